"""Per-layer homogenization metrics, batched over texts and layers.

Everything here is pure tensor computation: it runs on whatever device the inputs live on,
accumulates in float64, and never loops over texts or layers in Python.

For one text at one layer, X is the (n x d) matrix of its token vectors (padding removed).
The singular values sigma of X come from the eigenvalues of the smaller Gram matrix
(X X^T when n <= d, else X^T X) via a symmetric eigensolver: sigma_i^2 = lambda_i. Padding
rows are zeroed, so they add only zero eigenvalues and drop out of every formula. Which solver
runs where (``HOMOG_CPU_EIGENSOLVER``, ``HOMOG_GPU_EIGENSOLVER``) is
``homog.metrics.eigensolver``'s.

Metric definitions (docs/design.md; names are a public contract):

- ``erank``            exp(-sum p_i ln p_i), p_i = sigma_i / sum_j sigma_j  (Roy & Vetterli 2007)
- ``mev``              sigma_1^2 / sum sigma_i^2
- ``schatten_1``       sum sigma_i / sqrt(sum sigma_i^2)
- ``schatten_4``       (sum sigma_i^4)^(1/4) / sqrt(sum sigma_i^2)
- ``resultant_length`` || (1/n) sum_i x_i / ||x_i|| ||_2
- ``mean_cosine``      (n R^2 - 1) / (n - 1): the mean off-diagonal pairwise cosine
- ``norm_mean``        mean_i ||x_i||

Conventions and edge cases (each documented, none silent):

- ``center=True`` subtracts the column mean over the text's tokens before the spectrum; it
  affects the four spectral metrics only. ``resultant_length``, ``mean_cosine`` and
  ``norm_mean`` always use the raw vectors (centred vectors have resultant ~0 by construction).
- Eigenvalues below ``max(n, d) * eps64 * lambda_max`` are set to zero: below that level the
  Gram route cannot tell them from rounding (sigma is known to ~sqrt(eps) relative accuracy),
  and counting rounding noise would inflate ``erank`` of a rank-1 matrix above 1.
- A text with no tokens raises ``MetricInputError``. A single token is well defined for all
  metrics but ``mean_cosine`` (no pairs), which is NaN. An all-zero matrix (every valid token
  the zero vector) gives NaN for the scale-free metrics; a zero token among others gives NaN
  ``resultant_length``/``mean_cosine`` (its direction is undefined).
- NaN or inf at a valid position raises ``NonFiniteError`` listing the offending indices.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from homog.metrics.eigensolver import eigvalsh, eigvalsh_with_minor
from homog.metrics.errors import MetricInputError, NonFiniteError
from homog.metrics.registry import HIDDEN_METRICS

METRIC_NAMES: tuple[str, ...] = HIDDEN_METRICS  # homog.metrics.registry, in order
DATASET_METRICS: tuple[str, ...] = ("rankme", "alpha_req", "alpha_req_r2")


def token_mask(
    attention_mask: Tensor,
    special_tokens_mask: Tensor | None = None,
    exclude_special: bool = True,
) -> Tensor:
    """The boolean mask of tokens that enter the hidden-state metrics.

    attention_mask: (B, n) 1 for real tokens, 0 for padding. special_tokens_mask: (B, n) 1 for
    tokenizer-added special tokens (BOS, EOS, ...), as returned by a HF tokenizer with
    ``return_special_tokens_mask=True``. With ``exclude_special`` those are dropped too.
    """
    mask = attention_mask.bool()
    if exclude_special and special_tokens_mask is not None:
        if special_tokens_mask.shape != attention_mask.shape:
            raise MetricInputError(
                f"special_tokens_mask shape {tuple(special_tokens_mask.shape)} does not match "
                f"attention_mask shape {tuple(attention_mask.shape)}"
            )
        mask = mask & ~special_tokens_mask.bool()
    return mask


def _check_inputs(hidden: Tensor, mask: Tensor, *, finite: bool = True) -> Tensor:
    """Validate shapes and values; return the mask broadcast to hidden.shape[:-1].

    ``finite=False`` skips the NaN/inf scan (the caller checks the squared norms instead).
    """
    if hidden.dim() < 2:
        raise MetricInputError(
            f"hidden states must have shape (..., n_tokens, d); got {tuple(hidden.shape)}"
        )
    if mask.dtype != torch.bool:
        mask = mask.bool()
    try:
        mask = mask.to(hidden.device).broadcast_to(hidden.shape[:-1])
    except RuntimeError as exc:
        raise MetricInputError(
            f"mask shape {tuple(mask.shape)} does not match hidden states "
            f"{tuple(hidden.shape)} (expected a shape broadcastable to {tuple(hidden.shape[:-1])})"
        ) from exc
    counts = mask.sum(-1)
    if bool((counts == 0).any()):
        empty = [tuple(i) for i in torch.nonzero(counts == 0).tolist()]
        raise MetricInputError(f"no tokens left after masking at indices {empty[:10]}")
    if finite:
        _raise_non_finite(~torch.isfinite(hidden).all(-1) & mask)
    return mask


def _raise_non_finite(bad: Tensor) -> None:
    """Raise NonFiniteError listing the leading indices of the True entries of ``bad`` (..., n)."""
    if bool(bad.any()):
        idx = sorted({tuple(i[:-1]) for i in torch.nonzero(bad).tolist()})
        raise NonFiniteError(
            f"hidden states hold NaN or inf at {len(idx)} (text, layer) positions, first "
            f"{idx[:10]}; in float16/bfloat16 this is usually overflow: use float32",
            idx,
        )


def smaller_gram(x: Tensor) -> Tensor:
    """The smaller Gram matrix of x (..., n, d): X X^T when n <= d, else X^T X."""
    return x @ x.mT if x.shape[-2] <= x.shape[-1] else x.mT @ x


def _clean(eig: Tensor, size: int) -> Tensor:
    """Ascending eigenvalues made descending, those at rounding level set to 0.

    ``size`` is max(n, d) of the matrix the Gram matrix came from.
    """
    eig = eig.flip(-1)
    tol = eig[..., :1].clamp_min(0) * (size * torch.finfo(torch.float64).eps)
    return torch.where(eig > tol, eig, torch.zeros_like(eig))


def gram_eigenvalues(gram: Tensor, size: int) -> Tensor:
    """Descending eigenvalues (= sigma^2) of Gram matrices (..., k, k) of matrices with
    max(n, d) = ``size``, rounding-level ones set to 0 (as every metric here reads them)."""
    return _clean(eigvalsh(gram), size)


def eigenvalues_with_minor(gram: Tensor, minor: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """(eigenvalues of ``gram`` (..., n, n), eigenvalues of its minor without row and column
    ``minor`` (...,): n values with a 0 for the removed row, all 0 where ``minor < 0``), both
    as ``gram_eigenvalues`` gives them, from one reduction per matrix
    (``homog.metrics.eigensolver.eigvalsh_with_minor``). Needs ``minor_spectra_supported(gram)``."""
    both = eigvalsh_with_minor(gram, minor)
    return _clean(both[..., 0, :], size), _clean(both[..., 1, :], size)


def _spectrum(x: Tensor) -> Tensor:
    """Descending eigenvalues sigma^2 of x (..., n, d) through its smaller Gram matrix."""
    return gram_eigenvalues(smaller_gram(x), max(x.shape[-2:]))


def spectral_metrics(eig: Tensor) -> dict[str, Tensor]:
    """erank, mev, schatten_1, schatten_4 from descending eigenvalues sigma^2 (..., k)."""
    sigma = eig.sqrt()
    s1 = sigma.sum(-1)
    s2 = eig.sum(-1)  # sum sigma^2
    p = sigma / s1.unsqueeze(-1)
    entropy = -torch.special.xlogy(p, p).sum(-1)
    return {
        "erank": entropy.exp(),
        "mev": eig[..., 0] / s2,
        "schatten_1": s1 / s2.sqrt(),
        "schatten_4": (eig.square().sum(-1)).pow(0.25) / s2.sqrt(),
    }


def prepare_tokens(hidden: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(mask, x, gram, sq_norms): the checked mask, the float64 token vectors with masked rows
    zeroed, their smaller Gram matrix and the squared token norms. Raises NonFiniteError when
    a counted token holds NaN/inf."""
    mask = _check_inputs(hidden, mask, finite=False)
    n, d = hidden.shape[-2:]
    x = hidden.to(torch.float64)
    x = x.clone() if x is hidden else x
    # fill, not multiply: padding may hold NaN/inf that must not leak into the sums
    x.masked_fill_(~mask.unsqueeze(-1), 0.0)
    # One pass over X: the Gram matrix. When n <= d, norms, the resultant and the centred
    # spectrum all follow from the n x n Gram matrix G, so X is never touched again.
    gram = smaller_gram(x)
    sq_norms = gram.diagonal(dim1=-2, dim2=-1) if n <= d else x.square().sum(-1)
    # A NaN or inf anywhere in a token vector makes its squared norm NaN or inf (float64
    # cannot overflow on squares of float32/bf16 values), so this scan replaces a full one.
    _raise_non_finite(~torch.isfinite(sq_norms) & mask)
    return mask, x, gram, sq_norms


