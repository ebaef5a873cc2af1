"""The probe stage's fit step (``probe@<model>``) and both steps together (``run_probe``,
``homog probe --model KEY``).

The features step (``probe_features@<model>``, ``homog.probe.features``) runs the model once
and writes the pooled vectors and zero-shot log-odds to ``data/probe/<model>/features/``. The
fit step (``run_fit``) reads them, the ``stats:`` settings and, when present, the extraction's
per-text erank (``data/extract/<model>/<intervention>/layer_metrics.parquet``, for the cost
slopes), and computes the probes (``homog.probe.fit``), the summaries
(``homog.probe.summary``) and the slopes (``homog.probe.cost``). It writes under
``data/probe/<model>/`` (``homog.layout.Layout``): ``probe_texts.parquet``,
``lm_sentiment.parquet``, ``probe_metrics.parquet`` and ``probe.json`` (timings, sizes,
headline numbers). A change of ``stats:`` or of the probe's fit settings reruns the fit only.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from homog.config.probe import ProbeConfig
from homog.errors import HomogError
from homog.io import atomic_path, write_json
from homog.layout import Layout
from homog.probe.cost import cost_slopes
from homog.probe.features import features_damage, read_features, run_features, up_to_date
from homog.probe.fit import assign_folds, probe_texts
from homog.probe.lm import with_margin
from homog.probe.summary import summarise
from homog.probe.view import headline
from homog.stats.settings import StatsSettings

PROBE_COLUMNS = [
    "model",
    "intervention",
    "scheme",
    "kind",
    "baseline",
    "variant",
    "layer",
    "band",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
    "n",
    "verdict",
    "family",
    "sesoi",
    "sesoi_basis",
    "eq_ci_low",
    "eq_ci_high",
]
LM_DTYPES = {
    "model": object,
    "intervention": object,
    "variant": object,
    "sample_id": object,
    "label": object,
    "log_odds": float,
    "margin": float,
    "correct": bool,
    "n_prompt_tokens": "int64",
    "truncated": bool,
}
LM_COLUMNS = list(LM_DTYPES)


def _write_parquet(frame: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def read_erank(root: Path, model: str, keys: dict[str, str | None]) -> tuple[Any, dict[str, str]]:
    """(Per-text erank (intervention, variant, sample_id, layer, value) of the model's runs
    whose texts are the features' (None when none is), why each other run was not used).

    ``keys``: intervention -> the features' ``pooled_key`` (what the model read of the
    texts). A run is used only when its run.json has the same ``pooled_key``: the erank of
    other texts (``homog probe --texts OTHER`` beside the project's extraction) under the
    same sample ids would give slopes of unrelated pairs."""
    layout = Layout(root)
    parts, skipped = [], {}
    for iv, key in keys.items():
        run = layout.run_dir(model, iv)
        path = run / "layer_metrics.parquet"
        if not path.exists():
            continue  # no extraction of this intervention: no slopes for it
        try:
            theirs = json.loads((run / "run.json").read_text()).get("pooled_key")
        except (OSError, ValueError, AttributeError):
            theirs = None
        if key is None or theirs != key:
            skipped[iv] = (
                f"{run} is an extraction of other texts or settings than these features "
                f"(run.json pooled_key {theirs or 'missing'}, the features' {key or 'missing'})"
            )
            continue
        lm = pd.read_parquet(path, filters=[("metric", "==", "erank")])
        lm = lm[["variant", "sample_id", "layer", "value"]].astype({"sample_id": str})
        parts.append(lm.assign(intervention=iv))
    return (pd.concat(parts, ignore_index=True) if parts else None), skipped


def _matching_erank(
    root: Path, model: str, record: dict[str, Any], interventions: list[str]
) -> tuple[Any, dict[str, str]]:
    """``read_erank`` for the features' texts, each run left out said on stderr."""
    keys = record.get("pooled_key", {})
    erank, skipped = read_erank(root, model, {iv: keys.get(iv) for iv in interventions})
    advice = (
        "the slopes need an extraction of these texts (`homog extract` on them, in a project "
        "of their own); for an older extraction of them, rerun `homog extract`, then "
        "`homog probe --step features`"
    )
    for iv, why in skipped.items():
        print(f"probe: no cost slopes from {model}/{iv}: {why}; {advice}", file=sys.stderr)
    return erank, skipped


def slope_rows(slopes: Any) -> Any:
    """``cost_slopes`` rows in the probe_metrics columns (kind ``slope``)."""
    out = slopes.rename(columns={"outcome": "metric"}).copy()
    out["kind"] = "slope"
    out["scheme"] = np.where(out["metric"] == "lm_margin", "zero_shot", "train_original")
    out["baseline"] = np.where(out["contrast"] == "zero_pos", "none", "original")
    out["intervention"] = np.where(out["contrast"] == "zero_pos", "zero_pos", "none")
    out["metric"] = out["metric"] + "_per_erank"
    return out.drop(columns=["contrast", "n_texts"])


def fold_count(fewest: int, folds: int) -> int:
    """The probe's number of folds when the rarer label has ``fewest`` reviews: ``folds``
    (probe.folds), or as many as ``fewest`` for a small corpus (a test, the own-model
    walkthrough; said on stderr). Below 2 no review is held out: a HomogError, and no
    message about folds before it."""
    if fewest < 2:
        raise HomogError(
            f"the probe needs at least 2 reviews of each label (one held out per fold); the "
            f"rarer label has {fewest}: use more reviews (corpus.n)"
        )
    if fewest >= folds:
        return folds
    print(
        f"probe: {fewest} reviews of the rarer label: {fewest} folds instead of probe.folds "
        f"{folds}",
        file=sys.stderr,
    )
    return fewest


def fit_settings(params: Any) -> StatsSettings:
    """The ``stats:`` settings the summaries and slopes read, with the probe's seed."""
    return replace(StatsSettings.of(params), seed=params.probe.seed)


def _originals(pooled: dict[str, Any], probe: ProbeConfig) -> pd.DataFrame:
    """The original texts (variant, sample_id, label) the features hold, each once over the
    interventions, sorted by sample_id; HomogError without originals or without the
    positive label among their labels."""
    cols = ("variant", "sample_id", "label")
    texts = pd.concat([pd.DataFrame({k: p[k] for k in cols}) for p in pooled.values()])
    texts = texts.drop_duplicates(["variant", "sample_id"])
    originals = texts[texts["variant"] == "original"].sort_values("sample_id")
    if originals.empty:
        raise HomogError("the texts have no original variant: the probe trains on originals")
    labels = sorted(set(originals["label"]))
    if probe.positive_label not in labels:
        raise HomogError(
            f"probe.positive_label {probe.positive_label!r} is not a label of the "
            f"texts ({', '.join(labels)})"
        )
    return originals


def _probe_frame(pooled: dict[str, Any], originals: pd.DataFrame, probe: ProbeConfig) -> Any:
    """The per-text probe outputs of every intervention's vectors (``probe_texts``), folds
    grouped by review and assigned on the originals."""
    n_folds = fold_count(int(originals["label"].value_counts().min()), probe.folds)
    folds = assign_folds(originals["sample_id"], originals["label"], n_folds, probe.seed)
    label_of = dict(zip(originals["sample_id"], originals["label"], strict=True))
    fit = dict(cs=probe.c, inner=probe.inner_folds, seed=probe.seed, max_iter=probe.max_iter)
    parts = []
    for iv, p in pooled.items():
        y = np.array([label_of.get(s) == probe.positive_label for s in p["sample_id"]], int)
        texts_iv = probe_texts(p["vectors"], p["variant"], p["sample_id"], y, folds, **fit)
        parts.append(texts_iv.assign(intervention=iv))
    return pd.concat(parts, ignore_index=True)


def _lm_frame(zero: Any, probe: ProbeConfig, model: str) -> pd.DataFrame:
    """The zero-shot answers ``zero`` with their margins (LM_COLUMNS), or an empty table
    without answers (the stage's output exists either way)."""
    if zero is None:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in LM_DTYPES.items()})
    lm_df = with_margin(zero, probe.positive_label).assign(model=model)
    return lm_df.reindex(columns=LM_COLUMNS)


