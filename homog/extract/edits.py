"""The graded interventions' edits of the forward pass (homog.interventions: their names).

``edit_batch`` is a context manager around one batch's forward pass: it installs what the
batch's intervention changes and removes it afterwards, so the model is untouched between
batches and runs. The intervention kinds that act on position ids need nothing here.

- ``sink_bias`` / ``sink_bias_control`` (attention logits): a ``ColumnBias`` on every
  attention module from the onset layer on (``extract.sink_bias_onset``; ``middle`` = L // 2,
  attention layer l being the attention inside block l). The biased key is the sink, the
  sequence's first token (position 0: BOS where the tokenizer adds one, else the first text
  token), or for the control one interior position per text (``control_column``). The
  blockwise attention function reads the bias itself (its output and its statistics); under
  eager or plain SDPA attention a forward pre-hook puts it into the mask the module gets.
- ``homogenize`` / ``homogenize_control`` (a block's output): a forward hook on the block
  whose output is hidden layer ``extract.homogenize_layer`` (``middle`` = L // 2) replaces
  that output (``homogenized``) before anything reads it: the layer's own metrics, the
  blocks above. It runs first among the block's hooks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from homog.errors import HomogError
from homog.extract.plan import EncodedText, seeded_rng
from homog.interventions import (
    ATTENTION_LOGITS,
    BLOCK_OUTPUT,
    Intervention,
    parse,
    resolve_layer,
)
from homog.metrics.attn_bias import BIAS_ATTR, ColumnBias


def control_column(text: EncodedText, seed: int) -> int:
    """The sink_bias control's key for one text: a position in 1..n-2 (interior: neither
    the sink nor the last token), drawn with a generator seeded by (seed, variant,
    sample_id), so every dose of the control biases the same token of the text."""
    n = len(text.input_ids)
    if n < 3:
        raise HomogError(f"text {text.name} has {n} tokens: the sink_bias control needs >= 3")
    return int(
        seeded_rng(seed, "sink_bias_control", text.variant, text.sample_id).integers(1, n - 1)
    )


def control_columns(texts: Sequence[EncodedText], intervention: str, seed: int) -> list[int] | None:
    """Per text, the sink_bias control's key (``control_column``) in every run of the
    sink_bias family, the sink arm and dose 0 included (``attn_ctrl_token`` is measured
    there, so the control arm's x has every dose); None for any other intervention."""
    if parse(intervention).family != "sink_bias":
        return None
    return [control_column(t, seed) for t in texts]


def control_directions(texts: Sequence[EncodedText], n_pad: int, d: int, seed: int) -> np.ndarray:
    """(B, n_pad, d) float32 standard normal vectors, one per token, seeded per text by
    (seed, variant, sample_id): the homogenize control's raw directions (zero past a text)."""
    out = np.zeros((len(texts), n_pad, d), dtype=np.float32)
    for row, t in enumerate(texts):
        rng = seeded_rng(seed, "homogenize_control", t.variant, t.sample_id)
        out[row, : len(t.input_ids)] = rng.standard_normal((len(t.input_ids), d))
    return out


def homogenized(
    hidden: torch.Tensor, movable: torch.Tensor, alpha: float, directions: torch.Tensor | None
) -> torch.Tensor:
    """``hidden`` (B, n, d) with every ``movable`` (B, n) token moved.

    m_i is the mean of the movable tokens j <= i (causal: a later token changes no m_i);
    without ``directions`` h_i -> h_i + alpha (m_i - h_i); with ``directions`` (B, n, d) the
    control: h_i -> h_i + alpha |m_i - h_i| u_i, u_i the unit part of the direction orthogonal
    to (m_i - h_i) (no move where m_i = h_i). Computed in float64, returned in hidden's dtype;
    tokens that are not movable are returned as they are.
    """
    x = hidden.double()
    w = movable.to(x.dtype)[..., None]
    count = torch.cumsum(w, 1).clamp(min=1.0)
    mean = torch.cumsum(x * w, 1) / count
    toward = mean - x
    if directions is None:
        step = alpha * toward
    else:
        r = directions.to(x)
        sq = (toward * toward).sum(-1, keepdim=True)
        along = torch.where(sq > 0, (r * toward).sum(-1, keepdim=True) / sq.clamp(min=1e-300), 0.0)
        u = r - along * toward
        u = u / u.norm(dim=-1, keepdim=True).clamp(min=1e-300)
        step = alpha * sq.sqrt() * u
    moved = (x + step).to(hidden.dtype)
    return torch.where(movable[..., None], moved, hidden)


def _eager_bias_hook(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """Forward pre-hook (eager / SDPA attention): the module's bias put into its mask."""
    bias = getattr(module, BIAS_ATTR, None)
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    if bias is None or hidden is None:
        return None
    n = hidden.shape[1]
    window = getattr(module, "sliding_window", None)
    mask = kwargs.get("attention_mask")
    kwargs["attention_mask"] = bias.mask(mask, n, n, window, hidden.dtype, hidden.device)
    return args, kwargs


@contextlib.contextmanager
def edit_batch(
    loaded: Any, config: Any, intervention: str, texts: Sequence[EncodedText], mask: torch.Tensor
) -> Iterator[None]:
    """The intervention's edits installed for one forward pass over ``texts`` (right-padded,
    ``mask`` (B, n_pad) their metric tokens on the input device); nothing for the kinds that
    change position ids."""
    iv = parse(intervention)
    handles: list[Any] = []
    try:
        if iv.target == ATTENTION_LOGITS:
            handles = _attach_bias(loaded, config, iv, texts)
        elif iv.target == BLOCK_OUTPUT:
            handles = _attach_homogenize(loaded, config, iv, texts, mask)
        yield
    finally:
        for h in handles:
            h.remove()


def edit_alone(
    loaded: Any, config: Any, intervention: str, texts: Sequence[EncodedText], mask: torch.Tensor
) -> Callable[[int, int], Any] | None:
    """``edit(row, n)``: the intervention's edit for text ``row`` of a batch alone, its first
    n tokens unpadded (``mask`` (B, n_pad): the batch's metric tokens); None for the kinds
    that change position ids, which need no edit."""
    if parse(intervention).target not in (ATTENTION_LOGITS, BLOCK_OUTPUT):
        return None
    return lambda row, n: edit_batch(
        loaded, config, intervention, [texts[row]], mask[row : row + 1, :n]
    )


class _AttrHandle:
    """Removes an attribute set on a module (like a hook handle)."""

    def __init__(self, module: Any, name: str, value: Any):
        self.module, self.name = module, name
        setattr(module, name, value)

    def remove(self) -> None:
        if hasattr(self.module, self.name):
            delattr(self.module, self.name)


def check_edit_layers(config: Any, n_layers: int) -> None:
    """HomogError when a graded intervention of ``config.interventions`` names a layer this
    model of ``n_layers`` blocks does not have (``sink_bias_onset``, ``homogenize_layer``):
    checked when the model loads, before the first pass (which may be the long ``none``
    run), not when the graded run starts."""
    targets = {parse(iv).target for iv in config.interventions}
    if ATTENTION_LOGITS in targets:
        resolve_layer(config.sink_bias_onset, n_layers, "sink_bias_onset", n_layers)
    if BLOCK_OUTPUT in targets:
        resolve_layer(config.homogenize_layer, n_layers, "homogenize_layer", n_layers - 1)


def _attach_bias(loaded: Any, config: Any, iv: Intervention, texts: Sequence[EncodedText]) -> list:
    from homog.metrics.attn_blockwise import ATTENTION_FUNCTION

    onset = resolve_layer(
        config.sink_bias_onset, loaded.n_layers, "sink_bias_onset", loaded.n_layers
    )
    if iv.is_control:
        cols = control_columns(texts, iv.name, config.seed) or []
    else:
        cols = [0] * len(texts)  # the sink: the sequence's first token
    column = torch.tensor(cols, dtype=torch.long, device=loaded.input_device)
    assert iv.dose is not None
    bias = ColumnBias(column, iv.dose)
    handles: list[Any] = []
    for module in loaded.attn_modules[onset - 1 :]:
        handles.append(_AttrHandle(module, BIAS_ATTR, bias))
        impl = getattr(getattr(module, "config", None), "_attn_implementation", None)
        if impl != ATTENTION_FUNCTION:  # the blockwise function applies the bias itself
            handles.append(module.register_forward_pre_hook(_eager_bias_hook, with_kwargs=True))
    return handles


def _attach_homogenize(
    loaded: Any, config: Any, iv: Intervention, texts: Sequence[EncodedText], mask: torch.Tensor
) -> list:
    layer = resolve_layer(
        config.homogenize_layer, loaded.n_layers, "homogenize_layer", loaded.n_layers - 1
    )
    # the sink (position 0) is neither moved nor part of any mean; special tokens neither
    movable = mask.clone()
    movable[:, 0] = False
    alpha = float(iv.dose or 0.0)
    directions = None
    if iv.is_control:
        n_pad = mask.shape[1]
        raw = control_directions(texts, n_pad, loaded.d_model, config.seed)
        directions = torch.from_numpy(raw)

    def hook(_module: Any, _inputs: Any, output: Any) -> Any:
        hidden = output[0] if isinstance(output, tuple) else output
        dirs = directions.to(hidden.device) if directions is not None else None
        new = homogenized(hidden, movable.to(hidden.device), alpha, dirs)
        return (new, *output[1:]) if isinstance(output, tuple) else new

    return [loaded.layers[layer - 1].register_forward_hook(hook, prepend=True)]
