"""The summary rows' work on arrays (homog.probe.summary): a frame's groups as row positions,
pairs matched by sample_id, and each row's bootstrap CIs and p as the row alone gets them.

``bootstrap_ci`` and ``paired_p`` (homog.stats.paired_tests) take [rows, n] matrices and draw
the same seeded resamples and sign vectors for every row of one n, but a product over many
rows (BLAS gemm) rounds a row's resampled means differently from the row alone (gemv), in the
last bits (4e-16 here): so each row's means stay its own [1, n] product, and only the
quantiles of the rows of one n come from one call (``bootstrap_bounds``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from homog.stats.paired_tests import paired_p, resample_counts
from homog.stats.settings import StatsSettings


def group_rows(frame: Any, keys: Sequence[str]) -> list[tuple[tuple, np.ndarray]]:
    """(key, rows) of each group of ``keys`` in ``frame.groupby(keys, sort=True,
    dropna=False)``'s order and with its keys, the rows (positions) in frame order: the
    groups without a frame each."""
    grouped = frame.groupby(list(keys), sort=True, dropna=False)
    codes = grouped.ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    parts = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1) if len(order) else []
    names = grouped.size().index
    return [(k if isinstance(k, tuple) else (k,), p) for k, p in zip(names, parts, strict=True)]


def bootstrap_bounds(
    values: list[np.ndarray], cis: Sequence[float], settings: StatsSettings
) -> list[tuple[list[float], list[float]]]:
    """Per row of ``values`` (1-d, any lengths): ([low per ci], [high per ci]) of the
    percentile bootstrap CIs at ``cis``, the numbers ``bootstrap_ci`` gives the row alone (its
    seeded draws): each row's resampled means are its own [1, n] product (one over many rows
    rounds them differently), the quantiles of the rows of one n come from one call."""
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in values]
    by_n: dict[int, list[int]] = {}
    for i, v in enumerate(values):
        by_n.setdefault(v.size, []).append(i)
    for n, idx in by_n.items():
        counts = resample_counts(n, settings.n_boot, settings.seed)
        means = np.concatenate(
            [np.asarray(values[i], dtype=float)[None, :] @ counts.T / n for i in idx]
        )
        for ci in cis:
            alpha = (1.0 - ci) / 2.0
            low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=1)
            for j, i in enumerate(idx):
                out[i][0].append(float(low[j]))
                out[i][1].append(float(high[j]))
    return out


def positions(ids: np.ndarray, mask: np.ndarray) -> tuple[dict[Any, int], set[Any]]:
    """(sample_id -> row of the rows ``mask``, the sample_ids there more than once)."""
    rows = np.flatnonzero(mask)
    where = dict(zip(ids[rows].tolist(), rows.tolist(), strict=True))
    if len(where) == rows.size:
        return where, set()
    return where, {s for s, k in Counter(ids[rows].tolist()).items() if k > 1}


def equal(column: np.ndarray, value: Any) -> np.ndarray:
    """column == value elementwise as bools (a missing value equals nothing)."""
    return np.array([v == value for v in column.tolist()], dtype=bool)


def pair_stats(diffs: list[np.ndarray], settings: StatsSettings) -> list[dict[str, float]]:
    """Per difference row: the bootstrap CI (``stats.ci``), the equivalence CI (1 - 2 alpha)
    from the same resamples (``bootstrap_bounds``), and the p of ``stats.test``
    (``paired_p`` of the row alone): the numbers ``bootstrap_ci`` and ``paired_p`` give the
    row alone."""
    bounds = bootstrap_bounds(diffs, [settings.ci, 1 - 2 * settings.alpha], settings)
    out = []
    for d, (low, high) in zip(diffs, bounds, strict=True):
        p = paired_p(d[None, :], test=settings.test, n_perm=settings.n_perm, seed=settings.seed)
        out.append(
            {
                "ci_low": low[0],
                "ci_high": high[0],
                "p_value": float(p[0]),
                "eq_ci_low": low[1],
                "eq_ci_high": high[1],
            }
        )
    return out
