"""A synthetic but schema-valid homog database for tests, benchmarks and ``homog tui --demo``.

A fixture, not part of the read-only query API (:mod:`homog.store.query`). It builds through
the same atomic helper as the load (:func:`homog.store.loader.atomic_database`) and adjusts
the contrasts' p-values with the stats stage's Holm correction
(:func:`homog.stats.paired_tests.holm`).
"""

from __future__ import annotations

import os
from typing import Any

import duckdb

from homog.errors import HomogError
from homog.metrics.registry import METRICS
from homog.schema.summary import materialize_layer_summary
from homog.schema.tables import create_schema
from homog.stats.paired_tests import holm
from homog.store.demo_more import fill_probe, fill_sentences, fill_u_shape
from homog.store.loader import atomic_database

DEMO_MODELS = (
    # (model key, source, n_layers, d_model, n_heads)
    ("smollm2-135m", "embedded:smollm2-135m", 30, 576, 9),
    ("gemma3-270m", "embedded:gemma3-270m", 18, 640, 4),
    ("llama-8b", "random:llama-8b", 32, 4096, 32),
)
DEMO_INTERVENTIONS = ("none", "zero_pos", "shuffle_pos")
# metric -> (value at layer 0, value at the last layer, noise sd, shift per unit of bias)
DEMO_METRICS = {m.name: m.demo for m in METRICS if m.demo}  # homog.metrics.registry


# Tables make_demo_db fills, in the order its counts are reported.
DEMO_TABLES = (
    "runs",
    "texts",
    "layer_metrics",
    "attention_profile",
    "attention_heads",
    "dataset_spectra",
    "mauve_scores",
    "contrasts",
    "posenc_results",
    "head_ablation",
    "logit_decomposition",
)


def make_demo_db(
    path: str | os.PathLike[str],
    n_runs: int = 10,
    n_texts: int = 200,
    *,
    seed: int = 0,
    n_bins: int = 20,
    summary: str = "table",
) -> dict[str, int]:
    """Write a synthetic, schema-valid homog database to ``path``; return row counts.

    Runs cycle over ``DEMO_MODELS`` x ``DEMO_INTERVENTIONS``; every run has the four variants
    for ``n_texts`` texts and the ten metrics at every layer (attention metrics from layer 1).
    Curves are smooth in depth with per-text random effects and noise derived from hashes
    (deterministic for a given ``seed``), front/end lower erank than original, control in
    between. Also fills texts, attention_profile, attention_heads, dataset_spectra,
    mauve_scores, contrasts (normal-approximation p-values, Holm over layers), posenc_results,
    head_ablation and logit_decomposition. With the defaults (10 runs, 200 texts) layer_metrics
    has about 2.2 M rows and the build takes a few seconds: the rows come from DuckDB SQL,
    the Holm correction of the contrasts from :func:`homog.stats.paired_tests.holm`. The file is
    written
    atomically by :func:`homog.store.loader.atomic_database`. ``layer_summary`` is materialised
    as ``homog load`` does (``summary='table'``), or left the view that databases built by
    older homog hold (``summary='view'``, the benchmark's "before"). Raises HomogError for
    ``n_runs < 1`` or ``n_texts < 2``.
    """
    if n_runs < 1 or n_texts < 2:
        raise HomogError("make_demo_db needs n_runs >= 1 and n_texts >= 2")
    with atomic_database(path) as con:
        create_schema(con, summary=summary)
        con.executemany(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            demo_runs(n_runs, n_texts, seed),
        )
        _fill_run_tables(con, n_texts, seed=seed, n_bins=n_bins)
        _fill_contrasts(con)
        _fill_posenc(con, seed=seed)
        fill_probe(con, seed=seed)
        fill_u_shape(con, seed=seed)
        fill_sentences(con, seed=seed)
        if summary == "table":
            materialize_layer_summary(con)
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in DEMO_TABLES}
    return counts


