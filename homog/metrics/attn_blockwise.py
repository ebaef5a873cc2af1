"""Attention statistics from each layer's own q and k, block of query rows by block, with SDPA.

Eager attention materialises (heads x n x n) weights per layer (about 600 MB per text and
layer for smollm2-135m at 4,096 tokens) and shuts off SDPA. Instead homog registers an
attention function, ``ATTENTION_FUNCTION``, with transformers' ``AttentionInterface`` (its
documented extension point) and loads the model with it. The function

- runs transformers' own ``sdpa_attention_forward`` for the layer's output (the forward
  pass is SDPA, with the masks SDPA gets), unless the model soft-caps its attention logits
  (SDPA cannot) or the caller asked for ``output_attentions``: then it computes the output
  (and the weights when asked) block of query rows by block, exactly as eager attention does;
- hands the layer's query and key, as the attention module passes them in (after q/k norms
  and RoPE, before GQA's key repetition), to a *sink* the ``Extractor`` attached to the
  module for the current batch. The sink calls ``attention_sums``: for each block of
  ``block`` query rows it forms ``softmax(q k^T * scaling + mask)`` (soft-capped when
  configured; causal, padding and sliding-window masks) and reduces it at once to the
  per-head column sums and row-entropy sums that ``homog.metrics.attention.stats_from_sums`` turns
  into every attention statistic. At most (heads x block x n) weights exist at a time.

``choose_implementation`` picks the implementation when a model is loaded: blockwise for the
attention modules in ``BLOCKWISE_ATTENTION`` (whose call of the attention function, masks
and q/k handling were checked against eager weights in tests/test_attn_blockwise.py), eager
with a one-line warning naming the model class otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from homog.metrics.attn_bias import BIAS_ATTR, ColumnBias

ATTENTION_FUNCTION = "homog_sdpa"
SINK_ATTR = "_homog_attention_sink"
# attention module classes whose query/key/mask handling the blockwise path knows
BLOCKWISE_ATTENTION: tuple[str, ...] = (
    "LlamaAttention",
    "Gemma3Attention",
    "Qwen2Attention",
    "Qwen3Attention",
)
DEFAULT_BLOCK = 256
# ``extract.attention_block: auto``: rows per block by device. On a CPU the (heads x block x n)
# logits of a 32-row block stay in cache: at 4 x 512 tokens (smollm2-135m's 9 heads) 21 ms of
# CPU per layer against 64 ms with 256 rows (bench/attn_blockwise.py --blocks).
AUTO_BLOCK = {"cpu": 32}


def block_rows(block: int | str, device: Any) -> int:
    """Query rows per block: ``block`` itself, or for ``"auto"`` ``AUTO_BLOCK`` of the
    device's type (``DEFAULT_BLOCK`` on a GPU)."""
    if block != "auto":
        return int(block)
    return AUTO_BLOCK.get(torch.device(device).type, DEFAULT_BLOCK)


# sink(query, key, scaling=..., softcap=..., sliding_window=...)
Sink = Callable[..., None]


