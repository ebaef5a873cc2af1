"""The contrasts table's columns beyond the raw paired difference (pure: frames in, frames out).

For the rows of one (run, variant pair, metric): the layers and the bands of
:func:`homog.stats.bands.band_of_layers` (``layer0``, ``early``, ``middle``, ``late``,
``final``),
each a per-text table [row x sample_id] of both sides. Besides the raw mean difference, its
bootstrap CI and paired test (columns of the store's first schema, computed by
:func:`homog.stats.contrasts.paired_contrasts`), every row gets (docs/statistics.md has the
formulas):

- ``n_tokens_diff``: mean over the row's texts of the metric-token count difference a - b;
- ``adjusted``: whether the row is adjusted for length (``homog.stats.adjusted.adjustable``: enough
  texts change their token count, and the changes vary);
  ``adj_diff``, ``adj_ci_low``, ``adj_ci_high``, ``adj_p_value``: the intercept of the
  per-text regression of the difference on the token difference (homog.stats.adjusted), NaN when
  not adjusted;
- ``dz``: the effect the verdict reads (adj_diff when adjusted, else mean_diff) over the SD of
  the per-text differences it is the mean of;
- ``baseline_mean``, ``baseline_sd``: mean and between-text SD (ddof 1) of the original's
  values over the row's texts (of variant b when the run has no original; of the unchanged run
  for an intervention contrast);
- ``sesoi``: the smallest effect of interest of the row (homog.stats.margins: ``sd``, the
  default, ``stats.sesoi`` x baseline_sd; ``depth``; or a pin); ``sesoi_basis``: that rule in
  words, with the number it scales and the row's scope; ``depth_change``: the run and metric's
  homogenizing early-to-late change (NaN where the metric does not homogenize monotonically),
  so that a reader can recompute the margin under the other basis; ``p_tost``: the TOST
  p-value of equivalence of the verdict's effect to zero within +-sesoi;
- ``eq_ci_low``, ``eq_ci_high``: the (1 - 2 ``stats.alpha``) percentile bootstrap CI of the
  verdict's effect, from the same resamples as its CI (the equivalence CI);
- ``layer0_diff``, ``layer0_p_value``: the raw mean difference at layer 0 (the position-free
  token embeddings: a lexical difference) over the row's texts, and its paired test; NaN for a
  metric without layer 0 (attention);
- ``rel_layer0_diff``, ``rel_layer0_ci_low``, ``rel_layer0_ci_high``: the row's per-text
  difference minus the same text's layer-0 difference (what the network adds on top of the
  lexical difference), length-adjusted like the effect, with a bootstrap CI.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from homog.stats.adjusted import adjustable, adjusted_block, raw_block, raw_size, tost_p
from homog.stats.margins import Margin
from homog.stats.paired_tests import bootstrap_ci, paired_difference, paired_p
from homog.stats.settings import StatsSettings

EXTRA_COLUMNS = (
    "n_tokens_diff",
    "adjusted",
    "adj_diff",
    "adj_ci_low",
    "adj_ci_high",
    "adj_p_value",
    "dz",
    "baseline_mean",
    "baseline_sd",
    "sesoi",
    "p_tost",
    "sesoi_basis",
    "eq_ci_low",
    "eq_ci_high",
    "depth_change",
    "layer0_diff",
    "layer0_p_value",
    "rel_layer0_diff",
    "rel_layer0_ci_low",
    "rel_layer0_ci_high",
)


def _draws(settings: StatsSettings) -> dict[str, Any]:
    """The bootstrap's draws and CI level of ``settings``, as the effect blocks take them."""
    return {"n_boot": settings.n_boot, "ci": settings.ci, "seed": settings.seed}


def _empty(g: int) -> dict[str, np.ndarray]:
    out = {c: np.full(g, np.nan) for c in EXTRA_COLUMNS}
    out["adjusted"] = np.zeros(g, dtype=bool)
    out["sesoi_basis"] = np.full(g, None, dtype=object)
    return out


def extra_columns(
    a: pd.DataFrame,
    b: pd.DataFrame,
    settings: StatsSettings,
    *,
    tokens_a: pd.Series | None,
    tokens_b: pd.Series | None,
    baseline: pd.DataFrame,
    layer0: pd.Series | None,
    margin: Margin,
) -> pd.DataFrame:
    """EXTRA_COLUMNS for the rows of ``a`` - ``b`` (aligned [row x sample_id] tables).

    tokens_a / tokens_b: sample_id -> metric-token count (None: no adjustment);
    baseline: [row x sample_id] values of the original; layer0: sample_id -> the layer-0
    difference a - b (None for a metric without layer 0); margin: the run and metric's SESOI
    rule (homog.stats.margins); settings: the bootstrap and test, and the equivalence CI's
    level 1 - 2 ``alpha``.
    Returns one row per row of ``a`` (after aligning with ``b``), in that order
    (:func:`extra_arrays` of the tables' values).
    """
    a, b = a.align(b, join="inner")
    samples = a.columns
    if tokens_a is not None and tokens_b is not None:
        t = (tokens_a.reindex(samples) - tokens_b.reindex(samples)).to_numpy(dtype=float)
    else:
        t = np.full(len(samples), np.nan)
    d0 = layer0.reindex(samples).to_numpy(dtype=float) if layer0 is not None else None
    d = paired_difference(a.to_numpy(dtype=float), b.to_numpy(dtype=float))  # [G, n]
    base = baseline.reindex(index=a.index, columns=samples).to_numpy(dtype=float)
    return pd.DataFrame(extra_arrays(d, base, list(a.index), settings, t=t, d0=d0, margin=margin))


