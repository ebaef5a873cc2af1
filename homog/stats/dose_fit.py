"""The within-text fits of a dose-response (text fixed effects): the slope of values on
positions and the quadratic's curvature, each pooled over texts with its per-text
contributions for the paired test (homog.stats.dose, homog.stats.intervention_doses).

Arrays: values y [V, G, n] (variants or doses, rows of depth, texts) at positions x [V, n].
A text whose values differ only by rounding (the same tokens reordered, at layer 0) has no
slope and no curvature: its deviations are set to exactly 0
(homog.stats.paired_tests.NUMERIC_TOLERANCE).
"""

from __future__ import annotations

import numpy as np

from homog.stats.paired_tests import NUMERIC_TOLERANCE

CENTRE = 0.5  # the quadratic's x is centred here: its linear term is the slope at the middle


def within_slopes(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S_xy [G, n], S_xx [G, n], used [G, n]) of values y [V, G, n] at positions x [V, n]."""
    m = np.isfinite(y) & np.isfinite(x)[:, None, :]
    c = m.sum(axis=0)
    xs = np.where(m, x[:, None, :], 0.0)
    ys = np.where(m, y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        xbar, ybar = xs.sum(0) / c, ys.sum(0) / c
    xc = np.where(m, xs - xbar, 0.0)
    dev = np.where(m, ys - ybar, 0.0)
    # a text whose values differ only by rounding (the same tokens reordered, at layer 0)
    # has no slope: its deviations are set to exactly 0 (homog.stats.paired_tests.NUMERIC_TOLERANCE)
    scale = np.where(m, np.abs(ys), 0.0).max(axis=0)
    dev = np.where((np.abs(dev) <= NUMERIC_TOLERANCE * scale).all(axis=0), 0.0, dev)
    sxy = (xc * dev).sum(0)
    sxx = (xc * xc).sum(0)
    used = (c >= 2) & (sxx > 1e-12)
    return np.where(used, sxy, 0.0), np.where(used, sxx, 0.0), used


def _quad_design(x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """([z, z^2] and y, each demeaned within text over its finite variants, [V, G, n]; used
    [G, n]) for values y [V, G, n] at positions x [V, n], z = x - CENTRE. A text needs 3 finite
    variants; one whose values differ only by rounding gets deviations of exactly 0."""
    m = np.isfinite(y) & np.isfinite(x)[:, None, :]
    m &= m.sum(axis=0) >= 3
    c = m.sum(axis=0)
    z = np.where(np.isfinite(x), x - CENTRE, 0.0)[:, None, :]
    cols = [np.where(m, z, 0.0), np.where(m, z * z, 0.0)]
    ys = np.where(m, y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cols = [np.where(m, k - k.sum(0) / c, 0.0) for k in cols]
        dev = np.where(m, ys - ys.sum(0) / c, 0.0)
    scale = np.abs(ys).max(axis=0)
    dev = np.where((np.abs(dev) <= NUMERIC_TOLERANCE * scale).all(axis=0), 0.0, dev)
    return cols, dev, c >= 3


def within_quadratic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(theta [G, 2], q [G, n], used [G, n]) of y = a_i + b z + c z^2 within text (text fixed
    effects), z = x - CENTRE, for values y [V, G, n] at positions x [V, n]: theta = (b, c)
    pooled over texts, (sum_i Z_i'Z_i)^-1 sum_i Z_i'y_i with Z_i the text's (z, z^2) demeaned
    within text; q: the per-text contributions to c (its row of (sum_i Z_i'Z_i)^-1 Z_i'y_i;
    they sum to c); used: the texts with 3 finite variants (:func:`_quad_design`)."""
    cols, dev, used = _quad_design(x, y)
    zz = np.stack([[(ci * cj).sum(0) for cj in cols] for ci in cols])  # [2, 2, G, n]
    zy = np.stack([(ci * dev).sum(0) for ci in cols])  # [2, G, n]
    big = zz.sum(-1).transpose(2, 0, 1)  # [G, 2, 2]
    g = zz.shape[2]
    theta = np.full((g, 2), np.nan)
    q = np.zeros(zy.shape[1:])
    for k in range(g):
        if np.linalg.matrix_rank(big[k]) == 2:
            inv = np.linalg.inv(big[k])
            theta[k] = inv @ zy[:, k].sum(-1)
            q[k] = inv[1] @ zy[:, k]
    return theta, q, used


def quadratic_boot(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """[G, B] the quadratic coefficient c refitted on each bootstrap resample (weights w [B, n]
    of texts; NaN where a resample cannot identify it)."""
    (c1, c2), dev, _ = _quad_design(x, y)
    s11, s12, s22, s1y, s2y = (
        (a * b).sum(0) @ w.T for a, b in ((c1, c1), (c1, c2), (c2, c2), (c1, dev), (c2, dev))
    )
    det = s11 * s22 - s12 * s12
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.abs(det) > 1e-12 * np.abs(s11 * s22)
        return np.where(ok, (s11 * s2y - s12 * s1y) / det, np.nan)
