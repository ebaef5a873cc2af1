"""`homog diff RUN_A RUN_B`: two runs compared text by text, the command-line twin of Compare.

Per metric and depth band (``--by-layer``: per layer too), the mean of the paired differences
A - B over the texts both runs hold, its bootstrap CI and the paired test's p (Holm over the
layers, and over the bands), computed by the stats stage's own functions
(:func:`homog.stats.contrasts.intervention_contrasts`) on the runs' ``layer_metrics`` rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from homog.cli.claims import stats_settings
from homog.cli.options import (
    connect_db,
    db_option,
    format_option,
    params_option,
    plain,
    resolve_runs,
    short_ids,
    split_values,
    wide_option,
)
from homog.cli.tables import emit
from homog.errors import HomogError

COLUMNS = (
    "metric",
    "variant",
    "band",
    "layer",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
)


def _rows(con: Any, run_id: str, variants: list[str], metrics: list[str] | None):
    import pandas as pd

    from homog.stats.contrasts import NOT_CONTRASTED

    args: list[Any] = [run_id, variants]
    where = "run_id = ? AND variant IN (SELECT unnest(?))"
    if metrics:
        where += " AND metric IN (SELECT unnest(?))"
        args.append(metrics)
    frame = con.execute(
        f"SELECT variant, sample_id, layer, metric, value FROM layer_metrics WHERE {where}", args
    ).df()
    return frame[~frame["metric"].isin(NOT_CONTRASTED)] if not frame.empty else pd.DataFrame()


def paired_run_diff(
    con: Any,
    run_a: str,
    run_b: str,
    *,
    variants: list[str],
    metrics: list[str] | None,
    settings: dict[str, Any],
):
    """Contrast rows (the ``contrasts`` columns) of run A - run B over their shared texts.

    Raises HomogError when the runs differ in depth, share no texts, or have no rows for the
    chosen variants or metrics (naming what is there).
    """
    from homog.stats.contrasts import intervention_contrasts
    from homog.stats.settings import StatsSettings
    from homog.store import list_runs
    from homog.store import metrics as all_metrics
    from homog.store import variants as all_variants

    runs = {r["run_id"]: r for r in list_runs(con)}
    la, lb = runs[run_a].get("n_layers"), runs[run_b].get("n_layers")
    if la != lb:
        raise HomogError(
            f"{run_a} has {la} layers and {run_b} {lb}: layer-by-layer differences would pair "
            "unlike layers; diff two runs of the same model (e.g. an intervention and its "
            "unchanged run)"
        )
    from homog.store.sql import check_names

    check_names("variant", variants, all_variants(con))
    if metrics:
        check_names("metric", metrics, all_metrics(con))
    a, b = _rows(con, run_a, variants, metrics), _rows(con, run_b, variants, metrics)
    if a.empty or b.empty:
        empty = run_a if a.empty else run_b
        raise HomogError(f"run {empty} has no layer_metrics rows for variant(s) {variants}")
    shared = set(a["sample_id"]) & set(b["sample_id"])
    if not shared:
        raise HomogError(
            f"runs {run_a} and {run_b} share no texts (sample_id): a paired difference needs "
            "the same texts in both runs"
        )
    return intervention_contrasts(a, b, run_a, run_b, StatsSettings(**settings)), len(shared)


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option(
    "--metric", "metrics", multiple=True, help="Metrics (repeat or comma-separate; default: all)."
)
@click.option(
    "--variants",
    "variants",
    multiple=True,
    help="Variants compared (each against itself in the other run)  [default: original].",
)
@click.option("--by-layer", is_flag=True, help="Per layer as well as per depth band.")
@db_option
@params_option
@format_option
@wide_option
def diff(
    run_a: str,
    run_b: str,
    metrics: tuple[str, ...],
    variants: tuple[str, ...],
    by_layer: bool,
    db_path: Path | None,
    params_path: Path,
    fmt: str,
    wide: bool,
) -> None:
    """Paired difference RUN_A - RUN_B per metric and depth band, with a CI, over shared texts.

    RUN_A and RUN_B are run ids or unique prefixes (as `homog runs` and `homog compare` print
    them). For each metric and variant: the mean over the texts both runs hold of (A - B),
    its bootstrap CI and the paired test's p, Holm-corrected over the bands (and over the
    layers with --by-layer); the same computation as the stats stage's intervention
    contrasts, with the `stats:` settings of --params (defaults without the file). The runs
    must have the same number of layers.

    \b
    Examples:
      homog diff cf240802 5e1a9b3c          # zero_pos run - unchanged run
      homog diff cf240802 5e1a9b3c --metric erank,mev --by-layer
      homog diff cf240802 5e1a9b3c --variants front --format json
    """
    from homog.store import run_ids
    from homog.store.query import check_schema

    con = connect_db(db_path)
    check_schema(con, ("runs", "layer_metrics", "texts"))
    ids = run_ids(con)
    a, b = resolve_runs(ids, [run_a]) + resolve_runs(ids, [run_b])
    if a == b:
        raise HomogError(f"RUN_A and RUN_B are the same run ({a}); give two runs")
    frame, n_shared = paired_run_diff(
        con,
        a,
        b,
        variants=split_values(variants) or ["original"],
        metrics=split_values(metrics) or None,
        settings={k: v for k, v in stats_settings(params_path).items() if k != "alpha"},
    )
    if not by_layer:
        frame = frame[frame["band"].notna()]
    frame = frame.rename(columns={"variant_a": "variant"})
    columns = [c for c in COLUMNS if by_layer or c != "layer"]
    rows = [[plain(r[c]) for c in columns] for _, r in frame.iterrows()]
    short = short_ids(ids)
    if fmt == "table":
        from homog.cli.views import show_diff

        title = f"{short[a]} - {short[b]} ({n_shared} shared texts)"
        show_diff(
            [dict(zip(columns, r, strict=True)) for r in rows], title, by_layer=by_layer, wide=wide
        )
    else:
        emit(columns, rows, fmt)