def extra_arrays(
    d: np.ndarray,
    base: np.ndarray,
    scopes: list,
    settings: StatsSettings,
    *,
    t: np.ndarray,
    d0: np.ndarray | None,
    margin: Margin,
) -> dict[str, np.ndarray]:
    """EXTRA_COLUMNS [G] of the rows of the per-text differences ``d`` [G, n]
    (:func:`homog.stats.paired_tests.paired_difference`).

    base: [G, n] the original's values; scopes: each row's layer or band (its SESOI's scope);
    t: [n] the token-count differences a - b (NaN: no adjustment); d0: [n] the layer-0
    differences (None for a metric without layer 0); margin, settings: see
    :func:`extra_columns`.
    """
    g, n = d.shape
    out = _empty(g)
    if g == 0 or n == 0:
        return out
    d0 = np.full(n, np.nan) if d0 is None else d0
    eq_ci = 1.0 - 2.0 * settings.alpha
    out["depth_change"][:] = margin.depth
    masks = np.isfinite(d)
    # rows with the same set of usable texts share one vectorised computation
    patterns: dict[bytes, list[int]] = {}
    for i in range(g):
        patterns.setdefault(masks[i].tobytes(), []).append(i)
    for key, rows in patterns.items():
        m = np.frombuffer(key, dtype=bool)
        if m.sum() < 2:
            continue
        idx = np.array(rows)
        dm = d[idx][:, m]
        tm = t[m]
        eff, adjust = _effect_columns(out, idx, dm, tm, settings, eq_ci)
        bsd = _size_columns(out, idx, eff, base[idx][:, m])
        rules = [margin.of(scopes[i], sd) for i, sd in zip(idx, bsd, strict=True)]
        delta = np.array([r[0] for r in rules], dtype=float)
        out["sesoi_basis"][idx] = np.array([r[1] for r in rules], dtype=object)
        out["sesoi"][idx] = delta
        out["p_tost"][idx] = tost_p(eff["effect"], eff["se"], eff["df"], delta)
        _layer0_columns(out, idx, dm, tm, d0[m], adjust, settings)
    return out


def _effect_columns(
    out: dict[str, np.ndarray],
    idx: np.ndarray,
    dm: np.ndarray,
    tm: np.ndarray,
    settings: StatsSettings,
    eq_ci: float,
) -> tuple[dict, bool]:
    """Fill the token-difference, length-adjustment and equivalence-CI columns of rows ``idx``
    (differences ``dm``, token differences ``tm``); return the verdict's effect and whether
    it is adjusted."""
    has_t = bool(np.isfinite(tm).all())
    if has_t:
        out["n_tokens_diff"][idx] = tm.mean()
    adjust = has_t and adjustable(tm)
    if adjust:
        eff = adjusted_block(dm, tm, **_draws(settings), eq_ci=eq_ci)
        out["adjusted"][idx] = True
        out["adj_diff"][idx] = eff["effect"]
        out["adj_ci_low"][idx] = eff["ci_low"]
        out["adj_ci_high"][idx] = eff["ci_high"]
        out["adj_p_value"][idx] = eff["p"]
        out["eq_ci_low"][idx], out["eq_ci_high"][idx] = eff["eq_low"], eff["eq_high"]
    else:  # the raw effect's size (its CI and p are the raw columns)
        eff = raw_size(dm)
        # the same resamples as the raw CI (homog.stats.contrasts.paired_contrasts: same n and
        # seed)
        eq = bootstrap_ci(dm, n_boot=settings.n_boot, ci=eq_ci, seed=settings.seed)
        out["eq_ci_low"][idx], out["eq_ci_high"][idx] = eq
    return eff, adjust


def _size_columns(
    out: dict[str, np.ndarray], idx: np.ndarray, eff: dict, bm: np.ndarray
) -> np.ndarray:
    """Fill ``dz`` and the baseline's mean and SD of rows ``idx`` (baseline values ``bm``);
    return the baseline SDs."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out["dz"][idx] = np.where(
            eff["sd"] > 0, eff["effect"] / eff["sd"], np.where(eff["effect"] == 0, 0.0, np.nan)
        )
    out["baseline_mean"][idx] = np.nanmean(bm, axis=1)
    # each row's texts contiguous: the same sums as np.nanstd of each row on its own
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows under 2 values: NaN below
        sd = np.nanstd(np.ascontiguousarray(bm), axis=1, ddof=1)
    bsd = np.where(np.isfinite(bm).sum(axis=1) >= 2, sd, math.nan)
    out["baseline_sd"][idx] = bsd
    return bsd


def _layer0_columns(
    out: dict[str, np.ndarray],
    idx: np.ndarray,
    dm: np.ndarray,
    tm: np.ndarray,
    d0: np.ndarray,
    adjust: bool,
    settings: StatsSettings,
) -> None:
    """Fill the layer-0 and relative-to-layer-0 columns of rows ``idx`` (``d0``: the texts'
    layer-0 differences); nothing with fewer than two finite ones."""
    m0 = np.isfinite(d0)
    if m0.sum() < 2:
        return
    d0m = d0[m0]
    out["layer0_diff"][idx] = d0m.mean()
    out["layer0_p_value"][idx] = paired_p(
        d0m[None, :], test=settings.test, n_perm=settings.n_perm, seed=settings.seed
    )[0]
    rel = dm[:, m0] - d0m[None, :]
    trel = tm[m0]
    if adjust and adjustable(trel):
        r = adjusted_block(rel, trel, **_draws(settings))
    else:
        r = raw_block(rel, **_draws(settings))
    out["rel_layer0_diff"][idx] = r["effect"]
    out["rel_layer0_ci_low"][idx] = r["ci_low"]
    out["rel_layer0_ci_high"][idx] = r["ci_high"]
