"""The tools ``bench/peers.py`` compares, each a loader returning ``work(ids) -> metrics``.

Every ``*_work(args)`` loads the model its way and returns ``(work, info)``: ``work`` maps
(N, T) token ids to float64 arrays ``erank``, ``mev``, ``resultant_length`` (N, L+1) and
``attn_first`` (N, L, H); ``info`` says how it ran. The peers (hf, nnsight, tlens) share
``peer_maths``: per text and layer ``torch.linalg.svdvals`` in float64 and the formulas of
docs/design.md, written out here independently of ``homog.metrics``. The expert peer
(hf-fast) does the same maths the way a competent user batches it (``expert_maths``: every
layer at once, Gram matrices and ``eigvalsh`` in float64 on the device, one host copy at the
end). A tool that cannot run here raises ``SkipTool`` with the reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from _bench_util import encoded_texts, model_setup

TOOLS = ("homog", "homog-min", "hf-fast", "hf", "nnsight", "tlens")
HOMOG_TOOLS = ("homog", "homog-min")
REFERENCE = "hf"
HIDDEN = ("erank", "mev", "resultant_length")
METRICS = (*HIDDEN, "attn_first")
Work = Callable[[np.ndarray], dict[str, np.ndarray]]


class SkipTool(Exception):
    """The tool cannot do this work here (the message says why)."""


# ---------------------------------------------------------------------------------------------
# the maths every peer does after its forward pass (independent of homog.metrics)


def peer_maths(hidden: list[Any], attn: list[Any]) -> dict[str, np.ndarray]:
    """Per-text metrics from one batch's hidden states and attention weights.

    hidden: L+1 tensors (B, n, d); attn: L tensors (B, H, n, n). Per text and layer, the
    singular values come from ``torch.linalg.svdvals`` in float64. Returns erank, mev,
    resultant_length (B, L+1) and attn_first (B, L, H) as float64 numpy arrays.
    """
    import torch

    b = hidden[0].shape[0]
    out = {m: np.zeros((b, len(hidden))) for m in HIDDEN}
    for layer, h in enumerate(hidden):
        for i in range(b):
            x = h[i].double()
            s = torch.linalg.svdvals(x)
            p = s / s.sum()
            out["erank"][i, layer] = math.exp(float(-torch.special.xlogy(p, p).sum()))
            out["mev"][i, layer] = float(s[0] ** 2 / (s**2).sum())
            unit = x / x.norm(dim=1, keepdim=True)
            out["resultant_length"][i, layer] = float(unit.mean(0).norm())
    # A_i0 for every query i, averaged over the n queries (all of them see token 0)
    out["attn_first"] = torch.stack([a[..., :, 0].double().mean(-1) for a in attn], 1).cpu().numpy()
    return out


def expert_maths(hidden: list[Any], attn: list[Any]) -> dict[str, Any]:
    """The metrics of peer_maths, batched as an expert writes them: device tensors, no sync.

    Every layer's hidden states stacked (L+1, B, n, d) in float64; one batched Gram matrix per
    text and layer (n x n or d x d, whichever is smaller: the same nonzero eigenvalues s^2) and
    one batched ``torch.linalg.eigvalsh``; the formulas vectorised over layers and texts.
    Returns torch tensors on the input's device: erank, mev, resultant_length (B, L+1) and
    attn_first (B, L, H).
    """
    import torch

    x = torch.stack(hidden).double()  # (L+1, B, n, d)
    n, d = x.shape[-2:]
    gram = x @ x.mT if n <= d else x.mT @ x
    ev = torch.linalg.eigvalsh(gram).clamp_min(0)  # s^2, ascending
    s = ev.sqrt()
    p = s / s.sum(-1, keepdim=True)
    erank = torch.exp(-torch.special.xlogy(p, p).sum(-1))
    mev = ev[..., -1] / ev.sum(-1)
    rl = (x / x.norm(dim=-1, keepdim=True)).mean(-2).norm(dim=-1)
    first = torch.stack([a[..., :, 0] for a in attn]).double().mean(-1)  # (L, B, H)
    return {
        "erank": erank.T,
        "mev": mev.T,
        "resultant_length": rl.T,
        "attn_first": first.permute(1, 0, 2),
    }


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {m: np.concatenate([p[m] for p in parts]) for m in METRICS}


# ---------------------------------------------------------------------------------------------
# the tools (each runs in its own child process)


def homog_work(args: argparse.Namespace, tool: str) -> tuple[Work, dict[str, Any]]:
    from homog.extract import Extractor, compute_shard, plan_samples
    from homog.metrics.attention import HEAD_METRICS
    from homog.metrics.sets import hidden_metric_names
    from homog.models import load_for

    source, cfg = model_setup(args.model, args.params)
    cfg = dataclasses.replace(
        cfg, device=args.device, dtype=args.dtype, attention=True, max_tokens=args.tokens
    )
    if args.batch_tokens:
        cfg = dataclasses.replace(cfg, batch_tokens=args.batch_tokens)
    if tool == "homog-min":
        cfg = dataclasses.replace(cfg, token_sets=(), peer_metrics=False)
    lm = load_for(source, cfg)

    def work(ids: np.ndarray) -> dict[str, np.ndarray]:
        texts = encoded_texts(ids)
        plan = plan_samples(texts, cfg.sample_tokens, cfg.pooled_texts, cfg.seed, True)
        extractor = Extractor(lm, cfg)
        try:
            res = compute_shard(extractor, texts, "none", plan, cfg.batch_tokens)
        finally:
            extractor.close()
        order = np.argsort(res.indices)
        names = res.names
        out = {m: res.metrics[order][:, :, names.index(m)] for m in HIDDEN}
        out["attn_first"] = res.heads[order][..., HEAD_METRICS.index("attn_first")]
        return out

    info = {
        # blockwise (q and k, SDPA forward) or eager, where this homog has the choice
        "attention": getattr(cfg, "attention_impl", "eager"),
        "attn_implementation": lm.info.get("attn_implementation"),
        "hidden_metrics": len(hidden_metric_names(cfg.token_sets, cfg.peer_metrics)),
    }
    return work, info


def _batches(ids: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Row groups of at most batch_tokens tokens (equal lengths: homog's make_batches)."""
    per = max(1, batch_tokens // ids.shape[1])
    return [ids[i : i + per] for i in range(0, len(ids), per)]


def _load_eager(args: argparse.Namespace) -> tuple[Any, int]:
    """The model with eager attention (the peers read its weights) and the batch size."""
    import inspect

    from homog.models import load_model

    source, cfg = model_setup(args.model, args.params)
    kwargs: dict[str, Any] = {"dtype": args.dtype, "device": args.device, "attention": True}
    if "attention_impl" in inspect.signature(load_model).parameters:
        kwargs["attention_impl"] = "eager"
    return load_model(source, **kwargs), args.batch_tokens or cfg.batch_tokens


def _eager_parts(lm: Any, batch_tokens: int, ids: np.ndarray, maths: Callable) -> list:
    """``maths(hidden_states, attentions)`` of each batch of HF's eager forward over ``ids``."""
    import torch

    parts = []
    for chunk in _batches(ids, batch_tokens):
        x = torch.from_numpy(chunk).to(lm.input_device)
        with torch.inference_mode():
            out = lm.decoder(
                input_ids=x,
                attention_mask=torch.ones_like(x),
                output_hidden_states=True,
                output_attentions=True,
                use_cache=False,
            )
            parts.append(maths(list(out.hidden_states), list(out.attentions)))
        del out
    return parts


def hf_work(args: argparse.Namespace) -> tuple[Work, dict[str, Any]]:
    lm, batch_tokens = _load_eager(args)

    def work(ids: np.ndarray) -> dict[str, np.ndarray]:
        return _concat(_eager_parts(lm, batch_tokens, ids, peer_maths))

    return work, {"attention": "eager"}


def nnsight_work(args: argparse.Namespace) -> tuple[Work, dict[str, Any]]:
    import nnsight
    import torch

    lm, batch_tokens = _load_eager(args)
    net = nnsight.NNsight(lm.decoder)

    def work(ids: np.ndarray) -> dict[str, np.ndarray]:
        parts = []
        for chunk in _batches(ids, batch_tokens):
            x = torch.from_numpy(chunk).to(lm.input_device)
            with torch.inference_mode():
                # modules are read in the order the forward pass reaches them; only what is
                # saved (the two lists) comes back out of the trace
                with net.trace(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False):
                    hidden = nnsight.save([net.embed_tokens.output])
                    attn = nnsight.save([])
                    for i, layer in enumerate(net.layers):
                        attn.append(layer.self_attn.output[1])
                        if i < len(net.layers) - 1:  # the last block's output is not a layer
                            hidden.append(layer.output)
                    hidden.append(net.norm.output)
                parts.append(peer_maths(hidden, attn))
        return _concat(parts)

    return work, {"attention": "eager", "version": nnsight.__version__}


def tlens_work(args: argparse.Namespace) -> tuple[Work, dict[str, Any]]:
    from importlib.metadata import version

    import torch

    from homog.models import torch_dtype

    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError as exc:
        raise SkipTool(f"TransformerLens is not installed or too old ({exc})") from exc
    lm, batch_tokens = _load_eager(args)
    try:
        # TransformerLens 4 dropped HookedTransformer; its bridge wraps a local HF model object
        # (the name only labels it) with raw HF weights, i.e. the same numerics as HF eager
        model = TransformerBridge.boot_transformers(
            lm.source,
            hf_model=lm.model,
            tokenizer=lm.tokenizer,
            device=args.device,
            dtype=torch_dtype(args.dtype),
        )
    except Exception as exc:  # noqa: BLE001 - any failure to load means: skip, say why
        raise SkipTool(f"TransformerBridge cannot load {lm.source}: {exc}") from exc
    L = lm.n_layers
    names = {"blocks.0.hook_resid_pre", "ln_final.hook_out"}
    names |= {f"blocks.{i}.hook_resid_post" for i in range(L - 1)}
    names |= {f"blocks.{i}.attn.hook_pattern" for i in range(L)}

    def work(ids: np.ndarray) -> dict[str, np.ndarray]:
        parts = []
        for chunk in _batches(ids, batch_tokens):
            x = torch.from_numpy(chunk).to(lm.input_device)
            with torch.inference_mode():
                _, cache = model.run_with_cache(
                    x, return_type=None, names_filter=lambda n: n in names
                )
                hidden = [cache["blocks.0.hook_resid_pre"]]
                hidden += [cache[f"blocks.{i}.hook_resid_post"] for i in range(L - 1)]
                hidden.append(cache["ln_final.hook_out"])  # the final norm's output
                attn = [cache[f"blocks.{i}.attn.hook_pattern"] for i in range(L)]
                parts.append(peer_maths(hidden, attn))
            del cache
        return _concat(parts)

    return work, {"attention": "eager", "version": version("transformer-lens")}


def hf_fast_work(args: argparse.Namespace) -> tuple[Work, dict[str, Any]]:
    """The expert peer: hf's forward, then expert_maths per batch; one host copy at the end."""
    import torch

    lm, batch_tokens = _load_eager(args)

    def work(ids: np.ndarray) -> dict[str, np.ndarray]:
        parts = _eager_parts(lm, batch_tokens, ids, expert_maths)
        return {m: torch.cat([p[m] for p in parts]).cpu().numpy() for m in METRICS}

    return work, {"attention": "eager"}


TOOL_WORK = {"hf-fast": hf_fast_work, "hf": hf_work, "nnsight": nnsight_work, "tlens": tlens_work}
