"""Read-only queries over the homog DuckDB file, shared by the CLI and the terminal UI.

Every function takes a connection from :func:`connect` (read-only) and returns plain Python
values: lists of dicts (one dict per row, keys = column names) or ``(columns, rows)``. Names
given by users (metrics, variants, models, runs) are checked against the database and a
HomogError lists the valid ones. Nothing here imports a UI toolkit.

``make_demo_db`` writes a synthetic but schema-valid database for tests and benchmarks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from homog.io import HomogError

CREATE_HINT = "create it with `dvc repro` (the whole pipeline) or `homog load` (after the stages)"
# Statement types run_sql lets through: everything else could change the database or write files.
READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN", "PRAGMA", "CALL")
VARIANT_ORDER = ("original", "front", "end", "control")


def connect(db_path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """Open the database read-only.

    Raises HomogError when the file is missing, empty (0 bytes), not a DuckDB database, or has
    no homog tables; the message names the pipeline command that creates it.
    """
    path = Path(db_path)
    if not path.exists():
        raise HomogError(f"no database at {path}: {CREATE_HINT}")
    if path.is_dir() or path.stat().st_size == 0:
        raise HomogError(f"the database {path} is empty: {CREATE_HINT}")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise HomogError(
            f"{path} is not a readable DuckDB database ({exc}); move it away and {CREATE_HINT}"
        ) from exc
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "runs" not in tables or "layer_metrics" not in tables:
        con.close()
        raise HomogError(f"{path} holds no homog tables: {CREATE_HINT}")
    return con


def _dicts(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def check_names(kind: str, given: Sequence[Any] | None, valid: Sequence[Any]) -> None:
    """Raise HomogError when an item of ``given`` is not in ``valid``, listing the valid ones."""
    if not given:
        return
    bad = [g for g in given if g not in valid]
    if bad:
        shown = ", ".join(map(str, valid)) if valid else "(none: the database has no data)"
        raise HomogError(f"unknown {kind} {', '.join(map(str, bad))}; valid: {shown}")


def list_runs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """All runs, newest model/intervention grouping first.

    Keys: run_id, model, model_source, n_layers, d_model, n_heads, dtype, device,
    intervention, n_texts, created_at (a datetime or None).
    """
    return _dicts(
        con.execute(
            "SELECT run_id, model, model_source, n_layers, d_model, n_heads, dtype, device, "
            "intervention, n_texts, created_at FROM runs ORDER BY model, intervention, created_at"
        )
    )


def metrics(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Metric names present in ``layer_metrics``, sorted."""
    return [
        r[0]
        for r in con.execute("SELECT DISTINCT metric FROM layer_metrics ORDER BY metric").fetchall()
    ]