def demo_runs(n_runs: int, n_texts: int, seed: int = 0) -> list[tuple[Any, ...]]:
    """The ``runs`` rows: ``DEMO_MODELS`` x ``DEMO_INTERVENTIONS`` in turn, fixed dates."""
    runs = []
    for i in range(n_runs):
        key, source, n_layers, d_model, n_heads = DEMO_MODELS[i % len(DEMO_MODELS)]
        intervention = DEMO_INTERVENTIONS[(i // len(DEMO_MODELS)) % len(DEMO_INTERVENTIONS)]
        run_id = f"demo{seed:02d}{i:04d}"
        runs.append(
            (
                run_id,
                key,
                source,
                n_layers,
                d_model,
                n_heads,
                "float32",
                "cpu",
                intervention,
                f'{{"demo": true, "index": {i}}}',
                "demo",
                f"2025-01-{1 + i % 28:02d} 12:00:00",
                n_texts,
                0,
                "{}",
            )
        )
    return runs


def _uniform(key: str, seed: int) -> str:
    """SQL: a deterministic uniform(-0.5, 0.5) from a hash of the SQL expressions ``key``."""
    return f"((hash({key}, {seed}) % 1000003) / 1000003.0 - 0.5)"


def _noise(seed: int, *parts: str) -> str:
    """SQL: hash noise over the columns ``parts``, a sum of two uniforms (roughly a bell)."""
    key = ", ".join(parts)
    return f"({_uniform(key, seed)} + {_uniform(key + ', 7', seed)})"


def _fill_run_tables(
    con: duckdb.DuckDBPyConnection, n_texts: int, *, seed: int, n_bins: int
) -> None:
    """texts and every per-run table, from the ``runs`` rows already inserted."""
    _create_demo_grid(con)
    _fill_texts_and_metrics(con, n_texts, seed=seed)
    _fill_attention(con, n_texts, seed=seed, n_bins=n_bins)
    _fill_spectra_and_mauve(con, seed=seed)


def _create_demo_grid(con: duckdb.DuckDBPyConnection) -> None:
    """The temporary tables the fills cross: variants ``v``, metrics ``m``, run layers ``l``."""
    con.execute(
        "CREATE TEMP TABLE v AS SELECT * FROM (VALUES ('original', 0.0), ('front', 1.0), "
        "('end', 0.8), ('control', 0.2)) t(variant, bias)"
    )
    con.execute(
        "CREATE TEMP TABLE m AS SELECT * FROM (VALUES "
        + ", ".join(f"('{k}', {a}, {b}, {s}, {e})" for k, (a, b, s, e) in DEMO_METRICS.items())
        + ") t(metric, v0, v1, sd, shift)"
    )
    con.execute(
        "CREATE TEMP TABLE l AS SELECT run_id, n_layers, intervention, n_heads, "
        "unnest(range(n_layers + 1)) AS layer FROM runs"
    )


def _fill_texts_and_metrics(con: duckdb.DuckDBPyConnection, n_texts: int, *, seed: int) -> None:
    """``texts`` (``n_texts`` per variant) and ``layer_metrics`` for every run, layer, metric."""
    con.execute(f"""
        INSERT INTO texts (dataset, variant, sample_id, text, label, keyphrase, bertscore_f1)
        SELECT 'demo', v.variant, printf('demo-%05d', t.i),
               'Demo review ' || t.i || ' (' || v.variant || ').',
               CASE WHEN t.i % 2 = 0 THEN 'pos' ELSE 'neg' END, 'key phrase ' || t.i,
               CASE WHEN v.variant = 'original' THEN 1.0
                    ELSE 0.9 + 0.1 * {_uniform("t.i, v.variant", seed)} + 0.05 END
        FROM range({n_texts}) t(i), v
    """)
    # Per text (shared by its layers and variants: a random effect) and per cell.
    text_noise = _noise(seed, "t.i", "m.metric", "l.run_id")
    cell_noise = _noise(seed, "t.i", "m.metric", "l.run_id", "v.variant", "l.layer")
    con.execute(f"""
        INSERT INTO layer_metrics
        SELECT l.run_id, v.variant, printf('demo-%05d', t.i), l.layer, m.metric,
               m.v0 + (m.v1 - m.v0) * (l.layer / l.n_layers)
               + m.shift * v.bias * (l.layer / l.n_layers)
                 * CASE l.intervention WHEN 'none' THEN 1.0 ELSE 0.5 END
               + m.sd * 2.0 * {text_noise}
               + 0.5 * m.sd * 2.0 * {cell_noise}
        FROM l, v, range({n_texts}) t(i), m
        WHERE l.layer > 0 OR m.metric NOT LIKE 'attn_%'
        ORDER BY l.run_id, m.metric, v.variant, l.layer
    """)


def _fill_attention(
    con: duckdb.DuckDBPyConnection, n_texts: int, *, seed: int, n_bins: int
) -> None:
    """``attention_profile`` (``n_bins`` bins per head) and ``attention_heads``."""
    bin_noise = _noise(seed, "l.run_id", "v.variant", "l.layer", "h.head", "b.bin")
    con.execute(f"""
        INSERT INTO attention_profile
        SELECT run_id, variant, layer, head, bin, w / sum(w) OVER
               (PARTITION BY run_id, variant, layer, head)
        FROM (
            SELECT l.run_id, v.variant, l.layer, h.head, b.bin,
                   exp(-b.bin * (0.2 + 0.3 * l.layer / l.n_layers))
                   + 0.3 * (b.bin = {n_bins - 1})::INT
                   + 0.05 + 0.04 * {bin_noise} AS w
            FROM l, v, range(l.n_heads) h(head), range({n_bins}) b(bin)
            WHERE l.layer > 0
        )
    """)
    head_noise = _noise(seed, "l.run_id", "v.variant", "l.layer", "h.head", "m.metric")
    con.execute(f"""
        INSERT INTO attention_heads
        SELECT l.run_id, v.variant, l.layer, h.head, m.metric,
               m.v0 + (m.v1 - m.v0) * (l.layer / l.n_layers)
               + m.sd * 4.0 * {head_noise},
               m.sd, {n_texts}
        FROM l, v, range(l.n_heads) h(head), m
        WHERE l.layer > 0 AND m.metric LIKE 'attn_%'
    """)


def _fill_spectra_and_mauve(con: duckdb.DuckDBPyConnection, *, seed: int) -> None:
    """``dataset_spectra`` (both poolings) and ``mauve_scores`` for every run and layer."""
    con.execute(f"""
        INSERT INTO dataset_spectra
        SELECT l.run_id, v.variant, l.layer, p.pooling, s.metric,
               CASE s.metric
                 WHEN 'rankme' THEN 80.0 * (1.0 - 0.6 * l.layer / l.n_layers) - 8 * v.bias
                 WHEN 'alpha_req' THEN 0.8 + 0.6 * l.layer / l.n_layers + 0.1 * v.bias
                 ELSE 0.95 END
               + 0.02 * {_noise(seed, "l.run_id", "v.variant", "l.layer", "p.pooling", "s.metric")}
        FROM l, v, (VALUES ('mean'), ('last')) p(pooling),
             (VALUES ('rankme'), ('alpha_req'), ('alpha_req_r2')) s(metric)
    """)
    con.execute(f"""
        INSERT INTO mauve_scores
        SELECT l.run_id, v.variant, l.layer,
               least(1.0, greatest(0.004, 0.6 + 0.35 * l.layer / l.n_layers - 0.1 * v.bias
                     + 0.1 * {_noise(seed, "l.run_id", "v.variant", "l.layer")}))
        FROM l, v WHERE l.layer < l.n_layers
    """)


def _fill_contrasts(con: duckdb.DuckDBPyConnection) -> None:
    """Contrasts vs original from the synthetic rows, Holm-adjusted over each run's layers.

    Paired differences with normal-approximation p-values (the demo needs plausible numbers,
    not the stage's ``stats.test`` p-values); the Holm family is (run, variant, metric), as in
    the stats stage.
    """
    con.execute("""
        CREATE TEMP TABLE d AS
        SELECT a.run_id, a.variant AS variant_a, 'original' AS variant_b, a.layer,
               a.metric, avg(a.value - b.value) AS md, stddev_samp(a.value - b.value) AS sd,
               count(*) AS n
        FROM layer_metrics a JOIN layer_metrics b
          ON a.run_id = b.run_id AND a.sample_id = b.sample_id AND a.layer = b.layer
         AND a.metric = b.metric AND b.variant = 'original' AND a.variant <> 'original'
        GROUP BY ALL
    """)
    frame = con.execute("""
        SELECT run_id, variant_a, variant_b, layer, metric, md AS mean_diff,
               md - 1.96 * sd / sqrt(n) AS ci_low, md + 1.96 * sd / sqrt(n) AS ci_high,
               least(1.0, 2 * exp(-0.5 * (md / (sd / sqrt(n))) ** 2)
                          / greatest(abs(md / (sd / sqrt(n))), 1.0)) AS p_value,
               n
        FROM d
        ORDER BY run_id, metric, variant_a, layer
    """).df()
    frame["p_holm"] = frame.groupby(["run_id", "variant_a", "metric"])["p_value"].transform(
        lambda p: holm(p.to_numpy())
    )
    con.register("demo_contrasts", frame)
    con.execute("""
        INSERT INTO contrasts (run_id, variant_a, variant_b, layer, metric, mean_diff, ci_low,
                               ci_high, p_value, p_holm, band, baseline_run_id, n)
        SELECT run_id, variant_a, variant_b, layer, metric, mean_diff, ci_low, ci_high,
               p_value, p_holm, NULL, NULL, n
        FROM demo_contrasts
    """)
    con.unregister("demo_contrasts")


def _fill_posenc(con: duckdb.DuckDBPyConnection, *, seed: int) -> None:
    """posenc_results, head_ablation (a rope deposit head at layer 1, head 3), logit shares."""
    con.execute("""
        INSERT INTO posenc_results
        SELECT pe, task, split, acc - CASE split WHEN 'test' THEN 0.02 ELSE 0 END,
               1200000 + 5000 * k, 100, 0
        FROM (VALUES ('nope', 0, 0.30, 0.78), ('sinusoidal', 1, 0.80, 0.85),
                     ('learned', 2, 0.78, 0.86), ('t5', 3, 0.88, 0.90),
                     ('alibi', 4, 0.89, 0.91), ('rope', 5, 0.93, 0.69),
                     ('partial_rope', 6, 0.90, 0.90), ('mla', 7, 0.88, 0.97))
             e(pe, k, dist, cnt),
             (VALUES ('distance'), ('count')) t(task), (VALUES ('train'), ('test')) s(split),
             LATERAL (SELECT CASE task WHEN 'distance' THEN dist ELSE cnt END AS acc)
    """)
    drop_noise = _noise(seed, "p.pe", "p.task", "l.layer", "h.head")
    con.execute(f"""
        INSERT INTO head_ablation
        SELECT pe, task, layer, head, accuracy - drop, drop
        FROM (
            SELECT p.pe, p.task, l.layer, h.head, p.accuracy,
                   CASE WHEN p.pe = 'rope' AND p.task = 'distance' AND l.layer = 1
                             AND h.head = 3 THEN 0.6
                        ELSE greatest(0.0, 0.01 + 0.02 * {drop_noise}) END AS drop
            FROM posenc_results p, range(6) l(layer), range(16) h(head)
            WHERE p.split = 'test'
        )
    """)
    con.execute(f"""
        INSERT INTO logit_decomposition
        SELECT p.pe, l.layer, h.head, t.term,
               CASE t.term WHEN 'content' THEN 0.6 WHEN 'position' THEN 0.3 ELSE 0.1 END
               + 0.05 * {_noise(seed, "p.pe", "l.layer", "h.head", "t.term")}
        FROM (SELECT DISTINCT pe FROM posenc_results) p, range(6) l(layer),
             range(16) h(head), (VALUES ('content'), ('position'), ('mixed')) t(term)
    """)
