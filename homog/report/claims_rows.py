"""The claims table's row (``Claim``), its verdict rule and units (pure; see report/claims.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SUPPORTED, REVERSED = "supported", "reversed"
EQUIVALENT, INCONCLUSIVE = "equivalent to no effect", "inconclusive"
VERDICTS = (SUPPORTED, REVERSED, EQUIVALENT, INCONCLUSIVE)
NOT_SUPPORTED = "not supported"  # the verdict before issue 29 (now equivalent / inconclusive)

UNITS = {
    "erank": "effective rank (dimensions)",
    "mev": "share of variance on the first singular direction (0-1)",
    "attn_first": "attention mass on the first token (0-1, mean over queries and heads)",
    "attn_last": "attention mass on the last token (0-1)",
    "resultant_length": "resultant length of the unit token vectors (0-1)",
    "mean_cosine": "mean pairwise cosine (-1 to 1)",
    "sink_rate": "share of heads with an attention sink (0-1)",
}


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
    mm_effect / mm_p (the mixed model's contrast and p). ``sign``: the claimed sign (+1, -1,
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
    sign: int = 0


def decide(effect: float, p_holm: float, p_tost: float, sign: int | None, alpha: float) -> str:
    """The verdict of one row: significant (supported / reversed by the sign; an undirected
    claim, ``sign`` None: supported), else equivalent (TOST p < alpha), else inconclusive."""
    if math.isfinite(effect) and math.isfinite(p_holm) and p_holm < alpha and effect != 0:
        if sign is None or np.sign(effect) == sign:
            return SUPPORTED
        return REVERSED
    if math.isfinite(p_tost) and p_tost < alpha:
        return EQUIVALENT
    return INCONCLUSIVE


def directional_verdict(effect: float, p: float, sign: int, alpha: float) -> str:
    """supported / reversed / inconclusive for a claim that ``effect`` has ``sign`` (no TOST)."""
    return decide(effect, p, math.nan, sign, alpha)


def undirected_verdict(p: float, alpha: float) -> str:
    """supported when p < alpha, else inconclusive (no TOST)."""
    return SUPPORTED if math.isfinite(p) and p < alpha else INCONCLUSIVE
