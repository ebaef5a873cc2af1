"""The project's verdict rule (docs/statistics.md, "Verdicts"), in one place for every stage
that judges an effect: the claims table (``homog.report.claims``), the sentence and position
sections, and the probe stage's differences and cost slopes (``homog.probe``).

Pure: floats in, a word out. Against a smallest effect of interest (SESOI):

- supported / reversed: significant after the family's Holm and the CI lies wholly beyond
  +SESOI or below -SESOI (the minimum-effect test), on the claimed side or the other;
- nonzero: significant, but the CI reaches into +-SESOI: real, not shown to matter;
- negligible: the (1 - 2 alpha) equivalence CI lies inside +-SESOI, and the effect is
  significant or its CI excludes the null (uncorrected: a statement that the effect is small);
- equivalent: inside, the CI holds the null, not significant;
- inconclusive: otherwise;
- too few pairs: fewer than ``MIN_PAIRS`` paired texts, whatever the numbers;
- descriptive: no SESOI, so no verdict (the row is a description).

"Inside" is read from the (1 - 2 alpha) equivalence CI of the same bootstrap resamples as the
95 % CI.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SUPPORTED, REVERSED, NONZERO = "supported", "reversed", "nonzero"
NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE = "negligible", "equivalent", "inconclusive"
TOO_FEW, DESCRIPTIVE = "too few pairs", "descriptive"
VERDICTS = (
    SUPPORTED,
    REVERSED,
    NONZERO,
    NEGLIGIBLE,
    EQUIVALENT,
    INCONCLUSIVE,
    TOO_FEW,
    DESCRIPTIVE,
)
# the verdicts of an effect shown to matter (beyond the margin): the answer's only
# "an effect that matters"
MATTERS = (SUPPORTED, REVERSED)
# below this many paired texts a bootstrap CI is the span of a handful of values and a
# sign-flip p has few distinct values: no verdict is read (n = 2 gave a CI [12, 12])
MIN_PAIRS = 10


def has_margin(sesoi: float) -> bool:
    return sesoi is not None and math.isfinite(sesoi) and sesoi > 0


def inside_margin(
    eq_low: float, eq_high: float, sesoi: float, p_tost: float = math.nan, alpha: float = 0.05
) -> bool:
    """Whether the effect lies within +-sesoi: its (1 - 2 alpha) CI ``[eq_low, eq_high]`` is
    inside the open interval (-sesoi, +sesoi) (the CI form of TOST). A database without the
    equivalence CI falls back on its TOST p-value (< alpha)."""
    if not has_margin(sesoi):
        return False
    if math.isfinite(eq_low) and math.isfinite(eq_high):
        return -sesoi < eq_low and eq_high < sesoi
    return math.isfinite(p_tost) and p_tost < alpha


def beyond_margin(ci_low: float, ci_high: float, sesoi: float) -> int:
    """+1 when the CI lies wholly above +sesoi, -1 wholly below -sesoi, else 0 (the
    minimum-effect test read from the CI)."""
    if not (has_margin(sesoi) and math.isfinite(ci_low) and math.isfinite(ci_high)):
        return 0
    return 1 if ci_low > sesoi else -1 if ci_high < -sesoi else 0


def excludes(ci_low: float, ci_high: float, null: float = 0.0) -> bool:
    """Whether the CI [ci_low, ci_high] lies wholly on one side of ``null``."""
    return math.isfinite(ci_low) and math.isfinite(ci_high) and (ci_low > null or ci_high < null)


def judge(
    effect: float,
    ci: tuple[float, float],
    eq_ci: tuple[float, float],
    sesoi: float,
    p_holm: float,
    alpha: float,
    sign: int | None = None,
    n: float = math.nan,
    p_tost: float = math.nan,
) -> str:
    """The verdict of one row centred on its null (effect, ``ci`` and ``eq_ci`` minus the
    null): its 95 % CI, its (1 - 2 alpha) equivalence CI, its SESOI, its Holm p (a control
    row's raw p), the claimed sign (None: undirected by declaration, either side supports)
    and its paired texts ``n`` (NaN: unknown, not checked). The module's docstring gives the
    rule; ``p_tost`` stands in for the equivalence CI where a database has none."""
    if math.isfinite(n) and n < MIN_PAIRS:
        return TOO_FEW
    if not has_margin(sesoi):
        return DESCRIPTIVE
    significant = math.isfinite(effect) and math.isfinite(p_holm) and p_holm < alpha and effect != 0
    if inside_margin(eq_ci[0], eq_ci[1], sesoi, p_tost, alpha):
        return NEGLIGIBLE if significant or excludes(*ci) else EQUIVALENT
    if not significant:
        return INCONCLUSIVE
    side = beyond_margin(ci[0], ci[1], sesoi)
    if side == 0 or side != np.sign(effect):
        return NONZERO
    return SUPPORTED if sign is None or side == sign else REVERSED


def verdict_of(
    effect: float,
    ci_low: float,
    ci_high: float,
    eq_low: float,
    eq_high: float,
    sesoi: float,
    p_holm: float,
    alpha: float,
    sign: int | None = None,
    n: float = math.nan,
) -> str:
    """:func:`judge` for a row that has its CI, equivalence CI, SESOI and Holm p (the raw p
    of a control row): the one call the probe stage's and the report sections' rows need."""
    return judge(effect, (ci_low, ci_high), (eq_low, eq_high), sesoi, p_holm, alpha, sign, n)


def row_verdict(row: Any, alpha: float, sign: int | None = None, effect: str = "value") -> str:
    """:func:`verdict_of` of one table row (a namedtuple of ``itertuples``) with the columns
    ``effect`` (its name), ci_low, ci_high, eq_ci_low, eq_ci_high, sesoi, p_holm and n."""
    return verdict_of(
        getattr(row, effect),
        row.ci_low,
        row.ci_high,
        row.eq_ci_low,
        row.eq_ci_high,
        row.sesoi,
        row.p_holm,
        alpha,
        sign,
        n=row.n,
    )
