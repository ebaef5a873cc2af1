"""The probe's features step (``probe_features@<model>``, ``homog probe --step features``): the
model's forward passes, run once, written compactly for the fit step to read.

Per intervention of ``extract.interventions`` that changes position ids (the graded ones act
inside the extraction's forward pass, which this step's passes do not run; docs/interventions.md)
(on the texts extraction runs it on:
``homog.extract.run.intervention_groups``) it computes the pooled vectors
(``homog.probe.pooled``; read from the extraction's run when it holds these texts' under the
same settings, ``from_extraction``, else from a pass of its own) and, under ``probe.lm``,
the zero-shot log-odds (``homog.probe.lm``). Nothing here reads ``stats:`` or the probe's
fit settings, so a change of those reruns only the fit (``homog.probe.stage``). Writes
``<out>/`` (by default ``data/probe/<model>/features/``):

- ``pooled_<intervention>.npy``: (texts, L+1, d) in ``probe.vector_dtype``, rows in the
  index's order (``np.load(..., mmap_mode="r")`` reads one layer without the rest);
- ``index.parquet``: one row per text and intervention: intervention, row (into the npy),
  variant, sample_id, label, n_tokens (metric tokens), truncated;
- ``zero_shot.parquet``: intervention, variant, sample_id, label, log_odds, n_prompt_tokens,
  truncated (absent under ``probe.lm: false``);
- ``features.json``: the model's facts, the interventions in order, every text set's hash,
  the ``fingerprint`` of what the features depend on, sizes, timings and forward passes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from homog.errors import HomogError
from homog.extract.plan import extract_inputs, texts_hash
from homog.interventions import POSITION_IDS, parse
from homog.io import atomic_path, content_hash, write_json
from homog.layout import Layout
from homog.probe.features_read import INDEX_COLUMNS, ZERO_SHOT_COLUMNS, features_damage
from homog.probe.features_read import read_features as read_features
from homog.probe.lm import zero_shot
from homog.probe.pooled import pooled_from_run, pooled_means
from homog.probe.reuse import ModelOnDemand, matching_run, zero_shot_from_run
from homog.progress import rate_progress

# the settings the forward passes read (besides the texts and the model's source): a change of
# any other (stats:, probe.c, probe.folds, ...) leaves the features as they are; dvc.yaml's
# probe_features stage lists the same params
EXTRACT_FIELDS = (
    "dtype",
    "device",
    "device_map",
    "max_tokens",
    "batch_tokens",
    "interventions",
    "intervention_variants",
    "exclude_special",
    "seed",
)
PROBE_FIELDS = ("vector_dtype", "lm", "prompt", "positive_word", "negative_word")


def texts_with_labels(params: Any, texts: Any) -> tuple[Any, list[str]]:
    """(sorted texts with a str label column, the interventions that change position ids);
    HomogError without labels."""
    df, interventions = extract_inputs(texts, params.extract.interventions)
    interventions = [iv for iv in interventions if parse(iv).target == POSITION_IDS]
    if "label" not in df.columns:
        raise HomogError("the texts have no label column: the probe needs labelled texts")
    df["label"] = df["label"].astype(str)
    return df, interventions


def fingerprint(params: Any, source: str, df: Any) -> str:
    """A hash of what the features depend on: the texts with their labels, the model's source
    and the settings of ``EXTRACT_FIELDS`` and ``PROBE_FIELDS``."""
    rows = df[["variant", "sample_id", "text", "label"]].to_numpy().tolist()
    settings = {
        "extract": {k: getattr(params.extract, k) for k in EXTRACT_FIELDS},
        "probe": {k: getattr(params.probe, k) for k in PROBE_FIELDS},
    }
    return content_hash({"texts": rows, "source": source, "settings": settings}, 16)


def up_to_date(params: Any, source: str, texts: Any, out_dir: str | Path) -> bool:
    """Whether ``out_dir`` holds complete, undamaged features with this fingerprint (nothing
    to rerun); damaged ones (``features_damage``) are not up to date."""
    out = Path(out_dir)
    path = out / "features.json"
    if not path.exists():
        return False
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    df, _ = texts_with_labels(params, texts)
    if not isinstance(record, dict) or record.get("fingerprint") != fingerprint(params, source, df):
        return False
    if "pooled_key" not in record:  # older features: the fit could not match an extraction
        return False
    return features_damage(out) is None


def _write_parquet(frame: Any, path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return path.stat().st_size


def save_vectors(path: Path, vectors: np.ndarray) -> int:
    """``vectors`` as one .npy, atomically; its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, vectors, allow_pickle=False)
    return path.stat().st_size


