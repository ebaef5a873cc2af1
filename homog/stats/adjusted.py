"""Length-adjusted paired effects, equivalence tests and effect sizes (arrays in, arrays out).

A paired contrast a - b over n texts has per-text differences d_i of a metric and t_i of the
texts' metric-token counts. The rewrites of the paper's variants add tokens, and the spectral
metrics move with the token count, so the effect read at "no added tokens" is the intercept
of the per-text least-squares line

    d_i = alpha + beta t_i + e_i,      alpha = mean(d) - beta mean(t),
    beta = sum (t_i - mean t)(d_i - mean d) / sum (t_i - mean t)^2,

i.e. the mean of the adjusted differences d_i - beta t_i. Its CI is a percentile bootstrap of
texts (the same seeded multinomial weights as the raw CI: one [B, n] matrix for all rows), its
p-value the OLS t-test of the intercept (se^2 = s^2 (1/n + mean(t)^2 / S_tt), s^2 = RSS /
(n - 2), n - 2 degrees of freedom). A row is adjusted only where the token counts differ in
enough texts (``MIN_CHANGED``: at least 3, and 5 % of them) and vary over texts. A constant
non-zero change cannot be separated from the effect; a change in a handful of texts moves the
raw mean by that handful's share alone, and a line through them would rest on those texts.

``tost_p``: the two one-sided t-tests of equivalence to no effect within +-delta.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from homog.stats.paired_tests import bootstrap_ci, resample_counts

MIN_CHANGED = (3, 0.05)  # texts with a token change before a row is adjusted: count, share


def min_changed(n: int) -> int:
    """How many of ``n`` texts must change their token count for a row to be adjusted."""
    count, share = MIN_CHANGED
    return max(count, math.ceil(share * n))


def adjustable(t: np.ndarray) -> bool:
    """True when the token differences ``t`` [n] can and must be adjusted for: at least
    ``min_changed(n)`` texts' counts differ and the differences vary over texts. (On the
    380-review study one text of 311 changed by one token under gemma3-270m; adjusting its
    rows swapped their permutation p for the regression's t-test on that one text.)"""
    t = np.asarray(t, dtype=float)
    changed = int(np.count_nonzero(t))
    return bool(t.size >= 3 and changed >= min_changed(t.size) and np.ptp(t) > 0)


def intercepts(d: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, beta) [G] of the least-squares lines d[g] = alpha + beta t (d [G, n], t [n])."""
    tc = t - t.mean()
    beta = (d - d.mean(axis=1, keepdims=True)) @ tc / (tc @ tc)
    return d.mean(axis=1) - beta * t.mean(), beta


def adjusted_block(
    d: np.ndarray,
    t: np.ndarray,
    *,
    n_boot: int,
    ci: float,
    seed: int,
    eq_ci: float | None = None,
) -> dict[str, np.ndarray]:
    """Length-adjusted effects of complete rows ``d`` [G, n] on the token differences ``t`` [n].

    Returns arrays [G]: effect (the intercept), ci_low, ci_high (percentile bootstrap of texts;
    resamples where t does not vary are left out), p (OLS t-test of the intercept), se, df,
    sd (SD of the adjusted differences d - beta t, ddof 1), slope (beta); with ``eq_ci`` (a
    level, e.g. 1 - 2 alpha) also eq_low, eq_high: that percentile interval of the same
    resamples (the equivalence CI).
    """
    d = np.asarray(d, dtype=float)
    t = np.asarray(t, dtype=float)
    g, n = d.shape
    alpha, beta = intercepts(d, t)
    resid = d - alpha[:, None] - beta[:, None] * t[None, :]
    df = n - 2
    s2 = (resid**2).sum(axis=1) / df
    stt = ((t - t.mean()) ** 2).sum()
    se = np.sqrt(s2 * (1.0 / n + t.mean() ** 2 / stt))
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = alpha / se
        p = np.where(se > 0, 2 * sps.t.sf(np.abs(tstat), df), np.where(alpha == 0, 1.0, 0.0))
    w = resample_counts(n, n_boot, seed)  # [B, n]
    st, stt_w = w @ t / n, w @ (t * t) / n  # [B]
    sd_, sdt = d @ w.T / n, (d * t) @ w.T / n  # [G, B]
    var_t = stt_w - st**2
    ok = var_t > 1e-12 * max(1.0, float(np.abs(t).max()) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        b_boot = (sdt - sd_ * st) / var_t
    a_boot = np.where(ok, sd_ - b_boot * st, np.nan)
    half = (1.0 - ci) / 2.0
    low, high = np.nanquantile(a_boot, [half, 1.0 - half], axis=1)
    adj = d - beta[:, None] * t[None, :]
    eq = {}
    if eq_ci is not None:
        h = (1.0 - eq_ci) / 2.0
        eq["eq_low"], eq["eq_high"] = np.nanquantile(a_boot, [h, 1.0 - h], axis=1)
    return {
        **eq,
        "effect": alpha,
        "ci_low": low,
        "ci_high": high,
        "p": p,
        "se": se,
        "df": np.full(g, float(df)),
        "sd": adj.std(axis=1, ddof=1),
        "slope": beta,
    }


def raw_size(d: np.ndarray) -> dict[str, np.ndarray]:
    """The mean of complete rows ``d`` [G, n] (n >= 2) with se = SD / sqrt(n), df = n - 1 and
    the SD (ddof 1): what dz and the TOST of an unadjusted effect need."""
    d = np.asarray(d, dtype=float)
    g, n = d.shape
    sd = d.std(axis=1, ddof=1)
    return {"effect": d.mean(axis=1), "se": sd / np.sqrt(n), "df": np.full(g, n - 1.0), "sd": sd}


def raw_block(d: np.ndarray, *, n_boot: int, ci: float, seed: int) -> dict[str, np.ndarray]:
    """:func:`raw_size` plus the percentile bootstrap CI of the mean (ci_low, ci_high)."""
    low, high = bootstrap_ci(np.asarray(d, dtype=float), n_boot=n_boot, ci=ci, seed=seed)
    return {**raw_size(d), "ci_low": low, "ci_high": high}


def tost_p(effect: np.ndarray, se: np.ndarray, df: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Two one-sided t-tests of |true effect| < delta: max of the p-values of H0: effect <=
    -delta and H0: effect >= +delta (t with ``df`` degrees of freedom). A zero se gives 0
    inside (-delta, delta) and 1 outside; a non-positive or non-finite delta gives NaN."""
    effect, se, df, delta = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (effect, se, df, delta))
    )
    out = np.full(effect.shape, np.nan)
    ok = np.isfinite(effect) & np.isfinite(se) & (df > 0) & np.isfinite(delta) & (delta > 0)
    pos = ok & (se > 0)
    lower = sps.t.sf((effect[pos] + delta[pos]) / se[pos], df[pos])  # H0: effect <= -delta
    upper = sps.t.cdf((effect[pos] - delta[pos]) / se[pos], df[pos])  # H0: effect >= +delta
    out[pos] = np.maximum(lower, upper)
    zero = ok & (se == 0)
    out[zero] = np.where(np.abs(effect[zero]) < delta[zero], 0.0, 1.0)
    return out
