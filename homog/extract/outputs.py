"""A run's output files: shard results -> tables and arrays (pure), then one atomic write.

``load_shards`` reads and checks a run's shard files; ``build_outputs`` turns the combined
``BatchResult`` into the output tables (``RunOutputs``: layer_metrics, attention_profile,
attention_heads, dataset_spectra, massive_activations, vectors) without touching the file
system;
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
from homog.extract.names import TOKEN_COUNT
from homog.extract.plan import EncodedText, RunSpec, SamplePlan
from homog.extract.result import BatchResult
from homog.io import atomic_path, write_json
from homog.metrics.attention import HEAD_METRICS, TEXT_METRICS

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
    n_texts: int = 0
    n_tokens: int = 0
    n_sampled_tokens: int = 0
    warnings: list[str] = field(default_factory=list)

    def tables(self) -> dict[str, Any]:
        """File stem -> table, for the tables that exist (in the order they are written)."""
        tables = {
            "layer_metrics": self.layer_metrics,
            "attention_profile": self.attention_profile,
            "attention_heads": self.attention_heads,
            "dataset_spectra": self.dataset_spectra,
            "massive_activations": self.massive_activations,
            "sentence_metrics": self.sentence_metrics,
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


def _std(x: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    return x.std(axis=axis, ddof=1) if n > 1 else np.full(x.mean(axis=axis).shape, np.nan)


def _int32(df: Any) -> Any:
    """The index-like columns as int32, as they are stored."""
    for col in INT32_COLUMNS:
        if col in df.columns:
            df[col] = df[col].astype(np.int32)
    return df


def _long_frame(
    values: np.ndarray,
    names: list[str],
    variants: np.ndarray,
    sample_ids: np.ndarray,
    first_layer: int,
) -> Any:
    """(N, layers, M) per-text values -> long rows (variant, sample_id, layer, metric, value)."""
    import pandas as pd

    n, n_layers, m = values.shape
    ti, li, mi = np.meshgrid(np.arange(n), np.arange(n_layers), np.arange(m), indexing="ij")
    return pd.DataFrame(
        {
            "variant": variants[ti.ravel()],
            "sample_id": sample_ids[ti.ravel()],
            "layer": (li.ravel() + first_layer).astype(np.int32),
            "metric": np.array(names)[mi.ravel()],
            "value": values.ravel(),
        }
    )


def _profile_frame(variant: str, mass: np.ndarray) -> Any:
    """(L, H, BINS) mean column mass of one variant -> long rows."""
    import pandas as pd

    li, hi, bi = np.meshgrid(*(np.arange(s) for s in mass.shape), indexing="ij")
    return pd.DataFrame(
        {
            "variant": variant,
            "layer": li.ravel() + 1,
            "head": hi.ravel(),
            "bin": bi.ravel(),
            "mass": mass.ravel(),
        }
    )


def _heads_frame(variant: str, h: np.ndarray) -> Any:
    """(n, L, H, 3) head statistics of one variant's n texts -> mean/std rows."""
    import pandas as pd

    mean, std = h.mean(0), _std(h, 0)
    li, hi, mi = np.meshgrid(*(np.arange(s) for s in mean.shape), indexing="ij")
    return pd.DataFrame(
        {
            "variant": variant,
            "layer": li.ravel() + 1,
            "head": hi.ravel(),
            "metric": np.array(HEAD_METRICS)[mi.ravel()],
            "mean": mean.ravel(),
            "std": std.ravel(),
            "n": len(h),
        }
    )


def _spectra_frames(
    variant: str, pooling: str, vecs: np.ndarray, n_layers: int, warnings: list[str]
) -> list[Any]:
    """Dataset spectra of one variant's (n, L+1, d) pooled vectors, one frame per metric.

    With one text there is no dataset spectrum: NaN rows, and a note in ``warnings``.
    """
    import pandas as pd
    import torch

    from homog.metrics.spectra import MetricInputError, dataset_spectra

    if len(vecs) >= 2:
        try:
            spectra = dataset_spectra(torch.from_numpy(vecs.transpose(1, 0, 2).copy()))
        except MetricInputError as exc:
            raise HomogError(
                f"dataset spectra of variant {variant} ({pooling}-pooled vectors): {exc}"
            ) from exc
        values = {k: v.numpy() for k, v in spectra.items()}
    else:  # one text: no dataset spectrum; written as NaN and noted in run.json
        values = {k: np.full(n_layers + 1, np.nan) for k in ("rankme", "alpha_req", "alpha_req_r2")}
        warnings.append(f"variant {variant}: 1 text, dataset spectra are NaN")
    return [
        pd.DataFrame(
            {
                "variant": variant,
                "layer": np.arange(n_layers + 1),
                "pooling": pooling,
                "metric": metric,
                "value": value,
            }
        )
        for metric, value in values.items()
    ]


