"""The columns of the sentence tables (docs/sentences.md; homog.schema.tables holds
them in TABLES). Public contracts like every table: extended, never renamed.

- ``sentence_metrics``: one row per (run, variant, review, sentence, layer, metric) of the
  position family's followed sentences (homog.extract.sentences): ``sentence`` is the
  sentence's index in the original review, ``sent_index`` its index in this variant's text,
  ``rel_position`` = sent_index / (sentences - 1), ``n_tokens`` its tokens, ``is_key`` /
  ``is_control`` / ``is_ctrl`` whether it is the key sentence / the sentence key_control moves
  / the same-place control sentence that ctrl_first, ctrl_mid and ctrl_last move. Hidden
  layers 0..L for ``sent_cos_centroid``, ``sent_cos_first``, ``sent_erank``,
  ``sent_erank_c``, ``sent_norm``; attention layers 1..L for ``sent_attn_in``.
- ``sentence_contrasts``: the contrasts table's columns (homog.stats.contrasts) for the moved
  sentence, paired within sentence (homog.stats.sentences): ``sentence`` says whose values
  are compared: ``key`` (the key sentence; variant_a key_first / key_mid / key_last /
  key_ends against variant_b original or key_mid), ``control`` (the sentence key_control
  moves, key_control - original) and ``key - control`` (the position effect:
  variant_a ``key_far``, the key sentence moved the control's way, minus the control's move).
"""

from __future__ import annotations

V = "VARCHAR"
I = "INTEGER"  # noqa: E741 - a type name, not a loop variable
D = "DOUBLE"
B = "BOOLEAN"

SENTENCE_METRICS: tuple[tuple[str, str], ...] = (
    ("run_id", V),
    ("variant", V),
    ("sample_id", V),
    ("sentence", I),
    ("sent_index", I),
    ("rel_position", D),
    ("n_tokens", I),
    ("is_key", B),
    ("is_control", B),
    ("layer", I),
    ("metric", V),
    ("value", D),
    ("is_ctrl", B),
)
# the contrasts table's columns after sentence (homog.schema.stats_tables keeps them equal)
CONTRAST_TAIL: tuple[tuple[str, str], ...] = (
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
    ("n_tokens_diff", D),
    ("adjusted", B),
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
    ("sesoi_basis", V),
    ("eq_ci_low", D),
    ("eq_ci_high", D),
    ("depth_change", D),
    ("n_identical", I),
)
# position_pred: what the positional curve of the non-key sentences predicts for the row's
# contrast (band rows; homog.stats.position_curve)
SENTENCE_CONTRASTS: tuple[tuple[str, str], ...] = (
    ("sentence", V),
    *CONTRAST_TAIL,
    ("position_pred", D),
)
