"""The ``probe@<model>`` stage: files in, files out (``homog probe --model KEY``).

Reads the texts (``data/synth/texts.parquet``: variant, sample_id, text, label) and, when
present, the extraction's per-text erank (``data/extract/<model>/<intervention>/
layer_metrics.parquet``, for the cost slopes). Per intervention of ``extract.interventions``
(the interventions other than ``none`` on ``extract.intervention_variants``, as extraction
runs them: ``homog.extract.run.intervention_groups``) it computes the pooled vectors
(``homog.probe.pooled``) and the zero-shot answers (``homog.probe.lm``), then the probes
(``homog.probe.fit``), the summaries (``homog.probe.summary``) and the slopes
(``homog.probe.cost``). Writes under ``data/probe/<model>/`` (``homog.layout.Layout``):
``pooled_<intervention>.npz``, ``probe_texts.parquet``, ``lm_sentiment.parquet``,
``probe_metrics.parquet`` and ``probe.json`` (timings, sizes, headline numbers).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.io import atomic_path, write_json
from homog.layout import Layout

PROBE_COLUMNS = ["model", "intervention", "scheme", "kind", "baseline", "variant", "layer",
                 "band", "metric", "value", "ci_low", "ci_high", "p_value", "p_holm", "n",
                 "verdict"]  # fmt: skip
LM_COLUMNS = ["model", "intervention", "variant", "sample_id", "label", "log_odds", "margin",
              "correct", "n_prompt_tokens", "truncated"]  # fmt: skip


def _write_parquet(frame: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def read_erank(root: Path, model: str, interventions: list[str]) -> Any:
    """Per-text erank (intervention, variant, sample_id, layer, value) of the model's runs
    that exist (None when none does)."""
    import pandas as pd

    layout = Layout(root)
    parts = []
    for iv in interventions:
        path = layout.run_dir(model, iv) / "layer_metrics.parquet"
        if path.exists():
            lm = pd.read_parquet(path, filters=[("metric", "==", "erank")])
            lm = lm[["variant", "sample_id", "layer", "value"]].astype({"sample_id": str})
            parts.append(lm.assign(intervention=iv))
    return pd.concat(parts, ignore_index=True) if parts else None


def slope_rows(slopes: Any) -> Any:
    """``cost_slopes`` rows in the probe_metrics columns (kind ``slope``)."""
    out = slopes.rename(columns={"outcome": "metric"}).copy()
    out["kind"] = "slope"
    out["scheme"] = np.where(out["metric"] == "lm_margin", "zero_shot", "train_original")
    out["baseline"] = np.where(out["contrast"] == "zero_pos", "none", "original")
    out["intervention"] = np.where(out["contrast"] == "zero_pos", "zero_pos", "none")
    out["metric"] = out["metric"] + "_per_erank"
    return out.drop(columns=["contrast", "n_texts"])


def _inputs(params: Any, texts: Any) -> tuple[Any, list[str]]:
    from homog.extract.plan import extract_inputs

    df, interventions = extract_inputs(texts, params.extract.interventions)
    if "label" not in df.columns:
        raise HomogError("the texts have no label column: the probe needs labelled texts")
    df["label"] = df["label"].astype(str)
    return df, interventions


def forward_passes(
    params: Any,
    model: str,
    source: str,
    texts: Any,
    out_dir: str | Path,
    *,
    loaded: Any = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """The model's part: pooled vectors (``pooled_<intervention>.npz``) and zero-shot answers
    (``lm_sentiment.parquet``) of every intervention, written to ``out_dir``. Returns the
    record's model facts, sizes, timings and forward passes."""
    import pandas as pd

    from homog.extract.plan import texts_hash
    from homog.extract.run import intervention_groups
    from homog.models import load_model
    from homog.probe.lm import with_margin, zero_shot
    from homog.probe.pooled import pooled_means, save_pooled
    from homog.progress import rate_progress

    cfg, probe = params.extract, params.probe
    df, interventions = _inputs(params, texts)
    out = Path(out_dir)
    t0 = time.perf_counter()
    if loaded is None:
        loaded = load_model(source, dtype=cfg.dtype, device=cfg.device,
                            device_map=cfg.device_map, attention=False, seed=cfg.seed)  # fmt: skip
    timings: dict[str, float] = {"load_s": round(time.perf_counter() - t0, 2)}
    lm_parts, sizes, n_texts, n_forward = [], {}, {}, 0
    for sub, ivs, _ in intervention_groups(df, interventions, cfg):
        for iv in ivs:
            total = len(sub) * (2 if probe.lm else 1)
            with rate_progress(f"{model}/{iv}", total, show=show_progress) as advance:
                t1 = time.perf_counter()
                pooled = pooled_means(loaded, sub, cfg, iv, vector_dtype=probe.vector_dtype,
                                      on_batch=lambda n: advance(n, 0))  # fmt: skip
                timings[f"pooled_{iv}_s"] = round(time.perf_counter() - t1, 2)
                sizes[iv] = save_pooled(out / f"pooled_{iv}.npz", pooled, model=model,
                                        intervention=iv, texts_hash=texts_hash(sub))  # fmt: skip
                n_texts[iv] = len(sub)
                n_forward += len(sub)
                if probe.lm:
                    t1 = time.perf_counter()
                    answers = zero_shot(loaded, sub, cfg, probe, iv,
                                        on_batch=lambda n: advance(n, 0))  # fmt: skip
                    lm_parts.append(with_margin(answers, probe.positive_label).assign(
                        intervention=iv))  # fmt: skip
                    timings[f"lm_{iv}_s"] = round(time.perf_counter() - t1, 2)
                    n_forward += len(sub)
    lm_path = out / "lm_sentiment.parquet"
    if lm_parts:
        lm_df = pd.concat(lm_parts, ignore_index=True).assign(model=model)
        _write_parquet(lm_df.reindex(columns=LM_COLUMNS), lm_path)
    elif lm_path.exists():
        lm_path.unlink()  # an earlier run's answers (probe.lm: false now)
    return {
        "model": model,
        "model_source": source,
        "n_layers": loaded.n_layers,
        "d_model": loaded.d_model,
        "n_texts": n_texts,
        "pooled_bytes": sizes,
        "pooled_bytes_per_1000_texts": {
            iv: round(sizes[iv] * 1000 / max(n, 1)) for iv, n in n_texts.items()
        },
        "timings": timings,
        "forward_passes": n_forward,
    }