def direction_metrics(x: Tensor, gram: Tensor, mask: Tensor, sq_norms: Tensor) -> dict[str, Tensor]:
    """resultant_length, mean_cosine, norm_mean of the tokens in ``mask``.

    x: (..., n, d) float64 with rows outside ``mask`` zeroed; gram: its smaller Gram matrix;
    sq_norms: (..., n) squared norms (0 outside the mask). A set with no token gives NaN.
    """
    n, d = x.shape[-2:]
    n_tok = mask.sum(-1).to(torch.float64)
    norms = sq_norms.clamp_min(0).sqrt()
    inv = torch.where(norms > 0, 1 / norms, torch.zeros_like(norms))
    if n <= d:
        # n^2 R^2 = || sum_i x_i/|x_i| ||^2 = sum_ij G_ij / (|x_i| |x_j|)
        rn2 = torch.einsum("...i,...ij,...j->...", inv, gram, inv)
    else:
        rn2 = (x * inv.unsqueeze(-1)).sum(-2).square().sum(-1)
    resultant = rn2.clamp_min(0).sqrt() / n_tok
    zero_token = ((norms == 0) & mask).any(-1)
    resultant = torch.where(zero_token, torch.full_like(resultant, math.nan), resultant)
    mean_cos = (n_tok * resultant.square() - 1) / (n_tok - 1)
    mean_cos = torch.where(n_tok > 1, mean_cos, torch.full_like(mean_cos, math.nan))
    return {
        "resultant_length": resultant,
        "mean_cosine": mean_cos,
        "norm_mean": (norms * mask).sum(-1) / n_tok,
    }


