"""Does homogenization cost the model anything? The table ``intervention_cost``
(docs/interventions.md, "The cost"; docs/database.md).

For one unchanged run and its ``homogenize`` runs (the same pair_key), two arms, the
homogenization and its control, each a dose series sharing dose 0 (the ``homogenize:0`` run,
else the unchanged run). On the texts every dose of both arms holds, with a label, in the
graded runs' variant (``original``), per text the LM's zero-shot margin (its log-odds signed
by the label, positive = right: homog.probe.lm.with_margin):

- ``level`` rows (per arm and dose): the margin's mean, the accuracy (margin > 0) and the ROC
  AUC of the log-odds, each with a bootstrap CI over texts; no test, no verdict;
- ``dose`` rows (per arm and dose other than 0): each one's change against dose 0 with a
  bootstrap CI, a p (sign-flip of the paired differences; for the AUC a bootstrap p) and the
  verdict, SESOI ``stats.cost_margin`` (margin) or ``stats.cost_accuracy_margin`` (accuracy
  and AUC), family ``exploratory``;
- ``manipulation`` rows (per arm, dose and band ``final``/``late``): the measured erank change
  against dose 0 (the figure's x; no verdict);
- ``probe_accuracy`` / ``probe_margin`` rows (level and dose, per band): probes trained on
  the unchanged run's originals read every dose's pooled vectors (homog.stats.cost_probe);
- ``slope`` rows: per text, the least-squares slope of the margin on alpha across the arm's
  doses; arm ``homogenize - control`` is their per-text difference at matched perturbation
  size (the control moves each token as far): the pre-registered primary endpoint, family
  ``primary`` (Holm over its rows, one per model), SESOI ``stats.cost_margin`` / the range of
  alpha. The arms' own slopes are exploratory.

A cost is a fall: every verdict claims the sign -1, so ``supported`` is a cost beyond the
margin and ``reversed`` a gain.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from homog.interventions import parse
from homog.io import read_output
from homog.stats.bands import band_of_layers, pivot_metrics
from homog.stats.cost_probe import probe_bands, probe_rows
from homog.stats.cost_rows import (
    ARMS,
    BANDS,
    FAMILY,
    CostInputs,
    cost_rows,
    finish,
)
from homog.stats.settings import StatsSettings


def band_erank(frame: pd.DataFrame, variant: str, samples: list[str]) -> np.ndarray:
    """[len(BANDS), n] erank of ``samples``: the final layer and the late band's mean (NaN
    where the model has no such band: fewer than 3 layers between layer 0 and the last)."""
    wide = pivot_metrics(frame[(frame["variant"] == variant) & (frame["metric"] == "erank")])
    table = wide[(variant, "erank")].reindex(columns=samples)
    bands = band_of_layers(list(table.index))
    return np.stack(
        [table.reindex(bands.get(b, [])).mean(axis=0, skipna=False).to_numpy(float) for b in BANDS]
    )


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _answers(run_dir: Path) -> pd.DataFrame | None:
    path = run_dir / "zero_shot.parquet"
    if not path.exists():
        return None
    fix = "rerun `homog extract` for its model (or `dvc repro`)"
    return read_output(path, pd.read_parquet, fix)


def series_of(base: dict, graded: Mapping[str, dict]) -> dict[str, dict[float, dict]]:
    """arm -> {dose: run} of one unchanged run's homogenize runs (``graded``: name -> run);
    dose 0 of both arms is the ``homogenize:0`` run when there is one, else ``base``."""
    out: dict[str, dict[float, dict]] = {arm: {} for arm in ARMS}
    for name, run in graded.items():
        iv = parse(name)
        out["control" if iv.is_control else FAMILY][float(iv.dose or 0.0)] = run
    zero = out[FAMILY].get(0.0, base)
    for arm in out.values():
        arm.setdefault(0.0, zero)
    return {arm: dict(sorted(s.items())) for arm, s in out.items()}


def inputs_of(
    series: dict[str, dict[float, dict]],
    answers: Mapping[str, pd.DataFrame],
    frames: Mapping[str, pd.DataFrame],
    labels: pd.DataFrame,
    variant: str,
) -> tuple[CostInputs, list[str]]:
    """The aligned ``CostInputs`` of a dose series and its texts: those every dose of both
    arms answered and measured, with a label (``labels``: variant, sample_id, positive)."""
    runs = [r for s in series.values() for r in s.values()]
    own = labels[labels["variant"] == variant].set_index("sample_id")["positive"]
    shared = set(own.index)
    for r in runs:
        a, f = answers[r["run_id"]], frames[r["run_id"]]
        shared &= set(a.loc[a["variant"] == variant, "sample_id"])
        shared &= set(f.loc[(f["variant"] == variant) & (f["metric"] == "erank"), "sample_id"])
    samples = sorted(shared)

    def margin(run: dict) -> np.ndarray:
        a = answers[run["run_id"]]
        lo = a[a["variant"] == variant].set_index("sample_id")["log_odds"].reindex(samples)
        return np.where(own.reindex(samples).to_numpy(bool), 1.0, -1.0) * lo.to_numpy(float)

    inp = CostInputs(
        doses={arm: np.array(list(s), dtype=float) for arm, s in series.items()},
        margin={arm: np.stack([margin(r) for r in s.values()]) for arm, s in series.items()},
        erank={
            arm: np.stack([band_erank(frames[r["run_id"]], variant, samples) for r in s.values()])
            for arm, s in series.items()
        },
        positive=own.reindex(samples).to_numpy(bool),
    )
    return inp, samples


def intervention_cost(
    params: Any,
    settings: StatsSettings,
    found: Sequence[tuple[dict, Path]],
    frames: Mapping[str, pd.DataFrame],
    labels: pd.DataFrame | None,
    base_of: Callable[[dict], dict | None],
    log: Callable[[str], None],
) -> pd.DataFrame:
    """The ``intervention_cost`` table of every unchanged run with homogenize runs of both
    arms (``labels``: the texts' variant, sample_id, positive; ``base_of``: a graded run's
    unchanged run). A run without answers (``probe.lm: false``, a prompt with text before
    ``{text}``) or texts without labels give no rows, and ``log`` says so."""
    dirs = {r["run_id"]: d for r, d in found}
    graded: dict[str, dict[str, dict]] = {}
    bases: dict[str, dict] = {}
    for run, _ in found:
        iv = parse(run.get("intervention", "none"))
        if iv.family == FAMILY and iv.dose is not None and (base := base_of(run)) is not None:
            bases[base["run_id"]] = base
            graded.setdefault(base["run_id"], {})[run["intervention"]] = run
    graded = {b: g for b, g in graded.items() if any(parse(n).is_control for n in g)}
    if graded and labels is None:
        log("the texts have no label column: no intervention_cost rows (the LM's margin needs it)")
        return finish([], settings.alpha)
    rows: list[dict] = []
    for base_id, named in graded.items():
        series = series_of(bases[base_id], named)
        runs = {r["run_id"]: r for s in series.values() for r in s.values()}
        answers = {rid: _answers(dirs[rid]) for rid in runs}
        missing = [runs[rid]["intervention"] for rid, a in answers.items() if a is None]
        model = bases[base_id]["model"]
        if missing:
            log(
                f"{model}: no zero_shot.parquet in run(s) {', '.join(missing)} (probe.lm off or "
                "a prompt not starting with {text}): no intervention_cost rows"
            )
            continue
        inp, samples = inputs_of(series, answers, frames, labels, "original")
        if len(samples) < 2:
            continue
        rows += cost_rows(inp, base_id, model, settings)
        pooled = {rid: pooled_of(dirs[rid], answers[rid], samples) for rid in runs}
        pooled[base_id] = pooled_of(dirs[base_id], _answers(dirs[base_id]), samples)
        rows += cost_probe_rows(params, inp, bases[base_id], series, pooled, settings, log)
    return finish(rows, settings.alpha)


def pooled_of(run_dir: Path, answers: pd.DataFrame | None, samples: list[str]) -> np.ndarray | None:
    """[n, L+1, d] the run's mean-pooled vectors of the originals ``samples`` (its
    ``pooled_mean.npy``, rows in the order of its answers); None without the file or when its
    rows are not the answers'."""
    path = run_dir / "pooled_mean.npy"
    if answers is None or not path.exists():
        return None
    vectors = np.load(path, mmap_mode="r")
    if len(vectors) != len(answers):
        return None
    row = {
        (v, s): i
        for i, (v, s) in enumerate(zip(answers["variant"], answers["sample_id"], strict=True))
    }
    return np.asarray(vectors[[row[("original", s)] for s in samples]], dtype=np.float64)