def _massive_frame(
    variant: str, top: np.ndarray, encoded: Sequence[EncodedText], sel: np.ndarray
) -> Any:
    """The ``massive_activations`` rows of one variant.

    top: (n, L+1, TOP_K, 3) [position, feature, value] of each text's largest |activations|.
    Per layer, the TOP_K (position, feature) pairs that are most often among a text's top
    activations (ties: larger mean |value| first), with n_texts (texts where the pair is among
    their top), share (n_texts / texts), mean_abs and max_abs (|value| over those texts),
    sign (of the mean value) and token_id (the most common token at that position).
    """
    import pandas as pd

    n, n_layers, k, _ = top.shape
    pos = top[..., 0].astype(np.int64)
    rows = pd.DataFrame(
        {
            "text": np.repeat(np.arange(n), n_layers * k),
            "layer": np.tile(np.repeat(np.arange(n_layers), k), n),
            "position": pos.ravel(),
            "feature": top[..., 1].astype(np.int64).ravel(),
            "value": top[..., 2].ravel(),
        }
    )
    ids = [encoded[i].input_ids for i in sel]
    rows["token_id"] = [ids[t][p] for t, p in zip(rows["text"], rows["position"], strict=True)]
    rows["abs"] = rows["value"].abs()
    # topk returns distinct (position, feature) entries, so a pair counts once per text
    keys = ["layer", "position", "feature"]
    agg = (
        rows.groupby(keys, sort=False)
        .agg(
            n_texts=("text", "size"),
            mean_abs=("abs", "mean"),
            max_abs=("abs", "max"),
            mean_value=("value", "mean"),
        )
        .reset_index()
    )
    agg = agg.sort_values(["layer", "n_texts", "mean_abs"], ascending=[True, False, False])
    agg = agg.groupby("layer", sort=True).head(k).copy()
    agg["rank"] = agg.groupby("layer").cumcount() + 1
    chosen = rows.merge(agg[keys], on=keys)
    modal = (
        chosen.groupby([*keys, "token_id"])
        .size()
        .reset_index(name="c")
        .sort_values(["c", "token_id"], ascending=[False, True])
        .drop_duplicates(keys)
    )
    agg = agg.merge(modal[[*keys, "token_id"]], on=keys)
    agg = agg.sort_values(["layer", "rank"])
    agg["share"] = agg["n_texts"] / n
    agg["sign"] = np.sign(agg.pop("mean_value")).astype(np.int32)
    agg.insert(0, "variant", variant)
    cols = ["variant", "layer", "rank", "position", "feature", "token_id", "n_texts", "share",
            "mean_abs", "max_abs", "sign"]  # fmt: skip
    return agg[cols].rename(columns={"n_texts": "n"}).reset_index(drop=True)


def _metric_tokens(text: EncodedText, exclude_special: bool) -> int:
    """The number of tokens of ``text`` that enter the hidden-state metrics."""
    n = len(text.input_ids)
    return int(n - np.count_nonzero(text.special)) if exclude_special else n


