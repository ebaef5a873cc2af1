"""Attention statistics per text and head, reduced on the device from one layer's weights.

For one text of n real tokens (special tokens included, padding excluded) and one head, A is
the n x n row-stochastic attention matrix (causal: A_ij = 0 for j > i). docs/design.md
defines

- column mass ``c_j = (1/n) sum_i A_ij`` (sums to 1 over j);
- ``attn_first = c_0`` and ``attn_last = c_(n-1)``;
- ``attn_entropy = (1/n) sum_i H(A_i.)`` in nats, H(p) = -sum_j p_j ln p_j;
- the position profile: c summed into ``N_BINS`` equal bins of relative position j/n
  (bin = floor(N_BINS * j / n)); it sums to 1 over bins.

Per text (``TEXT_METRICS``, with ``sink_epsilon`` / ``positions``):

- ``sink_rate``: the share of heads whose first token receives, on average over the queries
  that can see it (all of them: A is causal), more than epsilon of the attention, i.e.
  ``attn_first`` of the head > epsilon (Gu et al. 2025, "When Attention Sink Emerges",
  sail-sg/Attention-Sink; they average the indicator over layers too, homog keeps it per
  layer);
- ``attn_massive``: the attention the token at ``positions`` (the one holding the largest
  |activation| of the block's input) receives on average over the queries that can see it,
  (1 / (n - j)) sum_(i >= j) A_ij, mean over heads (= ``attn_first`` when j = 0);
- ``attn_ctrl_token`` (with ``ctrl_positions``): the same formula at the token the
  ``sink_bias`` control biases (``homog.extract.edits.control_column``), the control arm's
  manipulated quantity as ``attn_first`` is the sink arm's.

Everything is pure tensor computation on the weights' device; nothing loops over texts.
``attention_stats`` reduces dense weights; ``stats_from_sums`` finishes from the per-head sums
over query rows, which the blockwise path (``homog.metrics.attn_blockwise``) accumulates.
"""

from __future__ import annotations

import torch
from torch import Tensor

N_BINS = 20
HEAD_METRICS: tuple[str, ...] = ("attn_first", "attn_last", "attn_entropy")
TEXT_METRICS: tuple[str, ...] = ("sink_rate", "attn_massive")
CTRL_METRIC = "attn_ctrl_token"


def attention_stats(
    weights: Tensor,
    lengths: Tensor,
    n_bins: int = N_BINS,
    *,
    sink_epsilon: float | None = None,
    positions: Tensor | None = None,
    ctrl_positions: Tensor | None = None,
) -> dict[str, Tensor]:
    """Column-mass statistics of a batch of right-padded attention weights.

    weights: (B, H, n, n) softmax weights (any float dtype) of B texts padded on the right;
    lengths: (B,) count of real tokens per text (>= 1; positions >= length are padding).
    Returns float32 tensors on weights' device: ``attn_first``, ``attn_last``,
    ``attn_entropy`` of shape (B, H) and ``profile`` of shape (B, H, n_bins).
    With ``sink_epsilon``, also ``sink_rate`` (B,); with ``positions`` (B,) (each < length),
    also ``attn_massive`` (B,); with ``ctrl_positions`` (B,), also ``attn_ctrl_token`` (B,)
    (module docstring).
    Padding rows and columns never enter (they are masked with ``where``, so NaN in padding
    rows cannot leak). Raises ValueError on mismatched shapes or a zero length.
    """
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"attention weights must be (B, H, n, n); got {tuple(weights.shape)}")
    b, _, n, _ = weights.shape
    lengths = check_lengths(lengths, b, n, weights.device)
    real = torch.arange(n, device=weights.device)[None, :] < lengths[:, None]  # (B, n)
    a = weights.float()
    if not bool(real.all()):  # skip the copy when no text in the batch is padded
        a = torch.where(real[:, None, :, None], a, 0.0)
    column = a.sum(-2)  # (B, H, n); padding rows are zero
    entropy = -torch.special.xlogy(a, a).sum((-1, -2))  # (B, H); 0 on padding rows
    return stats_from_sums(
        column,
        entropy,
        lengths,
        n_bins,
        sink_epsilon=sink_epsilon,
        positions=positions,
        ctrl_positions=ctrl_positions,
    )


def check_lengths(lengths: Tensor, b: int, n: int, device: torch.device) -> Tensor:
    """``lengths`` on ``device`` after checking it is (b,) with values in 1..n (ValueError)."""
    if lengths.shape != (b,):
        raise ValueError(f"lengths must have shape ({b},); got {tuple(lengths.shape)}")
    lengths = lengths.to(device)
    if bool((lengths < 1).any()) or bool((lengths > n).any()):
        raise ValueError(f"lengths must lie in 1..{n}; got {lengths.tolist()}")
    return lengths


def stats_from_sums(
    column_sum: Tensor,
    entropy_sum: Tensor,
    lengths: Tensor,
    n_bins: int = N_BINS,
    *,
    sink_epsilon: float | None = None,
    positions: Tensor | None = None,
    ctrl_positions: Tensor | None = None,
) -> dict[str, Tensor]:
    """``attention_stats``'s results from the two sums over a text's real query rows i.

    column_sum: (B, H, n) float32, sum_i A_ij; entropy_sum: (B, H), sum_i H(A_i.);
    lengths: (B,) real tokens (checked by the caller). Both the dense path
    (``attention_stats``) and the blockwise one (``homog.metrics.attn_blockwise``, which
    adds up these sums block of query rows by block) end here, so they share every formula.
    """
    b, h, n = column_sum.shape
    pos = torch.arange(n, device=column_sum.device)
    real = pos[None, :] < lengths[:, None]  # (B, n)
    inv_len = 1.0 / lengths.float()[:, None, None]
    column = torch.where(real[:, None, :], column_sum * inv_len, 0.0)  # padding columns ~0
    entropy = entropy_sum * inv_len[..., 0]
    first = column[..., 0]
    last = column.gather(-1, (lengths - 1).view(b, 1, 1).expand(b, h, 1))[..., 0]
    # bin of column j in text t: floor(n_bins * j / length_t), padding columns carry 0 mass
    bins = torch.div(pos[None, :] * n_bins, lengths[:, None], rounding_mode="floor")
    bins = bins.clamp(max=n_bins - 1).expand(b, n)
    profile = torch.zeros(b, h, n_bins, device=column.device)
    profile.scatter_add_(-1, bins[:, None, :].expand_as(column), column)
    out = {"attn_first": first, "attn_last": last, "attn_entropy": entropy, "profile": profile}
    if sink_epsilon is not None:
        out["sink_rate"] = (first > sink_epsilon).double().mean(-1)
    if positions is not None:
        out["attn_massive"] = received(column, lengths, positions)
    if ctrl_positions is not None:
        out[CTRL_METRIC] = received(column, lengths, ctrl_positions)
    return out


def received(column: Tensor, lengths: Tensor, positions: Tensor) -> Tensor:
    """(B,) the attention token ``positions`` (B,) receives from the queries that can see it,
    mean over heads, from the (B, H, n) column mass (1/n) sum_i A_ij."""
    b, h, _ = column.shape
    j = positions.to(column.device).long().view(b, 1, 1)
    got = column.gather(-1, j.expand(b, h, 1))[..., 0]  # (B, H)
    # column mass is (1/n) sum_i A_ij; the queries that see token j are n - j of them
    scale = lengths.float() / (lengths - j.view(b)).float()
    return got.mean(-1) * scale
