"""The paired tests of the stats stage, on arrays of per-text differences (no I/O, no frames).

``holm`` (Holm-Bonferroni adjustment), ``bootstrap_ci`` (percentile bootstrap CI of the mean,
one multinomial weight matrix for all rows), and the two-sided p-values of ``stats.test``:
``sign_flip_p`` (paired sign-flip permutation test of the mean, the default: the statistic the
CI is about) and ``wilcoxon_p`` (scipy's signed-rank test); ``paired_p`` picks one by name.
``paired_difference`` takes the per-text differences, rounding set to exact zeros.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence

import numpy as np

from homog.config.stats import TESTS
from homog.errors import HomogError

# A per-text difference within this share of the larger of its two values is floating-point
# rounding, not an effect: the same tokens in another order (the key_* family at layer 0, or
# two runs batched differently) give differences of ~1e-14 relative whose signs can agree
# across texts, so a paired test calls them significant. Real differences are > 1e-6.
NUMERIC_TOLERANCE = 1e-9


def paired_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b elementwise (float), with every difference within ``NUMERIC_TOLERANCE`` of
    max(|a|, |b|) set to exactly 0 (NaN stays NaN)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = a - b
    with np.errstate(invalid="ignore"):
        tiny = np.abs(d) <= NUMERIC_TOLERANCE * np.maximum(np.abs(a), np.abs(b))
    return np.where(tiny, 0.0, d)


def holm(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values (same order as ``p``).

    p_holm[(i)] = max_{j <= i} min(1, (m - j + 1) p_(j)) over the sorted p-values. NaN entries
    are not counted as tests (m = number of finite p-values) and stay NaN.
    """
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(stepped)
    return out


@functools.lru_cache(maxsize=8)
def resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, n] seeded multinomial counts: how often each of n texts is drawn in each
    bootstrap resample (the one set of draws every bootstrap of the stats stage uses).
    Cached and read-only: the same matrix serves every layer, band, metric and pair."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
    counts.setflags(write=False)
    return counts


