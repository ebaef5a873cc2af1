"""The claims table's row (``Claim``), its verdict rule and units (pure; see report/claims.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from homog.metrics.registry import METRICS

SUPPORTED, REVERSED = "supported", "reversed"
NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE = "negligible", "equivalent", "inconclusive"
VERDICTS = (SUPPORTED, REVERSED, NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE)
NOT_SUPPORTED = "not supported"  # the verdict before issue 29 (now equivalent / inconclusive)
# the families of docs/statistics.md: the pre-registered endpoints (stats.primary), every other
# claim row, and the negative controls (layer 0: in no Holm family)
PRIMARY, EXPLORATORY, CONTROL = "primary", "exploratory", "control"
FAMILIES = (PRIMARY, EXPLORATORY, CONTROL)

UNITS = {m.name: m.unit for m in METRICS if m.unit}  # homog.metrics.registry


def token_set_of(metric: str) -> str:
    """The token set of a metric name: ``all`` or the suffix after ``__``."""
    return metric.split("__", 1)[1] if "__" in metric else "all"


def unit_of(metric: str) -> str:
    """The unit of a metric's values (and of a difference of them)."""
    base = metric.split("__", 1)[0]
    unit = UNITS.get(base, base)
    return unit if "__" not in metric else f"{unit}, {token_set_of(metric)} tokens"


@dataclass
class Claim:
    """One row of the claims table (every column is documented in docs/statistics.md).

    model, claim ("1" .. "5c", "1 (no_sink)", "3 (summary)"), statement, metric, comparison
    ("a - b"), scope (a readable band or layer range); effect: the effect the verdict reads
    (length-adjusted where ``adjusted``; for claim 4 a count of layers, for claim 2's second row
    a layer index); ci_low / ci_high: its bootstrap CI; p_holm: its p-value Holm-corrected over
    the model's family of claim rows; n: paired texts; verdict; note.
    Added by issue 29: raw_effect (unadjusted mean difference), adjusted, dz (effect / SD of
    the per-text differences it is the mean of), pct_of_baseline (100 effect / baseline_mean),
    baseline_mean (the original's mean), unit, p_value (before the family correction), sesoi
    (the equivalence bound, in the metric's unit), p_tost (family-Holm TOST p), layer0_effect
    and layer0_p (the contrast at layer 0 and its paired p), lexical_confound (layer0_p <
    alpha), rel_layer0_effect / _ci_low / _ci_high (difference minus the layer-0 difference,
    per text), token_set, band (layer0 / early / middle / late / final, or a claim's range),
    mm_effect / mm_p (the mixed model's contrast and p).
    Added by issue 38: family (primary / exploratory / control), sesoi_basis (what the bound
    is a share of), eq_ci_low / eq_ci_high (the (1 - 2 alpha) CI the equivalence reads).
    ``null``: the effect's value under no effect (0; claim 4's AUC: 0.5), internal like ``sign``.
    ``sign``: the claimed sign (+1, -1,
    0 undirected), internal (not a column).
    """

    model: str
    claim: str
    statement: str
    metric: str
    comparison: str
    scope: str
    effect: float
    ci_low: float
    ci_high: float
    p_holm: float
    n: int
    verdict: str
    note: str = ""
    raw_effect: float = math.nan
    adjusted: bool = False
    dz: float = math.nan
    pct_of_baseline: float = math.nan
    baseline_mean: float = math.nan
    unit: str = ""
    p_value: float = math.nan
    sesoi: float = math.nan
    p_tost: float = math.nan
    layer0_effect: float = math.nan
    layer0_p: float = math.nan
    lexical_confound: bool = False
    rel_layer0_effect: float = math.nan
    rel_layer0_ci_low: float = math.nan
    rel_layer0_ci_high: float = math.nan
    token_set: str = "all"
    band: str = ""
    mm_effect: float = math.nan
    mm_p: float = math.nan
    family: str = EXPLORATORY
    sesoi_basis: str = ""
    eq_ci_low: float = math.nan
    eq_ci_high: float = math.nan
    sign: int = 0
    null: float = 0.0


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