def run_fit(
    params: Any,
    model: str,
    out_dir: str | Path,
    *,
    features_dir: str | Path | None = None,
    root: str | Path = ".",
) -> tuple[dict[str, Any], Any]:
    """The fit step: the probes, summaries and slopes from the features in ``features_dir``
    (default ``<out_dir>/features``, ``homog.probe.features``) with the ``stats:`` and
    ``probe:`` fit settings; writes ``probe_texts.parquet``, ``lm_sentiment.parquet``,
    ``probe_metrics.parquet`` and ``probe.json`` to ``out_dir``. No model is loaded.
    Returns (the probe.json record, the metrics)."""
    probe = params.probe
    out = Path(out_dir)
    feats = read_features(features_dir if features_dir is not None else out / "features", model)
    pooled, record = feats["pooled"], feats["record"]
    cpu0 = time.process_time()
    t1 = time.perf_counter()
    probe_df = _probe_frame(pooled, _originals(pooled, probe), probe)
    timings = {"fit_s": round(time.perf_counter() - t1, 2)}
    t1 = time.perf_counter()
    lm_df = _lm_frame(feats["zero_shot"] if probe.lm else None, probe, model)
    settings = fit_settings(params)
    lm_in = lm_df if len(lm_df) else None
    metrics = summarise(probe_df, lm_in, settings, positive_label=probe.positive_label)
    erank, skipped = _matching_erank(Path(root), model, record, list(pooled))
    slopes = cost_slopes(probe_df, lm_in, erank, settings)
    if len(slopes):
        metrics = pd.concat([metrics, slope_rows(slopes)], ignore_index=True)
    timings["summary_s"] = round(time.perf_counter() - t1, 2)
    metrics = metrics.assign(model=model).reindex(columns=PROBE_COLUMNS)
    for col in ("baseline", "band", "verdict", "family", "sesoi_basis"):  # all-null: strings
        metrics[col] = metrics[col].astype(object).where(metrics[col].notna(), None)
    _write_parquet(lm_df, out / "lm_sentiment.parquet")
    _write_parquet(metrics, out / "probe_metrics.parquet")
    _write_parquet(probe_df.assign(model=model), out / "probe_texts.parquet")
    record = _record(record, timings, metrics)
    record["slopes_skipped"] = skipped  # intervention -> why its extraction was not used
    # CPU seconds of this process (all threads): steadier than wall time on a shared machine
    record["fit_cpu_s"] = round(time.process_time() - cpu0, 1)
    write_json(out / "probe.json", record)
    return record, metrics