def spectral_gram(x: Tensor, gram: Tensor, mask: Tensor, center: bool) -> Tensor:
    """The Gram matrix whose eigenvalues are the spectrum: ``gram`` itself, or (``center``)
    that of the vectors centred over the tokens in ``mask``."""
    if not center:
        return gram
    n, d = x.shape[-2:]
    k = mask.sum(-1).to(torch.float64)[..., None]
    if n <= d:
        # (x_i - mu).(x_j - mu) = G_ij - r_i - r_j + mu.mu, with r_i = x_i.mu
        r = gram.sum(-1) / k
        mumu = r.sum(-1, keepdim=True) / k
        gram = gram - r.unsqueeze(-1) - r.unsqueeze(-2) + mumu.unsqueeze(-1)
        pair = mask.unsqueeze(-1) & mask.unsqueeze(-2)
        return torch.where(pair, gram, torch.zeros_like(gram))
    mu = x.sum(-2) / k  # (..., d)
    return gram - k.unsqueeze(-1) * mu.unsqueeze(-1) * mu.unsqueeze(-2)


def layer_metrics(hidden: Tensor, mask: Tensor, *, center: bool = False) -> dict[str, Tensor]:
    """All METRIC_NAMES for every leading index of ``hidden`` at once.

    hidden: (..., n, d) token vectors in any float dtype (e.g. (texts, layers, n, d));
    mask: bool, broadcastable to (..., n); True marks tokens that count.
    Returns {metric: float64 tensor of shape hidden.shape[:-2]} on hidden's device.
    Raises MetricInputError / NonFiniteError as described in the module docstring.
    (``homog.metrics.sets.hidden_metrics`` adds the token sets and the peers' metrics.)
    """
    mask, x, gram, sq_norms = prepare_tokens(hidden, mask)
    n, d = hidden.shape[-2:]
    out = spectral_metrics(gram_eigenvalues(spectral_gram(x, gram, mask, center), max(n, d)))
    out.update(direction_metrics(x, gram, mask, sq_norms))
    return {name: out[name] for name in METRIC_NAMES}


