"""Attention-logit decomposition: which part of each head's logits carries position.

Two decompositions, both exact (the terms add up to the layer's logits):

- additive encodings (nope, sinusoidal, learned, t5, alibi): the residual stream entering a
  block is content + p, where p is the absolute position vector added at the input (zero for
  nope/t5/alibi). LayerNorm is linear once its per-token scale 1/sigma(x) is fixed, so
  ln(x) = c' + p' with p' = gamma (p - mean p) / sigma(x) and c' the rest (content and
  LayerNorm's beta). The projections have no bias, so
  logit = q(c')k(c') + q(c')k(p') + q(p')k(c') + q(p')k(p') + b_ij, the terms ``cc``, ``cp``,
  ``pc``, ``pp`` and ``bias`` (b_ij: the t5 / alibi relative bias, 0 for the others).
- rotary encodings (rope, partial_rope, mla, and pretrained RoPE LMs): ``unrotated`` = the
  logits q.k of the same pre-rotation q and k, ``rotation`` = rotated minus unrotated logits,
  i.e. what the position-dependent rotation adds.

Each term's **share** is its energy over the sum of the terms' energies (shares of a head add
up to 1). The energy of a term is its sum of squares after centring every query's row over
the keys it may attend to: softmax ignores a constant per row, so only the within-row
variation moves attention. Pairs involving padding (and future keys in causal LMs) are left
out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from homog.config import Params, as_params
from homog.io import HomogError, atomic_path
from homog.layout import Layout
from homog.models import load_model, resolve_source
from homog.owned import write_parquet
from homog.posenc.model import ADDITIVE, Attention, Encoder

ADDITIVE_TERMS = ("cc", "cp", "pc", "pp", "bias")
ROTARY_TERMS = ("unrotated", "rotation")
DEMO_TEXTS = Layout().demo_corpus


def centered_energy(term: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per-head energy [H] of logits term [B, H, T, T] over valid pairs [B, T, T] (bool).

    Every (b, h, i) row is centred over its valid keys j before squaring.
    """
    w = valid[:, None].to(term.dtype)
    n = w.sum(-1, keepdim=True).clamp(min=1.0)
    centred = (term - (term * w).sum(-1, keepdim=True) / n) * w
    return centred.pow(2).sum(dim=(0, 2, 3))


