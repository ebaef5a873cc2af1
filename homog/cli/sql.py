"""``homog sql`` and ``homog export``: read-only SQL and whole tables or queries written out
(thin Click layer over :mod:`homog.store.sql`).

Both open the database read-only (``--db``); rows are streamed in batches, so a large result
is never held whole. A HomogError becomes the CLI's error message in ``homog.cli.LazyGroup``.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from homog.cli.options import connect_db, db_option, format_option, pipe_safe
from homog.cli.tables import cell, emit
from homog.errors import HomogError

SQL_TABLE_ROWS = 1000  # default cap of `homog sql` table output


@click.command()
@click.argument("query")
@db_option
@format_option
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=SQL_TABLE_ROWS,
    show_default=True,
    help="Rows shown in table format (csv/json stream every row).",
)
def sql(query: str, db_path: Path | None, fmt: str, max_rows: int) -> None:
    """Run one read-only SQL statement on the database; QUERY '-' reads it from stdin.

    Only reading statements run (SELECT, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN of a SELECT,
    listing PRAGMAs such as table_info/show_tables/database_size); the connection cannot
    touch files, settings or the network. Table output stops after --max-rows rows and says
    how many were left out; --format csv/json stream every row. Several statements are
    refused (one result per call). SQL errors print DuckDB's message and exit non-zero.

    \b
    Example:
      homog sql "SELECT count(*) FROM layer_metrics"
      homog sql "SELECT * FROM layer_summary WHERE metric = 'erank' AND layer = 9"
      echo "SELECT * FROM runs" | homog sql - --format csv
    """
    from homog.store import fetch_batches, sql_cursor

    text = sys.stdin.read() if query == "-" else query
    cur = sql_cursor(connect_db(db_path), text)
    if cur is None:
        return
    cols = [d[0] for d in cur.description]
    if fmt == "table":
        rows = next(fetch_batches(cur, max_rows + 1), [])
        more = len(rows) > max_rows
        emit(cols, rows[:max_rows], fmt)
        if more:
            left = 1 + sum(len(b) for b in fetch_batches(cur, 100_000))
            click.echo(
                f"{left} more row(s) not shown (first {max_rows}); use --max-rows N, "
                "--format csv or `homog export` for all rows",
                err=True,
            )
        return
    stream_rows(cols, fetch_batches(cur), fmt)


def stream_rows(
    columns: list[str],
    batches: Iterable[Sequence[Sequence[Any]]],
    fmt: str,
    out: Any = None,
) -> int:
    """Write row batches as CSV or a JSON array (on stdout, or the text file ``out``) without
    holding every row; return the row count. A closed stdout pipe ends quietly (status 0)."""
    with pipe_safe():
        n = _stream(columns, batches, fmt, out or sys.stdout)
        if out is None:
            sys.stdout.flush()
    return n


def _stream(columns: list[str], batches: Iterable[Sequence[Sequence[Any]]], fmt: str, out) -> int:
    n = 0
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for batch in batches:
            w.writerows([[cell(v) for v in r] for r in batch])
            n += len(batch)
        return n
    out.write("[")
    for batch in batches:
        for r in batch:
            obj = dict(zip(columns, map(cell, r), strict=True))
            out.write(("\n  " if n == 0 else ",\n  ") + json.dumps(obj, default=str))
            n += 1
    out.write("\n]\n" if n else "]\n")
    return n


EXPORT_FORMATS = ("parquet", "csv", "json")


def _relation_rows(con: Any, source: str) -> tuple[list[str], Iterable[list[tuple]]]:
    """(columns, row batches) of a table, view or read-only SELECT, streamed as Arrow; a
    repeated column name is renamed as in every export format (``unique_columns``)."""
    from homog.store.sql import relation, sql_error, unique_columns

    rel = relation(con, source)
    try:
        reader = rel.to_arrow_reader(100_000)
    except Exception as exc:  # duckdb.Error: DuckDB's message
        raise sql_error(exc) from exc
    names = unique_columns(reader.schema.names)

    def batches() -> Iterable[list[tuple]]:
        for b in reader:
            cols = [c.to_pylist() for c in b.columns]
            yield list(zip(*cols, strict=True))

    return names, batches()


@click.command()
@click.argument("source")
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    required=True,
    help="Output file (.parquet, .csv or .json), or - for stdout (csv or json).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMATS),
    default=None,
    help="File format (default: from the output suffix; csv for -o -).",
)
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
@db_option
def export(source: str, out: Path, fmt: str | None, force: bool, db_path: Path | None) -> None:
    """Export a table, view or read-only SELECT to Parquet, CSV or JSON (a list of objects).

    An existing OUT is refused unless --force; the database itself never is a target. The
    file is written beside OUT and renamed into place when complete. `-o -` streams CSV or
    JSON to stdout (Parquet is binary: give a file).

    \b
    Example:
      homog export layer_summary -o layer_summary.parquet
      homog export "SELECT * FROM contrasts WHERE metric = 'erank'" -o erank.csv
      homog export runs -o - --format json | jq '.[].run_id'
    """
    con = connect_db(db_path)
    if str(out) == "-":
        fmt = fmt or "csv"
        if fmt == "parquet":
            raise HomogError("-o - writes text: use --format csv or json, or give a .parquet file")
        stream_rows(*_relation_rows(con, source), fmt)
        return
    named = out.suffix.lstrip(".").lower()
    if fmt and named in EXPORT_FORMATS and named != fmt:
        # --format parquet -o x.csv wrote Parquet into a file every tool reads as CSV
        raise HomogError(
            f"{out} is named as {named} but --format is {fmt}: drop --format (the suffix "
            f"decides), or name the file {out.stem}.{fmt}"
        )
    fmt = fmt or (named or None)
    if fmt is not None and fmt not in EXPORT_FORMATS:
        raise HomogError(
            f"unknown export format {fmt!r} (the suffix of {out}); valid: "
            f"{', '.join(EXPORT_FORMATS)}: give OUT one of these suffixes or pass --format"
        )
    if fmt == "json":
        n = _export_json(con, source, out, force)
    else:
        from homog.store import export as export_rel

        n = export_rel(con, source, out, fmt, force=force)
    click.echo(f"wrote {out} ({n} rows)", err=True)


def _export_json(con: Any, source: str, out: Path, force: bool) -> int:
    """JSON export to a file: the store's target checks, then rows streamed into a temporary
    file beside ``out`` that is renamed into place when complete."""
    from homog.io import atomic_path
    from homog.layout import writable_dir
    from homog.store.sql import check_export_target

    out = check_export_target(con, out, force=force)
    columns, batches = _relation_rows(con, source)
    writable_dir(out.parent, what="export")
    try:
        with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as fh:
            return stream_rows(columns, batches, "json", fh)
    except OSError as exc:
        raise HomogError(f"cannot write {out}: {exc.strerror or exc}") from exc