def register() -> None:
    """Register ``ATTENTION_FUNCTION`` (attention and mask) with transformers; idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION_FUNCTION, attention_forward)
    AttentionMaskInterface.register(ATTENTION_FUNCTION, sdpa_mask)


def unsupported_reason(attn_modules: list[Any]) -> str | None:
    """Why the blockwise path cannot serve these attention modules (None when it can)."""
    unknown = sorted({type(m).__name__ for m in attn_modules} - set(BLOCKWISE_ATTENTION))
    if unknown:
        return (
            f"its attention module {', '.join(unknown)} is not one the blockwise path knows "
            f"({', '.join(BLOCKWISE_ATTENTION)})"
        )
    return None


def choose_implementation(model: Any, attn_modules: list[Any], attention: bool, impl: str) -> str:
    """Set and return the attention implementation of a model loaded with SDPA.

    attention False: "sdpa" (no statistics); impl "eager": "eager"; impl "blockwise":
    ``ATTENTION_FUNCTION`` when ``unsupported_reason`` finds nothing, else "eager" after a
    one-line warning on stderr naming the model class and the reason.
    """
    if not attention:
        return "sdpa"
    if impl == "blockwise":
        reason = unsupported_reason(attn_modules)
        if reason is None:
            register()
            model.set_attn_implementation(ATTENTION_FUNCTION)
            return ATTENTION_FUNCTION
        print(
            f"warning: attention statistics of {type(model).__name__} fall back to eager "
            f"attention (heads x n x n weights per layer): {reason}",
            file=sys.stderr,
        )
    model.set_attn_implementation("eager")
    return "eager"


class SinkHandle:
    """Attaches a sink to an attention module; ``remove()`` detaches it (like a hook handle)."""

    def __init__(self, module: Any, sink: Sink):
        self.module = module
        setattr(module, SINK_ATTR, sink)

    def remove(self) -> None:
        if getattr(self.module, SINK_ATTR, None) is not None:
            delattr(self.module, SINK_ATTR)


def attention_forward(
    module: Any,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    sliding_window: int | None = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """The function transformers calls for ``ATTENTION_FUNCTION`` (signature of its
    attention interface): the layer's output via SDPA, and the statistics via the sink.

    query (B, H, n, d), key and value (B, KV, n, d); attention_mask: SDPA's boolean mask
    (True = attend) or None for plain causal attention. Returns (output (B, n, H, d),
    weights (B, H, n, n) when ``output_attentions`` was asked for, else None).
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if scaling is None:
        scaling = module.head_dim**-0.5
    bias = getattr(module, BIAS_ATTR, None)  # the sink_bias intervention (homog.extract.edits)
    extra = {}
    if bias is not None:
        q, k = query.shape[2], key.shape[2]
        attention_mask = bias.mask(attention_mask, q, k, sliding_window, query.dtype, query.device)
        extra["bias"] = bias
    sink = getattr(module, SINK_ATTR, None)
    if sink is not None:
        sink(query, key, scaling=scaling, softcap=softcap, sliding_window=sliding_window, **extra)
    if softcap is None and not kwargs.get("output_attentions"):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    return attend_blockwise(
        query,
        key,
        value,
        attention_mask,
        scaling=scaling,
        softcap=softcap,
        return_weights=bool(kwargs.get("output_attentions")),
    )


def _logits(q: Tensor, k: Tensor, scaling: float, softcap: float | None) -> Tensor:
    """(B, KV, G*r, c) = q (B, KV, G*r, d) @ k (B, KV, c, d)^T * scaling, soft-capped as
    eager attention does: tanh(x / cap) * cap."""
    logits = torch.matmul(q, k.transpose(-1, -2)).mul_(scaling)
    if softcap is not None:
        logits = torch.tanh(logits.div_(softcap)).mul_(softcap)
    return logits


def _group_rows(query: Tensor, kv_heads: int, i0: int, i1: int) -> Tensor:
    """Query rows i0..i1-1 as (B, KV, G*r, d): head h uses key head h // G (GQA), so the G
    heads of one key head are stacked along the rows and share one matmul with that key."""
    b, h, _, d = query.shape
    g = h // kv_heads
    return query[:, :, i0:i1].reshape(b, kv_heads, g * (i1 - i0), d)


