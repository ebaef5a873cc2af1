"""The metrics: one entry per metric, read by the spectra, the calibration, the figures, the
report's glossary and claims, the TUI and the demo database. No torch.

Each entry names the metric as the tables store it in the token set ``all`` (the other token
sets add a suffix: :func:`metric_name`), its kind (``hidden``: one value per layer from the
text's token matrix, computed by ``homog.metrics.spectra``; ``attention``: from the attention
weights, ``homog.metrics.attention``), its axis label, its unit (a short one for the glossary,
the long one the claims table gives a difference in, None where the claims use the name), the
sentence that defines it, the direction it moves as representations collapse (+1 up, -1 down,
None: no rule; ``homog calibrate`` checks it), how it scales with the vectors
(``scale_power``), whether it is a function of the singular values alone (``spectral``:
calibration checks those on centred matrices too) and the demo database's shape for it (value
at layer 0, value at the last layer, noise sd, shift per unit of bias; None: not in the demo).

A metric's stored name is ``<base>__<token set>`` (``erank__no_sink``), or the base alone in the
token set ``all``: :func:`metric_name` writes it and :func:`split_metric` reads it, for every
stage, the report and the TUI.

Adding a metric is one entry here plus its computation (a formula in ``spectra`` for a
``hidden`` metric, and the same formula in the tests' independent reference) and its row in
docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

HIDDEN, ATTENTION = "hidden", "attention"
# the token sets of the hidden-state metrics: ``all`` keeps the plain names, the others are
# stored under a suffix (one loud token can fake collapse in the ``all`` set)
ALL_TOKENS = "all"
TOKEN_SETS: tuple[str, ...] = (ALL_TOKENS, "no_sink", "standardized")
SUFFIX_SETS: tuple[str, ...] = TOKEN_SETS[1:]  # the sets stored as <base>__<set>
SET_SEPARATOR = "__"
# what each token set keeps (the report's glossary prints it)
TOKEN_SET_DESCRIPTIONS: dict[str, str] = {
    "all": "the metric tokens (padding and tokenizer-added special tokens removed); plain "
    "metric names such as erank.",
    "no_sink": "all without the text's first metric token and without every token whose norm "
    "exceeds extract.sink_norm_ratio (10) times the text's median token norm; stored as "
    "metric__no_sink.",
    "standardized": "all with every feature z-scored over the text's tokens (population std; "
    "a constant feature becomes 0): removes rogue dimensions; stored as metric__standardized.",
}


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    label: str | None
    glossary_unit: str
    definition: str
    unit: str | None = None
    direction: int | None = None
    demo: tuple[float, float, float, float] | None = None
    token_sets: tuple[str, ...] = (ALL_TOKENS,)
    scale_power: int = 0  # the metric of c x X is c ** scale_power times that of X (calibration)
    spectral: bool = False  # a function of the singular values alone


_SETS = TOKEN_SETS  # the hidden-state metrics come in every token set

METRICS: tuple[Metric, ...] = (
    Metric(
        "erank",
        HIDDEN,
        "effective rank",
        "effective dimensions (1 to min(n, d))",
        "effective rank exp(-sum p_i ln p_i), p_i = sigma_i / sum_j sigma_j, over the "
        "singular values of the text's n x d hidden states (Roy & Vetterli 2007); lower = "
        "more homogeneous.",
        unit="effective rank (dimensions)",
        direction=-1,
        demo=(60.0, 20.0, 4.0, -6.0),
        token_sets=_SETS,
        spectral=True,
    ),
    Metric(
        "mev",
        HIDDEN,
        "max. explainable variance",
        "share of variance (0-1)",
        "maximum explainable variance sigma_1^2 / sum sigma_i^2: the share of the top "
        "direction; higher = more homogeneous.",
        unit="share of variance on the first singular direction (0-1)",
        direction=+1,
        demo=(0.10, 0.45, 0.04, 0.05),
        token_sets=_SETS,
        spectral=True,
    ),
    Metric(
        "schatten_1",
        HIDDEN,
        "Schatten-1 (normalised)",
        "ratio (1 to sqrt(rank))",
        "sum sigma_i / sqrt(sum sigma_i^2) (normalised Schatten-1 norm).",
        direction=-1,
        demo=(7.0, 3.5, 0.5, -0.6),
        token_sets=_SETS,
        spectral=True,
    ),
    Metric(
        "schatten_4",
        HIDDEN,
        "Schatten-4 (normalised)",
        "ratio (0-1)",
        "(sum sigma_i^4)^(1/4) / sqrt(sum sigma_i^2) (normalised Schatten-4 norm).",
        direction=+1,
        demo=(0.5, 0.85, 0.04, 0.04),
        token_sets=_SETS,
        spectral=True,
    ),
    Metric(
        "resultant_length",
        HIDDEN,
        "resultant length",
        "length (0-1)",
        "|| (1/n) sum_i x_i / ||x_i|| ||: the length of the mean unit token vector; higher "
        "= tokens point the same way.",
        unit="resultant length of the unit token vectors (0-1)",
        direction=+1,
        demo=(0.3, 0.8, 0.05, 0.05),
        token_sets=_SETS,
    ),
    Metric(
        "mean_cosine",
        HIDDEN,
        "mean pairwise cosine",
        "cosine (-1 to 1)",
        "(n R^2 - 1) / (n - 1), R = resultant length: the mean off-diagonal cosine.",
        unit="mean pairwise cosine (-1 to 1)",
        direction=+1,
        demo=(0.1, 0.6, 0.05, 0.05),
        token_sets=_SETS,
    ),
    Metric(
        "norm_mean",
        HIDDEN,
        "mean token norm",
        "norm units of the model",
        "mean token norm.",
        demo=(1.0, 60.0, 3.0, 2.0),
        token_sets=_SETS,
        scale_power=1,
    ),
    Metric(
        "attn_first",
        ATTENTION,
        "attention to first token",
        "share of attention (0-1)",
        "attention column mass of the first token, c_0 = (1/n) sum_i A_i0, per head, mean "
        "over heads.",
        unit="attention mass on the first token (0-1, mean over queries and heads)",
        demo=(0.2, 0.7, 0.05, 0.06),
    ),
    Metric(
        "attn_last",
        ATTENTION,
        "attention to last token",
        "share of attention (0-1)",
        "column mass of the last token, c_(n-1).",
        unit="attention mass on the last token (0-1)",
        demo=(0.1, 0.05, 0.02, 0.01),
    ),
    Metric(
        "attn_entropy",
        ATTENTION,
        "attention entropy (nats)",
        "nats",
        "mean over queries of the attention row's entropy.",
        demo=(2.5, 1.2, 0.2, -0.15),
    ),
    Metric(
        "sink_rate",
        ATTENTION,
        None,
        "share of heads (0-1)",
        "share of heads whose attn_first exceeds extract.sink_epsilon (0.3) (Gu et al. 2025).",
        unit="share of heads with an attention sink (0-1)",
    ),
    Metric(
        "attn_ctrl_token",
        ATTENTION,
        "attention to the control's token",
        "share of attention (0-1)",
        "attention the sink_bias control's token c receives, (1/(n-c)) sum_(i>=c) A_ic, "
        "mean over heads; in the runs of the sink_bias family only (the control arm's "
        "manipulated quantity).",
        unit="attention on the sink_bias control's token (0-1, mean over the queries that "
        "see it and heads)",
    ),
)
BY_NAME = {m.name: m for m in METRICS}
HIDDEN_METRICS = tuple(m.name for m in METRICS if m.kind == HIDDEN)
# the metrics calibration checks on centred matrices too (centring leaves a spectrum's shape)
SPECTRAL_METRICS = tuple(m.name for m in METRICS if m.spectral)
# the hidden-state metrics computed beside the spectra (homog.metrics.sets, .massive): named
# here, torch-free, so that names given in params can be checked without loading torch
PEER_METRICS: tuple[str, ...] = ("prompt_entropy", "curvature", "twonn_id")
MASSIVE_METRICS: tuple[str, ...] = (
    "act_top1",
    "act_median",
    "act_ratio",
    "act_top1_pos",
    "act_top1_feature",
)
# every per-layer metric name a contrast can carry (before a token set's suffix)
ALL_METRICS: tuple[str, ...] = (*BY_NAME, *PEER_METRICS, *MASSIVE_METRICS)


def metric_name(base: str, token_set: str = ALL_TOKENS) -> str:
    """The stored name of ``base`` in ``token_set``: ('erank', 'no_sink') -> 'erank__no_sink',
    ('erank', 'all') -> 'erank'."""
    return base if token_set == ALL_TOKENS else f"{base}{SET_SEPARATOR}{token_set}"


def split_metric(metric: str) -> tuple[str, str]:
    """(base, token set) of a stored name: 'erank__no_sink' -> ('erank', 'no_sink'), 'erank' ->
    ('erank', 'all'). The inverse of :func:`metric_name`."""
    base, sep, token_set = metric.partition(SET_SEPARATOR)
    return (base, token_set) if sep else (metric, ALL_TOKENS)


def base_metric(metric: str) -> str:
    """'erank__no_sink' -> 'erank'."""
    return split_metric(metric)[0]


def token_set_of(metric: str) -> str:
    """'erank__no_sink' -> 'no_sink'; a plain metric -> 'all'."""
    return split_metric(metric)[1]


def difference_unit(metric: str) -> str:
    """The unit the claims table gives a value (and a difference) of ``metric`` in: the
    registry's long ``unit`` (the base name where it has none), with the token set named
    when it is not ``all`` ('effective rank (dimensions), no_sink tokens')."""
    base, token_set = split_metric(metric)
    entry = BY_NAME.get(base)
    unit = entry.unit if entry is not None and entry.unit else base
    return unit if SET_SEPARATOR not in metric else f"{unit}, {token_set} tokens"


def glossary_unit(metric: str) -> str:
    """The glossary's short unit of ``metric``'s values and differences (the same in every
    token set; ``n/a`` for a name the registry does not hold)."""
    entry = BY_NAME.get(base_metric(metric))
    return entry.glossary_unit if entry is not None else "n/a"
