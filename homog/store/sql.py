"""The raw-SQL side of the read-only store: internal queries with damage-aware errors
(``fetch_rows``, ``fetch_dicts``), the user's SQL (``run_sql``, ``sql_cursor``, ``relation``,
batched fetches) and ``export``. ``homog.store`` exports the user-facing names
(``from homog.store import run_sql``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from homog.errors import HomogError
from homog.interrupts import register
from homog.io import atomic_path
from homog.layout import writable_dir
from homog.store.guard import check_read_only, damaged


def database_path(con: duckdb.DuckDBPyConnection) -> str | None:
    """The file of ``con``'s main database (None: in memory, or DuckDB cannot say)."""
    try:
        row = con.execute(
            "SELECT path FROM duckdb_databases() WHERE NOT internal AND path IS NOT NULL LIMIT 1"
        ).fetchone()
    except duckdb.Error:
        row = None
    return row[0] if row else None


def fetch_rows(
    con: duckdb.DuckDBPyConnection, sql: str, args: Sequence[Any] | None = None
) -> list[tuple]:
    """Run one internal query and fetch its rows; a DuckDB error (a damaged block, a lock)
    becomes a HomogError that says so."""
    try:
        return con.execute(sql, args).fetchall() if args else con.execute(sql).fetchall()
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        raise damaged(database_path(con), exc) from exc


def fetch_dicts(
    con: duckdb.DuckDBPyConnection, sql: str, args: Sequence[Any] | None = None
) -> list[dict[str, Any]]:
    """``fetch_rows`` as one dict per row (keys: the column names)."""
    try:
        cur = con.execute(sql, args) if args else con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        raise damaged(database_path(con), exc) from exc


def check_names(kind: str, given: Sequence[Any] | None, valid: Sequence[Any]) -> None:
    """Raise HomogError when an item of ``given`` is not in ``valid``, listing the valid ones."""
    if not given:
        return
    bad = [g for g in given if g not in valid]
    if bad:
        import difflib

        shown = ", ".join(map(str, valid)) if valid else "(none: the database has no data)"
        names = [str(v) for v in valid]
        close = [m for b in bad for m in difflib.get_close_matches(str(b), names, n=1, cutoff=0.75)]
        hint = f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else ""
        raise HomogError(f"unknown {kind} {', '.join(map(str, bad))}{hint}; valid: {shown}")


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
    """Run one read-only SQL statement; return its cursor (None when it has no rows).

    More than one statement is refused (HomogError naming the count): only one result could
    be shown, and showing the last one silently hid the others.

    Rows are not fetched here: callers stream them with ``fetchmany``. Raises HomogError for a
    refused statement (:func:`check_read_only`) or any DuckDB error.
    """
    check_read_only(con, sql)
    try:
        statements = con.extract_statements(sql)
        if len(statements) > 1:  # only the last one's rows would show: refuse, do not hide
            raise HomogError(
                f"the SQL holds {len(statements)} statements; homog sql runs one statement per "
                "call (only one result can be shown): run each in its own `homog sql` call"
            )
        cur = con.execute(statements[0])
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
    """Run one read-only SQL statement and return its ``(columns, rows)``.

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
        for r in fetch_rows(
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
        Path(r[0])
        for r in fetch_rows(con, "SELECT path FROM duckdb_databases() WHERE path IS NOT NULL")
    ]
    return [p for db in paths for p in (db, db.with_name(db.name + ".wal"))]


def unique_columns(names: Sequence[str]) -> list[str]:
    """Column names made unique the way DuckDB writes CSV and Parquet: a name already taken
    (case-insensitively) gets ``_1``, ``_2``, ... (``a, a, a_1`` -> ``a, a_1, a_1_1``). Every
    export format uses it, so ``SELECT 1 AS a, 2 AS a`` keeps both columns everywhere."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        new, k = name, 1
        while new.lower() in seen:
            new, k = f"{name}_{k}", k + 1
        seen.add(new.lower())
        out.append(new)
    return out


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

    out = Path(out)
    fmt = (fmt or out.suffix.lstrip(".") or "parquet").lower()
    if fmt not in ("parquet", "csv"):
        raise HomogError(f"unknown export format {fmt!r}; valid: parquet, csv (json: homog export)")
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

    # repeated names renamed here, as the JSON export does (DuckDB's writers would too)
    schema = reader.schema
    names = unique_columns(schema.names)
    if names != list(schema.names):
        schema = pa.schema([f.with_name(n) for f, n in zip(schema, names, strict=True)])
    renamed = (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in counted())
    stream = pa.RecordBatchReader.from_batches(schema, renamed)

    writer = register(duckdb.connect(config={"autoinstall_known_extensions": False}))
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
