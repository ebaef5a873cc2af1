"""Query commands over the DuckDB file: runs, compare, sql, export, plot (thin Click layer).

Every command opens the database read-only (``--db``, default ``homog.layout.default_db``:
params `db` or data/homog.duckdb), calls one function of :mod:`homog.store` and prints a rich
table, CSV or JSON (``--format``). A HomogError becomes the CLI's error message in
``homog.cli.LazyGroup``.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from homog.cli.options import (
    connect_db,
    db_option,
    model_option,
    pipe_safe,
    resolve_runs,
    short_ids,
    split_values,
)
from homog.cli.tables import cell, emit
from homog.errors import HomogError


def format_option(f: Callable) -> Callable:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "csv", "json"]),
        default="table",
        show_default=True,
        help="Output format.",
    )(f)


def _parse_layers(values: Sequence[str], top: int | None = None) -> list[int] | None:
    """'0,5,10' or '0-4' or repeated --layers -> sorted layer list (None when not given).

    ``top``: the highest layer of the database's models (layer 0 = embeddings); a layer or
    range outside 0..top is a HomogError (a huge range is never expanded)."""
    out: set[int] = set()
    for item in split_values(values):
        try:
            lo, hi = item.split("-", 1) if "-" in item[1:] else (item, item)
            lo, hi = int(lo), int(hi)
        except ValueError as exc:
            raise HomogError(f"bad layer {item!r}: use numbers like 0,5,10 or ranges 0-4") from exc
        if lo > hi:
            raise HomogError(f"--layers {item}: the range is reversed; write {hi}-{lo}")
        if top is not None and not 0 <= lo <= hi <= top:
            raise HomogError(
                f"--layers {item}: the models in the database have layers 0-{top}; give layers "
                f"or ranges within 0-{top}"
            )
        out.update(range(lo, hi + 1))
    return sorted(out) or None


def _top_layer(con: Any) -> int:
    """The highest layer of any run (n_layers; layer 0 is the embeddings)."""
    from homog.store.sql import fetch_rows

    return int(fetch_rows(con, "SELECT coalesce(max(n_layers), 0) FROM runs")[0][0])


def _run_ids(con: Any, given: Sequence[str]) -> list[str] | None:
    """``--runs`` values (ids or unique prefixes, repeated or comma-separated) as full ids."""
    from homog.store import run_ids

    names = split_values(given)
    return resolve_runs(run_ids(con), names) if names else None


def wide_option(f: Callable) -> Callable:
    return click.option(
        "--wide",
        is_flag=True,
        help="Table: every column, full run ids (lines may be wider than the terminal).",
    )(f)


@click.command()
@db_option
@format_option
@wide_option
def runs(db_path: Path | None, fmt: str, wide: bool) -> None:
    """List the runs in the database: model, intervention, layers, texts, date, sizes.

    The table shows what fits the terminal (run ids at their unique prefix, which every
    --runs option takes); --wide, --format csv or json show every column.

    \b
    Example:
      homog runs
      homog runs --wide
      homog runs --format json
    """
    from homog.store import list_runs

    con = connect_db(db_path)
    rows = list_runs(con)
    if not rows:
        raise HomogError("the database has no runs: run `dvc repro` (or `homog load`)")
    if fmt == "table":
        from homog.cli.views import show_runs

        show_runs(rows, short_ids([r["run_id"] for r in rows]), wide=wide)
        return
    cols = list(rows[0])
    emit(cols, [[r[c] for c in cols] for r in rows], fmt, "runs")


@click.command()
@click.option("--metric", required=True, help="Metric name, e.g. erank, mev, attn_first.")
@model_option()
@click.option("--variants", multiple=True, help="Variants, e.g. original,front,end,control.")
@click.option("--layers", multiple=True, help="Layers: 0,5,10 or ranges 0-4.")
@click.option(
    "--runs", "run_ids", multiple=True, help="Run ids or unique prefixes (default: all runs)."
)
@click.option("--raw", is_flag=True, help="Table: each variant's mean ± CI, not differences.")
@db_option
@format_option
@wide_option
def compare(
    metric: str,
    models: tuple[str, ...],
    variants: tuple[str, ...],
    layers: tuple[str, ...],
    run_ids: tuple[str, ...],
    raw: bool,
    db_path: Path | None,
    fmt: str,
    wide: bool,
) -> None:
    """Layer curves of one metric: each variant against the original, with 95 % CIs.

    One table per run, one line per layer: the original's mean ± CI half-width, then each
    variant's paired difference from the original (variant - original, mean over texts)
    with its 95 % CI, rounded to the CI's precision; `*` marks a Holm p (stats.test) below
    0.05. --raw shows each variant's own mean ± half-width instead. Variants that do not
    fit the terminal are left out and named (--wide or --variants shows them). CSV/JSON
    give the long rows (one per variant and layer, with the Holm p).

    \b
    Example:
      homog compare --metric erank
      homog compare --metric erank --raw --wide
      homog compare --metric mev --model smollm2-135m --variants original,front --layers 0-5
      homog compare --metric erank --runs cf240802      # a run-id prefix, as printed
    """
    from homog.store import layer_curves

    con = connect_db(db_path)
    rows = layer_curves(
        con,
        metric,
        run_ids=_run_ids(con, run_ids),
        variants=split_values(variants) or None,
        layers=_parse_layers(layers, _top_layer(con)),
        models=split_values(models) or None,
    )
    if not rows:
        raise HomogError(f"no rows for metric {metric} with these filters")
    if fmt != "table":
        cols = list(rows[0])
        emit(cols, [[r[c] for c in cols] for r in rows], fmt)
        return
    from homog.cli.views import show_compare
    from homog.store import run_ids as all_run_ids

    show_compare(con, rows, metric, short_ids(all_run_ids(con)), raw=raw, wide=wide)


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
      homog sql "SELECT * FROM layer_summary WHERE metric = 'erank' AND layer = 10"
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
    fmt = fmt or (out.suffix.lstrip(".").lower() if out.suffix else None)
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


@click.command()
@click.option(
    "--metric", default="erank", show_default=True, help="Metric for layer curves (kind=curves)."
)
@click.option(
    "--kind",
    type=click.Choice(["curves", "attention"]),
    default="curves",
    show_default=True,
    help="Layer curves or an attention position heatmap.",
)
@model_option("Model keys (curves).")
@click.option("--variants", multiple=True, help="Variants (curves), or the variant (attention).")
@click.option(
    "--runs",
    "run_ids",
    multiple=True,
    help="Run ids or unique prefixes (default: all; attention: one).",
)
@click.option("--head", type=int, default=None, help="One head (attention; default: mean).")
@click.option(
    "--x",
    "x_axis",
    type=click.Choice(["layer", "rel_depth"]),
    default="layer",
    show_default=True,
    help="x axis of layer curves.",
)
@click.option(
    "--raw",
    is_flag=True,
    help="Curves: each variant's own mean per layer (default: each variant minus the original, "
    "paired per text, with its CI).",
)
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Output image (.png, .pdf or .svg).",
)
@click.option("--force", is_flag=True, help="Overwrite OUT even if homog did not draw it.")
@db_option
def plot(
    metric: str,
    kind: str,
    models: tuple[str, ...],
    variants: tuple[str, ...],
    run_ids: tuple[str, ...],
    head: int | None,
    x_axis: str,
    raw: bool,
    out: Path,
    force: bool,
    db_path: Path | None,
) -> None:
    """Paper figures: layer curves per variant and model, or attention position heatmaps.

    Layer curves show each variant minus the original, paired per text, with the 95 % CI of
    the stats stage's contrasts (a difference of 1 % is invisible between raw curves); --raw
    draws each variant's own mean. An existing OUT is overwritten only when homog drew it (its
    metadata names `homog plot`) or with --force.

    \b
    Example:
      homog plot --metric erank -o erank.png
      homog plot --metric erank --raw --x rel_depth --variants original,front,end -o erank.pdf
      homog plot --kind attention --runs RUN_ID --variants front -o attn.png
    """
    from homog import plot as plots
    from homog import store as q
    from homog.io import check_target
    from homog.owned import check_owned_file

    check_owned_file(check_target(out, what="plot"), force=force, what="plot")
    con = connect_db(db_path)
    if kind == "curves":
        rows = q.layer_curves(
            con,
            metric,
            run_ids=_run_ids(con, run_ids),
            variants=split_values(variants) or None,
            models=split_values(models) or None,
        )
        diff = [] if raw else q.difference_curves(con, rows, metric)
        if not raw and not diff:
            raise HomogError(
                f"no paired contrasts of {metric} against the original in the database (run "
                "`homog stats` and `homog load`), or none of the variants asked for is paired "
                "with it: add --raw for each variant's own curve"
            )
        plots.layer_curves_figure(diff or rows, metric, out, x=x_axis, difference=not raw)
    else:
        ids = _run_ids(con, run_ids) or [r["run_id"] for r in q.list_runs(con)][:1]
        vs = split_values(variants) or ["original"]
        if len(ids) != 1 or len(vs) != 1:
            raise HomogError("--kind attention takes one --runs RUN_ID and one --variants")
        run = next((r for r in q.list_runs(con) if r["run_id"] == ids[0]), None)
        rows = q.attention_profile(con, ids[0], vs[0], head=head)
        title = f"{run['model'] if run else ids[0]} · {vs[0]}" + (
            f" · head {head}" if head is not None else " · mean over heads"
        )
        plots.attention_heatmap_figure(rows, out, title=title)
    click.echo(f"wrote {out}", err=True)
