"""The report's glossary: what each variant, intervention, token set, metric, band and verdict
word means, and the unit each metric's differences are in (pure data and one section builder).

The texts are taken from docs/design.md ("Metric definitions") and the README (synth
variants, interventions, statistics); nothing here defines anything new. Only the entries
that the database holds are listed, plus the verdict words and bands, which every report uses.
"""

from __future__ import annotations

from collections.abc import Iterable

from homog.interventions import describe as describe_intervention
from homog.metrics.registry import METRICS as METRIC_REGISTRY
from homog.metrics.registry import TOKEN_SET_DESCRIPTIONS as TOKEN_SETS
from homog.metrics.registry import base_metric, token_set_of
from homog.report.document import Section, Table
from homog.stats.verdicts import MIN_PAIRS
from homog.variants import VARIANTS as REGISTRY

VARIANTS = {v.name: v.definition for v in REGISTRY}  # homog.variants, in order
# metric -> (definition, unit of a value and of a difference)
METRICS = {m.name: (m.definition, m.glossary_unit) for m in METRIC_REGISTRY}
BANDS_TEXT = (
    "Depth bands split a model's layers into early (first 25 %), middle (50 %) and late (last "
    "25 %) (band sizes round(n/4)); a band's value is the per-text mean over its layers. "
    "Layer 0 is the embedding output: these RoPE models give it no position, so a difference "
    "there is lexical by construction (the negative control). Layer L is the final-norm output "
    "(HF hidden_states[-1]), a different kind of tensor from the blocks' outputs."
)
LAYER_ROLES_TEXT = (
    " In this database layer 0 and layer L are reported on rows of their own (scope 'layer 0', "
    "'final layer') and kept out of the bands, which split the layers between them."
)
VERDICTS = {
    "supported": "significant (Holm-corrected p < alpha within the row's family) and its 95 % "
    "CI lies wholly beyond +-SESOI, the smallest effect of interest, on the claimed side (the "
    "minimum-effect test): an effect that matters. A row undirected by declaration (claimed "
    "sign 'either') is supported on either side.",
    "reversed": "as supported, on the other side of the claimed sign.",
    "nonzero": "significant (Holm), but its 95 % CI reaches into +-SESOI: a real effect, not "
    "shown to be as large as the smallest one of interest.",
    "negligible": "its equivalence CI (1 - 2 alpha) lies inside +-SESOI, and it is significant "
    "or its CI excludes 0: a real effect too small to matter. Read from the uncorrected "
    "CIs: a statement that an effect is small needs no correction for the number of rows.",
    "equivalent": "its equivalence CI lies inside +-SESOI, its CI includes 0 and it is not "
    "significant: any effect is smaller than the smallest one of interest (absent, not merely "
    "unseen).",
    "inconclusive": "neither significant nor inside +-SESOI: the data cannot tell.",
    "too few pairs": f"fewer than {MIN_PAIRS} paired texts: no verdict is read (an "
    "inconclusive row, whatever its numbers).",
    "descriptive": "the row has no SESOI, so no verdict: its effect and CI describe, they do "
    "not judge.",
    "equivalent to no effect": "(databases before issue 38) the TOST p-value < alpha.",
    "not supported": "(older databases) p_holm >= alpha: no effect shown, without telling "
    "absent from too noisy.",
    "lexical confound": "a mark beside a verdict: the contrast already differs significantly "
    "at layer 0, the position-free token embeddings, so part of it is the words, not their "
    "position.",
}


def glossary_section(
    variants: Iterable[str],
    interventions: Iterable[str],
    metrics: Iterable[str],
    *,
    layer_roles: bool = False,
) -> Section:
    """The glossary of what the database holds: its variants, interventions, token sets and
    metrics, plus the bands and the verdict words. Unknown names are listed as such.
    ``layer_roles``: the claims report layer 0 and L on rows of their own (outside the bands)."""
    variants, interventions, metrics = list(variants), list(interventions), list(metrics)
    sec = Section("Glossary", paragraphs=[BANDS_TEXT + (LAYER_ROLES_TEXT if layer_roles else "")])
    known = {**VARIANTS}
    rows = [
        [v, known.get(v, "not described here (a variant this report does not know)")]
        for v in variants
    ]
    sec.tables.append(Table(["variant", "what it is"], rows, "variants in the database"))
    if interventions:
        rows = [[i, describe_intervention(i)] for i in interventions]
        sec.tables.append(Table(["intervention", "what it does"], rows, "interventions (runs)"))
    sets = ["all", *sorted({token_set_of(m) for m in metrics} - {"all"})]
    rows = [[s, TOKEN_SETS.get(s, "not described here")] for s in sets]
    sec.tables.append(Table(["token set", "tokens"], rows, "token sets"))
    bases = sorted({base_metric(m) for m in metrics if base_metric(m) in METRICS})
    rows = [[m, *METRICS[m]] for m in bases]
    sec.tables.append(Table(["metric", "definition", "unit"], rows, "metrics"))
    rows = [[w, t] for w, t in VERDICTS.items()]
    sec.tables.append(Table(["verdict word", "meaning"], rows, "verdicts"))
    return sec