@dataclass
class Passes:
    """What the forward passes gave so far, in run order (``run_features`` fills it)."""

    timings: dict[str, float]
    index_parts: list[Any] = field(default_factory=list)
    lm_parts: list[Any] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    hashes: dict[str, str] = field(default_factory=dict)
    pooled_bytes: dict[str, int] = field(default_factory=dict)
    n_texts: dict[str, int] = field(default_factory=dict)
    n_forward: int = 0
    # intervention -> where its pooled vectors (its zero-shot answers) came from: "extract"
    # (the extraction's pass) or "forward" (this step's own pass)
    pooled_from: dict[str, str] = field(default_factory=dict)
    # intervention -> what the model read (encoded_key): an extraction run whose run.json
    # pooled_key differs holds other texts, so its erank gives no cost slopes
    keys: dict[str, str] = field(default_factory=dict)
    zero_shot_from: dict[str, str] = field(default_factory=dict)
    shape: tuple[int, ...] = (0, 0)  # (L+1, d) of the pooled vectors


def run_features(
    params: Any,
    model: str,
    source: str,
    texts: Any,
    out_dir: str | Path,
    *,
    loaded: Any = None,
    show_progress: bool = True,
    root: str | Path | None = None,
) -> dict[str, Any]:
    """Compute (or read) the features of every intervention and write them to ``out_dir``;
    return (and write) the ``features.json`` record. With ``root`` (the project directory),
    an extraction run there of these texts under the same settings gives the pooled vectors
    and the zero-shot answers of a text-first prompt (``homog.probe.reuse``): no forward
    pass, and the model is not even loaded. Else the model runs once per intervention. The
    folder is written beside ``out_dir`` and renamed onto it when complete."""
    df, interventions = texts_with_labels(params, texts)
    # the whole folder at once: an interrupt leaves the previous features (or none), never
    # new vectors beside an old record
    with atomic_path(out_dir, directory=True, what="probe features") as out:
        return _run_features(
            params,
            model,
            source,
            df,
            interventions,
            out,
            loaded=loaded,
            show_progress=show_progress,
            root=root,
        )


def _run_features(
    params: Any,
    model: str,
    source: str,
    df: Any,
    interventions: list[str],
    out: Path,
    *,
    loaded: Any,
    show_progress: bool,
    root: str | Path | None,
) -> dict[str, Any]:
    """``run_features`` into the empty folder ``out``."""
    # homog.extract.run imports torch (through its outputs), so only when the features run
    from homog.extract.run import intervention_groups

    cfg = params.extract
    cpu0 = time.process_time()
    lm = ModelOnDemand(source, cfg, loaded)
    passes = Passes(timings={})
    for sub, ivs, _ in intervention_groups(df, interventions, cfg):
        for iv in ivs:
            _forward(
                lm,
                sub,
                iv,
                params,
                out,
                passes,
                model=model,
                show=show_progress,
                source=source,
                root=root,
            )
    sizes = _write_tables(out, passes)
    fp = fingerprint(params, source, df)
    cpu_s = round(time.process_time() - cpu0, 1)
    passes.timings["load_s"] = lm.load_s
    record = features_record(
        model, source, passes, params.probe.vector_dtype, sizes, fp=fp, cpu_s=cpu_s
    )
    record["model_loaded"] = lm.is_loaded
    write_json(out / "features.json", record)
    return record


