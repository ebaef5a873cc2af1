"""A run's output files: shard results -> tables and arrays (pure), then one atomic write.

``load_shards`` reads and checks a run's shard files; ``build_outputs`` turns the combined
``BatchResult`` into the output tables (``RunOutputs``: layer_metrics, attention_profile,
attention_heads, dataset_spectra, massive_activations, vectors) without touching the file
system (each table's rows from its builder in ``homog.extract.frames``);
``write_outputs`` writes them and run.json into a directory renamed into place only when
complete. ``merge_shards`` is the three in a row. Everything is ordered by the (variant,
sample_id) order of the encoded texts, so outputs do not depend on how the texts were
sharded, batched or resumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.extract.frames import (
    heads_frame,
    layer_metrics_frame,
    massive_frame,
    profile_frame,
    sentence_frame,
    spectra_frames,
    zero_shot_frame,
)
from homog.extract.plan import EncodedText, RunSpec, SamplePlan, encoded_key
from homog.extract.result import BatchResult
from homog.io import atomic_path, write_json
from homog.metrics.registry import metric_name

INT32_COLUMNS = ("layer", "head", "bin", "n", "rank", "position", "feature", "token_id")


@dataclass
class RunOutputs:
    """The contents of a run's output directory, before writing.

    Tables carry ``run_id`` first; ``attention_profile`` / ``attention_heads`` are None
    without attention. ``vectors``: the arrays of vectors.npz (insertion order is the file's
    order). ``warnings``: notes for run.json (e.g. a variant of one text has no dataset
    spectrum). ``n_tokens`` / ``n_sampled_tokens`` / ``n_texts``: sizes for run.json.
    """

    run_id: str
    layer_metrics: Any
    attention_profile: Any | None
    attention_heads: Any | None
    dataset_spectra: Any
    vectors: dict[str, np.ndarray]
    massive_activations: Any | None = None
    sentence_metrics: Any | None = None
    # the probe's zero-shot answers from the text's own pass (homog.extract.zero_shot)
    zero_shot: Any | None = None
    n_texts: int = 0
    n_tokens: int = 0
    n_sampled_tokens: int = 0
    warnings: list[str] = field(default_factory=list)
    # every text's mean-pooled vectors (N, L+1, d) in the texts' order, and the key of what the
    # model read (homog.extract.plan.encoded_key): pooled_mean.npy and run.json's pooled_key
    pooled: np.ndarray | None = None
    pooled_key: str = ""

    def tables(self) -> dict[str, Any]:
        """File stem -> table, for the tables that exist (in the order they are written)."""
        tables = {
            "layer_metrics": self.layer_metrics,
            "attention_profile": self.attention_profile,
            "attention_heads": self.attention_heads,
            "dataset_spectra": self.dataset_spectra,
            "massive_activations": self.massive_activations,
            "sentence_metrics": self.sentence_metrics,
            "zero_shot": self.zero_shot,
        }
        return {name: df for name, df in tables.items() if df is not None}


# ---------------------------------------------------------------------------------------------
# computation


def load_shards(paths: Sequence[Path], n_texts: int) -> tuple[BatchResult, np.ndarray]:
    """(all shards' results concatenated, the order that sorts them by text index).

    Raises HomogError when the shards do not cover the ``n_texts`` texts exactly once.
    """
    try:
        res = BatchResult.concat([BatchResult.load(p) for p in paths])
    except (OSError, ValueError, KeyError) as exc:  # a damaged or foreign shard file
        raise HomogError(
            f"cannot read the shards in {paths[0].parent} ({exc}): delete that directory and "
            "run again"
        ) from exc
    order = np.argsort(res.indices, kind="stable")
    if not np.array_equal(res.indices[order], np.arange(n_texts)):
        raise HomogError(f"shards in {paths[0].parent} do not cover the {n_texts} texts")
    return res, order


def _int32(df: Any) -> Any:
    """The index-like columns as int32, as they are stored."""
    for col in INT32_COLUMNS:
        if col in df.columns:
            df[col] = df[col].astype(np.int32)
    return df


def _set_warnings(metrics: np.ndarray, names: list[str], encoded_names: list[str]) -> list[str]:
    """run.json notes for token sets whose metrics are NaN because < 2 tokens were left."""
    notes = []
    reasons = {
        "no_sink": "fewer than 2 tokens left after removing the first token and tokens with "
        "norm > extract.sink_norm_ratio x the median norm",
        "standardized": "fewer than 2 tokens, or every feature constant over the tokens",
    }
    for token_set, reason in reasons.items():
        name = metric_name("erank", token_set)
        if name not in names:
            continue
        bad = np.isnan(metrics[:, :, names.index(name)])  # (N, L+1)
        if bad.any():
            texts = [encoded_names[i] for i in np.flatnonzero(bad.any(1))]
            notes.append(
                f"{token_set} metrics are NaN at {int(bad.sum())} (text, layer) positions of "
                f"{len(texts)} text(s) ({', '.join(texts[:5])}): {reason}"
            )
    return notes


def build_outputs(
    res: BatchResult,
    order: np.ndarray,
    encoded: Sequence[EncodedText],
    plan: SamplePlan,
    run_id: str,
    exclude_special: bool = True,
) -> RunOutputs:
    """The output tables and arrays of one run from its shards' results (no file I/O).

    res / order: from ``load_shards``; encoded: the run's texts in (variant, sample_id)
    order; plan: which pooled vectors are kept (the sampled tokens are in ``res``);
    exclude_special: ``extract.exclude_special`` (which tokens the metrics count). Besides
    the per-layer metrics, ``layer_metrics`` holds one row per text at layer 0 with metric
    ``n_tokens`` (TOKEN_COUNT): the text's metric tokens (after truncation), which the stats
    stage uses to adjust contrasts for length.
    """
    import pandas as pd

    metrics = res.metrics[order]  # (N, L+1, M)
    variants = np.array([t.variant for t in encoded])
    sample_ids = np.array([t.sample_id for t in encoded])
    n_layers = metrics.shape[1] - 1
    names = res.names

    heads = profile = None
    if res.heads is not None:
        heads = res.heads[order].astype(np.float64)  # (N, L, H, 3)
        profile = res.profile[order].astype(np.float64)  # (N, L, H, BINS)
    layer_df = layer_metrics_frame(
        res, order, metrics, heads, encoded, variants, sample_ids, exclude_special
    )
    layer_df.insert(0, "run_id", run_id)

    profile_rows, head_rows, spectra_rows, massive_rows = [], [], [], []
    warnings: list[str] = _set_warnings(metrics, names, [t.name for t in encoded])
    top = res.top[order] if res.top is not None else None
    vectors: dict[str, np.ndarray] = {}
    for variant in sorted(set(variants)):
        sel = np.flatnonzero(variants == variant)
        if heads is not None:
            profile_rows.append(profile_frame(variant, profile[sel].mean(0)))  # (L, H, BINS)
            head_rows.append(heads_frame(variant, heads[sel]))  # (n, L, H, 3)
        if top is not None:
            massive_rows.append(massive_frame(variant, top[sel], encoded, sel))
        for pooling, pooled in (("mean", res.pooled_mean), ("last", res.pooled_last)):
            vecs = pooled[order][sel]  # (n, L+1, d) float32
            spectra_rows += spectra_frames(variant, pooling, vecs, n_layers, warnings)
        vectors.update(_variant_vectors(res, order, plan, variants, sample_ids, variant, sel))

    def with_run(frames: list[Any]) -> Any:
        df = pd.concat(frames, ignore_index=True)
        df.insert(0, "run_id", run_id)
        return _int32(df)

    return RunOutputs(
        run_id=run_id,
        layer_metrics=_int32(layer_df),
        attention_profile=with_run(profile_rows) if heads is not None else None,
        attention_heads=with_run(head_rows) if heads is not None else None,
        dataset_spectra=with_run(spectra_rows),
        vectors=vectors,
        massive_activations=with_run(massive_rows) if massive_rows else None,
        sentence_metrics=sentence_frame(res, encoded, run_id),
        zero_shot=zero_shot_frame(res, order, encoded, run_id),
        n_texts=len(encoded),
        n_tokens=int(res.n_tokens.sum()),
        n_sampled_tokens=int(len(res.token_index)),
        warnings=warnings,
        pooled=res.pooled_mean[order],
        pooled_key=encoded_key(encoded),
    )


def _variant_vectors(
    res: BatchResult,
    order: np.ndarray,
    plan: SamplePlan,
    variants: np.ndarray,
    sample_ids: np.ndarray,
    variant: str,
    sel: np.ndarray,
) -> dict[str, np.ndarray]:
    """vectors.npz's arrays of one variant (its texts ``sel``, in the order of ``order``):
    the kept mean-pooled vectors and the sampled tokens, with their sample ids and positions."""
    vectors: dict[str, np.ndarray] = {}
    token_index = res.token_index
    keep = np.array([i for i in sel if i in plan.pooled], dtype=np.int64)
    vectors[f"pooled_mean__{variant}"] = res.pooled_mean[order][keep].transpose(1, 0, 2)
    vectors[f"sample_ids__{variant}"] = sample_ids[keep].astype(str)
    # sampled tokens of this variant, ordered by (text index, position)
    tsel = np.flatnonzero(variants[token_index] == variant) if len(token_index) else []
    tsel = np.asarray(tsel, dtype=np.int64)
    tord = tsel[np.lexsort((res.token_pos[tsel], token_index[tsel]))]
    vectors[f"tokens__{variant}"] = res.tokens[:, tord]
    vectors[f"token_sample_ids__{variant}"] = sample_ids[token_index[tord]].astype(str)
    vectors[f"token_positions__{variant}"] = res.token_pos[tord]
    return vectors


# ---------------------------------------------------------------------------------------------
# writing


def _write_parquet(df: Any, path: Path) -> None:
    """Parquet with dictionary-encoded strings and zstd (small files, fast to load)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, compression="zstd")


