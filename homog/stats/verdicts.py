"""The project's verdict rule (docs/statistics.md, "Verdicts"), in one place for every stage
that judges an effect: the claims table (``homog.report.claims``), the sentence and position
sections, and the probe stage's differences and cost slopes (``homog.probe``).

Pure: floats in, a word out. Five outcomes against a smallest effect of interest (SESOI):
supported / reversed (significant after the family's Holm, not inside +-SESOI), negligible
(inside, and significant or its CI excludes the null), equivalent (inside, CI holds the null,
not significant), inconclusive (otherwise). "Inside" is read from the (1 - 2 alpha)
equivalence CI of the same bootstrap resamples as the 95 % CI.
"""

from __future__ import annotations

import math

import numpy as np

SUPPORTED, REVERSED = "supported", "reversed"
NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE = "negligible", "equivalent", "inconclusive"
VERDICTS = (SUPPORTED, REVERSED, NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE)
# the families of docs/statistics.md: the pre-registered endpoints (stats.primary), every other
# claim row, and the negative controls (layer 0: in no Holm family)
PRIMARY, EXPLORATORY, CONTROL = "primary", "exploratory", "control"
FAMILIES = (PRIMARY, EXPLORATORY, CONTROL)


def inside_margin(eq_low: float, eq_high: float, sesoi: float, p_tost: float = math.nan,
                  alpha: float = 0.05) -> bool:  # fmt: skip
    """Whether the effect lies within +-sesoi: its (1 - 2 alpha) CI ``[eq_low, eq_high]`` is
    inside the open interval (-sesoi, +sesoi) (the CI form of TOST). A database without the
    equivalence CI falls back on its TOST p-value (< alpha)."""
    if not (math.isfinite(sesoi) and sesoi > 0):
        return False
    if math.isfinite(eq_low) and math.isfinite(eq_high):
        return -sesoi < eq_low and eq_high < sesoi
    return math.isfinite(p_tost) and p_tost < alpha


def decide(effect: float, p_holm: float, inside: bool, sign: int | None, alpha: float,
           excludes_zero: bool = False) -> str:  # fmt: skip
    """The verdict of one row (docs/statistics.md), from its Holm p (the family's, or the raw p
    of a control row), whether its equivalence CI lies within +-sesoi (``inside``) and whether
    its CI excludes 0 (``excludes_zero``):

    - supported / reversed: significant (p_holm < alpha, effect not 0) and not inside the
      margin; the claimed sign (an undirected claim, ``sign`` None: any sign) or the other;
    - negligible: inside the margin, and significant or its CI excludes 0 (a real effect too
      small to matter; "too small" needs no correction for the many rows);
    - equivalent: inside the margin, and its CI includes 0 and it is not significant;
    - inconclusive: neither (the data cannot tell).
    """
    significant = math.isfinite(effect) and math.isfinite(p_holm) and p_holm < alpha and effect != 0
    if inside:
        return NEGLIGIBLE if significant or excludes_zero else EQUIVALENT
    if significant:
        return SUPPORTED if sign is None or np.sign(effect) == sign else REVERSED
    return INCONCLUSIVE


def excludes(ci_low: float, ci_high: float, null: float = 0.0) -> bool:
    """Whether the CI [ci_low, ci_high] lies wholly on one side of ``null``."""
    return math.isfinite(ci_low) and math.isfinite(ci_high) and (ci_low > null or ci_high < null)


def verdict_of(effect: float, ci_low: float, ci_high: float, eq_low: float, eq_high: float,
               sesoi: float, p_holm: float, alpha: float,
               sign: int | None = None) -> str:  # fmt: skip
    """``decide`` for a row that has its CI, equivalence CI, SESOI and Holm p (the raw p of a
    control row): the one call the probe stage's rows need."""
    inside = inside_margin(eq_low, eq_high, sesoi)
    return decide(effect, p_holm, inside, sign, alpha, excludes(ci_low, ci_high))