def shares(energies: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Normalise per-term energies [H] so they add up to 1 per head (0 where all are 0)."""
    total = torch.stack(list(energies.values())).sum(0)
    return {k: torch.where(total > 0, v / total.clamp(min=1e-30), 0.0) for k, v in energies.items()}


def position_part(ln: torch.nn.LayerNorm, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """The part of ln(x) that the position vectors in x = content + position account for.

    ln(x) = gamma * (x - mean x) / sigma(x) + beta is linear in x once the per-token scale
    sigma(x) is fixed, so position contributes gamma * (position - mean position) / sigma(x);
    everything else (content and beta) is the content part ln(x) - position_part.
    """
    sigma = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + ln.eps)
    return ln.weight * (position - position.mean(-1, keepdim=True)) / sigma


def additive_terms(
    attn: Attention, ln: torch.nn.LayerNorm, x: torch.Tensor, position: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The five logit terms [B, H, T, T] of one additive-encoding layer; they sum to its logits.

    x [B, T, d]: the block's input; position [B, T, d]: the absolute position vectors in it
    (zeros without them). Relies on the q/k projections having no bias (``Attention.c_attn``).
    """
    p = position_part(ln, x, position)
    c = ln(x) - p
    (qc, kc, _), (qp, kp, _) = attn.qkv(c), attn.qkv(p)

    def dot(q, k):
        return (q @ k.transpose(-2, -1)) * attn.scale

    B, T = x.shape[:2]
    rel = torch.broadcast_to(torch.as_tensor(attn.position_bias(T)), (B, attn.n_head, T, T))
    return {"cc": dot(qc, kc), "cp": dot(qc, kp), "pc": dot(qp, kc), "pp": dot(qp, kp), "bias": rel}


def rotary_terms(
    q: torch.Tensor, k: torch.Tensor, rotate: Callable[[torch.Tensor, torch.Tensor], tuple]
) -> dict[str, torch.Tensor]:
    """``unrotated`` = q.k and ``rotation`` = rot(q).rot(k) - q.k, each [B, H, T, T].

    q, k [B, H, T, c] before the rotation (k already repeated to H heads); ``rotate(q, k)``
    returns the rotated pair. Scaling is left out: shares do not depend on it.
    """
    plain = q @ k.transpose(-2, -1)
    rq, rk = rotate(q, k)
    return {"unrotated": plain, "rotation": rq @ rk.transpose(-2, -1) - plain}


def _block_inputs(model: Encoder, idx: torch.Tensor) -> list[torch.Tensor]:
    """The residual stream entering each block [B, T, d] (forward pre-hooks)."""
    seen: list[torch.Tensor] = []
    hooks = [
        b.register_forward_pre_hook(lambda m, args: seen.append(args[0])) for b in model.blocks
    ]
    try:
        model(idx)
    finally:
        for h in hooks:
            h.remove()
    return seen


@torch.no_grad()
def encoder_terms(model: Encoder, idx: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Per layer, the logit terms [B, H, T, T] of a trained Encoder on token ids idx [B, T].

    Additive encodings give ADDITIVE_TERMS, rotary ones ROTARY_TERMS (see module docstring).
    """
    model.eval()
    T = idx.size(1)
    pos = model.position_embedding(T)
    out = []
    for block, x in zip(model.blocks, _block_inputs(model, idx), strict=True):
        attn = block.attn
        if model.config.pe in ADDITIVE:
            position = torch.zeros_like(x) if pos is None else pos.expand_as(x)
            out.append(additive_terms(attn, block.ln_1, x, position))
        else:
            q, k, _ = attn.qkv(block.ln_1(x))
            out.append(rotary_terms(q, k, lambda q, k, a=attn: (a.rotate(q), a.rotate(k))))
    return out


def encoder_decomposition(model: Encoder, idx: torch.Tensor) -> list[dict[str, Any]]:
    """Rows (layer 1..L, head, term, share) of the energy shares of a trained Encoder."""
    mask = idx != 0
    valid = mask[:, :, None] & mask[:, None, :]
    rows = []
    for layer, terms in enumerate(encoder_terms(model, idx), start=1):
        for term, share in shares({k: centered_energy(v, valid) for k, v in terms.items()}).items():
            rows += [
                {"layer": layer, "head": h, "term": term, "share": float(s)}
                for h, s in enumerate(share.tolist())
            ]
    return rows


# ----------------------------------------------------------------------------------------------
# pretrained RoPE language models (HF transformers: LLaMA, Qwen2, Mistral, Gemma 3, ...)


def qk_pre_rotation(attn: Any, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, H, T, hd] and k repeated to H heads, as the HF attention builds them before RoPE."""
    B, T, _ = hidden.shape
    hd = attn.head_dim
    q = attn.q_proj(hidden).view(B, T, -1, hd).transpose(1, 2)
    k = attn.k_proj(hidden).view(B, T, -1, hd).transpose(1, 2)
    # Gemma 3 / Qwen 3 normalise q and k per head before the rotation
    if getattr(attn, "q_norm", None) is not None:
        q, k = attn.q_norm(q), attn.k_norm(k)
    return q, k.repeat_interleave(q.size(1) // k.size(1), dim=1)


def rotary_fn(attn: Any) -> Callable:
    """The ``apply_rotary_pos_emb(q, k, cos, sin)`` of the module that defines ``attn``."""
    fn = getattr(sys.modules[type(attn).__module__], "apply_rotary_pos_emb", None)
    if fn is None:
        raise HomogError(
            f"{type(attn).__name__} has no apply_rotary_pos_emb beside it: the logit "
            "decomposition supports HF RoPE models (LLaMA, Qwen2, Mistral, Gemma 3)"
        )
    return fn


def causal_pairs(T: int, window: int | None, device: Any = None) -> torch.Tensor:
    """[1, T, T] bool: key j is visible from query i (j <= i, and i - j < window if given)."""
    offset = torch.arange(T, device=device)[:, None] - torch.arange(T, device=device)[None, :]
    visible = offset >= 0
    if window:
        visible &= offset < window
    return visible[None]


@torch.no_grad()
def pretrained_decomposition(
    model: Any, attn_modules: Sequence[Any], texts_ids: Sequence[torch.Tensor]
) -> list[dict[str, Any]]:
    """Rows (layer 1..L, head, term, share) of the rotary decomposition of a HF causal LM.

    model: a HF causal LM whose attention modules (``attn_modules[i]`` inside block i) receive
    ``hidden_states`` and ``position_embeddings=(cos, sin)``; texts_ids: 1-D token-id tensors,
    run one at a time (no padding). Energies are summed over texts, then normalised. Raises
    HomogError when the attention modules do not look like HF RoPE attention.
    """
    energy: dict[int, dict[str, torch.Tensor]] = {}

    def hook(layer: int, attn: Any, args: tuple, kwargs: dict) -> None:
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        cos_sin = kwargs.get("position_embeddings")
        if hidden is None or cos_sin is None:
            raise HomogError(
                f"attention {type(attn).__name__} was called without hidden_states and "
                "position_embeddings: not a HF RoPE attention homog can decompose"
            )
        q, k = (t.float() for t in qk_pre_rotation(attn, hidden))  # energies in float32
        cos, sin = (t.float() for t in cos_sin)
        terms = rotary_terms(q, k, lambda q, k: rotary_fn(attn)(q, k, cos, sin))
        causal = causal_pairs(q.size(2), getattr(attn, "sliding_window", None), q.device)
        acc = energy.setdefault(layer, {})
        for name, term in terms.items():
            e = centered_energy(term, causal).cpu()
            acc[name] = acc.get(name, 0) + e

    handles = [
        attn.register_forward_pre_hook(lambda m, a, kw, i=i: hook(i, m, a, kw), with_kwargs=True)
        for i, attn in enumerate(attn_modules, start=1)
    ]
    try:
        device = next(model.parameters()).device
        for ids in texts_ids:
            model(input_ids=ids[None].to(device), use_cache=False)
    finally:
        for h in handles:
            h.remove()
    rows = []
    for layer in sorted(energy):
        for term, share in shares(energy[layer]).items():
            rows += [
                {"layer": layer, "head": h, "term": term, "share": float(s)}
                for h, s in enumerate(share.tolist())
            ]
    return rows


def read_texts(texts_path: str | Path, n: int) -> list[str]:
    """The first ``n`` 'original' texts of a texts table, or of data/demo/reviews.jsonl.

    Raises HomogError when neither exists or they hold no text.
    """
    import pandas as pd

    path = Path(texts_path)
    if path.exists():
        frame = pd.read_parquet(path)
        if "variant" in frame:
            frame = frame[frame["variant"] == "original"]
    elif DEMO_TEXTS.exists():
        frame = pd.read_json(DEMO_TEXTS, lines=True)
    else:
        raise HomogError(f"no texts: {path} and {DEMO_TEXTS} are missing; run `homog synth`")
    texts = frame["text"].tolist()[:n]
    empty = sum(not (isinstance(t, str) and t.strip()) for t in texts)
    if empty or not texts:
        source = path if path.exists() else DEMO_TEXTS
        raise HomogError(f"{source}: {empty} of the first {len(texts)} texts are empty")
    return texts


def run_decompose(
    params: Params | Mapping[str, Any],
    model_key: str,
    texts_path: str | Path,
    out: str | Path,
    *,
    device: str,
):
    """Decompose a pretrained model's RoPE logits over a few texts; write the Parquet file.

    ``params``: the whole params.yaml (``models:`` resolves the key; ``posenc.decompose_texts``
    and ``posenc.decompose_max_tokens`` bound the work). Rows: source = model_key, layer, head,
    term (unrotated | rotation), share. Returns the DataFrame and counts (n_texts, n_tokens,
    n_truncated: texts cut at decompose_max_tokens). Raises HomogError for an unknown model key
    or a model whose attention is not HF RoPE attention.
    """
    import pandas as pd

    params = as_params(params)
    source = resolve_source(model_key, params.model_sources())
    loaded = load_model(source, dtype="float32", device=device, attention=False)
    texts = read_texts(texts_path, params.posenc.decompose_texts)
    max_tokens = params.posenc.decompose_max_tokens
    full = [loaded.tokenizer(t)["input_ids"] for t in texts]
    ids = [torch.tensor(t[:max_tokens]) for t in full]
    counts = {
        "n_texts": len(ids),
        "n_tokens": sum(len(t) for t in ids),
        "n_truncated": sum(len(t) > max_tokens for t in full),
    }
    rows = pretrained_decomposition(loaded.model, loaded.attn_modules, ids)
    frame = pd.DataFrame([{"source": model_key, **r} for r in rows])
    with atomic_path(out) as tmp:
        write_parquet(frame, tmp, "posenc decompose")  # homog's mark: a rerun may replace it
    return frame, counts