def cost_probe_rows(
    params: Any,
    inp: CostInputs,
    base: dict,
    series: dict[str, dict[float, dict]],
    pooled: Mapping[str, np.ndarray | None],
    settings: StatsSettings,
    log: Callable[[str], None],
) -> list[dict]:
    """The probe's rows (homog.stats.cost_probe) of one dose series (``pooled``: run_id ->
    its vectors of the texts, ``pooled_of``), or none (and ``log`` says why) when a run lacks
    its vectors or a label has fewer than 2 texts. A label with fewer texts than
    ``probe.folds`` (a small draw of ``extract.dose_texts``) sets the number of folds, and
    ``log`` says so."""
    pr = params.probe
    counts = np.bincount(inp.positive.astype(int), minlength=2)
    vectors = dict(pooled)
    names = {r["run_id"]: r["intervention"] for s in series.values() for r in s.values()}
    names[base["run_id"]] = base.get("intervention", "none")
    lacking = sorted(names[r] for r, x in vectors.items() if x is None)
    folds = min(pr.folds, int(counts.min()))
    if lacking or folds < 2:
        why = (
            f"no pooled_mean.npy in {', '.join(lacking)}"
            if lacking
            else f"{counts.min()} texts of a label: the probe needs 2 folds"
        )
        log(f"{base['model']}: no probe rows in intervention_cost ({why})")
        return []
    if folds < pr.folds:
        log(
            f"{base['model']}: intervention_cost's probe on {folds} folds, not probe.folds "
            f"{pr.folds}: a label has {folds} of the series' {len(inp.positive)} texts"
        )
    arms = {arm: [vectors[r["run_id"]] for r in s.values()] for arm, s in series.items()}
    probe = probe_bands(
        vectors[base["run_id"]],
        arms,
        inp.positive,
        folds=folds,
        c=pr.c[0],
        max_iter=pr.max_iter,
        seed=params.seed,
    )
    key = {"run_id": base["run_id"], "model": base["model"], "family": FAMILY}
    return probe_rows(probe, inp, key, settings)


def write_cost(
    out_dir: Path,
    params: Any,
    settings: StatsSettings,
    texts: Path,
    found: Sequence[tuple[dict, Path]],
    frames: Mapping[str, pd.DataFrame],
    base_of: Callable[[dict], dict | None],
) -> int:
    """``out_dir / intervention_cost.parquet`` (the stats stage's), from the texts table at
    ``texts`` (its labels; ``probe.positive_label`` is the positive one); its row count."""
    labels = None
    if texts.exists() and "label" in pq.read_schema(texts).names:
        labels = pd.read_parquet(texts, columns=["variant", "sample_id", "label"])
        labels["positive"] = labels["label"].astype(str) == params.probe.positive_label
    table = intervention_cost(params, settings, found, frames, labels, base_of, _warn)
    table.to_parquet(out_dir / "intervention_cost.parquet", index=False)
    return len(table)