def variants(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Variant names present in ``layer_metrics``: original, front, end, control first."""
    found = {r[0] for r in con.execute("SELECT DISTINCT variant FROM layer_metrics").fetchall()}
    return [v for v in VARIANT_ORDER if v in found] + sorted(found - set(VARIANT_ORDER))


def models(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Model keys present in ``runs``, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT model FROM runs ORDER BY 1").fetchall()]


def run_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """All run ids, sorted."""
    return [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY 1").fetchall()]


_all_variants, _all_models, _all_run_ids = variants, models, run_ids


def _in(column: str, values: Sequence[Any] | None, args: list[Any]) -> str:
    if not values:
        return ""
    args.append(list(values))
    return f" AND {column} IN (SELECT unnest(?))"


def layer_curves(
    con: duckdb.DuckDBPyConnection,
    metric: str,
    run_ids: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    models: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Per-layer mean curves of ``metric`` with 95 % CIs and the contrast p-values.

    Filters (None = all): ``run_ids``, ``variants``, ``layers`` (layer indices), ``models``
    (model keys). Rows, ordered by model, run, variant (original, front, end, control), layer:
    run_id, model, intervention, variant, layer, rel_depth (layer / n_layers), n, mean, std,
    ci_low, ci_high, p_holm_vs_original (Holm-corrected Wilcoxon p of variant vs original at
    that layer from ``contrasts``; None for the original itself or when stats did not run).
    Raises HomogError for an unknown metric, variant, model or run, listing the valid ones.
    """
    args: list[Any] = [metric]
    where = "s.metric = ?"
    where += _in("s.run_id", run_ids, args)
    where += _in("s.variant", variants, args)
    where += _in("s.layer", layers, args)
    where += _in("s.model", models, args)
    order = ", ".join(f"'{v}'" for v in VARIANT_ORDER)
    sql = f"""
        SELECT s.run_id, s.model, r.intervention, s.variant, s.layer,
               s.layer / r.n_layers AS rel_depth, s.n, s.mean, s.std, s.ci_low, s.ci_high,
               c.p_holm AS p_holm_vs_original
        FROM layer_summary AS s
        JOIN runs AS r USING (run_id)
        LEFT JOIN contrasts AS c
          ON c.run_id = s.run_id AND c.metric = s.metric AND c.layer = s.layer
         AND c.variant_a = s.variant AND c.variant_b = 'original'
         AND c.band IS NULL AND c.baseline_run_id IS NULL
        WHERE {where}
        ORDER BY s.model, r.intervention, s.run_id,
                 coalesce(list_position([{order}], s.variant), 99), s.variant, s.layer
    """
    rows = _dicts(con.execute(sql, args))
    if not rows:
        # Validate names only when nothing matched: the DISTINCT scans cost a full pass over
        # layer_metrics, too much for the TUI's redraw on every metric switch.
        # The filter arguments shadow the module's listing functions, hence the _all_* aliases.
        check_names("metric", [metric], metrics(con))
        check_names("variant", variants, _all_variants(con))
        check_names("model", models, _all_models(con))
        check_names("run", run_ids, _all_run_ids(con))
    return rows


def contrasts(
    con: duckdb.DuckDBPyConnection,
    metric: str,
    run_ids: Sequence[str] | None = None,
    bands: bool = False,
) -> list[dict[str, Any]]:
    """Rows of ``contrasts`` for ``metric``: per layer (``bands=False``) or per depth band.

    Keys: every column of ``contrasts`` plus ``model``. Raises HomogError for an unknown metric.
    """
    check_names("metric", [metric], metrics(con))
    args: list[Any] = [metric]
    where = "c.metric = ? AND c.band IS " + ("NOT NULL" if bands else "NULL")
    where += _in("c.run_id", run_ids, args)
    return _dicts(
        con.execute(
            f"SELECT r.model, c.* FROM contrasts AS c JOIN runs AS r USING (run_id) WHERE {where} "
            "ORDER BY r.model, c.run_id, c.baseline_run_id NULLS FIRST, c.variant_a, c.variant_b, "
            "c.band, c.layer",
            args,
        )
    )


def attention_profile(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    variant: str,
    head: int | None = None,
) -> list[dict[str, Any]]:
    """Attention column mass by relative-position bin for one run and variant.

    ``head=None`` averages over heads. Rows (layer, bin, mass) ordered by layer, bin.
    Raises HomogError for an unknown run or variant.
    """
    check_names("run", [run_id], run_ids(con))
    check_names("variant", [variant], variants(con))
    args: list[Any] = [run_id, variant]
    head_sql = ""
    if head is not None:
        head_sql = " AND head = ?"
        args.append(int(head))
    return _dicts(
        con.execute(
            "SELECT layer, bin, avg(mass) AS mass FROM attention_profile "
            f"WHERE run_id = ? AND variant = ?{head_sql} GROUP BY layer, bin ORDER BY layer, bin",
            args,
        )
    )


def attn_first_curves(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The attention sink curve of one run: ``attn_first`` per variant and layer.

    Rows (variant, layer, n, mean, ci_low, ci_high), ordered by variant then layer.
    Raises HomogError for an unknown run.
    """
    check_names("run", [run_id], run_ids(con))
    return (
        [
            {k: r[k] for k in ("variant", "layer", "n", "mean", "ci_low", "ci_high")}
            for r in layer_curves(con, "attn_first", run_ids=[run_id])
        ]
        if "attn_first" in metrics(con)
        else []
    )


def posenc_results(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """All rows of ``posenc_results`` (pe, task, split, accuracy, n_params, epochs, seed)."""
    return _dicts(
        con.execute(
            "SELECT pe, task, split, accuracy, n_params, epochs, seed FROM posenc_results "
            "ORDER BY pe, task, split, seed"
        )
    )


def head_ablation(con: duckdb.DuckDBPyConnection, pe: str, task: str) -> list[dict[str, Any]]:
    """Per-head ablation of one encoding and task: rows (layer, head, accuracy, drop).

    Raises HomogError for an unknown encoding or task.
    """
    pes = [r[0] for r in con.execute("SELECT DISTINCT pe FROM head_ablation ORDER BY 1").fetchall()]
    check_names("positional encoding", [pe], pes)
    tasks = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT task FROM head_ablation WHERE pe = ? ORDER BY 1", [pe]
        ).fetchall()
    ]
    check_names("task", [task], tasks)
    return _dicts(
        con.execute(
            "SELECT layer, head, accuracy, drop FROM head_ablation WHERE pe = ? AND task = ? "
            "ORDER BY layer, head",
            [pe, task],
        )
    )


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise HomogError unless every statement in ``sql`` only reads.

    Uses DuckDB's own parser (statement types), so comments, CTEs and odd spacing cannot hide a
    write. Allowed: SELECT (incl. SHOW, DESCRIBE, SUMMARIZE, VALUES, FROM-first), EXPLAIN,
    PRAGMA, CALL. Refused: INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, COPY, ATTACH, SET, ...
    A syntax error raises HomogError with DuckDB's message.
    """
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise HomogError(str(exc)) from exc
    if not statements:
        raise HomogError("no SQL statement given")
    for st in statements:
        kind = st.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise HomogError(
                f"refused: {kind} statements are not allowed; homog sql is read-only "
                "(only SELECT/SHOW/DESCRIBE/EXPLAIN). Use `homog export` to write files."
            )


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple]]:
    """Run read-only SQL and return ``(columns, rows)`` of the last statement.

    Raises HomogError for a write statement (see :func:`check_read_only`) or any DuckDB error
    (the message is DuckDB's).
    """
    check_read_only(con, sql)
    try:
        cur = None
        for st in con.extract_statements(sql):
            cur = con.execute(st)
        if cur is None or cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.Error as exc:
        raise HomogError(str(exc)) from exc


