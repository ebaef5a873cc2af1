"""The stats stage's inputs: the extracted runs of params.yaml's models and interventions,
their layer_metrics, and which unchanged run an intervention run is compared with."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from homog.config import Params
from homog.extract import TOKEN_COUNT
from homog.io import HomogError, read_output
from homog.layout import find_runs
from homog.stats.contrasts import NOT_CONTRASTED


def _read_metrics(run_dir: Path) -> pd.DataFrame:
    path = run_dir / "layer_metrics.parquet"
    if not path.exists():
        raise HomogError(f"{path} is missing; rerun `dvc repro` (extract stage)")
    columns = ["variant", "sample_id", "layer", "metric", "value"]
    fix = "rerun `homog extract` for its model (or `dvc repro`)"
    frame = read_output(path, lambda p: pd.read_parquet(p, columns=columns), fix)
    keep = ~frame["metric"].isin(NOT_CONTRASTED) | (frame["metric"] == TOKEN_COUNT)
    return frame[keep]  # the token counts adjust the contrasts; they are not contrasted


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def quiet(message: str) -> None:
    """A log that drops its message: for a second look-up the contrasts already warned of."""


def unchanged_run(
    run: dict[str, Any], runs: Sequence[dict[str, Any]], log: Callable[[str], None] = warn
) -> dict[str, Any] | None:
    """The unchanged (``none``) run an intervention run is compared with, or None.

    Runs pair only when they agree on everything but the intervention: the same model and the
    same ``pair_key`` (a hash of the model source, the result-changing extract options and
    the texts, in run.json). A run without a pair_key (written by an older homog) is never
    paired: nothing shows that its texts and options match, so a stale directory left by an
    interrupted re-extract cannot be compared with a new run. Each refusal is logged with
    what to rerun.
    """
    where = f"{run['model']}/{run.get('intervention')} run {str(run['run_id'])[:12]}"
    key = run.get("pair_key")
    if key is None:
        log(
            f"{where}: run.json has no pair_key (an older homog wrote it), so it is not compared "
            f"with an unchanged run; rerun `homog extract --model {run['model']}`"
        )
        return None
    for r in runs:
        if (
            r["model"] == run["model"]
            and r.get("intervention", "none") == "none"
            and r.get("pair_key") == key
        ):
            return r
    log(
        f"{where}: no unchanged (none) run with the same texts and extract options (stale "
        f"output of other params?); not compared; rerun `homog extract --model {run['model']}`"
    )
    return None


def read_runs(
    params: Params, root: str | Path = "."
) -> tuple[list[tuple[dict[str, Any], Path]], dict[str, pd.DataFrame]]:
    """(runs, run_id -> layer_metrics frame) of the interventions of ``extract.interventions``.

    Raises HomogError when there is no extracted run.
    """
    runs = find_runs(params.models, root, interventions=params.extract.interventions)
    if not runs:
        raise HomogError(
            "no extracted runs under data/extract/<model>/ for the models in params.yaml; "
            "run `dvc repro` (or `homog extract --model KEY`) first"
        )
    return runs, {r["run_id"]: _read_metrics(d) for r, d in runs}