def _forward(
    lm: Any,
    sub: Any,
    iv: str,
    params: Any,
    out: Path,
    passes: Passes,
    *,
    model: str,
    show: bool,
    source: str = "",
    root: str | Path | None = None,
) -> None:
    """One intervention's features over ``sub``, recorded in ``passes``: its pooled vectors
    (the extraction's under ``root`` when they are these texts', else a pass of its own)
    written to ``out`` and, under ``probe.lm``, its zero-shot answers (the extraction's for a
    text-first prompt, else a pass of its own). lm: a ``homog.probe.reuse.ModelOnDemand``."""
    cfg, probe = params.extract, params.probe
    t1 = time.perf_counter()
    run = pooled = answers = None
    if root is not None:
        run = matching_run(Layout(Path(root)).run_dir(model, iv), lm, sub, cfg, source, iv)
    if run is not None:
        pooled = pooled_from_run(run, cfg, probe.vector_dtype)
        answers = zero_shot_from_run(run, sub, probe) if probe.lm else None
    passes.pooled_from[iv] = "forward" if pooled is None else "extract"
    if probe.lm:
        passes.zero_shot_from[iv] = "forward" if answers is None else "extract"
    total = len(sub) * ((pooled is None) + (probe.lm and answers is None))
    with rate_progress(f"{model}/{iv}", total, show=show and total > 0) as advance:
        if pooled is None:
            pooled = pooled_means(
                lm.loaded,
                sub,
                cfg,
                iv,
                vector_dtype=probe.vector_dtype,
                on_batch=lambda n: advance(n, 0),
            )
            passes.n_forward += len(sub)
        passes.timings[f"pooled_{iv}_s"] = round(time.perf_counter() - t1, 2)
        passes.pooled_bytes[iv] = save_vectors(out / f"pooled_{iv}.npy", pooled["vectors"])
        passes.index_parts.append(index_part(iv, sub, pooled))
        passes.order.append(iv)
        passes.hashes[iv] = texts_hash(sub)
        passes.keys[iv] = pooled["key"]
        passes.n_texts[iv] = len(sub)
        passes.shape = pooled["vectors"].shape[1:]
        if probe.lm:
            t1 = time.perf_counter()
            if answers is None:
                answers = zero_shot(
                    lm.loaded, sub, cfg, probe, iv, on_batch=lambda n: advance(n, 0)
                )
                passes.n_forward += len(sub)
            passes.lm_parts.append(answers.assign(intervention=iv))
            passes.timings[f"lm_{iv}_s"] = round(time.perf_counter() - t1, 2)


def index_part(iv: str, sub: Any, pooled: dict[str, Any]) -> Any:
    """The index rows of one intervention's pooled vectors (``INDEX_COLUMNS``)."""
    return pd.DataFrame(
        {
            "intervention": iv,
            "row": np.arange(len(sub)),
            "variant": pooled["variant"],
            "sample_id": pooled["sample_id"],
            "label": sub["label"].to_numpy(),  # pooled_means keeps sub's order
            "n_tokens": pooled["n_tokens"],
            "truncated": pooled["truncated"],
        }
    )


def _write_tables(out: Path, passes: Passes) -> dict[str, int]:
    """Write index.parquet and (with answers) zero_shot.parquet; their sizes in bytes."""
    index = pd.concat(passes.index_parts, ignore_index=True).reindex(columns=INDEX_COLUMNS)
    sizes = {"index": _write_parquet(index, out / "index.parquet")}
    if passes.lm_parts:
        lm_df = pd.concat(passes.lm_parts, ignore_index=True).reindex(columns=ZERO_SHOT_COLUMNS)
        sizes["zero_shot"] = _write_parquet(lm_df, out / "zero_shot.parquet")
    return sizes


def features_record(
    model: str,
    source: str,
    passes: Passes,
    vector_dtype: str,
    sizes: dict[str, int],
    *,
    fp: str,
    cpu_s: float,
) -> dict[str, Any]:
    """The ``features.json`` record: the model's facts, the interventions, hashes, the
    fingerprint ``fp``, sizes per 1,000 texts, timings, forward passes and CPU seconds."""
    pooled_bytes, n_texts = passes.pooled_bytes, passes.n_texts
    all_texts = sum(n_texts.values())
    shared = sum(sizes.values())  # the index and zero-shot tables, over every intervention
    return {
        "model": model,
        "model_source": source,
        "n_layers": passes.shape[0] - 1,
        "d_model": passes.shape[1],
        "vector_dtype": vector_dtype,
        "interventions": passes.order,
        "texts_hash": passes.hashes,
        "fingerprint": fp,
        "n_texts": n_texts,
        "pooled_bytes": pooled_bytes,
        "pooled_bytes_per_1000_texts": {
            iv: round(pooled_bytes[iv] * 1000 / max(n, 1)) for iv, n in n_texts.items()
        },
        "table_bytes": sizes,
        # everything the fit reads, per 1,000 (text, intervention) pairs
        "features_bytes_per_1000_texts": round(
            (sum(pooled_bytes.values()) + shared) * 1000 / max(all_texts, 1)
        ),
        "timings": passes.timings,
        "forward_passes": passes.n_forward,
        "pooled_from": passes.pooled_from,
        "pooled_key": passes.keys,
        "zero_shot_from": passes.zero_shot_from,
        "features_cpu_s": cpu_s,
    }
