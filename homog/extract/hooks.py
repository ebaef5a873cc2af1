"""The per-batch ``Extractor``: forward hooks that reduce each layer on the device.

``Extractor`` loads nothing itself; it wraps a ``LoadedModel`` with forward hooks and maps one
batch of encoded texts to a ``BatchResult`` (per-text metrics per layer, attention statistics
per head, pooled vectors, sampled token vectors). Each layer's summaries are computed on the
device as soon as the layer's output exists, and only those small results go to the CPU;
hidden states and attention weights are never kept. ``compute_shard`` runs one shard in
batches; every engine calls it, so a shard holds the same batches wherever it runs.

Conventions (recorded in every run's ``config_json``): hidden layer 0 is the embedding output
(as HF returns it, e.g. scaled by sqrt(d) in Gemma), layer l in 1..L-1 the output of block l,
and layer L the final-norm output, which is what HF returns as ``hidden_states[-1]``.
Attention layer l (1..L) is the attention inside block l. Texts are padded on the right so
real tokens keep positions 0..n-1; position ids are always passed explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from homog.attention import HEAD_METRICS
from homog.config import ExtractConfig
from homog.errors import HomogError
from homog.extract.plan import EncodedText, SamplePlan, make_batches, n_tokens, position_ids
from homog.metrics import METRIC_NAMES

POOLINGS: tuple[str, ...] = ("mean", "last")


@dataclass
class BatchResult:
    """Summaries of a batch (or, concatenated, of a shard); arrays are on the CPU.

    indices (B,); metrics (B, L+1, len(METRIC_NAMES)) float64; heads (B, L, H, 3) float32
    with HEAD_METRICS (None without attention); profile (B, L, H, N_BINS) float32 (or None);
    pooled_mean, pooled_last (B, L+1, d) float16; tokens (L+1, K, d) float16 with
    token_index / token_pos (K,) naming the text and position of each sampled token;
    n_tokens (B,) real tokens per text.
    """

    indices: np.ndarray
    n_tokens: np.ndarray
    metrics: np.ndarray
    heads: np.ndarray | None
    profile: np.ndarray | None
    pooled_mean: np.ndarray
    pooled_last: np.ndarray
    tokens: np.ndarray
    token_index: np.ndarray
    token_pos: np.ndarray

    @classmethod
    def concat(cls, parts: Sequence[BatchResult]) -> BatchResult:
        def cat(name: str, axis: int = 0) -> Any:
            values = [getattr(p, name) for p in parts]
            return None if values[0] is None else np.concatenate(values, axis=axis)

        return cls(
            **{
                name: cat(name, axis=1 if name == "tokens" else 0)
                for name in cls.__dataclass_fields__
            }
        )

    def save(self, path: Path) -> None:
        arrays = {k: v for k, v in asdict(self).items() if v is not None}
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: Path) -> BatchResult:
        with np.load(path) as data:
            fields = cls.__dataclass_fields__
            return cls(**{k: (data[k] if k in data.files else None) for k in fields})


@dataclass
class BatchState:
    """What the hooks read and fill during one forward pass (``Extractor.run_batch``).

    Inputs: the texts' names (for error messages), the metric-token mask (B, n) and real
    lengths (B,) on the input device, the (row, position) pairs of the sampled tokens, the
    device results are gathered on and the dtype vectors are kept in. Outputs, one slot per
    layer (filled by the hooks): metrics and pooled vectors and sampled tokens per hidden
    layer (L+1), heads and profile per attention layer (L).
    """

    names: list[str]
    mask: torch.Tensor
    lengths: torch.Tensor
    sample_b: torch.Tensor
    sample_p: torch.Tensor
    device: Any
    n_layers: int
    vec_dtype: torch.dtype = torch.float16
    metrics: list[torch.Tensor | None] = field(init=False)
    pooled: dict[str, list[torch.Tensor | None]] = field(init=False)
    tokens: list[torch.Tensor | None] = field(init=False)
    heads: list[torch.Tensor | None] = field(init=False)
    profile: list[torch.Tensor | None] = field(init=False)

    def __post_init__(self) -> None:
        hidden = self.n_layers + 1
        self.metrics = [None] * hidden
        self.pooled = {how: [None] * hidden for how in POOLINGS}
        self.tokens = [None] * hidden
        self.heads = [None] * self.n_layers
        self.profile = [None] * self.n_layers


def _stack(values: list[torch.Tensor | None], dim: int) -> np.ndarray:
    return torch.stack(values, dim).cpu().numpy()  # type: ignore[arg-type]


class Extractor:
    """Maps a batch of encoded texts to a ``BatchResult`` with one forward pass.

    Forward hooks on the embedding, the decoder blocks, the final norm and (with attention)
    each block's self-attention compute that layer's summaries on the device while the
    forward pass runs; nothing of size (tokens x d) outlives its layer. The LM head is never
    run (the decoder is called, not the causal-LM wrapper). Reusable by any engine: it holds
    the model and the config, not the texts.
    """

    def __init__(self, loaded: Any, config: ExtractConfig):
        self.loaded = loaded
        self.config = config
        self.metric_names = METRIC_NAMES
        self._state: BatchState | None = None
        self._handles: list[Any] = []
        L = loaded.n_layers
        self._handles.append(loaded.embed.register_forward_hook(self._hidden_hook(0)))
        for i, block in enumerate(loaded.layers[:-1]):
            self._handles.append(block.register_forward_hook(self._hidden_hook(i + 1)))
        # HF's hidden_states[-1] is the final-norm output, not the last block's output.
        self._handles.append(loaded.norm.register_forward_hook(self._hidden_hook(L)))
        if config.attention:
            for i, attn in enumerate(loaded.attn_modules):
                self._handles.append(attn.register_forward_hook(self._attention_hook(i)))

    def close(self) -> None:
        """Remove the hooks (the model behaves as before)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()

    # -- hooks ------------------------------------------------------------------------------

    def _hidden_hook(self, layer: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if self._state is not None:
                hidden = output[0] if isinstance(output, tuple) else output
                self._summarise_hidden(self._state, layer, hidden)

        return hook

    def _attention_hook(self, index: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if self._state is None:
                return
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:
                raise HomogError(
                    "attention statistics need attention weights but the model returned none: "
                    "load it with attention=True (eager attention)"
                )
            self._summarise_attention(self._state, index, weights)

        return hook

    def _summarise_hidden(self, st: BatchState, layer: int, hidden: Any) -> None:
        from homog.metrics import MetricInputError, NonFiniteError, layer_metrics, pool

        mask = st.mask.to(hidden.device)
        try:
            values = layer_metrics(hidden, mask, center=self.config.center)
        except NonFiniteError as exc:
            names = sorted({st.names[i[0]] for i in exc.indices})
            raise HomogError(
                f"NaN/inf in hidden states at layer {layer} for text(s) {', '.join(names[:10])} "
                f"(dtype {self.loaded.dtype}; float16/bfloat16 overflow? use --dtype float32)"
            ) from exc
        except MetricInputError as exc:
            raise HomogError(f"layer {layer}: {exc} (texts {', '.join(st.names[:10])})") from exc
        dev, vec = st.device, st.vec_dtype
        st.metrics[layer] = torch.stack([values[m] for m in self.metric_names], -1).to(dev)
        # float32 is plenty for vectors stored as float16, and layer_metrics has just checked
        # these tokens for NaN/inf.
        for how in POOLINGS:
            pooled = pool(hidden, mask, how, dtype=torch.float32, check_finite=False)
            st.pooled[how][layer] = pooled.to(dev, vec)
        b, p = st.sample_b, st.sample_p
        st.tokens[layer] = hidden[b.to(hidden.device), p.to(hidden.device)].to(dev, vec)

    def _summarise_attention(self, st: BatchState, index: int, weights: Any) -> None:
        from homog.attention import attention_stats

        stats = attention_stats(weights, st.lengths)
        st.heads[index] = torch.stack([stats[m] for m in HEAD_METRICS], -1).to(st.device)
        st.profile[index] = stats["profile"].to(st.device)

    # -- one batch --------------------------------------------------------------------------

    def run_batch(
        self, texts: Sequence[EncodedText], intervention: str, plan: SamplePlan
    ) -> BatchResult:
        """One forward pass over ``texts`` (right-padded) under ``intervention``.

        Raises HomogError naming the text when hidden states hold NaN/inf.
        """
        from homog.metrics import token_mask

        lm = self.loaded
        dev = lm.input_device
        n_pad = max(len(t.input_ids) for t in texts)
        b = len(texts)
        pad_id = lm.tokenizer.pad_token_id or 0
        ids = np.full((b, n_pad), pad_id, dtype=np.int64)
        attn = np.zeros((b, n_pad), dtype=np.int64)
        special = np.zeros((b, n_pad), dtype=bool)
        pos = np.zeros((b, n_pad), dtype=np.int64)
        sample_b, sample_p = [], []
        for row, t in enumerate(texts):
            n = len(t.input_ids)
            ids[row, :n], attn[row, :n], special[row, :n] = t.input_ids, 1, t.special
            pos[row] = position_ids(intervention, t, n_pad, self.config.seed)
            chosen = plan.tokens.get(t.index, np.zeros(0, dtype=np.int64))
            sample_b += [row] * len(chosen)
            sample_p += chosen.tolist()
        attn_t = torch.from_numpy(attn)
        mask = token_mask(attn_t, torch.from_numpy(special), self.config.exclude_special)
        st = BatchState(
            names=[t.name for t in texts],
            mask=mask.to(dev),
            lengths=attn_t.sum(1).to(dev),
            sample_b=torch.tensor(sample_b, dtype=torch.long),
            sample_p=torch.tensor(sample_p, dtype=torch.long),
            device=dev,
            n_layers=lm.n_layers,
        )
        self._state = st
        try:
            with torch.inference_mode():
                lm.decoder(
                    input_ids=torch.from_numpy(ids).to(dev),
                    attention_mask=attn_t.to(dev),
                    position_ids=torch.from_numpy(pos).to(dev),
                    use_cache=False,
                )
            missing = [i for i, v in enumerate(st.metrics) if v is None]
            if missing:
                raise HomogError(f"no hidden states were captured for layer(s) {missing}")
            attention = self.config.attention
            result = BatchResult(
                indices=np.array([t.index for t in texts]),
                n_tokens=attn.sum(1),
                metrics=_stack(st.metrics, 1),
                heads=_stack(st.heads, 1) if attention else None,
                profile=_stack(st.profile, 1) if attention else None,
                pooled_mean=_stack(st.pooled["mean"], 1),
                pooled_last=_stack(st.pooled["last"], 1),
                tokens=_stack(st.tokens, 0),
                token_index=np.array([texts[r].index for r in sample_b], dtype=np.int64),
                token_pos=np.array(sample_p, dtype=np.int64),
            )
        finally:
            self._state = None
        return result


def compute_shard(
    extractor: Extractor,
    shard: Sequence[EncodedText],
    intervention: str,
    plan: SamplePlan,
    batch_tokens: int,
    on_batch: Callable[[int, int], None] | None = None,
) -> BatchResult:
    """One shard -> its ``BatchResult``: the shard's texts in ``make_batches`` batches of at
    most ``batch_tokens`` padded tokens, one ``extractor.run_batch`` each, concatenated.

    Every engine computes shards with this function, so a shard holds the same batches (and
    the same values) wherever it runs. ``on_batch(texts, tokens)`` is called after each batch.
    Raises what ``Extractor.run_batch`` raises (HomogError on NaN/inf).
    """
    parts = []
    for batch in make_batches(shard, batch_tokens):
        parts.append(extractor.run_batch(batch, intervention, plan))
        if on_batch:
            on_batch(len(batch), n_tokens(batch))
    return BatchResult.concat(parts)