def attend_blockwise(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    *,
    scaling: float,
    softcap: float | None = None,
    block: int = DEFAULT_BLOCK,
    return_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Eager attention's output (and weights when asked) in blocks of ``block`` query rows.

    Same maths as transformers' eager attention of LLaMA/Gemma 3/Qwen: logits in the input
    dtype, soft-capped, masked (boolean SDPA mask, or causal when None), softmax in float32
    cast back to the input dtype, times V. Returns (output (B, n, H, d), weights or None).
    """
    b, h, n, d = query.shape
    kv = key.shape[1]
    g = h // kv
    out = torch.empty(b, kv, g, n, value.shape[-1], dtype=query.dtype, device=query.device)
    weights = (
        torch.empty(b, h, n, n, dtype=query.dtype, device=query.device) if return_weights else None
    )
    pos = torch.arange(n, device=query.device)
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        logits = _logits(_group_rows(query, kv, i0, i1), key, scaling, softcap)
        logits = logits.view(b, kv, g, i1 - i0, n)
        if attention_mask is None:
            allowed = (pos[None, :] <= pos[i0:i1, None])[None, None]
        elif attention_mask.dtype == torch.bool:
            allowed = attention_mask[:, :, i0:i1]  # (B or 1, 1, r, n)
        else:  # an additive float mask
            logits = logits + attention_mask[:, :, None, i0:i1]
        if attention_mask is None or attention_mask.dtype == torch.bool:
            logits = logits.masked_fill(~allowed[:, :, None], torch.finfo(logits.dtype).min)
        p = torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
        out[:, :, :, i0:i1] = torch.matmul(p, value[:, :, None])
        if weights is not None:
            weights[:, :, i0:i1] = p.reshape(b, h, i1 - i0, n)
    return out.reshape(b, h, n, -1).transpose(1, 2).contiguous(), weights


def attention_sums(
    query: Tensor,
    key: Tensor,
    lengths: Tensor,
    *,
    scaling: float,
    softcap: float | None = None,
    sliding_window: int | None = None,
    block: int = DEFAULT_BLOCK,
    bias: ColumnBias | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-head sums over each text's real query rows of its attention weights, in blocks.

    query (B, H, n, d) and key (B, KV, n, d) as the attention module computed them (after
    RoPE; H a multiple of KV); lengths (B,) real tokens per right-padded text. Weights are
    ``softmax(q k^T * scaling + mask)`` in float32, soft-capped as tanh(x / cap) * cap
    when ``softcap`` is set; the mask allows key j for query i when j <= i, j < length and,
    with ``sliding_window`` w, i - j < w (transformers' masks); ``bias`` (the sink_bias
    intervention) adds its beta to the allowed logits it hits, or masks them. Returns float32
    ``column_sum`` (B, H, n) = sum_i A_ij and ``entropy_sum`` (B, H) = sum_i H(A_i.) over
    the real rows i < length, for ``homog.metrics.attention.stats_from_sums``.

    Each block of rows [i0, i1) sees keys [c0, i1) only (causal; c0 > 0 with a sliding
    window), and is reduced as soon as it exists: with l' = logits - row max, e = exp(l'),
    z = sum_j e_j, the weights are e / z and the row entropy is ln z - sum_j e_j l'_j / z
    (no log per weight). At most (H x block x n) floats are held at a time.
    """
    b, h, n, _ = query.shape
    kv = key.shape[1]
    g = h // kv
    q, k = query.float(), key.float()
    lengths = lengths.to(query.device)
    pos = torch.arange(n, device=query.device)
    column = torch.zeros(b, kv, g, n, device=query.device)
    entropy = torch.zeros(b, kv, g, device=query.device)
    lowest = torch.finfo(torch.float32).min
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        c0 = 0 if sliding_window is None else max(0, i0 - sliding_window + 1)
        rows, cols = pos[i0:i1, None], pos[None, c0:i1]
        allowed = cols <= rows
        if sliding_window is not None:
            allowed = allowed & (cols > rows - sliding_window)
        allowed = allowed[None] & (cols[None] < lengths[:, None, None])  # (B, r, c)
        shift = None  # the bias's additive term (B, r, c), when it does not mask
        if bias is not None:
            hit = bias.hits(pos[i0:i1], pos[c0:i1])
            if bias.masks:
                allowed = allowed & ~hit
            else:
                shift = torch.where(hit, bias.beta, 0.0)
        r = i1 - i0
        logits = _logits(_group_rows(q, kv, i0, i1), k[:, :, c0:i1], scaling, softcap)
        logits = logits.view(b, kv, g, r, i1 - c0)
        if shift is not None:
            logits.add_(shift[:, None, None])
        logits.masked_fill_(~allowed[:, None, None], lowest)
        logits.sub_(logits.amax(-1, keepdim=True))  # l' <= 0; masked keys stay ~lowest
        e = torch.exp(logits)
        z = e.sum(-1)  # (B, KV, G, r) >= 1: the row maximum contributes exp(0)
        # padding rows (i >= length) get weight 0, real rows 1 / z
        real = (pos[None, i0:i1] < lengths[:, None])[:, None, None]  # (B, 1, 1, r)
        row_w = torch.where(real, 1.0 / z, 0.0)
        column[..., c0:i1] += torch.matmul(row_w[..., None, :], e)[..., 0, :]
        # masked keys: e = 0 and l' finite, so e * l' = 0 (no NaN)
        row_h = torch.log(z) - e.mul_(logits).sum(-1) / z
        entropy += torch.where(real, row_h, 0.0).sum(-1)
    return column.view(b, h, n), entropy.view(b, h)
