"""The contrasts table's columns beyond the raw paired difference (pure: frames in, frames out).

For the rows of one (run, variant pair, metric): the layers and the bands of
:func:`homog.stats.band_of_layers` (``layer0``, ``early``, ``middle``, ``late``, ``final``),
each a per-text table [row x sample_id] of both sides. Besides the raw mean difference, its
bootstrap CI and paired test (columns of the store's first schema, computed by
:func:`homog.stats.paired_contrasts`), every row gets (docs/statistics.md has the formulas):

- ``n_tokens_diff``: mean over the row's texts of the metric-token count difference a - b;
- ``adjusted``: whether the row is adjusted for length (``homog.adjusted.adjustable``: enough
  texts change their token count, and the changes vary);
  ``adj_diff``, ``adj_ci_low``, ``adj_ci_high``, ``adj_p_value``: the intercept of the
  per-text regression of the difference on the token difference (homog.adjusted), NaN when
  not adjusted;
- ``dz``: the effect the verdict reads (adj_diff when adjusted, else mean_diff) over the SD of
  the per-text differences it is the mean of;
- ``baseline_mean``, ``baseline_sd``: mean and between-text SD (ddof 1) of the original's
  values over the row's texts (of variant b when the run has no original; of the unchanged run
  for an intervention contrast);
- ``sesoi`` = ``stats.sesoi`` x baseline_sd, and ``p_tost``: the TOST p-value of equivalence of
  the verdict's effect to zero within +-sesoi;
- ``layer0_diff``, ``layer0_p_value``: the raw mean difference at layer 0 (the position-free
  token embeddings: a lexical difference) over the row's texts, and its paired test; NaN for a
  metric without layer 0 (attention);
- ``rel_layer0_diff``, ``rel_layer0_ci_low``, ``rel_layer0_ci_high``: the row's per-text
  difference minus the same text's layer-0 difference (what the network adds on top of the
  lexical difference), length-adjusted like the effect, with a bootstrap CI.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from homog.adjusted import adjustable, adjusted_block, raw_block, raw_size, tost_p
from homog.paired_tests import paired_difference, paired_p

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
    "layer0_diff",
    "layer0_p_value",
    "rel_layer0_diff",
    "rel_layer0_ci_low",
    "rel_layer0_ci_high",
)


def _empty(g: int) -> dict[str, np.ndarray]:
    out = {c: np.full(g, np.nan) for c in EXTRA_COLUMNS}
    out["adjusted"] = np.zeros(g, dtype=bool)
    return out


def extra_columns(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    tokens_a: pd.Series | None,
    tokens_b: pd.Series | None,
    baseline: pd.DataFrame,
    layer0: pd.Series | None,
    sesoi: float,
    n_boot: int,
    ci: float,
    seed: int,
    test: str,
    n_perm: int,
) -> pd.DataFrame:
    """EXTRA_COLUMNS for the rows of ``a`` - ``b`` (aligned [row x sample_id] tables).

    tokens_a / tokens_b: sample_id -> metric-token count (None: no adjustment);
    baseline: [row x sample_id] values of the original; layer0: sample_id -> the layer-0
    difference a - b (None for a metric without layer 0). Returns one row per row of ``a``
    (after aligning with ``b``), in that order.
    """
    a, b = a.align(b, join="inner")
    samples = a.columns
    d = paired_difference(a.to_numpy(dtype=float), b.to_numpy(dtype=float))  # [G, n]
    g, n = d.shape
    out = _empty(g)
    if g == 0 or n == 0:
        return pd.DataFrame(out)
    base = baseline.reindex(index=a.index, columns=samples).to_numpy(dtype=float)
    if tokens_a is not None and tokens_b is not None:
        t = (tokens_a.reindex(samples) - tokens_b.reindex(samples)).to_numpy(dtype=float)
    else:
        t = np.full(n, np.nan)
    d0 = layer0.reindex(samples).to_numpy(dtype=float) if layer0 is not None else np.full(n, np.nan)
    opts = {"n_boot": n_boot, "ci": ci, "seed": seed}
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
        has_t = bool(np.isfinite(tm).all())
        if has_t:
            out["n_tokens_diff"][idx] = tm.mean()
        adjust = has_t and adjustable(tm)
        if adjust:
            eff = adjusted_block(dm, tm, **opts)
            out["adjusted"][idx] = True
            out["adj_diff"][idx] = eff["effect"]
            out["adj_ci_low"][idx] = eff["ci_low"]
            out["adj_ci_high"][idx] = eff["ci_high"]
            out["adj_p_value"][idx] = eff["p"]
        else:  # the raw effect's size (its CI and p are the raw columns)
            eff = raw_size(dm)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["dz"][idx] = np.where(
                eff["sd"] > 0, eff["effect"] / eff["sd"], np.where(eff["effect"] == 0, 0.0, np.nan)
            )
        bm = base[idx][:, m]
        out["baseline_mean"][idx] = np.nanmean(bm, axis=1)
        bsd = np.array(
            [np.nanstd(r, ddof=1) if np.isfinite(r).sum() >= 2 else math.nan for r in bm]
        )
        out["baseline_sd"][idx] = bsd
        delta = sesoi * bsd
        out["sesoi"][idx] = delta
        out["p_tost"][idx] = tost_p(eff["effect"], eff["se"], eff["df"], delta)
        m0 = np.isfinite(d0[m])
        if m0.sum() >= 2:
            d0m = d0[m][m0]
            out["layer0_diff"][idx] = d0m.mean()
            out["layer0_p_value"][idx] = paired_p(
                d0m[None, :], test=test, n_perm=n_perm, seed=seed
            )[0]
            rel = dm[:, m0] - d0m[None, :]
            trel = tm[m0]
            if adjust and adjustable(trel):
                r = adjusted_block(rel, trel, **opts)
            else:
                r = raw_block(rel, **opts)
            out["rel_layer0_diff"][idx] = r["effect"]
            out["rel_layer0_ci_low"][idx] = r["ci_low"]
            out["rel_layer0_ci_high"][idx] = r["ci_high"]
    return pd.DataFrame(out)
