"""Read-only queries over the homog DuckDB file, shared by the CLI and the terminal UI.

Every function takes a connection from :func:`connect` (read-only) and returns plain Python
values: lists of dicts (one dict per row, keys = column names) or ``(columns, rows)``. Names
given by users (metrics, variants, models, runs) are checked against the database and a
HomogError lists the valid ones. Nothing here imports a UI toolkit or writes the database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from homog.errors import HomogError
from homog.io import atomic_path
from homog.store.guard import check_read_only, damaged, open_reader

CREATE_HINT = "create it with `dvc repro` (the whole pipeline) or `homog load` (after the stages)"
# the paper's variants, then the position family (homog.synth.position; a finer sweep's
# key_p25 ... sort after these by name)
VARIANT_ORDER = (
    "original", "front", "end", "control", "key_first", "key_mid", "key_last", "key_control",
)  # fmt: skip


def connect(db_path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """Open the database read-only, with the reader guards of :mod:`homog.store.guard`.

    Raises HomogError when the file is missing, empty (0 bytes), not a DuckDB database, or has
    no homog tables (the message names the pipeline command that creates it), and
    :class:`DatabaseLocked` while another process holds a write connection (retry; the file
    is fine).
    """
    path = Path(db_path)
    if not path.exists():
        raise HomogError(f"no database at {path}: {CREATE_HINT}")
    if path.is_dir() or path.stat().st_size == 0:
        raise HomogError(f"the database {path} is empty: {CREATE_HINT}")
    con = open_reader(path)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    except duckdb.Error as exc:
        con.close()
        raise damaged(path, exc) from exc
    if "runs" not in tables or "layer_metrics" not in tables:
        con.close()
        raise HomogError(f"{path} holds no homog tables: {CREATE_HINT}")
    return con


def _db_path(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        row = con.execute(
            "SELECT path FROM duckdb_databases() WHERE NOT internal AND path IS NOT NULL LIMIT 1"
        ).fetchone()
    except duckdb.Error:
        row = None
    return row[0] if row else None


def _q(con: duckdb.DuckDBPyConnection, sql: str, args: Sequence[Any] | None = None) -> list[tuple]:
    """Run one internal query and fetch its rows; a DuckDB error (a damaged block, a lock)
    becomes a HomogError that says so."""
    try:
        return con.execute(sql, args).fetchall() if args else con.execute(sql).fetchall()
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        raise damaged(_db_path(con), exc) from exc


def _dicts(
    con: duckdb.DuckDBPyConnection, sql: str, args: Sequence[Any] | None = None
) -> list[dict[str, Any]]:
    try:
        cur = con.execute(sql, args) if args else con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        raise damaged(_db_path(con), exc) from exc


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
        con,
        "SELECT run_id, model, model_source, n_layers, d_model, n_heads, dtype, device, "
        "intervention, n_texts, created_at FROM runs ORDER BY model, intervention, created_at",
    )


def metrics(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Metric names present in ``layer_metrics``, sorted."""
    return [r[0] for r in _q(con, "SELECT DISTINCT metric FROM layer_metrics ORDER BY metric")]


