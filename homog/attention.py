"""Attention statistics per text and head, reduced on the device from one layer's weights.

For one text of n real tokens (special tokens included, padding excluded) and one head, A is
the n x n row-stochastic attention matrix (causal: A_ij = 0 for j > i). docs/design.md
defines

- column mass ``c_j = (1/n) sum_i A_ij`` (sums to 1 over j);
- ``attn_first = c_0`` and ``attn_last = c_(n-1)``;
- ``attn_entropy = (1/n) sum_i H(A_i.)`` in nats, H(p) = -sum_j p_j ln p_j;
- the position profile: c summed into ``N_BINS`` equal bins of relative position j/n
  (bin = floor(N_BINS * j / n)); it sums to 1 over bins.

Everything is pure tensor computation on the weights' device; nothing loops over texts.
"""

from __future__ import annotations

import torch
from torch import Tensor

N_BINS = 20
HEAD_METRICS: tuple[str, ...] = ("attn_first", "attn_last", "attn_entropy")


def attention_stats(weights: Tensor, lengths: Tensor, n_bins: int = N_BINS) -> dict[str, Tensor]:
    """Column-mass statistics of a batch of right-padded attention weights.

    weights: (B, H, n, n) softmax weights (any float dtype) of B texts padded on the right;
    lengths: (B,) count of real tokens per text (>= 1; positions >= length are padding).
    Returns float32 tensors on weights' device: ``attn_first``, ``attn_last``,
    ``attn_entropy`` of shape (B, H) and ``profile`` of shape (B, H, n_bins).
    Padding rows and columns never enter (they are masked with ``where``, so NaN in padding
    rows cannot leak). Raises ValueError on mismatched shapes or a zero length.
    """
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"attention weights must be (B, H, n, n); got {tuple(weights.shape)}")
    b, _, n, _ = weights.shape
    if lengths.shape != (b,):
        raise ValueError(f"lengths must have shape ({b},); got {tuple(lengths.shape)}")
    lengths = lengths.to(weights.device)
    if bool((lengths < 1).any()) or bool((lengths > n).any()):
        raise ValueError(f"lengths must lie in 1..{n}; got {lengths.tolist()}")
    pos = torch.arange(n, device=weights.device)
    real = pos[None, :] < lengths[:, None]  # (B, n): rows and columns that count
    a = weights.float()
    if not bool(real.all()):  # skip the copy when no text in the batch is padded
        a = torch.where(real[:, None, :, None], a, 0.0)
    inv_len = 1.0 / lengths.float()[:, None, None]
    column = a.sum(-2) * inv_len  # (B, H, n); padding rows are zero, padding columns ~0
    column = torch.where(real[:, None, :], column, 0.0)
    row_entropy = -torch.special.xlogy(a, a).sum(-1)  # (B, H, n); 0 on padding rows
    entropy = row_entropy.sum(-1) * inv_len[..., 0]
    first = column[..., 0]
    last = column.gather(-1, (lengths - 1).view(b, 1, 1).expand(b, column.shape[1], 1))[..., 0]
    # bin of column j in text t: floor(n_bins * j / length_t), padding columns carry 0 mass
    bins = torch.div(pos[None, :] * n_bins, lengths[:, None], rounding_mode="floor")
    bins = bins.clamp(max=n_bins - 1).expand(b, n)
    profile = torch.zeros(*column.shape[:2], n_bins, device=weights.device)
    profile.scatter_add_(-1, bins[:, None, :].expand_as(column), column)
    return {"attn_first": first, "attn_last": last, "attn_entropy": entropy, "profile": profile}
