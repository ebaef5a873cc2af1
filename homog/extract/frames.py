"""The rows of a run's output tables, one builder per table (pure: arrays in, DataFrames out).

``homog.extract.outputs.build_outputs`` calls them: ``layer_metrics_frame`` (layer_metrics),
``profile_frame`` and ``heads_frame`` (attention_profile, attention_heads, per variant),
``spectra_frames`` (dataset_spectra), ``massive_frame`` (massive_activations),
``sentence_frame`` (sentence_metrics) and ``zero_shot_frame`` (zero_shot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.extract.names import TOKEN_COUNT
from homog.extract.plan import EncodedText
from homog.extract.result import BatchResult
from homog.metrics.attention import CTRL_METRIC, HEAD_METRICS, TEXT_METRICS


def _std(x: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    return x.std(axis=axis, ddof=1) if n > 1 else np.full(x.mean(axis=axis).shape, np.nan)


def long_frame(
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


def profile_frame(variant: str, mass: np.ndarray) -> Any:
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


def heads_frame(variant: str, h: np.ndarray) -> Any:
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


def spectra_frames(
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


def massive_frame(
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
    cols = [
        "variant",
        "layer",
        "rank",
        "position",
        "feature",
        "token_id",
        "n_texts",
        "share",
        "mean_abs",
        "max_abs",
        "sign",
    ]
    return agg[cols].rename(columns={"n_texts": "n"}).reset_index(drop=True)


def sentence_frame(res: BatchResult, encoded: Sequence[EncodedText], run_id: str) -> Any:
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
            # a batch of an older partial run may lack the same-place control's column
            "is_ctrl": meta[:, 8].astype(bool) if meta.shape[1] > 8 else False,
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


def _metric_tokens(text: EncodedText, exclude_special: bool) -> int:
    """The number of tokens of ``text`` that enter the hidden-state metrics."""
    n = len(text.input_ids)
    return int(n - np.count_nonzero(text.special)) if exclude_special else n


def layer_metrics_frame(
    res: BatchResult,
    order: np.ndarray,
    metrics: np.ndarray,
    heads: np.ndarray | None,
    encoded: Sequence[EncodedText],
    variants: np.ndarray,
    sample_ids: np.ndarray,
    exclude_special: bool,
) -> Any:
    """The ``layer_metrics`` rows (without ``run_id``): the (N, L+1, M) ``metrics``, each
    text's metric-token count (TOKEN_COUNT, at layer 0), the mean over heads of the (N, L, H,
    3) ``heads`` and the per-text attention metrics of ``res`` (both at layers 1..L)."""
    import pandas as pd

    frames = [
        long_frame(metrics, res.names, variants, sample_ids, first_layer=0),
        long_frame(
            np.array([_metric_tokens(t, exclude_special) for t in encoded], dtype=np.float64)[
                :, None, None
            ],
            [TOKEN_COUNT],
            variants,
            sample_ids,
            first_layer=0,
        ),
    ]
    if heads is not None:
        frames.append(long_frame(heads.mean(2), list(HEAD_METRICS), variants, sample_ids, 1))
    if res.text_attn is not None:
        text_attn = res.text_attn[order]
        frames.append(long_frame(text_attn, list(TEXT_METRICS), variants, sample_ids, 1))
    if res.ctrl_attn is not None:
        ctrl = res.ctrl_attn[order][..., None]
        frames.append(long_frame(ctrl, [CTRL_METRIC], variants, sample_ids, 1))
    return pd.concat(frames, ignore_index=True)


def zero_shot_frame(
    res: BatchResult, order: np.ndarray, encoded: Sequence[EncodedText], run_id: str
) -> Any:
    """The ``zero_shot`` rows (homog.extract.zero_shot), one per text in the texts' order:
    run_id, variant, sample_id, log_odds, n_prompt_tokens, truncated; None when the run
    answered no prompt."""
    import pandas as pd

    if res.log_odds is None or res.prompt_tokens is None:
        return None
    return pd.DataFrame(
        {
            "run_id": run_id,
            "variant": [t.variant for t in encoded],
            "sample_id": [t.sample_id for t in encoded],
            "log_odds": res.log_odds[order].astype(np.float64),
            "n_prompt_tokens": res.prompt_tokens[order].astype(np.int64),
            "truncated": [t.truncated for t in encoded],
        }
    )
