"""Token sets, the peers' per-layer metrics and massive activations, batched on the device.

``hidden_metrics`` extends ``homog.metrics.spectra.layer_metrics`` (whose values it keeps for the
``all`` set, to rounding: at most 2.5e-12 relative on real reviews) in the same pass over the
same float64 Gram matrix.

On the CPU with n <= d and no centring, a ``no_sink`` set that drops only the first token
(the usual case: 98 % of text-layers on smollm2-135m and 86 % on gemma3-270m, 60 real
reviews at up to 512 tokens) shares one tridiagonal reduction with ``all``
(``homog.metrics.eigenvalues_with_minor``), so it costs an O(n^2) solve instead of a
decomposition of its own.

Token sets (docs/design.md; each metric of a set is stored as ``<metric>__<set>``):

- ``all``: the metric tokens, as ``layer_metrics`` (names without a suffix).
- ``no_sink``: without the text's first metric token and without every token whose norm
  exceeds ``sink_norm_ratio`` times the median token norm of the text (``n_removed__no_sink``
  counts them). Its Gram matrix is a sub-matrix of the ``all`` one.
- ``standardized``: every feature z-scored over the text's tokens (population std; a constant
  feature becomes 0), which removes rogue dimensions (Timkey & van Schijndel 2021).
  ``mean_cosine__standardized`` is the anisotropy after standardisation.

A set with fewer than 2 tokens gives NaN for all its metrics (never an error).

The peers' metrics, per set (``PEER_METRICS``):

- ``prompt_entropy``: matrix-based Renyi entropy (nats) of order ``renyi_alpha`` of the
  trace-normalised Gram matrix, S = ln(sum_i p_i^alpha) / (1 - alpha), alpha = 1:
  -sum p_i ln p_i, with p_i = sigma_i^2 / sum_j sigma_j^2 (Skean et al. 2025, "Layer by
  Layer"; the same eigenvalues as the spectral metrics, so the same centring convention).
- ``curvature`` (``homog.metrics.curvature``): the mean angle (radians, in [0, pi]) between
  consecutive difference vectors v_k = x_(k+1) - x_k of the set's token trajectory (in text
  order; pairs with a zero difference vector are left out; NaN with fewer than 3 tokens).
- ``twonn_id``: the TwoNN intrinsic dimension (Facco et al. 2017) as dadapy computes it:
  mu_i = r2_i / r1_i from each token's two nearest neighbours (Euclidean distances from the
  Gram matrix), the 90 % smallest ln mu kept (n_eff = floor(0.9 N)), the slope through the
  origin of -ln(1 - i/N) on the sorted ln mu (i = 1..n_eff). Tokens whose nearest neighbour
  is a duplicate (squared distance <= 1e-10 of their squared norm, e.g. a repeated word at
  the embedding layer) are left out of N. NaN when n_eff < 2.

Massive activations (``act_*``, with ``peers``) come from ``homog.metrics.massive``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from homog.metrics.curvature import curvature, curvature_from_vectors
from homog.metrics.eigensolver import minor_spectra_supported
from homog.metrics.massive import MASSIVE_METRICS, massive_activations
from homog.metrics.pending import PendingSpectra, sharing_inputs
from homog.metrics.registry import PEER_METRICS, SUFFIX_SETS, metric_name
from homog.metrics.spectra import (
    METRIC_NAMES,
    direction_metrics,
    prepare_tokens,
    smaller_gram,
    spectral_gram,
)

N_REMOVED = metric_name("n_removed", "no_sink")
TWONN_FRACTION = 0.9
DUPLICATE_REL = 1e-10
LOG_MU_TIE = 1e-9  # log(r2 / r1) under this is a tie (twonn)


def set_metric_names(peers: bool) -> tuple[str, ...]:
    """The metrics computed for every token set."""
    return METRIC_NAMES + (PEER_METRICS if peers else ())


def hidden_metric_names(token_sets: tuple[str, ...] = (), peers: bool = False) -> tuple[str, ...]:
    """The names ``hidden_metrics`` returns, in their order (the order of the stored array)."""
    names = list(set_metric_names(peers))
    if peers:
        names += MASSIVE_METRICS
    for s in token_sets:
        names += [metric_name(m, s) for m in set_metric_names(peers)]
        if s == "no_sink":
            names.append(N_REMOVED)
    return tuple(names)


# ---------------------------------------------------------------------------------------------
# the peers' metrics on one set


def sq_distances(token_gram: Tensor) -> Tensor:
    """Squared Euclidean distances (..., n, n) between the tokens of an n x n Gram matrix
    (|x_i|^2 + |x_j|^2 - 2 x_i.x_j, rounding below 0 clipped)."""
    sq = token_gram.diagonal(dim1=-2, dim2=-1)
    return torch.add(sq.unsqueeze(-1) + sq.unsqueeze(-2), token_gram, alpha=-2).clamp_min_(0)


def _nearest(
    d2: Tensor, row_mask: Tensor, col_mask: Tensor, first_row: int = 0, k: int = 2
) -> tuple[Tensor, Tensor]:
    """(values, indices) (..., b, k): squared distances to the k nearest other tokens in
    ``col_mask`` for the b rows of ``d2`` (..., b, n) (rows first_row .. first_row + b - 1
    of the full matrix), ascending; inf where there are fewer."""
    b, n = d2.shape[-2:]
    pair = row_mask.unsqueeze(-1) & col_mask.unsqueeze(-2)
    rows = torch.arange(first_row, first_row + b, device=d2.device)
    pair = pair & (rows.unsqueeze(-1) != torch.arange(n, device=d2.device))
    near = torch.where(pair, d2, math.inf).topk(min(k, n), dim=-1, largest=False)
    return near.values, near.indices


def _two_nearest(d2: Tensor, row_mask: Tensor, col_mask: Tensor, first_row: int = 0) -> Tensor:
    """(..., b, 2) squared distances to the two nearest other tokens in ``col_mask`` for the
    b rows of ``d2`` (..., b, n) (rows first_row .. first_row + b - 1 of the full matrix)."""
    return _nearest(d2, row_mask, col_mask, first_row)[0]


def nearest_blockwise(
    x: Tensor, sq: Tensor, mask: Tensor, block: int, k: int = 2
) -> tuple[Tensor, Tensor]:
    """``_nearest`` for all n tokens of x (..., n, d) (squared norms ``sq``), ``block`` rows
    of distances at a time: memory (..., block, n) instead of (..., n, n), the same distances
    (|x_i|^2 + |x_j|^2 - 2 x_i.x_j, clipped at 0) as ``sq_distances``."""
    n = x.shape[-2]
    values, indices = [], []
    for a in range(0, n, block):
        xb = x[..., a : a + block, :]
        d2 = torch.add(sq[..., a : a + block, None] + sq.unsqueeze(-2), xb @ x.mT, alpha=-2)
        v, i = _nearest(d2.clamp_min_(0), mask[..., a : a + block], mask, a, k)
        values.append(v)
        indices.append(i)
    return torch.cat(values, dim=-2), torch.cat(indices, dim=-2)


def two_nearest_blockwise(x: Tensor, sq: Tensor, mask: Tensor, block: int) -> Tensor:
    """``_two_nearest`` for all n tokens of x (..., n, d), blockwise (``nearest_blockwise``)."""
    return nearest_blockwise(x, sq, mask, block)[0]


def two_nearest_within(values: Tensor, indices: Tensor, keep: Tensor) -> Tensor:
    """(..., n, 2): each token's two smallest squared distances to tokens in ``keep``
    (..., n), from its k nearest (``nearest_blockwise`` over a superset of ``keep``). Exact
    when at most k - 2 of those k neighbours are outside ``keep``."""
    keep = keep.expand(indices.shape[:-1])
    inside = keep.gather(-1, indices.flatten(-2)).view_as(indices)  # never an n x n view
    return torch.where(inside, values, math.inf).topk(2, dim=-1, largest=False).values


def twonn(
    token_gram: Tensor | None,
    mask: Tensor,
    d2: Tensor | None = None,
    *,
    near: Tensor | None = None,
    sq: Tensor | None = None,
) -> Tensor:
    """TwoNN intrinsic dimension of the tokens in ``mask`` from their n x n Gram matrix
    (``d2``: its ``sq_distances`` when already computed for another token set), or from
    ``near`` (..., n, 2), each token's two smallest squared distances
    (``two_nearest_blockwise``), and ``sq`` the squared norms, when there is no Gram matrix."""
    n = mask.shape[-1]
    if n < 3:
        return torch.full(mask.shape[:-1], math.nan, dtype=torch.float64, device=mask.device)
    if near is None:
        assert token_gram is not None
        sq = token_gram.diagonal(dim1=-2, dim2=-1)
        d2 = sq_distances(token_gram) if d2 is None else d2
        near = _two_nearest(d2, mask, mask)  # (..., n, 2): r1^2, r2^2
    assert sq is not None
    r1, r2 = near[..., 0], near[..., 1]
    valid = mask & (r1 > DUPLICATE_REL * sq) & torch.isfinite(r2)
    log_mu = 0.5 * (torch.log(torch.where(valid, r2, 1.0)) - torch.log(torch.where(valid, r1, 1.0)))
    # r2 = r1 (two nearest: copies of one token) can round 1e-16 apart; ties would fit 1e15
    log_mu = torch.where(log_mu < LOG_MU_TIE, 0.0, log_mu)
    log_mu = torch.where(valid, log_mu, math.inf).sort(-1).values
    big_n = valid.sum(-1, keepdim=True).to(torch.float64)
    n_eff = torch.floor(big_n * TWONN_FRACTION)
    i = torch.arange(1, n + 1, dtype=torch.float64, device=mask.device)
    keep = i <= n_eff
    y = -torch.log1p(-torch.where(keep, i / big_n, 0.0))
    xs = torch.where(keep, log_mu, 0.0)
    sxx = xs.square().sum(-1)
    dim = (xs * y).sum(-1) / sxx
    ok = (n_eff[..., 0] >= 2) & (sxx > 0)
    return torch.where(ok, dim, torch.full_like(dim, math.nan))


NEIGHBOUR_BLOCK = 256  # rows of the distance matrix at a time when n > d (twonn_id)


def _set_metrics(
    direction: dict[str, Tensor],
    token_gram: Tensor | None,
    d2: Tensor | None,
    mask: Tensor,
    vectors: Tensor | None = None,
    near: Tensor | None = None,
) -> dict[str, Tensor]:
    """The set's metrics that need no eigenvalue (``_spectral_set_metrics`` has the others);
    the peers' too when ``token_gram`` (and its ``sq_distances`` ``d2``) or, for n > d, the
    token ``vectors`` themselves are given (then no n x n matrix is made: curvature from the
    difference vectors, twonn_id from blocks of distance rows)."""
    out = dict(direction)
    if token_gram is not None:
        out["curvature"] = curvature(token_gram, mask)
        out["twonn_id"] = twonn(token_gram, mask, d2)
    elif vectors is not None:
        sq = vectors.square().sum(-1)
        out["curvature"] = curvature_from_vectors(vectors, mask)
        if near is None:
            near = two_nearest_blockwise(vectors, sq, mask, NEIGHBOUR_BLOCK)
        out["twonn_id"] = twonn(None, mask, near=near, sq=sq)
    return out


# ---------------------------------------------------------------------------------------------
# everything at once


def no_sink_mask(mask: Tensor, norms: Tensor, ratio: float) -> Tensor:
    """``mask`` without the first token in it and without tokens whose norm exceeds ``ratio``
    times the median norm of the tokens in it (numpy's median: the middle pair's mean)."""
    n = mask.shape[-1]
    pos = torch.arange(n, device=mask.device)
    first = torch.where(mask, pos, n).amin(-1, keepdim=True)
    med = torch.where(mask, norms, math.nan).nanquantile(0.5, dim=-1, keepdim=True)
    return mask & (pos != first) & ~(norms > ratio * med)


def standardize(x: Tensor, mask: Tensor) -> Tensor:
    """Features z-scored over the tokens in ``mask`` (population std; constant features and
    rows outside the mask are 0). x: (..., n, d) float64 with rows outside the mask zeroed."""
    k = mask.sum(-1).to(x.dtype)[..., None, None]
    mu = x.sum(-2, keepdim=True) / k
    # one new (..., n, d) tensor, changed in place: passes over it cost as much as its Gram
    # matrix. x - 1 * mu on the tokens in the mask, x - 0 * mu = 0 (x is 0 there) elsewhere.
    xc = torch.addcmul(x, mask.unsqueeze(-1).to(x.dtype), mu, value=-1)
    sd = (xc.square().sum(-2, keepdim=True) / k).sqrt()
    return xc.div_(torch.where(sd > 0, sd, math.inf))


MAX_SHARED_REMOVED = 14  # no_sink drops at most this many tokens: its neighbours come from all's


def _shared_neighbours(x: Tensor, mask: Tensor, m_ns: Tensor) -> dict[str, Tensor]:
    """n > d: the two nearest neighbours (``twonn``'s ``near``) of the ``all`` and ``no_sink``
    sets from ONE blockwise distance search (the same vectors; no_sink only drops columns):
    each token's 2 + r nearest in ``all``, r the most tokens no_sink drops in any text, hold
    its two nearest in ``no_sink``. At 4,096 tokens the search is most of the peers' cost.
    Empty (each set searches on its own) when r > MAX_SHARED_REMOVED."""
    dropped = int((mask & ~m_ns).sum(-1).max())
    if dropped > MAX_SHARED_REMOVED:
        return {}
    values, indices = nearest_blockwise(x, x.square().sum(-1), mask, NEIGHBOUR_BLOCK, 2 + dropped)
    return {"": values[..., :2], "__no_sink": two_nearest_within(values, indices, m_ns)}


def hidden_metrics(
    hidden: Tensor,
    mask: Tensor,
    *,
    center: bool = False,
    token_sets: tuple[str, ...] = (),
    peers: bool = False,
    sink_norm_ratio: float = 10.0,
    renyi_alpha: float = 1.0,
) -> tuple[dict[str, Tensor], Tensor | None]:
    """All ``hidden_metric_names(token_sets, peers)`` for every leading index of ``hidden``.

    hidden: (..., n, d); mask: bool broadcastable to (..., n). Returns ({name: float64 tensor
    of shape hidden.shape[:-2]}, the top activations (..., TOP_K, 3) or None without
    ``peers``). One eigvalsh per token set (one batched call for all sets), but one for ``all``
    and ``no_sink`` together where ``sharing_inputs`` applies; the ``all`` values equal
    ``layer_metrics`` to rounding. Raises what ``layer_metrics`` raises. (``hidden_pending``
    followed by its ``finish(solve())``.)
    """
    pending, top = hidden_pending(
        hidden,
        mask,
        center=center,
        token_sets=token_sets,
        peers=peers,
        sink_norm_ratio=sink_norm_ratio,
        renyi_alpha=renyi_alpha,
    )
    return pending.finish(pending.solve()), top


def hidden_pending(
    hidden: Tensor,
    mask: Tensor,
    *,
    center: bool = False,
    token_sets: tuple[str, ...] = (),
    peers: bool = False,
    sink_norm_ratio: float = 10.0,
    renyi_alpha: float = 1.0,
    activations: dict[str, Tensor] | None = None,
) -> tuple[PendingSpectra, Tensor | None]:
    """``hidden_metrics`` up to the spectra: (its ``PendingSpectra``, the top activations or
    None). Arguments and errors as ``hidden_metrics``'. ``activations``: the
    ``massive_activations`` metrics of ``hidden``, already computed (with ``peers``; the top
    activations are then None), e.g. per layer by a caller that stacks layers
    (``homog.extract.host_spectra.LayerStack``)."""
    unknown = set(token_sets) - set(SUFFIX_SETS)
    if unknown:
        raise ValueError(f"unknown token set(s) {sorted(unknown)}: use {', '.join(SUFFIX_SETS)}")
    mask, x, gram, sq_norms = prepare_tokens(hidden, mask)
    n, d = hidden.shape[-2:]
    small = n <= d
    sets, extra = _token_sets(
        x, mask, gram, sq_norms, token_sets, center, peers, small, sink_norm_ratio
    )
    if "no_sink" in token_sets and small and not center and minor_spectra_supported(gram):
        grams = sharing_inputs(sets, mask)
    else:
        grams = (torch.stack([spectral_gram(s[1], s[3], s[2], s[5]) for s in sets]),)
    near: dict[str, Tensor] = {}  # n > d: no_sink shares the nearest-neighbour search of all
    if peers and not small and "no_sink" in token_sets:
        near = _shared_neighbours(x, mask, sets[1][2])
    out, few_of = _set_values(sets, x, peers, small, near)
    out.update(extra)
    top = None
    if peers:
        act, top = massive_activations(hidden, mask) if activations is None else (activations, None)
        out.update(act)
    names = hidden_metric_names(tuple(s for s in SUFFIX_SETS if s in token_sets), peers)
    suffixes = tuple(s[0] for s in sets)
    pending = PendingSpectra(grams, max(n, d), suffixes, few_of, out, names, renyi_alpha, peers)
    return pending, top


def _token_sets(
    x: Tensor,
    mask: Tensor,
    gram: Tensor,
    sq_norms: Tensor,
    token_sets: tuple[str, ...],
    center: bool,
    peers: bool,
    small: bool,
    sink_norm_ratio: float,
) -> tuple[list[tuple[Any, ...]], dict[str, Tensor]]:
    """The sets to measure, each (name suffix, x, mask, Gram, squared norms, centre?, token
    Gram matrix for the peers' metrics or None), ``all`` first; and the extra metrics
    (``n_removed__no_sink``). ``small``: n <= d."""

    def token_gram_of(xs: Tensor, g: Tensor) -> Tensor | None:
        # n > d: no n x n matrix (4,096 tokens: 134 MB per text and copy); the peers' metrics
        # then come from the vectors (``_set_metrics``)
        return g if peers and small else None

    # (name suffix, x, mask, Gram, squared norms, centre?) per set
    sets = [("", x, mask, gram, sq_norms, center, token_gram_of(x, gram))]
    extra: dict[str, Tensor] = {}
    if "no_sink" in token_sets:
        m_ns = no_sink_mask(mask, sq_norms.clamp_min(0).sqrt(), sink_norm_ratio)
        # with n <= d only the Gram matrix is read (x just for its shape): no copy of x
        x_ns = x if small else x.masked_fill(~m_ns.unsqueeze(-1), 0.0)
        if small:
            g_ns = torch.where(m_ns.unsqueeze(-1) & m_ns.unsqueeze(-2), gram, 0.0)
        else:
            g_ns = smaller_gram(x_ns)
        tg = sets[0][6]  # the same distances; twonn reads only the pairs in the mask
        sets.append(("__no_sink", x_ns, m_ns, g_ns, torch.where(m_ns, sq_norms, 0.0), center, tg))
        extra[N_REMOVED] = (mask.sum(-1) - m_ns.sum(-1)).to(torch.float64)
    if "standardized" in token_sets:
        x_st = standardize(x, mask)
        g_st = smaller_gram(x_st)
        sq_st = g_st.diagonal(dim1=-2, dim2=-1) if small else x_st.square().sum(-1)
        sets.append(("__standardized", x_st, mask, g_st, sq_st, False, token_gram_of(x_st, g_st)))
    return sets, extra


def _set_values(
    sets: list[tuple[Any, ...]], x: Tensor, peers: bool, small: bool, near: dict[str, Tensor]
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Every set's metrics that need no eigenvalue, named ``<metric><suffix>`` (NaN for a
    set with too few tokens), and per token set (not ``all``) its too-few mask."""
    out: dict[str, Tensor] = {}
    few_of: dict[str, Tensor] = {}
    distances: dict[int, Tensor] = {}  # no_sink shares the token Gram matrix of all
    for suffix, xs, ms, gs, sqs, _, tg in sets:
        direction = direction_metrics(xs, gs, ms, sqs)
        d2 = None if tg is None else distances.get(id(tg))
        if tg is not None and d2 is None:
            d2 = distances[id(tg)] = sq_distances(tg)
        # n > d: the peers' metrics from the vectors; no_sink reads the tokens' own vectors
        # (x_ns has the removed rows zeroed) under its mask, as the Gram route does
        vectors = (x if suffix == "__no_sink" else xs) if peers and not small else None
        values = _set_metrics(direction, tg, d2, ms, vectors, near.get(suffix))
        if suffix:
            few = ms.sum(-1) < 2
            if suffix == "__standardized":  # constant features only: nothing to measure
                few = few | (sqs.sum(-1) == 0)
            few_of[suffix] = few
            values = {k: torch.where(few, math.nan, v) for k, v in values.items()}
        out.update({f"{k}{suffix}": v for k, v in values.items()})
    return out, few_of
