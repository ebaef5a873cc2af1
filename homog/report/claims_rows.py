"""The claims table's row (``Claim``), its verdict rule (pure; see report/claims.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from homog.claims import EXPLORATORY

# the verdict rule and its words live in homog.stats.verdicts (the probe stage uses them too)
NOT_SUPPORTED = "not supported"  # an older database's word (now equivalent or inconclusive)


@dataclass
class Claim:
    """One row of the claims table (every column is documented in docs/statistics.md).

    model, claim ("1" .. "5c", "1 (no_sink)", "3 (summary)"), statement, metric, comparison
    ("a - b"), scope (a readable band or layer range); effect: the effect the verdict reads
    (length-adjusted where ``adjusted``; for claim 4 a count of layers, for claim 2's second row
    a layer index); ci_low / ci_high: its bootstrap CI; p_holm: its p-value Holm-corrected over
    the model's family of claim rows; n: paired texts; verdict; note.
    The effect's detail: raw_effect (unadjusted mean difference), adjusted, dz (effect / SD of
    the per-text differences it is the mean of), pct_of_baseline (100 effect / baseline_mean),
    baseline_mean (the original's mean), unit, p_value (before the family correction), sesoi
    (the equivalence bound, in the metric's unit), p_tost (family-Holm TOST p), layer0_effect
    and layer0_p (the contrast at layer 0 and its paired p), lexical_confound (layer0_p <
    alpha), rel_layer0_effect / _ci_low / _ci_high (difference minus the layer-0 difference,
    per text), token_set, band (layer0 / early / middle / late / final, or a claim's range),
    mm_effect / mm_p (the mixed model's contrast and p).
    The families and margins: family (primary / exploratory / control), sesoi_basis (what the
    bound is a share of), eq_ci_low / eq_ci_high (the (1 - 2 alpha) CI the equivalence reads).
    The margin's inputs: baseline_sd (the original's between-text SD at the row) and
    depth_change (the homogenizing early-to-late change; homog.stats.margins), from which the
    sensitivity table recomputes the margin of every setting.
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
    baseline_sd: float = math.nan
    depth_change: float = math.nan
    sign: int = 0
    null: float = 0.0
