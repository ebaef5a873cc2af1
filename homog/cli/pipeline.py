"""Pipeline stage commands: ``homog mauve``, ``homog stats``, ``homog load`` (thin Click layer).

Each reads params.yaml (``--params``) and calls one library function; heavy imports stay inside
the commands so ``homog --help`` is fast.
"""

from __future__ import annotations

from pathlib import Path

import click

from homog.cli.options import params_option
from homog.config import load_config
from homog.layout import Layout


@click.command()
@click.option("--model", required=True, help="Model key of params.yaml `models:`.")
@params_option
def mauve(model: str, params_path: Path) -> None:
    """MAUVE between consecutive layers of every run of one model.

    Reads data/extract/MODEL/*/vectors.npz and writes data/mauve/MODEL.parquet. The k-means
    path is params `mauve.path`: auto (torch on a CUDA device, else faiss), torch (batched on
    the extract device) or faiss (mauve-text's own, CPU).

    \b
    Example:
      homog mauve --model smollm2-135m
      dvc exp run -S mauve.path=faiss     # the reference path
    """
    from homog.mauve import mauve_stage

    frame = mauve_stage(load_config(params_path), model)
    click.echo(f"wrote {Layout().mauve(model)} ({len(frame)} rows)", err=True)


@click.command()
@params_option
def stats(params_path: Path) -> None:
    """Paired contrasts between variants and interventions (bootstrap CI, paired test, Holm).

    Reads data/extract/*/*/layer_metrics.parquet (models of params.yaml; and
    sentence_metrics.parquet) and writes to data/stats/: contrasts.parquet (raw and
    length-adjusted effects, layer-0 control, TOST, mixed model: docs/statistics.md),
    dose_response.parquet (the position family's slope on the key sentence's position),
    separability.parquet (claim 4's classifiers), sentence_contrasts.parquet (the moved
    sentence's contrasts), metrics.json (DVC metrics) and plots/*.csv (DVC plots).

    \b
    Example:
      homog stats && dvc metrics show
    """
    from homog.stats.stage import stats_stage

    counts = stats_stage(load_config(params_path))
    click.echo(
        f"wrote {Layout().stats_dir}/ ({counts['contrasts']} contrasts, "
        f"{counts['dose_response']} dose-response rows, {counts['runs']} runs)",
        err=True,
    )


@click.command()
@params_option
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="DuckDB file to build (default: params `db`, data/homog.duckdb); a symlink is followed.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace a DuckDB file that homog did not build (its tables are not kept). A file "
    "that is not a DuckDB database is never replaced.",
)
@click.option(
    "--prune",
    is_flag=True,
    help="Drop the runs (and all their rows) of models no longer in params `models:`; without "
    "it such a load stops and lists them.",
)
def load(params_path: Path, db_path: Path | None, force: bool, prune: bool) -> None:
    """Load every stage output into the DuckDB file, atomically.

    Earlier runs (other params) stay; runs being loaded are replaced, so loading twice gives
    the same rows. The new file is built beside the old one and renamed into place under a
    lock: readers never see a half-written database. Ctrl-C stops it cleanly (exit 130, the
    old database unchanged); temporary files of killed loads are removed by the next load.
    Only homog's own databases are replaced. Runs of models no longer in params `models:`
    are dropped only with --prune (with a notice); without it the load stops, lists them and
    leaves the database unchanged.

    \b
    Example:
      homog load && homog runs
    """
    from homog.store import load as load_db

    try:
        counts = load_db(
            load_config(params_path),
            db_path,
            force=force,
            prune=prune,
            notify=lambda m: click.echo(m, err=True),
        )
    except KeyboardInterrupt:
        click.echo(
            "load interrupted: the database is unchanged and no temporary file is left",
            err=True,
        )
        raise click.exceptions.Exit(130) from None
    summary = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
    click.echo(f"loaded: {summary}", err=True)
