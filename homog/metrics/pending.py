"""``hidden_metrics``' last step, apart: the spectra of the Gram matrices and the metrics
that follow from them.

``homog.metrics.sets.hidden_pending`` computes every metric that needs no eigenvalue and
returns a ``PendingSpectra`` holding the Gram matrices still to solve;
``PendingSpectra.finish(PendingSpectra.solve())`` completes it where its tensors are. On a GPU
with ``HOMOG_GPU_EIGENSOLVER=host`` the extractor copies it to the host and completes it there
while the GPU runs on (``homog.extract.host_spectra``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from homog.metrics.spectra import eigenvalues_with_minor, gram_eigenvalues, spectral_metrics


def renyi_entropy(eig: Tensor, alpha: float) -> Tensor:
    """Renyi entropy (nats) of order alpha of p = eig / sum(eig); eig (..., k) >= 0."""
    p = eig / eig.sum(-1, keepdim=True)
    if alpha == 1:
        return -torch.special.xlogy(p, p).sum(-1)
    return torch.log(torch.where(p > 0, p.pow(alpha), 0.0).sum(-1)) / (1 - alpha)


def sharing_inputs(sets: list[tuple], mask: Tensor) -> tuple[Tensor, ...]:
    """What ``solve_sharing`` reads for ``sets`` (all, no_sink[, standardized]; n <= d,
    uncentred) where ``no_sink`` drops only the first token: its Gram matrix is then the
    ``all`` one's minor without that row, and both spectra come from one tridiagonal reduction
    (``homog.metrics.eigenvalues_with_minor``). (the ``all`` Gram matrix, the row to remove
    or -1, where it is removed, the other no_sink matrices (norm-based removals too) and the
    standardized ones, to be solved as before in one batched call)."""
    gram, g_ns, m_ns = sets[0][3], sets[1][3], sets[1][2]
    n = mask.shape[-1]
    pos = torch.arange(n, device=mask.device)
    first = torch.where(mask, pos, n).amin(-1)
    one = (mask.sum(-1) - m_ns.sum(-1) == 1).expand(gram.shape[:-2])
    minor = torch.where(one, first.expand(gram.shape[:-2]), -1)
    rest = [g_ns[~one]] + [s[3] for s in sets[2:]]
    return gram, minor, one, torch.cat([g.reshape(-1, n, n) for g in rest])


def solve_sharing(
    gram: Tensor, minor: Tensor, one: Tensor, rest: Tensor, size: int, n_sets: int
) -> list[Tensor]:
    """The spectra of the ``n_sets`` sets from ``sharing_inputs``' tensors."""
    eig_all, eig_ns = eigenvalues_with_minor(gram, minor, size)
    solved = gram_eigenvalues(rest, size)
    k = int((~one).sum())
    eig_ns[~one] = solved[:k]
    tail = solved[k:].reshape(n_sets - 2, *eig_all.shape)
    return [eig_all, eig_ns, *tail.unbind(0)]


@dataclass
class PendingSpectra:
    """``hidden_metrics``' results before the spectra: the Gram matrices to solve
    (``grams``: one stack, or ``sharing_inputs``' four tensors), the metrics that need no
    eigenvalue (``values``, final) and what the spectral ones need (the sets' name suffixes,
    where each token set has too few tokens). ``finish(solve())`` is what ``hidden_metrics``
    returns, computed where the tensors are: ``map`` moves them (``homog.extract.host_spectra``
    solves a GPU's on the host beside the next forward)."""

    grams: tuple[Tensor, ...]
    size: int
    suffixes: tuple[str, ...]
    few: dict[str, Tensor]
    values: dict[str, Tensor]
    names: tuple[str, ...]
    alpha: float
    peers: bool

    def map(self, fn: Callable[[Tensor], Tensor]) -> PendingSpectra:
        """The same with ``fn`` applied to every tensor (e.g. a copy to the host)."""
        return dataclasses.replace(
            self,
            grams=tuple(fn(g) for g in self.grams),
            few={k: fn(v) for k, v in self.few.items()},
            values={k: fn(v) for k, v in self.values.items()},
        )

    def solve(self) -> list[Tensor]:
        """The descending spectra of the sets (``gram_eigenvalues``), one per suffix."""
        if len(self.grams) == 1:
            return list(gram_eigenvalues(self.grams[0], self.size).unbind(0))
        return solve_sharing(*self.grams, self.size, len(self.suffixes))

    def finish(self, eigs: list[Tensor]) -> dict[str, Tensor]:
        """Every metric (``names``, in order) from the spectra ``eigs`` and ``values``."""
        out = dict(self.values)
        for suffix, eig in zip(self.suffixes, eigs, strict=True):
            values = spectral_metrics(eig)
            if self.peers:
                values["prompt_entropy"] = renyi_entropy(eig, self.alpha)
            if suffix:
                values = {k: torch.where(self.few[suffix], math.nan, v) for k, v in values.items()}
            out.update({f"{k}{suffix}": v for k, v in values.items()})
        return {k: out[k] for k in self.names}