def variants(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Variant names present in ``layer_metrics``: original, front, end, control first."""
    found = {r[0] for r in _q(con, "SELECT DISTINCT variant FROM layer_metrics")}
    return [v for v in VARIANT_ORDER if v in found] + sorted(found - set(VARIANT_ORDER))


def models(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Model keys present in ``runs``, sorted."""
    return [r[0] for r in _q(con, "SELECT DISTINCT model FROM runs ORDER BY 1")]


def run_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """All run ids, sorted."""
    return [r[0] for r in _q(con, "SELECT run_id FROM runs ORDER BY 1")]


_all_variants, _all_models, _all_run_ids = variants, models, run_ids


def summary_names(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """(metrics, variants) that ``layer_summary`` has rows for, ordered as :func:`metrics` and
    :func:`variants` order them: the names a curve can be drawn for.

    A lookup on a materialised summary (databases built by ``homog load``); on the view of an
    older database, :func:`metrics` and :func:`variants` (a scan of ``layer_metrics``; the
    view would aggregate every row first). The two differ only for a metric without one finite
    value, which the summary leaves out (nothing to draw).
    """
    from homog.extract import PER_TEXT_METRICS
    from homog.store.schema import summary_kind

    try:
        kind = summary_kind(con)
    except duckdb.Error as exc:
        raise damaged(_db_path(con), exc) from exc
    if kind != "table":
        found_metrics = metrics(con)
        found_variants = variants(con)
    else:
        found_metrics = [
            r[0] for r in _q(con, "SELECT DISTINCT metric FROM layer_summary ORDER BY metric")
        ]
        found = {r[0] for r in _q(con, "SELECT DISTINCT variant FROM layer_summary")}
        found_variants = [v for v in VARIANT_ORDER if v in found] + sorted(
            found - set(VARIANT_ORDER)
        )
    # per-text counts (n_tokens, layer 0 only) are no curve
    return [m for m in found_metrics if m not in PER_TEXT_METRICS], found_variants


def has_summary(con: duckdb.DuckDBPyConnection, metric: str) -> bool:
    """True when ``layer_summary`` has a row of ``metric`` (a lookup on the materialised table)."""
    return bool(_q(con, "SELECT 1 FROM layer_summary WHERE metric = ? LIMIT 1", [metric]))


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
    ci_low, ci_high, p_holm_vs_original (Holm-corrected p, stats.test, of variant vs original at
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
    rows = _dicts(con, sql, args)
    if rows:
        # Names that matched nothing among the rows found: a typo (listed with the valid
        # names) or a valid name without rows for this metric (fine). Only then the scan.
        for kind, given, field, listing in (
            ("variant", variants, "variant", _all_variants),
            ("model", models, "model", _all_models),
            ("run", run_ids, "run_id", _all_run_ids),
        ):
            seen = {r[field] for r in rows}
            unseen = [g for g in given or () if g not in seen]
            if unseen:
                check_names(kind, unseen, listing(con))
    else:
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
        con,
        f"SELECT r.model, c.* FROM contrasts AS c JOIN runs AS r USING (run_id) WHERE {where} "
        "ORDER BY r.model, c.run_id, c.baseline_run_id NULLS FIRST, c.variant_a, c.variant_b, "
        "c.band, c.layer",
        args,
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
        heads = [
            r[0]
            for r in _q(
                con,
                "SELECT DISTINCT head FROM attention_profile WHERE run_id = ? ORDER BY 1",
                [run_id],
            )
        ]
        if heads and int(head) not in heads:
            raise HomogError(
                f"head {head} is out of range: run {run_id[:8]} has heads {heads[0]}..{heads[-1]}"
            )
        head_sql = " AND head = ?"
        args.append(int(head))
    return _dicts(
        con,
        "SELECT layer, bin, avg(mass) AS mass FROM attention_profile "
        f"WHERE run_id = ? AND variant = ?{head_sql} GROUP BY layer, bin ORDER BY layer, bin",
        args,
    )


def attn_first_curves(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The attention sink curve of one run: ``attn_first`` per variant and layer.

    Rows (variant, layer, n, mean, ci_low, ci_high), ordered by variant then layer.
    Raises HomogError for an unknown run.
    """
    check_names("run", [run_id], run_ids(con))
    if not has_summary(con, "attn_first"):  # extracted without attention statistics
        return []
    return [
        {k: r[k] for k in ("variant", "layer", "n", "mean", "ci_low", "ci_high")}
        for r in layer_curves(con, "attn_first", run_ids=[run_id])
    ]


def posenc_results(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """All rows of ``posenc_results`` (pe, task, split, accuracy, n_params, epochs, seed)."""
    return _dicts(
        con,
        "SELECT pe, task, split, accuracy, n_params, epochs, seed FROM posenc_results "
        "ORDER BY pe, task, split, seed",
    )


def head_ablation(con: duckdb.DuckDBPyConnection, pe: str, task: str) -> list[dict[str, Any]]:
    """Per-head ablation of one encoding and task: rows (layer, head, accuracy, drop).

    Raises HomogError for an unknown encoding or task.
    """
    pes = [r[0] for r in _q(con, "SELECT DISTINCT pe FROM head_ablation ORDER BY 1")]
    check_names("positional encoding", [pe], pes)
    tasks = [
        r[0]
        for r in _q(con, "SELECT DISTINCT task FROM head_ablation WHERE pe = ? ORDER BY 1", [pe])
    ]
    check_names("task", [task], tasks)
    return _dicts(
        con,
        "SELECT layer, head, accuracy, drop FROM head_ablation WHERE pe = ? AND task = ? "
        "ORDER BY layer, head",
        [pe, task],
    )


def sql_error(exc: BaseException) -> HomogError:
    """A HomogError for a DuckDB error raised by user SQL (DuckDB's message, plus a hint)."""
    msg = str(exc)
    if "pytz" in msg:
        return HomogError(
            "this query needs the Python package pytz (time zones: now(), timestamptz): "
            "`pip install pytz`"
        )
    if "Corrupt" in msg or "checksum" in msg:
        return damaged(None, exc)
    return HomogError(msg.strip().splitlines()[0] if "\n" in msg.strip() else msg)


def sql_cursor(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyConnection | None:
    """Run read-only SQL; return the cursor of the last statement (None when it has no rows).

    Rows are not fetched here: callers stream them with ``fetchmany``. Raises HomogError for a
    refused statement (:func:`check_read_only`) or any DuckDB error.
    """
    check_read_only(con, sql)
    try:
        cur = None
        for st in con.extract_statements(sql):
            cur = con.execute(st)
    except duckdb.Error as exc:
        raise sql_error(exc) from exc
    if cur is None or cur.description is None:
        return None
    return cur


def fetch_batches(cur: duckdb.DuckDBPyConnection, batch: int = 10_000) -> Iterator[list[tuple]]:
    """Row batches of a cursor from :func:`sql_cursor`, at most ``batch`` rows each (a DuckDB
    error while fetching becomes a HomogError)."""
    while True:
        try:
            rows = cur.fetchmany(batch)
        except duckdb.Error as exc:
            raise sql_error(exc) from exc
        if not rows:
            return
        yield rows


def run_sql(
    con: duckdb.DuckDBPyConnection, sql: str, *, max_rows: int | None = None
) -> tuple[list[str], list[tuple]]:
    """Run read-only SQL and return ``(columns, rows)`` of the last statement.

    ``max_rows`` fetches at most that many rows (None: all), so a console can show the first
    rows of ``SELECT * FROM layer_metrics`` without pulling millions of tuples into memory.
    Raises HomogError for a refused statement (see :func:`check_read_only`) or any DuckDB
    error, an interrupted query included (the message is DuckDB's).
    """
    cur = sql_cursor(con, sql)
    if cur is None:
        return [], []
    try:
        rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows)
    except duckdb.Error as exc:
        raise sql_error(exc) from exc
    return [d[0] for d in cur.description], rows


def relation(con: duckdb.DuckDBPyConnection, table_or_sql: str) -> duckdb.DuckDBPyRelation:
    """A relation for a table/view name or a read-only query (for export).

    Raises HomogError for an unknown table (listing the valid ones), a refused statement or a
    DuckDB error.
    """
    text = table_or_sql.strip().rstrip(";")
    names = [
        r[0]
        for r in _q(
            con,
            "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views() "
            "WHERE NOT internal ORDER BY 1",
        )
    ]
    if text.replace("_", "").isalnum():
        check_names("table", [text], names)
        return con.table(text)
    check_read_only(con, text)
    try:
        statements = con.extract_statements(text)
        if len(statements) != 1:
            raise HomogError("export takes one SELECT statement")
        return con.sql(text)
    except duckdb.Error as exc:
        raise sql_error(exc) from exc


def _database_files(con: duckdb.DuckDBPyConnection) -> list[Path]:
    paths = [
        Path(r[0]) for r in _q(con, "SELECT path FROM duckdb_databases() WHERE path IS NOT NULL")
    ]
    return [p for db in paths for p in (db, db.with_name(db.name + ".wal"))]


def check_export_target(
    con: duckdb.DuckDBPyConnection, out: str | os.PathLike[str], *, force: bool = False
) -> Path:
    """The export target checked before any work: never the database (or its WAL), also
    through a symlink; an existing file only with ``force``; never a directory."""
    out = Path(out)
    real = out.resolve()
    for db in _database_files(con):
        if real == db.resolve() or (out.exists() and db.exists() and os.path.samefile(out, db)):
            raise HomogError(f"refused: {out} is the database {db} itself; choose another file")
    if out.is_dir():
        raise HomogError(f"{out} is a directory; give a file name (e.g. {out}/export.parquet)")
    if (out.exists() or out.is_symlink()) and not force:
        raise HomogError(f"{out} exists; pass --force to overwrite it, or choose another name")
    return out


def export(
    con: duckdb.DuckDBPyConnection,
    table_or_sql: str,
    out: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    force: bool = False,
) -> int:
    """Write a table or a read-only query to Parquet or CSV atomically; return the row count.

    ``fmt`` is 'parquet' or 'csv' (default: from the file suffix, else parquet). The reader
    connection cannot write files (external access is off), so the rows stream as Arrow
    batches into a separate in-memory DuckDB connection that writes the temporary file beside
    ``out``, renamed into place when complete. Refuses the database itself and (without
    ``force``) an existing file, before running the query.
    """
    import pyarrow as pa

    from homog.layout import writable_dir

    out = Path(out)
    fmt = (fmt or out.suffix.lstrip(".") or "parquet").lower()
    if fmt not in ("parquet", "csv"):
        raise HomogError(f"unknown export format {fmt!r}; valid: parquet, csv")
    out = check_export_target(con, out, force=force)
    rel = relation(con, table_or_sql)
    writable_dir(out.parent, what="export")
    try:
        reader = rel.to_arrow_reader(100_000)
    except duckdb.Error as exc:
        raise sql_error(exc) from exc
    count = [0]

    def counted() -> Iterator[pa.RecordBatch]:
        try:
            for b in reader:
                count[0] += b.num_rows
                yield b
        except duckdb.Error as exc:
            raise sql_error(exc) from exc

    stream = pa.RecordBatchReader.from_batches(reader.schema, counted())
    writer = duckdb.connect(config={"autoinstall_known_extensions": False})
    try:
        with atomic_path(out) as tmp:
            src = writer.from_arrow(stream)
            try:
                if fmt == "parquet":
                    src.write_parquet(str(tmp))
                else:
                    src.write_csv(str(tmp), header=True)
            except duckdb.Error as exc:
                raise sql_error(exc) from exc
    except OSError as exc:
        raise HomogError(f"cannot write {out}: {exc.strerror or exc}") from exc
    finally:
        writer.close()
    return count[0]
