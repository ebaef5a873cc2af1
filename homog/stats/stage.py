"""The ``stats`` stage: read the runs' layer_metrics, write contrasts, dose-response, metrics.

The computation is in :mod:`homog.stats.contrasts` (paired contrasts),
:mod:`homog.stats.contrast_rows` (length adjustment, layer-0 control, TOST) and
:mod:`homog.stats.dose` (the position family's dose-response); the runs are read by
:mod:`homog.stats.runs` and summarised for DVC by :mod:`homog.stats.headline`; this module
writes the files (docs/design.md, docs/statistics.md). The settings of every row are one
:class:`~homog.stats.settings.StatsSettings`, built here from params.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from homog.config import Params, as_params
from homog.io import atomic_path, read_output, write_json
from homog.layout import Layout
from homog.progress import progress
from homog.stats.bands import pivot_metrics
from homog.stats.combos import texts_identity
from homog.stats.contrasts import (
    NOT_CONTRASTED,
    finish_contrasts,
    intervention_contrasts,
    run_contrasts,
)
from homog.stats.dose import DOSE_COLUMNS, dose_response
from homog.stats.headline import headline, summarise, write_plots
from homog.stats.intervention_cost import write_cost
from homog.stats.intervention_doses import intervention_doses
from homog.stats.primary_names import check_primary
from homog.stats.reordering import first_changes
from homog.stats.runs import quiet, read_runs, unchanged_run, warn
from homog.stats.sentences import SENTENCE_CONTRAST_COLUMNS, run_sentence_contrasts
from homog.stats.separability import SEP_COLUMNS, SEP_METRICS, run_separability
from homog.stats.settings import StatsSettings

Found = list[tuple[dict[str, Any], Path]]


def compute_all(
    params: Params | Mapping[str, Any],
    root: str | Path = ".",
    log: Callable[[str], None] = warn,
    *,
    read: tuple[Found, dict[str, pd.DataFrame]] | None = None,
    settings: StatsSettings | None = None,
) -> pd.DataFrame:
    """All contrasts of all runs named by params (variant pairs and intervention vs none).

    Reads only the interventions of ``extract.interventions``; an intervention run is
    compared with the unchanged run of the same config (:func:`unchanged_run`). ``read``:
    what :func:`read_runs` returned, when the caller already has it (read once);
    ``settings``: the stage's (default: built from ``params``).
    """
    params = as_params(params)
    settings = settings or StatsSettings.of(params)
    runs, frames = read or read_runs(params, root)
    ids = texts_identity(Layout(Path(root)).texts)
    found = set().union(*(set(f["metric"].unique()) for f in frames.values()))
    missing = [m for m in settings.mixed_metrics if m not in found]
    if missing:
        log(
            f"stats.mixed_metrics names {', '.join(missing)}, which no run has: no mixed model "
            f"for them (metrics of the runs: {', '.join(sorted(found)[:12])} ...)"
        )
    parts = []
    with progress() as bar:
        task = bar.add_task("stats", total=len(runs))
        for run, _ in runs:
            frame = frames[run["run_id"]]
            parts.append(run_contrasts(frame, run["run_id"], settings, text_ids=ids))
            if run.get("intervention", "none") != "none":
                base = unchanged_run(run, [r for r, _ in runs], log)
                if base is not None:
                    base_frame = frames[base["run_id"]]
                    parts.append(
                        intervention_contrasts(
                            frame, base_frame, run["run_id"], base["run_id"], settings
                        )
                    )
            bar.advance(task)
    return finish_contrasts([p for p in parts if not p.empty])


def stats_stage(
    params: Params | Mapping[str, Any], root: str | Path = ".", out_dir: str | Path | None = None
) -> dict[str, int]:
    """The ``stats`` stage: writes ``data/stats/`` (contrasts.parquet, dose_response.parquet,
    metrics.json, plots/).

    ``dose_response.parquet``: the position family's slopes and points (:mod:`homog.stats.dose`)
    from the texts' ``key_position`` (an empty table when the texts have none).
    ``separability.parquet``: claim 4's classifier AUCs of the unchanged runs
    (:mod:`homog.stats.separability`).

    ``plots/<metric>__<model>.csv``: the unchanged run's layer curve of each plotted metric
    (:func:`homog.stats.headline.write_plots`). Returns counts; the whole directory is
    replaced atomically. ``intervention_cost.parquet``: homog.stats.intervention_cost.
    """
    params = as_params(params)
    check_primary(params.stats.primary, params.synth.position)  # a typo fails here, first
    settings = StatsSettings.of(params)
    layout = Layout(Path(root))
    out_dir = Path(out_dir) if out_dir is not None else layout.stats_dir
    found, frames = read = read_runs(params, root)
    # the per-layer contrasts (about 60 % of the stage) in a process of their own while this
    # one computes the rest: the same functions on the same files, so the same numbers
    contrasts_of = beside(compute_all, params, root, settings=settings, read=read)
    runs = [r for r, _ in found]
    summaries = pd.concat(
        [summarise(frames[r["run_id"]], r["run_id"]) for r in runs], ignore_index=True
    )
    mauve_parts = [
        read_output(p, pd.read_parquet, f"rerun `homog mauve --model {k}`")
        for k in params.models
        if (p := layout.mauve(k)).exists()
    ]
    mauve = pd.concat(mauve_parts, ignore_index=True) if mauve_parts else None
    dose = dose_tables(settings, layout, found, frames)
    ids = texts_identity(layout.texts)  # read once: claim 4 and the sentences share it
    separable = separability_tables(settings, runs, frames, layout.texts, ids)
    sentences = sentence_contrasts_of_runs(settings, found, ids)
    base_of = partial(unchanged_run, runs=runs, log=quiet)
    graded = intervention_doses(params, settings, runs, frames, base_of)
    contrasts = contrasts_of()
    with atomic_path(out_dir, directory=True) as tmp:
        contrasts.to_parquet(tmp / "contrasts.parquet", index=False)
        graded.to_parquet(tmp / "intervention_doses.parquet", index=False)
        cost = write_cost(tmp, params, settings, layout.texts, found, frames, base_of)
        sentences.to_parquet(tmp / "sentence_contrasts.parquet", index=False)
        dose.to_parquet(tmp / "dose_response.parquet", index=False)
        separable.to_parquet(tmp / "separability.parquet", index=False)
        write_json(
            tmp / "metrics.json", headline(contrasts, runs, summaries, mauve, settings.alpha)
        )
        (tmp / "plots").mkdir()
        write_plots(tmp / "plots", summaries, runs)
    return {
        "contrasts": len(contrasts),
        "dose_response": len(dose),
        "separability": len(separable),
        "sentence_contrasts": len(sentences),
        "intervention_doses": len(graded),
        "intervention_cost": cost,
        "runs": len(runs),
    }


SIDE_ROWS = 100_000  # layer_metrics rows from which a second process pays for its start (~5 s)


def side_workers() -> int:
    """The processes the stage may use: the cores this process may run on."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return int(cores or 1)