STEPS: tuple[str, ...] = ("all", "features", "fit")


def run_probe(
    params: Any,
    model: str,
    source: str,
    texts: Any,
    out_dir: str | Path,
    *,
    root: str | Path = ".",
    loaded: Any = None,
    step: str = "all",
    refit: bool = False,
    force: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run the stage for one model; return the ``probe.json`` record (step ``features``: the
    ``features.json`` record).

    params: a checked ``Params``; texts: a texts table or its Parquet path (needs a label
    column with two labels; the fit step reads the labels from the features); root: the
    project directory whose extraction outputs give the erank (none there: no slopes);
    loaded: an already loaded model (tests). step: ``features`` (the forward passes, into
    ``<out_dir>/features``), ``fit`` (the probes, summaries and slopes from those) or ``all``
    (both; the features are reused when their fingerprint is this run's, unless ``force``).
    refit: the same as step ``fit``.
    """
    if step not in STEPS:
        raise HomogError(f"unknown probe step {step!r}: use one of {', '.join(STEPS)}")
    step = "fit" if refit else step
    out = Path(out_dir)
    features = out / "features"
    stale = step == "all" and (force or not up_to_date(params, source, texts, features))
    if stale and not force and show_progress:
        damage = features_damage(features)
        if damage is not None:  # its advice (rerun ...) is what happens now
            reason = damage.split("; rerun `homog probe")[0]
            print(f"probe: recomputing the features: {reason}", file=sys.stderr)
    if step == "features" or stale:
        record = run_features(
            params,
            model,
            source,
            texts,
            features,
            loaded=loaded,
            show_progress=show_progress,
            root=root,
        )
        if step == "features":
            return record
    elif step == "all" and show_progress:
        print(
            f"probe: {features} is up to date (the same texts, model and settings): "
            "no forward pass",
            file=sys.stderr,
        )
    record, _ = run_fit(params, model, out, features_dir=features, root=root)
    return record


def _record(record: dict[str, Any], timings: dict[str, float], metrics: Any) -> dict[str, Any]:
    """probe.json: the features' record, the fit and summary timings, the time per 100 texts
    (features and fit) and the headline numbers (``homog.probe.view.headline``)."""
    record = {**record, "timings": {**record["timings"], **timings}}
    total_s = sum(v for k, v in record["timings"].items() if k != "load_s")
    record["s_per_100_texts"] = round(100 * total_s / max(sum(record["n_texts"].values()), 1), 2)
    record["headline"] = headline(metrics)
    return record