def finish_probe(
    params: Any, model: str, texts: Any, out_dir: str | Path, *, root: str | Path = "."
) -> tuple[Any, dict[str, float]]:
    """The probes, summaries and slopes from the files ``forward_passes`` wrote in
    ``out_dir`` (HomogError when they were made from other texts); writes
    ``probe_texts.parquet`` and ``probe_metrics.parquet``. Returns (metrics, timings)."""
    import pandas as pd

    from homog.extract.plan import texts_hash
    from homog.extract.run import intervention_groups
    from homog.probe.cost import cost_slopes
    from homog.probe.fit import assign_folds, probe_texts
    from homog.probe.pooled import load_pooled
    from homog.probe.summary import summarise

    probe = params.probe
    df, interventions = _inputs(params, texts)
    out = Path(out_dir)
    pooled = {}
    for sub, ivs, _ in intervention_groups(df, interventions, params.extract):
        for iv in ivs:
            pooled[iv] = load_pooled(out / f"pooled_{iv}.npz")
            if str(pooled[iv].get("texts_hash")) != texts_hash(sub):
                raise HomogError(f"{out}/pooled_{iv}.npz was made from other texts: run "
                                 "`homog probe` without --refit")  # fmt: skip
    t1 = time.perf_counter()
    originals = df[df["variant"] == "original"]
    if originals.empty:
        raise HomogError("the texts have no original variant: the probe trains on originals")
    labels = sorted(set(originals["label"]))
    if probe.positive_label not in labels:
        raise HomogError(f"probe.positive_label {probe.positive_label!r} is not a label of the "
                         f"texts ({', '.join(labels)})")  # fmt: skip
    # a small corpus (a test, the own-model walkthrough) gets as many folds as its rarer label
    # has reviews, said on stderr; fewer than 2 leaves no held-out review: assign_folds refuses
    fewest = int(originals["label"].value_counts().min())
    n_folds = probe.folds if fewest >= probe.folds else max(2, fewest)
    if n_folds != probe.folds:
        print(f"probe: {fewest} reviews of the rarer label: {n_folds} folds instead of "
              f"probe.folds {probe.folds}", file=sys.stderr)  # fmt: skip
    folds = assign_folds(originals["sample_id"], originals["label"], n_folds, probe.seed)
    label_of = dict(zip(originals["sample_id"], originals["label"], strict=True))
    fit = dict(cs=probe.c, inner=probe.inner_folds, seed=probe.seed, max_iter=probe.max_iter)
    probe_parts = []
    for iv, p in pooled.items():
        y = np.array([label_of.get(s) == probe.positive_label for s in p["sample_id"]], int)
        texts_iv = probe_texts(p["vectors"], p["variant"], p["sample_id"], y, folds, **fit)
        probe_parts.append(texts_iv.assign(intervention=iv))
    probe_df = pd.concat(probe_parts, ignore_index=True)
    timings = {"fit_s": round(time.perf_counter() - t1, 2)}
    t1 = time.perf_counter()
    lm_path = out / "lm_sentiment.parquet"
    lm_df = pd.read_parquet(lm_path) if probe.lm and lm_path.exists() else None
    stats = SimpleNamespace(n_boot=params.stats.n_boot, ci=params.stats.ci,
                            alpha=params.stats.alpha, test=params.stats.test,
                            n_perm=params.stats.n_perm, seed=probe.seed)  # fmt: skip
    metrics = summarise(probe_df, lm_df, stats)
    erank = read_erank(Path(root), model, list(pooled))
    slopes = cost_slopes(probe_df, lm_df, erank, n_boot=stats.n_boot, ci=stats.ci,
                         alpha=stats.alpha, seed=probe.seed)  # fmt: skip
    if len(slopes):
        metrics = pd.concat([metrics, slope_rows(slopes)], ignore_index=True)
    timings["summary_s"] = round(time.perf_counter() - t1, 2)
    metrics = metrics.assign(model=model).reindex(columns=PROBE_COLUMNS)
    for col in ("baseline", "band", "verdict"):  # all-null columns stay strings
        metrics[col] = metrics[col].astype(object).where(metrics[col].notna(), None)
    _write_parquet(metrics, out / "probe_metrics.parquet")
    _write_parquet(probe_df.assign(model=model), out / "probe_texts.parquet")
    return metrics, timings


