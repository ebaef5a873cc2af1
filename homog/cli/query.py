"""Query commands over the DuckDB file: runs, compare, plot (thin Click layer; sql and export
are in :mod:`homog.cli.sql`).

Every command opens the database read-only (``--db``, default ``homog.layout.default_db``:
params `db` or data/homog.duckdb), calls one function of :mod:`homog.store` and prints a rich
table, CSV or JSON (``--format``). A HomogError becomes the CLI's error message in
``homog.cli.LazyGroup``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from homog.cli.options import (
    connect_db,
    db_option,
    format_option,
    model_option,
    resolve_runs,
    short_ids,
    split_values,
    wide_option,
)
from homog.cli.tables import emit
from homog.errors import HomogError


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


def _current_runs(con: Any, given: Sequence[str]) -> list[str] | None:
    """The runs of ``--runs`` (None: not given), after which ``con`` sees one run per model
    and intervention: the newest, or the one named (:func:`homog.store.current.use_runs`);
    without ``--runs`` the older runs left out are named on stderr."""
    from homog.store.current import left_out, use_runs

    ids = _run_ids(con, given)
    selection = use_runs(con, ids or ())
    note = None if ids else left_out(selection.older)
    if note:
        click.echo(f"note: {note}", err=True)
    return ids


@click.command()
@db_option
@format_option
@wide_option
def runs(db_path: Path | None, fmt: str, wide: bool) -> None:
    """List the runs in the database: model, intervention, layers, texts, date, sizes.

    The table shows what fits the terminal (run ids at their unique prefix, which every
    --runs option takes); --wide, --format csv or json show every column. `used` says
    whether claims, report and compare read the run: of a model's runs of one intervention
    (runs of earlier params stay in the database) only the newest is read, never pooled.

    \b
    Example:
      homog runs
      homog runs --wide
      homog runs --format json
    """
    from homog.store import list_runs
    from homog.store.current import select_runs

    con = connect_db(db_path)
    rows = list_runs(con)
    if not rows:
        raise HomogError("the database has no runs: run `dvc repro` (or `homog load`)")
    short = short_ids([r["run_id"] for r in rows])
    # an older run of a model and intervention is never pooled with the newest: say which
    older = {r["run_id"] for r in select_runs(con).older}
    for r in rows:
        r["used"] = "no (older)" if r["run_id"] in older else "yes"
    if fmt == "table":
        from homog.cli.views import show_runs

        show_runs(rows, short, wide=wide)
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
      homog compare --metric mev --variants original,front --layers 0-5
      homog compare --metric erank --runs cf240802  # a run-id prefix, as printed
    """
    from homog.store import layer_curves
    from homog.store import run_ids as all_run_ids

    con = connect_db(db_path)
    short = short_ids(all_run_ids(con))
    ids = _current_runs(con, run_ids)
    wanted = split_values(variants) or None
    if wanted and fmt == "table" and not raw and "original" not in wanted:
        # the table's differences are "- orig": the original is their reference (without
        # it a variant lacking a paired contrast, ctrl_first, printed blank cells)
        wanted = ["original", *wanted]
    rows = layer_curves(
        con,
        metric,
        run_ids=ids,
        variants=wanted,
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

    show_compare(con, rows, metric, short, raw=raw, wide=wide)


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
      homog plot --metric erank --raw --x rel_depth --variants front -o erank.pdf
      homog plot --kind attention --runs RUN_ID --variants front -o attn.png
    """
    from homog import plot as plots
    from homog import store as q
    from homog.io import check_target
    from homog.owned import check_owned_file

    check_owned_file(check_target(out, what="plot"), force=force, what="plot")
    con = connect_db(db_path)
    ids = _current_runs(con, run_ids)
    if kind == "curves":
        rows = q.layer_curves(
            con,
            metric,
            run_ids=ids,
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
        ids = ids or [r["run_id"] for r in q.list_runs(con)][:1]
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