def beside(
    fn: Callable[..., pd.DataFrame], params: Params, root: str | Path, *, read: Any, **kw: Any
) -> Callable[[], pd.DataFrame]:
    """A thunk that returns ``fn(params, root, **kw)``: computed in a spawned process that
    starts now (it reads the runs itself), where this process may use two cores or more and
    the runs hold SIDE_ROWS rows or more; else here, when called, on ``read`` (the runs this
    process has read). A spawned process (not a fork): this one may hold BLAS and torch
    threads, which a fork would copy mid-state. An error in it is raised by the thunk."""
    rows = sum(len(frame) for frame in read[1].values())
    if side_workers() < 2 or rows < SIDE_ROWS:
        return lambda: fn(params, root, read=read, **kw)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
    future = pool.submit(fn, params, str(root), **kw)
    pool.shutdown(wait=False)  # the worker ends when its one task has

    def result() -> pd.DataFrame:
        try:
            return future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    return result


def sentence_contrasts_of_runs(
    settings: StatsSettings, found: Found, ids: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The sentence_contrasts rows (homog.stats.sentences) of every run whose directory holds
    a sentence_metrics.parquet (an empty table when none does); ``ids``: the texts' identity
    (:func:`texts_identity`) for the identity pairs."""
    parts = []
    for run, run_dir in found:
        path = run_dir / "sentence_metrics.parquet"
        if path.exists():
            frame = read_output(
                path, pd.read_parquet, f"rerun `homog extract --model {run['model']}`"
            )
            parts.append(run_sentence_contrasts(frame, run["run_id"], settings, text_ids=ids))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=SENTENCE_CONTRAST_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def key_positions(path: Path) -> pd.DataFrame | None:
    """(variant, sample_id, key_position) of the texts table at ``path``; None when the file
    or the column (texts of a synth without the position family) is absent."""
    if not path.exists() or "key_position" not in pq.read_schema(path).names:
        return None
    return pd.read_parquet(path, columns=["variant", "sample_id", "key_position"])


def dose_tables(
    settings: StatsSettings,
    layout: Layout,
    found: Sequence[tuple[dict[str, Any], Path]],
    frames: Mapping[str, pd.DataFrame],
) -> pd.DataFrame:
    """The dose-response rows of every run (:func:`homog.stats.dose.dose_response`)."""
    positions = key_positions(layout.texts)
    runs = [r for r, _ in found]
    parts = []
    for r in runs:
        base = r if r.get("intervention", "none") == "none" else unchanged_run(r, runs, quiet)
        ref = frames[base["run_id"]] if base is not None else None
        frame = frames[r["run_id"]]
        parts.append(
            dose_response(
                frame, positions, r["run_id"], settings, exclude=NOT_CONTRASTED, reference=ref
            )
        )
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in DOSE_COLUMNS})
    return pd.concat(parts, ignore_index=True)


def separability_tables(
    settings: StatsSettings,
    runs: Sequence[dict[str, Any]],
    frames: Mapping[str, pd.DataFrame],
    texts: Path | None = None,
    ids: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The separability rows of every unchanged run (homog.stats.separability; ``texts``: the
    texts table, for the split by a changed first sentence; ``ids``: its texts_identity, for
    the texts a variant left unchanged)."""
    first = first_changes(texts) if texts is not None else None
    parts = []
    for r in runs:
        if r.get("intervention", "none") != "none":
            continue
        frame = frames[r["run_id"]]
        tables = pivot_metrics(frame[frame["metric"].isin(SEP_METRICS)])
        parts.append(
            run_separability(tables, r["run_id"], settings, first_changed=first, text_ids=ids)
        )
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SEP_COLUMNS})
    return pd.concat(parts, ignore_index=True)
