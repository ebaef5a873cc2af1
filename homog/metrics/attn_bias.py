"""An additive bias on one key column of the attention logits (the sink_bias intervention).

``ColumnBias`` adds ``beta`` to the logit of every query i towards one key c_b per text b,
for the queries after it (i > c_b): the column's own query keeps its logit, so no row loses
its last key (a row with no key left would be NaN). ``beta = -inf`` masks the column. The
causal mask, the padding and any sliding window stay as they are: the bias moves logits that
the mask allows and never opens one it forbids.

Two consumers, one definition:

- ``mask``: the (B, 1, q, k) float mask the attention module's softmax adds (SDPA or eager),
  built from the mask transformers passed (boolean, float, or None for plain causal);
- ``hits``: the biased (row, column) pairs of a block of rows, for
  ``homog.metrics.attn_blockwise.attention_sums``, so the attention statistics are those of
  the biased softmax.

``BIAS_ATTR`` is the attribute of an attention module that holds its ``ColumnBias`` for the
current batch (``homog.extract.edits`` sets and removes it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

BIAS_ATTR = "_homog_attention_bias"


@dataclass(frozen=True)
class ColumnBias:
    """``beta`` on key ``column[b]`` for every query i > column[b] of text b."""

    column: Tensor  # (B,) long: the biased key per text
    beta: float

    @property
    def masks(self) -> bool:
        """True when the bias removes the column (beta = -inf)."""
        return math.isinf(self.beta) and self.beta < 0

    def hits(self, rows: Tensor, cols: Tensor) -> Tensor:
        """(B, r, c) bool: the biased (row, column) pairs among ``rows`` (r,) x ``cols`` (c,)."""
        col = self.column.to(rows.device)[:, None, None]
        return (cols[None, None, :] == col) & (rows[None, :, None] > col)

    def mask(
        self,
        attention_mask: Tensor | None,
        q: int,
        k: int,
        sliding_window: int | None,
        dtype: torch.dtype,
        device: torch.device,
    ) -> Tensor:
        """The float (B, 1, q, k) mask: ``attention_mask``'s (boolean: True = attend; float:
        additive; None: causal, within ``sliding_window`` when set) plus the bias on its
        allowed entries; forbidden entries are ``finfo(dtype).min``."""
        low = torch.finfo(dtype).min
        rows = torch.arange(k - q, k, device=device)  # the queries' positions (no cache: 0..q-1)
        cols = torch.arange(k, device=device)
        hit = self.hits(rows, cols)[:, None]  # (B, 1, q, k)
        if attention_mask is None or attention_mask.dtype == torch.bool:
            if attention_mask is None:
                allowed = cols[None, :] <= rows[:, None]
                if sliding_window is not None:
                    allowed = allowed & (cols[None, :] > rows[:, None] - sliding_window)
                allowed = allowed[None, None]
            else:
                allowed = attention_mask[..., -q:, :k].to(device)
            base = torch.where(allowed, 0.0, low).to(dtype)
        else:
            base = attention_mask[..., -q:, :k].to(device=device, dtype=dtype)
        if self.masks:
            return torch.where(hit, low, base)
        return torch.where(hit, base + self.beta, base)