def run_probe(
    params: Any,
    model: str,
    source: str,
    texts: Any,
    out_dir: str | Path,
    *,
    root: str | Path = ".",
    loaded: Any = None,
    refit: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run the stage for one model; return the ``probe.json`` record.

    params: a checked ``Params``; texts: a texts table or its Parquet path (needs a label
    column with two labels); root: the project directory whose extraction outputs give the
    erank (none there: no slopes); loaded: an already loaded model (tests); refit: reuse the
    forward passes' files in ``out_dir`` (their record in probe.json) and redo only the
    probes, summaries and slopes.
    """
    import json

    out = Path(out_dir)
    cpu0 = time.process_time()
    if refit:
        if not (out / "probe.json").exists():
            raise HomogError(f"{out}/probe.json not found: run `homog probe` without --refit")
        record = json.loads((out / "probe.json").read_text())
    else:
        record = forward_passes(params, model, source, texts, out, loaded=loaded,
                                show_progress=show_progress)  # fmt: skip
        write_json(out / "probe.json", record)  # what --refit reads, should the fits stop
    metrics, timings = finish_probe(params, model, texts, out, root=root)
    record = _record(record, timings, metrics)
    # CPU seconds of this process (all threads): steadier than wall time on a shared machine
    record["cpu_s" if not refit else "refit_cpu_s"] = round(time.process_time() - cpu0, 1)
    write_json(out / "probe.json", record)
    return record


def _record(record: dict[str, Any], timings: dict[str, float], metrics: Any) -> dict[str, Any]:
    """probe.json: the forward passes' record, the fit and summary timings, the time per 100
    texts and the headline numbers (``homog.probe.view.headline``)."""
    from homog.probe.view import headline

    record = {**record, "timings": {**record["timings"], **timings}}
    total_s = sum(v for k, v in record["timings"].items() if k != "load_s")
    record["s_per_100_texts"] = round(100 * total_s / max(sum(record["n_texts"].values()), 1), 2)
    record["headline"] = headline(metrics)
    return record