def relation(con: duckdb.DuckDBPyConnection, table_or_sql: str) -> duckdb.DuckDBPyRelation:
    """A relation for a table/view name or a read-only query (for export).

    Raises HomogError for an unknown table (listing the valid ones), a write statement or a
    DuckDB error.
    """
    text = table_or_sql.strip().rstrip(";")
    names = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views() "
            "WHERE NOT internal ORDER BY 1"
        ).fetchall()
    ]
    if text.replace("_", "").isalnum():
        check_names("table", [text], names)
        return con.table(text)
    check_read_only(con, text)
    try:
        return con.sql(text)
    except duckdb.Error as exc:
        raise HomogError(str(exc)) from exc


def export(
    con: duckdb.DuckDBPyConnection,
    table_or_sql: str,
    out: str | os.PathLike[str],
    fmt: str | None = None,
) -> int:
    """Write a table or a read-only query to Parquet or CSV atomically; return the row count.

    ``fmt`` is 'parquet' or 'csv' (default: from the file suffix, else parquet).
    """
    from homog.io import atomic_path

    out = Path(out)
    fmt = (fmt or out.suffix.lstrip(".") or "parquet").lower()
    if fmt not in ("parquet", "csv"):
        raise HomogError(f"unknown export format {fmt!r}; valid: parquet, csv")
    rel = relation(con, table_or_sql)
    with atomic_path(out) as tmp:
        try:
            if fmt == "parquet":
                rel.write_parquet(str(tmp))
            else:
                rel.write_csv(str(tmp), header=True)
        except duckdb.Error as exc:
            raise HomogError(str(exc)) from exc
    return int(rel.aggregate("count(*)").fetchall()[0][0])


# ---------------------------------------------------------------------------------------------
# Synthetic database for tests and benchmarks

DEMO_MODELS = (
    # (model key, source, n_layers, d_model, n_heads)
    ("smollm2-135m", "embedded:smollm2-135m", 30, 576, 9),
    ("gemma3-270m", "embedded:gemma3-270m", 18, 640, 4),
    ("llama-8b", "random:llama-8b", 32, 4096, 32),
)
DEMO_INTERVENTIONS = ("none", "zero_pos", "shuffle_pos")
# metric -> (value at layer 0, value at the last layer, noise sd, shift per unit of bias)
DEMO_METRICS = {
    "erank": (60.0, 20.0, 4.0, -6.0),
    "mev": (0.10, 0.45, 0.04, 0.05),
    "schatten_1": (7.0, 3.5, 0.5, -0.6),
    "schatten_4": (0.5, 0.85, 0.04, 0.04),
    "resultant_length": (0.3, 0.8, 0.05, 0.05),
    "mean_cosine": (0.1, 0.6, 0.05, 0.05),
    "norm_mean": (1.0, 60.0, 3.0, 2.0),
    "attn_first": (0.2, 0.7, 0.05, 0.06),
    "attn_last": (0.1, 0.05, 0.02, 0.01),
    "attn_entropy": (2.5, 1.2, 0.2, -0.15),
}


