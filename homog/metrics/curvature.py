"""The peers' ``curvature`` metric of a token set (``homog.metrics.sets``): the mean angle
between consecutive difference vectors of the set's token trajectory, from the tokens' n x n
Gram matrix (``curvature``) or, for n > d, from the token vectors (``curvature_from_vectors``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _compact(mask: Tensor) -> Tensor:
    """Indices (..., n) that put the positions in ``mask`` first, in order."""
    return torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)


def _mean_angle(dot: Tensor, n0: Tensor, n1: Tensor, mask: Tensor) -> Tensor:
    """Mean over k of the angle between v_k and v_(k+1) from their dot products and squared
    norms (..., n - 2), over the consecutive triples of the set's tokens; pairs with a zero
    vector are left out; NaN when none is left."""
    k = torch.arange(dot.shape[-1], device=mask.device)
    ok = (k + 2 < mask.sum(-1, keepdim=True)) & (n0 > 0) & (n1 > 0)
    cos = (dot / (n0 * n1).sqrt()).clamp(-1, 1)
    angle = torch.where(ok, torch.arccos(torch.where(ok, cos, 0.0)), 0.0)
    count = ok.sum(-1)
    out = angle.sum(-1) / count
    return torch.where(count > 0, out, torch.full_like(out, math.nan))


def curvature_from_vectors(x: Tensor, mask: Tensor) -> Tensor:
    """``curvature`` from the token vectors x (..., n, d) themselves: the difference vectors
    of the compacted trajectory, O(n d) memory (for n > d, where no n x n matrix is made)."""
    n = mask.shape[-1]
    if n < 3:
        return torch.full(mask.shape[:-1], math.nan, dtype=torch.float64, device=mask.device)
    idx = _compact(mask)
    xs = x.gather(-2, idx.unsqueeze(-1).expand(*idx.shape, x.shape[-1]))
    v = xs[..., 1:, :] - xs[..., :-1, :]  # (..., n - 1, d)
    v0, v1 = v[..., :-1, :], v[..., 1:, :]
    return _mean_angle((v0 * v1).sum(-1), v0.square().sum(-1), v1.square().sum(-1), mask)


def curvature(token_gram: Tensor, mask: Tensor) -> Tensor:
    """Mean angle between consecutive difference vectors of the tokens in ``mask``, from
    their n x n Gram matrix G (v_k . v_(k+1) = G12 - G11 - G02 + G01 for tokens 0, 1, 2 in a
    row): O(n) work on a matrix already computed."""
    n = mask.shape[-1]
    if n < 3:
        return torch.full(mask.shape[:-1], math.nan, dtype=torch.float64, device=mask.device)
    idx = _compact(mask)
    p0, p1, p2 = idx[..., :-2], idx[..., 1:-1], idx[..., 2:]
    flat = token_gram.flatten(-2)

    def g(p: Tensor, q: Tensor) -> Tensor:
        return flat.gather(-1, p * n + q)

    g11 = g(p1, p1)
    v0 = (g(p0, p0) + g11 - 2 * g(p0, p1)).clamp_min(0)  # |v_k|^2
    v1 = (g(p2, p2) + g11 - 2 * g(p1, p2)).clamp_min(0)  # |v_(k+1)|^2
    return _mean_angle(g(p1, p2) - g11 - g(p0, p2) + g(p0, p1), v0, v1, mask)