def run_json_record(outputs: RunOutputs, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` (the run.json fields known before the merge) plus the outputs' warnings,
    run id and sizes (``output_bytes`` is added by ``write_outputs``)."""
    record = dict(record)
    if outputs.warnings:
        record["warnings"] = [*record.get("warnings", []), *outputs.warnings]
    return {
        **record,
        "run_id": outputs.run_id,
        "n_texts": int(outputs.n_texts),
        "n_tokens": outputs.n_tokens,
        "n_sampled_tokens": outputs.n_sampled_tokens,
    }


def pooled_to_store(pooled: np.ndarray) -> np.ndarray:
    """The pooled vectors as written: float16 (half the bytes) when every value is finite and
    within float16's range, else float32 (a massive activation beyond 65,504 keeps its value)."""
    finite = np.isfinite(pooled).all()
    if finite and (pooled.size == 0 or np.abs(pooled).max() < np.finfo(np.float16).max):
        return pooled.astype(np.float16)
    return pooled.astype(np.float32)


def write_outputs(outputs: RunOutputs, target: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Write the output directory ``target`` atomically: the Parquet tables, vectors.npz,
    pooled_mean.npy (every text's mean-pooled vectors, ``pooled_to_store``) and run.json
    (``run_json_record`` plus ``pooled_key``, ``pooled_dtype`` and ``output_bytes``). Returns
    the run.json record."""
    record = run_json_record(outputs, record)
    with atomic_path(target, directory=True) as tmp:
        for name, df in outputs.tables().items():
            _write_parquet(df, tmp / f"{name}.parquet")
        with open(tmp / "vectors.npz", "wb") as fh:
            np.savez(fh, **outputs.vectors)
        if outputs.pooled is not None:
            stored = pooled_to_store(outputs.pooled)
            np.save(tmp / "pooled_mean.npy", stored)
            record.update(pooled_key=outputs.pooled_key, pooled_dtype=str(stored.dtype))
        record["output_bytes"] = int(sum(p.stat().st_size for p in tmp.iterdir()))
        write_json(tmp / "run.json", record)
    return record


def merge_shards(
    paths: Sequence[Path],
    encoded: Sequence[EncodedText],
    spec: RunSpec,
    plan: SamplePlan,
    target: Path,
    record: dict[str, Any],
) -> dict[str, Any]:
    """Turn shard files into the final output directory (atomically renamed into place).

    ``load_shards`` + ``build_outputs`` + ``write_outputs``: the layer_metrics,
    attention_profile, attention_heads and dataset_spectra Parquet files, vectors.npz and
    run.json (``record`` plus sizes). Returns the run record. Raises HomogError when the
    shards do not cover the texts.
    """
    res, order = load_shards(paths, len(encoded))
    outputs = build_outputs(
        res, order, encoded, plan, spec.run_id, exclude_special=spec.config.exclude_special
    )
    return write_outputs(outputs, target, record)