def _set_warnings(metrics: np.ndarray, names: list[str], encoded_names: list[str]) -> list[str]:
    """run.json notes for token sets whose metrics are NaN because < 2 tokens were left."""
    notes = []
    reasons = {
        "no_sink": "fewer than 2 tokens left after removing the first token and tokens with "
        "norm > extract.sink_norm_ratio x the median norm",
        "standardized": "fewer than 2 tokens, or every feature constant over the tokens",
    }
    for token_set, reason in reasons.items():
        name = f"erank__{token_set}"
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

    frames = [
        _long_frame(metrics, names, variants, sample_ids, first_layer=0),
        _long_frame(
            np.array([_metric_tokens(t, exclude_special) for t in encoded], dtype=np.float64)[
                :, None, None
            ],
            [TOKEN_COUNT],
            variants,
            sample_ids,
            first_layer=0,
        ),
    ]
    heads = profile = None
    if res.heads is not None:
        heads = res.heads[order].astype(np.float64)  # (N, L, H, 3)
        profile = res.profile[order].astype(np.float64)  # (N, L, H, BINS)
        frames.append(_long_frame(heads.mean(2), list(HEAD_METRICS), variants, sample_ids, 1))
    if res.text_attn is not None:
        text_attn = res.text_attn[order]
        frames.append(_long_frame(text_attn, list(TEXT_METRICS), variants, sample_ids, 1))
    layer_df = pd.concat(frames, ignore_index=True)
    layer_df.insert(0, "run_id", run_id)

    profile_rows, head_rows, spectra_rows, massive_rows = [], [], [], []
    warnings: list[str] = _set_warnings(metrics, names, [t.name for t in encoded])
    top = res.top[order] if res.top is not None else None
    vectors: dict[str, np.ndarray] = {}
    token_index = res.token_index
    for variant in sorted(set(variants)):
        sel = np.flatnonzero(variants == variant)
        if heads is not None:
            profile_rows.append(_profile_frame(variant, profile[sel].mean(0)))  # (L, H, BINS)
            head_rows.append(_heads_frame(variant, heads[sel]))  # (n, L, H, 3)
        if top is not None:
            massive_rows.append(_massive_frame(variant, top[sel], encoded, sel))
        for pooling, pooled in (("mean", res.pooled_mean), ("last", res.pooled_last)):
            vecs = pooled[order][sel]  # (n, L+1, d) float32
            spectra_rows += _spectra_frames(variant, pooling, vecs, n_layers, warnings)
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
        sentence_metrics=_sentence_frame(res, encoded, run_id),
        n_texts=len(encoded),
        n_tokens=int(res.n_tokens.sum()),
        n_sampled_tokens=int(len(token_index)),
        warnings=warnings,
    )


def _sentence_frame(res: BatchResult, encoded: Sequence[EncodedText], run_id: str) -> Any:
    """The ``sentence_metrics`` rows (homog.extract.sentences) of the run's followed
    sentences: one per (sentence, layer, metric), hidden layers 0..L and attention layers
    1..L; None when the run measured none (no spans, or ``extract.sentence_metrics`` off)."""
    import pandas as pd

    from homog.extract.sentences import SENT_ATTENTION, SENT_HIDDEN

    if res.sent_meta is None or res.sent_hidden is None or len(res.sent_meta) == 0:
        return None
    meta = res.sent_meta
    order = np.lexsort((meta[:, 1], meta[:, 0]))  # by text, then sentence
    meta, hidden = meta[order], res.sent_hidden[order]
    blocks = [(hidden, list(SENT_HIDDEN), 0)]
    if res.sent_attn is not None:
        blocks.append((res.sent_attn[order][:, :, None], list(SENT_ATTENTION), 1))
    text = meta[:, 0]
    n_sent = meta[:, 5]
    base = pd.DataFrame(
        {
            "variant": [encoded[i].variant for i in text],
            "sample_id": [encoded[i].sample_id for i in text],
            "sentence": meta[:, 1].astype(np.int32),
            "sent_index": meta[:, 2].astype(np.int32),
            "rel_position": meta[:, 2] / np.maximum(n_sent - 1, 1),
            "n_tokens": (meta[:, 4] - meta[:, 3]).astype(np.int32),
            "is_key": meta[:, 6].astype(bool),
            "is_control": meta[:, 7].astype(bool),
        }
    )
    frames = []
    for values, names, first in blocks:
        s, n_layers, m = values.shape
        rows = base.loc[np.repeat(np.arange(s), n_layers * m)].reset_index(drop=True)
        rows["layer"] = np.tile(np.repeat(np.arange(first, first + n_layers), m), s)
        rows["layer"] = rows["layer"].astype(np.int32)
        rows["metric"] = pd.Categorical(np.tile(names, s * n_layers))
        rows["value"] = values.reshape(-1).astype(np.float64)
        frames.append(rows)
    df = pd.concat(frames, ignore_index=True)
    df["metric"] = df["metric"].astype(str)
    df.insert(0, "run_id", run_id)
    return df


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


def write_outputs(outputs: RunOutputs, target: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Write the output directory ``target`` atomically: the Parquet tables, vectors.npz and
    run.json (``run_json_record`` plus ``output_bytes``). Returns the run.json record."""
    record = run_json_record(outputs, record)
    with atomic_path(target, directory=True) as tmp:
        for name, df in outputs.tables().items():
            _write_parquet(df, tmp / f"{name}.parquet")
        with open(tmp / "vectors.npz", "wb") as fh:
            np.savez(fh, **outputs.vectors)
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