def make_demo_db(
    path: str | os.PathLike[str],
    n_runs: int = 10,
    n_texts: int = 200,
    *,
    seed: int = 0,
    n_bins: int = 20,
) -> dict[str, int]:
    """Write a synthetic, schema-valid homog database to ``path``; return row counts.

    Runs cycle over ``DEMO_MODELS`` x ``DEMO_INTERVENTIONS``; every run has the four variants
    for ``n_texts`` texts and the ten metrics at every layer (attention metrics from layer 1).
    Curves are smooth in depth with per-text random effects and noise derived from hashes
    (deterministic for a given ``seed``), front/end lower erank than original, control in
    between. Also fills texts, attention_profile, attention_heads, dataset_spectra,
    mauve_scores, contrasts (normal-approximation p-values, Holm over layers), posenc_results,
    head_ablation and logit_decomposition. With the defaults (10 runs, 200 texts) layer_metrics
    has about 2.2 M rows and the build takes a few seconds: all rows come from DuckDB SQL.
    The file is written atomically (built beside ``path``, then renamed).
    """
    from homog.store import create_schema

    if n_runs < 1 or n_texts < 2:
        raise HomogError("make_demo_db needs n_runs >= 1 and n_texts >= 2")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.demo.tmp")
    for p in (tmp, tmp.with_name(tmp.name + ".wal")):
        p.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute("SET enable_progress_bar = false")
        create_schema(con)
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
        con.executemany(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs
        )
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
        # u(x): a deterministic uniform(-0.5, 0.5) from a hash; sums of two approximate a bell.
        u = "((hash({}, {seed}) % 1000003) / 1000003.0 - 0.5)"

        def noise(*parts: str) -> str:
            key = ", ".join(parts)
            return f"({u.format(key, seed=seed)} + {u.format(key + ', 7', seed=seed)})"

        con.execute(f"""
            INSERT INTO texts
            SELECT 'demo', v.variant, printf('demo-%05d', t.i),
                   'Demo review ' || t.i || ' (' || v.variant || ').',
                   CASE WHEN t.i % 2 = 0 THEN 'pos' ELSE 'neg' END, 'key phrase ' || t.i,
                   CASE WHEN v.variant = 'original' THEN 1.0
                        ELSE 0.9 + 0.1 * {u.format("t.i, v.variant", seed=seed)} + 0.05 END
            FROM range({n_texts}) t(i), v
        """)
        con.execute(f"""
            INSERT INTO layer_metrics
            SELECT l.run_id, v.variant, printf('demo-%05d', t.i), l.layer, m.metric,
                   m.v0 + (m.v1 - m.v0) * (l.layer / l.n_layers)
                   + m.shift * v.bias * (l.layer / l.n_layers)
                     * CASE l.intervention WHEN 'none' THEN 1.0 ELSE 0.5 END
                   + m.sd * 2.0 * {noise("t.i", "m.metric", "l.run_id")}
                   + 0.5 * m.sd * 2.0 * {
            noise("t.i", "m.metric", "l.run_id", "v.variant", "l.layer")
        }
            FROM l, v, range({n_texts}) t(i), m
            WHERE l.layer > 0 OR m.metric NOT LIKE 'attn_%'
            ORDER BY l.run_id, m.metric, v.variant, l.layer
        """)
        con.execute(f"""
            INSERT INTO attention_profile
            SELECT run_id, variant, layer, head, bin, w / sum(w) OVER
                   (PARTITION BY run_id, variant, layer, head)
            FROM (
                SELECT l.run_id, v.variant, l.layer, h.head, b.bin,
                       exp(-b.bin * (0.2 + 0.3 * l.layer / l.n_layers))
                       + 0.3 * (b.bin = {n_bins - 1})::INT
                       + 0.05 + 0.04 * {
            noise("l.run_id", "v.variant", "l.layer", "h.head", "b.bin")
        } AS w
                FROM l, v, range(l.n_heads) h(head), range({n_bins}) b(bin)
                WHERE l.layer > 0
            )
        """)
        con.execute(f"""
            INSERT INTO attention_heads
            SELECT l.run_id, v.variant, l.layer, h.head, m.metric,
                   m.v0 + (m.v1 - m.v0) * (l.layer / l.n_layers)
                   + m.sd * 4.0 * {noise("l.run_id", "v.variant", "l.layer", "h.head", "m.metric")},
                   m.sd, {n_texts}
            FROM l, v, range(l.n_heads) h(head), m
            WHERE l.layer > 0 AND m.metric LIKE 'attn_%'
        """)
        con.execute(f"""
            INSERT INTO dataset_spectra
            SELECT l.run_id, v.variant, l.layer, p.pooling, s.metric,
                   CASE s.metric
                     WHEN 'rankme' THEN 80.0 * (1.0 - 0.6 * l.layer / l.n_layers) - 8 * v.bias
                     WHEN 'alpha_req' THEN 0.8 + 0.6 * l.layer / l.n_layers + 0.1 * v.bias
                     ELSE 0.95 END
                   + 0.02 * {noise("l.run_id", "v.variant", "l.layer", "p.pooling", "s.metric")}
            FROM l, v, (VALUES ('mean'), ('last')) p(pooling),
                 (VALUES ('rankme'), ('alpha_req'), ('alpha_req_r2')) s(metric)
        """)
        con.execute(f"""
            INSERT INTO mauve_scores
            SELECT l.run_id, v.variant, l.layer,
                   least(1.0, greatest(0.004, 0.6 + 0.35 * l.layer / l.n_layers - 0.1 * v.bias
                         + 0.1 * {noise("l.run_id", "v.variant", "l.layer")}))
            FROM l, v WHERE l.layer < l.n_layers
        """)
        # Contrasts: paired differences vs original from the synthetic rows themselves, with
        # normal-approximation p-values (the demo needs plausible numbers, not Wilcoxon).
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
        con.execute("""
            INSERT INTO contrasts
            SELECT run_id, variant_a, variant_b, layer, metric, md,
                   md - 1.96 * sd / sqrt(n), md + 1.96 * sd / sqrt(n), p,
                   least(1.0, max(p_step) OVER (PARTITION BY run_id, variant_a, metric
                                                ORDER BY p ROWS UNBOUNDED PRECEDING)),
                   NULL, NULL, n
            FROM (
                SELECT *, p * (count(*) OVER w - row_number() OVER (w ORDER BY p) + 1) AS p_step
                FROM (SELECT *, least(1.0, 2 * exp(-0.5 * (md / (sd / sqrt(n))) ** 2)
                                      / greatest(abs(md / (sd / sqrt(n))), 1.0)) AS p FROM d)
                WINDOW w AS (PARTITION BY run_id, variant_a, metric)
            )
        """)
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
        con.execute(f"""
            INSERT INTO head_ablation
            SELECT pe, task, layer, head, accuracy - drop, drop
            FROM (
                SELECT p.pe, p.task, l.layer, h.head, p.accuracy,
                       CASE WHEN p.pe = 'rope' AND p.task = 'distance' AND l.layer = 1
                                 AND h.head = 3 THEN 0.6
                            ELSE greatest(0.0, 0.01 + 0.02 * {
            noise("p.pe", "p.task", "l.layer", "h.head")
        }) END AS drop
                FROM posenc_results p, range(6) l(layer), range(16) h(head)
                WHERE p.split = 'test'
            )
        """)
        con.execute(f"""
            INSERT INTO logit_decomposition
            SELECT p.pe, l.layer, h.head, t.term,
                   CASE t.term WHEN 'content' THEN 0.6 WHEN 'position' THEN 0.3 ELSE 0.1 END
                   + 0.05 * {noise("p.pe", "l.layer", "h.head", "t.term")}
            FROM (SELECT DISTINCT pe FROM posenc_results) p, range(6) l(layer),
                 range(16) h(head), (VALUES ('content'), ('position'), ('mixed')) t(term)
        """)
        counts = {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in (
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
        }
        con.execute("CHECKPOINT")
    except BaseException:
        con.close()
        for p in (tmp, tmp.with_name(tmp.name + ".wal")):
            p.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, path)
    return counts
