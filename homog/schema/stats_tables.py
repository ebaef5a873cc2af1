"""The columns of the stats stage's tables (homog.stats; homog.schema.tables holds them in
TABLES). Public contracts like every table: extended, never renamed.

- ``contrasts``: paired contrasts per layer and depth band, with the length adjustment, size,
  equivalence, layer-0 and mixed-model columns (homog/stats/contrast_rows.py,
  homog/stats/mixed.py; docs/statistics.md).
- ``dose_response``: the position family's slopes on the key sentence's position and the
  per-variant points (homog/stats/dose.py).
- ``separability``: claim 4's classifiers (homog/stats/separability.py).
- ``intervention_doses``: the graded interventions' dose-response, slopes and doses
  against dose 0 (homog/stats/intervention_doses.py; docs/interventions.md).
- ``intervention_cost``: the LM's zero-shot margin, accuracy and AUC under the homogenize
  doses and its control (homog/stats/intervention_cost.py; docs/interventions.md).
"""

from __future__ import annotations

V = "VARCHAR"
I = "INTEGER"  # noqa: E741 - a type name, not a loop variable
D = "DOUBLE"

# the equivalence columns of the contrasts, dose and separability tables
# (homog/stats/contrast_rows.py, homog/stats/dose.py, homog/stats/separability.py;
# docs/database.md)
EQUIVALENCE = (("sesoi_basis", V), ("eq_ci_low", D), ("eq_ci_high", D))
SEPARABILITY = (
    ("run_id", V),
    ("variant_a", V),
    ("variant_b", V),
    ("metric", V),
    ("scope", V),
    ("auc", D),
    ("ci_low", D),
    ("ci_high", D),
    ("p_value", D),
    ("n", I),
    ("n_layers", I),
    # homog/stats/reordering.py: "auc", or "auc - key_control" (the row's auc is the
    # variant's AUC minus key_control's); the texts whose first sentence the variant
    # changed (true), kept (false), or all (NULL); the fold assignments averaged
    ("statistic", V),
    ("first_changed", "BOOLEAN"),
    ("n_repeats", I),
    # the texts left out because the variant is the original's text (the contrasts' rule;
    # NULL: not checked, no texts table)
    ("n_identical", I),
)
CONTRASTS: tuple[tuple[str, str], ...] = (
    ("run_id", V),
    ("variant_a", V),
    ("variant_b", V),
    ("layer", I),
    ("metric", V),
    ("mean_diff", D),
    ("ci_low", D),
    ("ci_high", D),
    ("p_value", D),
    ("p_holm", D),
    ("band", V),
    ("baseline_run_id", V),
    ("n", I),
    # length adjustment, size, equivalence, layer-0 control, mixed model
    # (homog/stats/contrast_rows.py, homog/stats/mixed.py; docs/statistics.md)
    ("n_tokens_diff", D),
    ("adjusted", "BOOLEAN"),
    ("adj_diff", D),
    ("adj_ci_low", D),
    ("adj_ci_high", D),
    ("adj_p_value", D),
    ("dz", D),
    ("baseline_mean", D),
    ("baseline_sd", D),
    ("sesoi", D),
    ("p_tost", D),
    ("layer0_diff", D),
    ("layer0_p_value", D),
    ("rel_layer0_diff", D),
    ("rel_layer0_ci_low", D),
    ("rel_layer0_ci_high", D),
    ("mm_diff", D),
    ("mm_ci_low", D),
    ("mm_ci_high", D),
    ("mm_p_value", D),
    *EQUIVALENCE,
    # the homogenizing early-to-late change of the run's original (homog.stats.margins): the
    # depth basis, kept so that the report recomputes every margin setting
    ("depth_change", D),
    # the reviews left out because their texts make the contrast cancel (homog.stats.combos)
    ("n_identical", I),
)
DOSE_RESPONSE: tuple[tuple[str, str], ...] = (
    ("run_id", V),
    ("metric", V),
    ("band", V),
    ("kind", V),
    ("variant", V),
    ("key_position", D),
    ("value", D),
    ("ci_low", D),
    ("ci_high", D),
    ("p_value", D),
    ("n", I),
    ("intercept", D),
    ("p_holm", D),
    ("sesoi", D),
    *EQUIVALENCE,
)
# an estimate with its CI, p-values, n and verdict (probe_metrics, intervention_doses)
VERDICT_ROW = (
    ("value", D),
    ("ci_low", D),
    ("ci_high", D),
    ("p_value", D),
    ("p_holm", D),
    ("n", I),
    ("verdict", V),
)
INTERVENTION_DOSES: tuple[tuple[str, str], ...] = (
    ("run_id", V),  # the unchanged run the graded runs pair with
    ("family", V),
    ("arm", V),
    ("kind", V),
    ("band", V),
    ("metric", V),
    ("x_metric", V),
    ("dose", D),
    *VERDICT_ROW,
    ("family_holm", V),
    ("sesoi", D),
    *EQUIVALENCE,
)
INTERVENTION_COST: tuple[tuple[str, str], ...] = (
    ("run_id", V),  # the unchanged run the homogenize runs pair with
    ("model", V),
    ("family", V),
    ("arm", V),
    ("kind", V),
    ("band", V),
    ("metric", V),
    ("dose", D),
    *VERDICT_ROW,
    ("family_holm", V),
    ("sesoi", D),
    *EQUIVALENCE,
)
