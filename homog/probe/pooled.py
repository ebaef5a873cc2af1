"""Mean-pooled hidden states of every text at every layer (the probes' features).

The tokens are the extraction's: ``homog.extract.plan.encode_texts`` tokenizes and truncates
to ``extract.max_tokens`` (and the model's context), ``homog.metrics.spectra.token_mask``
drops tokenizer-added special tokens under ``extract.exclude_special``, and
``homog.extract.plan.position_ids`` applies the intervention. The layers are the
extraction's too: forward hooks on the embedding (layer 0), the blocks 1..L-1 and the final
norm (layer L), as ``homog.extract.hooks.Extractor`` places them. Each layer's mean over the
metric tokens is accumulated in float64 (``homog.metrics.spectra.pool``), so the same tokens
in another order (the position family at layer 0) give the same vector to ~1e-16 before it
is stored in ``probe.vector_dtype``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.extract.plan import encode_texts, encoded_key, make_batches, pad_batch
from homog.probe.reuse import matching_run

VECTOR_DTYPES = {"float16": np.float16, "float32": np.float32}


def _hidden_modules(loaded: Any) -> list[Any]:
    """The modules whose outputs are hidden layers 0..L (the Extractor's hook points)."""
    return [loaded.embed, *loaded.layers[:-1], loaded.norm]


def pooled_means(
    loaded: Any,
    df: Any,
    config: Any,
    intervention: str,
    *,
    vector_dtype: str = "float16",
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, np.ndarray]:
    """The mean hidden state over each text's metric tokens, at every layer 0..L.

    loaded: a ``homog.models.LoadedModel``; df: texts sorted by (variant, sample_id)
    (``homog.extract.plan.read_texts``); config: the ``ExtractConfig`` (max_tokens,
    batch_tokens, exclude_special, seed). Returns ``vectors`` (texts, L+1, d) in
    ``vector_dtype`` and ``variant``, ``sample_id``, ``n_tokens`` (metric tokens) and
    ``truncated`` per text, in df's order, and ``key``: what the model read
    (``homog.extract.plan.encoded_key``, an extraction's ``pooled_key`` of these texts).
    Raises HomogError when a vector overflows the stored dtype or the hidden states hold
    NaN/inf.
    """
    import torch

    # homog.metrics.spectra imports torch: both only when a forward pass runs
    from homog.metrics.spectra import pool, token_mask

    if vector_dtype not in VECTOR_DTYPES:
        raise HomogError(f"vector_dtype {vector_dtype!r}: use one of {', '.join(VECTOR_DTYPES)}")
    max_tokens = min(config.max_tokens, loaded.max_context)
    encoded = encode_texts(loaded.tokenizer, df, max_tokens)
    n_layers = loaded.n_layers
    out = np.zeros((len(encoded), n_layers + 1, loaded.d_model), dtype=VECTOR_DTYPES[vector_dtype])
    n_metric = np.zeros(len(encoded), dtype=np.int64)
    state: dict[str, Any] = {}

    def hook_for(layer: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            mask = state["mask"].to(hidden.device)
            state["pooled"][layer] = pool(hidden, mask, "mean").cpu().numpy()

        return hook

    handles = [m.register_forward_hook(hook_for(i)) for i, m in enumerate(_hidden_modules(loaded))]
    pad_id = loaded.tokenizer.pad_token_id or 0
    dev = loaded.input_device
    try:
        for batch in make_batches(encoded, config.batch_tokens):
            ids, attn, special, pos = pad_batch(batch, pad_id, intervention, config.seed)
            mask = token_mask(
                torch.from_numpy(attn), torch.from_numpy(special), config.exclude_special
            )
            rows = np.array([t.index for t in batch])
            empty = [batch[i].name for i in np.flatnonzero(~mask.any(1).numpy())]
            if empty:
                raise HomogError(f"text(s) with no metric token: {', '.join(empty[:10])}")
            state.update(mask=mask, pooled=[None] * (n_layers + 1))
            with torch.inference_mode():
                loaded.decoder(
                    input_ids=torch.from_numpy(ids).to(dev),
                    attention_mask=torch.from_numpy(attn).to(dev),
                    position_ids=torch.from_numpy(pos).to(dev),
                    use_cache=False,
                )
            missing = [i for i, v in enumerate(state["pooled"]) if v is None]
            if missing:
                raise HomogError(f"no hidden states were captured for layer(s) {missing}")
            out[rows] = to_stored(
                np.stack(state["pooled"], axis=1), vector_dtype, [t.name for t in batch]
            )
            n_metric[rows] = mask.sum(1).numpy()
            if on_batch:
                on_batch(len(batch))
    finally:
        for h in handles:
            h.remove()
    return _result(out, encoded, n_metric, encoded_key(encoded))


def from_extraction(
    run_dir: Path,
    loaded: Any,
    df: Any,
    config: Any,
    source: str,
    intervention: str,
    vector_dtype: str,
) -> dict[str, np.ndarray] | None:
    """``pooled_means``' result read from an extraction run instead of a forward pass, or None
    (``homog.probe.reuse.matching_run`` finds no run of these texts, or ``pooled_from_run``
    no vectors). loaded: anything with ``tokenizer`` and ``max_context``."""
    run = matching_run(run_dir, loaded, df, config, source, intervention)
    return None if run is None else pooled_from_run(run, config, vector_dtype)


def pooled_from_run(run: Any, config: Any, vector_dtype: str) -> dict[str, np.ndarray] | None:
    """``pooled_means``' result from the ``pooled_mean.npy`` of ``run`` (a
    ``homog.probe.reuse.ExtractionRun``), or None (other ``exclude_special``, a missing or
    damaged file, another shape: the caller runs the forward pass).

    ``homog extract`` writes every text's mean-pooled vectors, hooks at the same layers, the
    mean over the same metric tokens accumulated in float64. Vectors may differ from a fresh
    pass by the attention kernel's rounding (the extraction's blockwise SDPA against plain
    SDPA).
    """
    if run.settings.get("exclude_special") != config.exclude_special:
        return None
    encoded, record = run.encoded, run.record
    try:
        vectors = np.load(run.run_dir / "pooled_mean.npy")
    except (OSError, ValueError, EOFError):  # a damaged file: the caller's own pass instead
        return None
    if vectors.shape != (len(encoded), record.get("n_layers", -1) + 1, record.get("d_model")):
        return None
    names = [t.name for t in encoded]
    special = [int(t.special.sum()) if config.exclude_special else 0 for t in encoded]
    n_tokens = np.array([len(t.input_ids) - k for t, k in zip(encoded, special, strict=True)])
    stored = to_stored(vectors.astype(np.float32), vector_dtype, names)
    return _result(stored, encoded, n_tokens, record["pooled_key"])


def _result(vectors: np.ndarray, encoded: Any, n_tokens: np.ndarray, key: str) -> dict[str, Any]:
    """What ``pooled_means`` and ``from_extraction`` return, per text in ``encoded``'s order."""
    return {
        "vectors": vectors,
        "variant": np.array([t.variant for t in encoded]),
        "sample_id": np.array([t.sample_id for t in encoded]),
        "n_tokens": n_tokens,
        "truncated": np.array([t.truncated for t in encoded]),
        "key": key,
    }


def to_stored(vectors: np.ndarray, vector_dtype: str, names: Sequence[str]) -> np.ndarray:
    """``vectors`` (texts, layers, d) in ``vector_dtype``; HomogError naming the first text
    and layer that hold NaN/inf or a value beyond the dtype's range."""
    with np.errstate(over="ignore"):  # an overflow becomes inf, reported below
        stored = vectors.astype(VECTOR_DTYPES[vector_dtype])
    bad = ~np.isfinite(stored)
    if bad.any():
        text, layer = np.argwhere(bad.any(-1))[0]
        raise HomogError(
            f"pooled vector of {names[text]} at layer {layer} is not finite in {vector_dtype} "
            f"(largest |value| {np.nanmax(np.abs(vectors[text, layer])):.4g}): "
            "set probe.vector_dtype: float32"
        )
    return stored
