"""The store's schema: every table's columns, keys and storage order, and layer_summary.

The schema is a public contract (docs/design.md): tables are only ever extended, never renamed.
Additive extensions (documented in the README):

- ``runs`` carries ``n_texts``, ``n_truncated`` and ``timings_json`` from ``run.json``.
- ``attention_heads(run_id, variant, layer, head, metric, mean, std, n)``: per-head attention
  statistics (``attn_first``, ``attn_last``, ``attn_entropy``) over texts.
- ``dataset_spectra(run_id, variant, layer, pooling, metric, value)``: dataset-level spectra
  (``rankme``, ``alpha_req``, ``alpha_req_r2``) of mean- or last-token pooled vectors.
- ``massive_activations(run_id, variant, layer, rank, position, feature, token_id, n, share,
  mean_abs, max_abs, sign)``: per layer, the 3 (token position, feature) pairs most often
  among a text's 3 largest |activations| (``n`` texts, ``share`` of the variant's texts).
- ``contrasts`` carries ``band``, ``baseline_run_id`` and ``n``:
  ``band`` is NULL for a single layer and ``'early'|'middle'|'late'`` for a depth band (first
  25 %, middle 50 %, last 25 % of the layers); band rows have ``layer`` NULL.
  ``baseline_run_id`` is NULL for a contrast between two variants of the same run; for an
  intervention run (``zero_pos``, ``shuffle_pos``) compared with its unchanged run it holds
  the unchanged run's id, ``variant_a = variant_b`` and ``mean_diff`` is intervention minus
  unchanged. ``n`` is the number of paired texts.
- ``contrasts`` also carries the length adjustment, size, equivalence, layer-0 and mixed-model
  columns (``n_tokens_diff`` .. ``mm_p_value``; homog/stats/contrast_rows.py and
  docs/statistics.md define each); ``band`` also takes ``'layer0'`` (the embeddings) and
  ``'final'`` (the final-norm output), which the depth bands leave out.
- ``dose_response(run_id, metric, band, kind, variant, key_position, value, ci_low, ci_high,
  p_value, n, intercept, p_holm)``: the position family's within-text slope of each metric on the
  key sentence's position (``kind = 'slope'``) and the per-variant points (``'point'``);
  homog/stats/dose.py.
- ``layer_metrics`` holds one ``n_tokens`` row per text at layer 0 (the metric tokens).
- ``probe_metrics(model, intervention, scheme, kind, baseline, variant, layer, band, metric,
  value, ci_low, ci_high, p_value, p_holm, n, verdict, family, sesoi, sesoi_basis, eq_ci_low,
  eq_ci_high)`` and ``lm_sentiment(model, intervention, variant, sample_id, label, log_odds,
  margin, correct, n_prompt_tokens, truncated)``: the probe stage (homog/probe,
  docs/probe.md), keyed by model.
- ``sentence_metrics`` and ``sentence_contrasts``: every position-family sentence per layer
  and the key sentence's paired contrasts (homog/schema/sentences.py).
- ``homog_meta(key, value)``: ``schema_version``.
- ``layer_summary`` is a table that ``load`` materialises (same name, columns and types as the
  view that older databases hold; readers use it either way; homog/schema/summary.py).

The columns of the stats stage's tables are in homog/schema/stats_tables.py, those of the
sentence tables in homog/schema/sentences.py. Definitions only: no files are read or written
here (``create_schema`` runs its SQL on a connection it is given).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from homog.schema.column_types import Table, type_problems
from homog.schema.sentences import SENTENCE_CONTRASTS, SENTENCE_METRICS
from homog.schema.stats_tables import (
    CONTRASTS,
    DOSE_RESPONSE,
    INTERVENTION_COST,
    INTERVENTION_DOSES,
    SEPARABILITY,
    VERDICT_ROW,
)
from homog.schema.summary import LAYER_SUMMARY, LAYER_SUMMARY_VIEW, summary_kind

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = "1"


V = "VARCHAR"
I = "INTEGER"  # noqa: E741 - a type name, not a loop variable
D = "DOUBLE"
TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        Table(
            "texts",
            (
                ("dataset", V),
                ("variant", V),
                ("sample_id", V),
                ("text", V),
                ("label", V),
                ("keyphrase", V),
                ("bertscore_f1", D),
                # the position family's key sentence (homog.synth.position): its 0-based
                # sentence index and its first word's share of the text's words; null for the
                # paper's rewrites
                ("key_index", I),
                ("key_position", D),
            ),
            scope=("dataset", "variant", "sample_id"),
            order_by=("dataset", "sample_id", "variant"),
            required=("dataset", "variant", "sample_id", "text"),
        ),
        Table(
            "runs",
            (
                ("run_id", V),
                ("model", V),
                ("model_source", V),
                ("n_layers", I),
                ("d_model", I),
                ("n_heads", I),
                ("dtype", V),
                ("device", V),
                ("intervention", V),
                ("config_json", V),
                ("homog_version", V),
                ("created_at", "TIMESTAMP"),
                ("n_texts", I),
                ("n_truncated", I),
                ("timings_json", V),
            ),
            scope="run",
            order_by=("model", "intervention", "run_id"),
            required=("run_id", "model", "n_layers"),
        ),
        Table(
            "layer_metrics",
            (
                ("run_id", V),
                ("variant", V),
                ("sample_id", V),
                ("layer", I),
                ("metric", V),
                ("value", D),
            ),
            scope="run",
            order_by=("run_id", "metric", "variant", "layer", "sample_id"),
            required=("run_id", "variant", "sample_id", "layer", "metric", "value"),
        ),
        Table(
            "attention_profile",
            (("run_id", V), ("variant", V), ("layer", I), ("head", I), ("bin", I), ("mass", D)),
            scope="run",
            order_by=("run_id", "variant", "layer", "head", "bin"),
            required=("run_id", "variant", "layer", "head", "bin", "mass"),
        ),
        Table(
            "attention_heads",
            (
                ("run_id", V),
                ("variant", V),
                ("layer", I),
                ("head", I),
                ("metric", V),
                ("mean", D),
                ("std", D),
                ("n", I),
            ),
            scope="run",
            order_by=("run_id", "metric", "variant", "layer", "head"),
            required=("run_id", "variant", "layer", "head", "metric", "mean"),
        ),
        Table(
            "dataset_spectra",
            (
                ("run_id", V),
                ("variant", V),
                ("layer", I),
                ("pooling", V),
                ("metric", V),
                ("value", D),
            ),
            scope="run",
            order_by=("run_id", "metric", "pooling", "variant", "layer"),
            required=("run_id", "variant", "layer", "pooling", "metric", "value"),
        ),
        Table(
            "massive_activations",
            (
                ("run_id", V),
                ("variant", V),
                ("layer", I),
                ("rank", I),
                ("position", I),
                ("feature", I),
                ("token_id", I),
                ("n", I),
                ("share", D),
                ("mean_abs", D),
                ("max_abs", D),
                ("sign", I),
            ),
            scope="run",
            order_by=("run_id", "variant", "layer", "rank"),
            required=("run_id", "variant", "layer", "rank", "position", "feature", "n"),
        ),
        Table(
            "mauve_scores",
            (("run_id", V), ("variant", V), ("layer", I), ("mauve", D)),
            scope="run",
            order_by=("run_id", "variant", "layer"),
            required=("run_id", "variant", "layer", "mauve"),
        ),
        Table(
            "contrasts",
            CONTRASTS,
            scope="run",
            order_by=("run_id", "metric", "variant_a", "variant_b", "band", "layer"),
            required=("run_id", "variant_a", "variant_b", "layer", "metric", "mean_diff"),
        ),
        Table(
            "dose_response",
            DOSE_RESPONSE,
            scope="run",
            order_by=("run_id", "metric", "band", "kind", "variant"),
            required=("run_id", "metric", "band", "kind", "value"),
        ),
        Table(
            "sentence_metrics",
            SENTENCE_METRICS,
            scope="run",
            order_by=("run_id", "metric", "variant", "sample_id", "sentence", "layer"),
            required=("run_id", "variant", "sample_id", "sentence", "layer", "metric", "value"),
        ),
        Table(
            "sentence_contrasts",
            SENTENCE_CONTRASTS,
            scope="run",
            order_by=("run_id", "metric", "sentence", "variant_a", "band", "layer"),
            required=("run_id", "sentence", "variant_a", "variant_b", "metric", "mean_diff"),
        ),
        Table("separability", SEPARABILITY, "run", ("run_id", "metric", "scope", "variant_a")),
        Table(
            "intervention_doses",
            INTERVENTION_DOSES,
            scope="run",
            order_by=("run_id", "family", "kind", "arm", "band", "metric", "dose"),
            required=("run_id", "family", "arm", "kind", "band", "metric", "value"),
        ),
        Table(
            "intervention_cost",
            INTERVENTION_COST,
            scope="run",
            order_by=("run_id", "kind", "metric", "arm", "band", "dose"),
            required=("run_id", "model", "arm", "kind", "metric", "value"),
        ),
        # the probe stage (homog.probe, docs/probe.md): keyed by model, not by run (it runs its
        # own forward passes); a reload of a model replaces its rows
        Table(
            "probe_metrics",
            (
                ("model", V),
                ("intervention", V),
                ("scheme", V),
                ("kind", V),
                ("baseline", V),
                ("variant", V),
                ("layer", I),
                ("band", V),
                ("metric", V),
                *VERDICT_ROW,
                ("family", V),
                ("sesoi", D),
                ("sesoi_basis", V),
                ("eq_ci_low", D),
                ("eq_ci_high", D),
            ),
            scope=("model",),
            order_by=("model", "intervention", "scheme", "kind", "metric", "variant", "layer"),
            required=("model", "kind", "metric", "value"),
        ),
        Table(
            "lm_sentiment",
            (
                ("model", V),
                ("intervention", V),
                ("variant", V),
                ("sample_id", V),
                ("label", V),
                ("log_odds", D),
                ("margin", D),
                ("correct", "BOOLEAN"),
                ("n_prompt_tokens", I),
                ("truncated", "BOOLEAN"),
            ),
            scope=("model",),
            order_by=("model", "intervention", "variant", "sample_id"),
            required=("model", "intervention", "variant", "sample_id", "log_odds"),
        ),
        Table(
            "posenc_results",
            (
                ("pe", V),
                ("task", V),
                ("split", V),
                ("accuracy", D),
                ("n_params", "BIGINT"),
                ("epochs", I),
                ("seed", I),
            ),
            scope="pe",
            order_by=("pe", "task", "split", "seed"),
            required=("pe", "task", "split", "accuracy"),
        ),
        Table(
            "head_ablation",
            (("pe", V), ("task", V), ("layer", I), ("head", I), ("accuracy", D), ("drop", D)),
            scope="pe",
            order_by=("pe", "task", "layer", "head"),
            required=("pe", "task", "layer", "head", "accuracy"),
        ),
        Table(
            "logit_decomposition",
            (("source", V), ("layer", I), ("head", I), ("term", V), ("share", D)),
            scope=("source",),
            order_by=("source", "layer", "head", "term"),
            required=("source", "layer", "head", "term", "share"),
        ),
        Table(
            "homog_meta",
            (("key", V), ("value", V)),
            scope=("key",),
            order_by=("key",),
        ),
    ]
}


def create_schema(con: duckdb.DuckDBPyConnection, *, summary: str = "table") -> None:
    """Create every table of the store and ``layer_summary`` (idempotent).

    Input: a writable DuckDB connection. Existing tables are left as they are.
    ``summary='table'`` (the default) creates ``layer_summary`` as an empty table, filled by
    :func:`materialize_layer_summary` once ``layer_metrics`` is complete; ``'view'`` creates
    the view that databases built before materialisation hold (the benchmark's "before").
    An existing ``layer_summary`` of either kind is kept. Raises ValueError for another
    ``summary``.
    """
    if summary not in ("table", "view"):
        raise ValueError(f"summary must be 'table' or 'view', not {summary!r}")
    for table in TABLES.values():
        con.execute(table.ddl())
    if summary_kind(con) is None:
        con.execute(LAYER_SUMMARY.ddl() if summary == "table" else LAYER_SUMMARY_VIEW)
    con.execute(
        "INSERT INTO homog_meta SELECT 'schema_version', ? "
        "WHERE NOT EXISTS (SELECT 1 FROM homog_meta WHERE key = 'schema_version')",
        [SCHEMA_VERSION],
    )


# Columns added to the first schema (in italics in docs/design.md): a database built before
ADDED_COLUMNS = {  # them may lack them, every other column of a present table must be there.
    "runs": ("n_texts", "n_truncated", "timings_json"),
    "contrasts": (
        "band",
        "baseline_run_id",
        "n",
        "sesoi_basis",
        "eq_ci_low",
        "eq_ci_high",
        "depth_change",
        "n_identical",
    ),
    "probe_metrics": ("family", "sesoi", "sesoi_basis", "eq_ci_low", "eq_ci_high"),
    "sentence_contrasts": ("depth_change", "n_identical", "position_pred"),
    "separability": ("statistic", "first_changed", "n_repeats", "n_identical"),
    "sentence_metrics": ("is_ctrl",),
}


def schema_problems(con: duckdb.DuckDBPyConnection, tables: Iterable[str] = ()) -> list[str]:
    """Why the database behind ``con`` cannot be read as a homog store, one line each (empty:
    none): a table of ``tables`` (TABLES names) lacking columns, a column of the wrong type
    (schema_types). Absent tables are not problems (readers treat them as empty)."""
    names = list(tables) or list(TABLES)
    rows = con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema()"
    ).fetchall()
    have: dict[str, set[str]] = {}
    for table, column in rows:
        have.setdefault(table, set()).add(column)
    problems = []
    for name in names:
        if name not in have:
            continue
        optional = set(ADDED_COLUMNS.get(name, ()))
        missing = [c for c in TABLES[name].names if c not in have[name] and c not in optional]
        if missing:
            extra = sorted(have[name] - set(TABLES[name].names))
            problems.append(
                f"table {name} lacks column(s) {', '.join(missing)}"
                + (f" (it has {', '.join(extra)} instead)" if extra else "")
            )
    return problems + type_problems(con, {n: TABLES[n].columns for n in names if n in TABLES})


def table_names() -> Iterable[str]:
    """Names of the tables of the store (not the view)."""
    return [t for t in TABLES if t != "homog_meta"]