def pool(
    hidden: Tensor,
    mask: Tensor,
    how: str = "mean",
    *,
    dtype: torch.dtype = torch.float64,
    check_finite: bool = True,
) -> Tensor:
    """One vector per text: the mean of its masked tokens or its last masked token.

    hidden: (..., n, d); mask: broadcastable to (..., n). Returns (..., d) in ``dtype``.
    ``check_finite=False`` skips the NaN/inf scan for callers that have already checked the
    same tokens (the extractor runs ``layer_metrics`` on them first).
    """
    mask = _check_inputs(hidden, mask, finite=check_finite)
    if how == "mean":
        # masked in the hidden states' own dtype (exact: a 0/1 mask), summed with ``dtype``
        # accumulation: no full-size copy in ``dtype`` (float64 on a GPU would be 2-4x the
        # hidden states)
        m = mask.unsqueeze(-1)
        total = torch.where(m, hidden, hidden.new_zeros(())).sum(-2, dtype=dtype)
        return total / mask.sum(-1, keepdim=True)
    if how == "last":
        n = mask.shape[-1]
        pos = torch.arange(n, device=mask.device).expand_as(mask)
        last = torch.where(mask, pos, torch.full_like(pos, -1)).amax(-1)
        idx = last[..., None, None].expand(*last.shape, 1, hidden.shape[-1])
        return hidden.gather(-2, idx).squeeze(-2).to(dtype)
    raise MetricInputError(f"unknown pooling {how!r}: use 'mean' or 'last'")


def alpha_fit(eig: Tensor, window: tuple[float, float] = (0.0, 0.9)) -> tuple[Tensor, Tensor]:
    """Power-law decay exponent of descending eigenvalues (..., k): lambda_i ~ i^-alpha.

    Weighted least squares of ln(lambda_i) on ln(i) over the rank window: ranks from
    ``1 + floor(window[0] * r)`` to ``ceil(window[1] * r)`` where r is the count of non-zero
    eigenvalues (the tail beyond the numerical rank is excluded). Weights 1/i give every
    octave of rank the same total weight (ranks crowd at the tail on a log axis).
    Returns (alpha, r2), NaN where fewer than 3 ranks are in the window.
    """
    k = eig.shape[-1]
    i = torch.arange(1, k + 1, dtype=torch.float64, device=eig.device)
    r = (eig > 0).sum(-1, keepdim=True).to(torch.float64)
    lo = 1 + torch.floor(window[0] * r)
    hi = torch.ceil(window[1] * r)
    inside = (i >= lo) & (i <= hi) & (eig > 0)
    w = torch.where(inside, 1.0 / i, torch.zeros_like(eig))
    xs = torch.log(i).expand_as(eig)
    ys = torch.where(inside, torch.log(eig.clamp_min(torch.finfo(torch.float64).tiny)), 0.0)
    sw = w.sum(-1, keepdim=True)
    xm = (w * xs).sum(-1, keepdim=True) / sw
    ym = (w * ys).sum(-1, keepdim=True) / sw
    sxy = (w * (xs - xm) * (ys - ym)).sum(-1)
    sxx = (w * (xs - xm).square()).sum(-1)
    syy = (w * (ys - ym).square()).sum(-1)
    slope = sxy / sxx
    r2 = sxy.square() / (sxx * syy)
    enough = inside.sum(-1) >= 3
    nan = torch.full_like(slope, math.nan)
    return torch.where(enough, -slope, nan), torch.where(enough, r2, nan)


def dataset_spectra(
    vectors: Tensor,
    *,
    window: tuple[float, float] = (0.0, 0.9),
) -> dict[str, Tensor]:
    """Dataset-level spectra of one vector per text, per layer.

    vectors: (L, N, d): N texts' pooled vectors at each of L layers (any float dtype).
    Returns {"rankme", "alpha_req", "alpha_req_r2"}: float64 tensors of shape (L,).

    - ``rankme``: the effective rank (``erank`` above) of the uncentered N x d matrix
      (Garrido et al. 2023).
    - ``alpha_req``: the decay exponent of the eigenspectrum of the covariance (columns
      centred over texts; Agrawal et al. 2022), fitted by ``alpha_fit`` over ``window``;
      ``alpha_req_r2`` is the weighted R^2 of that fit.
    Raises MetricInputError when N < 2 or the vectors hold NaN/inf.
    """
    if vectors.dim() != 3:
        raise MetricInputError(
            f"vectors must have shape (layers, texts, d); got {tuple(vectors.shape)}"
        )
    if vectors.shape[1] < 2:
        raise MetricInputError("dataset spectra need at least 2 texts")
    ones = torch.ones(vectors.shape[:-1], dtype=torch.bool, device=vectors.device)
    _check_inputs(vectors, ones)
    x = vectors.to(torch.float64)
    rankme = spectral_metrics(_spectrum(x))["erank"]
    xc = x - x.mean(-2, keepdim=True)
    alpha, r2 = alpha_fit(_spectrum(xc) / (x.shape[-2] - 1), window)
    return {"rankme": rankme, "alpha_req": alpha, "alpha_req_r2": r2}