def bootstrap_ci(
    diffs: np.ndarray,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean of each row of ``diffs`` [G, n].

    Vectorised: one [n_boot, n] multinomial count matrix is drawn (seeded) and shared by all
    rows, so the G means of a resample come from one matrix product. Returns (low, high), each
    [G]. Rows must be complete (no NaN); n >= 1.
    """
    diffs = np.asarray(diffs, dtype=float)
    g, n = diffs.shape
    counts = resample_counts(n, n_boot, seed)  # [B, n]
    means = diffs @ counts.T / n  # [G, B]
    alpha = (1.0 - ci) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=1)
    return low, high


def bootstrap_p(boot: np.ndarray, null: float = 0.0) -> float:
    """Two-sided bootstrap p of a statistic whose resampled values are ``boot`` (non-finite
    draws left out): 2 (1 + k) / (B + 1), k the draws on the far side of ``null`` (the
    smaller tail), at most 1 and never 0 (B draws cannot show a p below 1 / (B + 1))."""
    b = np.asarray(boot, dtype=float)
    b = b[np.isfinite(b)]
    if not b.size:
        return math.nan
    k = min(int(np.count_nonzero(b <= null)), int(np.count_nonzero(b >= null)))
    return min(1.0, 2.0 * (1 + k) / (b.size + 1))


def wilcoxon_p(diffs: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired differences ``diffs`` [n].

    All-zero differences -> 1.0 (no evidence of a difference); fewer than 2 pairs -> NaN.
    Zeros are dropped (Wilcoxon's convention) before the test. Exact p-values for n <= 50
    without zeros or ties, the normal approximation (with tie correction) otherwise.
    """
    from scipy.stats import wilcoxon

    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        return math.nan
    if not np.any(d != 0):
        return 1.0
    nonzero = d[d != 0]
    ties = np.unique(np.abs(nonzero)).size < nonzero.size
    # The exact null distribution where it is valid (no zeros or ties, n <= 50), else the
    # normal approximation: scipy's 'auto' would pick a permutation test for small samples with
    # ties, 100x slower and not needed at these sample sizes.
    method = "exact" if nonzero.size == d.size and not ties and d.size <= 50 else "approx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's small-sample notes; the choice is ours above
        return float(
            wilcoxon(d, zero_method="wilcox", alternative="two-sided", method=method).pvalue
        )


@functools.lru_cache(maxsize=8)
def _signs(n: int, n_perm: int, seed: int) -> tuple[np.ndarray, bool]:
    """[B, n] matrix of +-1 sign vectors and whether it is the exact enumeration.

    Every one of the 2^n sign vectors when 2^n <= n_perm (exact test), else n_perm seeded random
    ones. Cached: the same matrix serves every layer, band and metric of a stage run.
    """
    if n < 31 and 2**n <= n_perm:
        codes = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        return np.where(codes & 1, -1.0, 1.0), True
    rng = np.random.default_rng([seed, n, 0x5F11])
    return np.where(rng.random((n_perm, n)) < 0.5, -1.0, 1.0), False


def _extreme_counts(diffs: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Per row of ``diffs`` [G, n]: how many sign vectors of ``signs`` [B, n] give a
    |mean(s d)| at least |mean(d)|. Ties within rounding count as "as extreme" (the identity
    and the full flip always do)."""
    obs = np.abs(diffs.mean(axis=1))
    null = np.abs(diffs @ signs.T) / diffs.shape[1]
    return (null >= obs[:, None] * (1 - 1e-9) - 1e-300).sum(axis=1)


def sign_flip_p(diffs: np.ndarray, *, n_perm: int = 10000, seed: int = 0) -> np.ndarray:
    """Two-sided paired sign-flip permutation p-value of the mean of each row of ``diffs`` [G, n].

    Under H0 each difference is as likely to have either sign, so the statistic |mean(s * d)|
    over random sign vectors s is the null distribution of |mean(d)|. Exact (all 2^n sign
    vectors) when 2^n <= n_perm, else Monte Carlo with n_perm seeded vectors and
    p = (1 + #{|mean(s d)| >= |mean(d)|}) / (1 + n_perm), which is never 0. Rows must be complete
    (no NaN). All-zero rows -> 1.0; n < 2 -> NaN.
    """
    diffs = np.asarray(diffs, dtype=float)
    g, n = diffs.shape
    out = np.full(g, np.nan)
    if n < 2:
        return out
    signs, exact = _signs(n, n_perm, seed)
    hits = _extreme_counts(diffs, signs)
    out[:] = hits / signs.shape[0] if exact else (1 + hits) / (1 + signs.shape[0])
    out[~np.any(diffs != 0, axis=1)] = 1.0
    return out


def refine_at_floor(
    diffs: np.ndarray,
    p: np.ndarray,
    *,
    n_perm: int,
    family: int,
    alpha: float,
    seed: int = 0,
    chunk: int = 8192,
) -> np.ndarray:
    """``p`` (``sign_flip_p`` of the rows of ``diffs`` [G, n] with ``n_perm``) with the rows
    at the Monte Carlo floor 1 / (n_perm + 1) redrawn with enough sign vectors for a Holm
    family of ``family`` rows at ``alpha``: N = ceil(10 family / alpha), so the new floor times
    the family is about alpha / 10.

    With 10,000 draws a family of 500 rows could pass nothing (1e-4 x 500 > 0.05). The redraw
    uses new seeded vectors (in chunks of ``chunk``), so each final p is a valid p-value: below
    the first floor only where both draws say so. Rows not at the floor, exact tests and
    families the first draw already serves are returned as they are.
    """
    p = np.asarray(p, dtype=float).copy()
    diffs = np.atleast_2d(np.asarray(diffs, dtype=float))
    g, n = diffs.shape
    floor = 1.0 / (n_perm + 1)
    if g == 0 or n < 2 or (n < 31 and 2**n <= n_perm) or floor * family < alpha / 10:
        return p
    rows = np.flatnonzero(np.isclose(p, floor, rtol=1e-9, atol=0.0))
    if rows.size == 0:
        return p
    total = int(math.ceil(10 * family / alpha))
    hits = np.zeros(rows.size)
    rng = np.random.default_rng([seed, n, 0x5F12])
    for start in range(0, total, chunk):
        signs = np.where(rng.random((min(chunk, total - start), n)) < 0.5, -1.0, 1.0)
        hits += _extreme_counts(diffs[rows], signs)
    p[rows] = (1 + hits) / (1 + total)
    return p


def paired_p(
    diffs: np.ndarray, *, test: str = "sign_flip", n_perm: int = 10000, seed: int = 0
) -> np.ndarray:
    """p-values of the rows of ``diffs`` [G, n] (complete rows) by ``test`` (see TESTS)."""
    diffs = np.asarray(diffs, dtype=float)
    if test == "sign_flip":
        return sign_flip_p(diffs, n_perm=n_perm, seed=seed)
    if test == "wilcoxon":
        return np.array([wilcoxon_p(row) for row in diffs], dtype=float)
    raise HomogError(f"stats.test must be one of {', '.join(TESTS)}, got {test!r}")
