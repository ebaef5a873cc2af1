"""Dose-response of the position family: each metric against the key sentence's position.

The token-preserving variants ``key_first``, ``key_mid``, ``key_last`` (and any finer sweep)
place a review's key sentence at a known relative position x (``texts.key_position``: its
first word as a share of the text's words, 0..1). Per run, metric and band (layer0 .. final),
the slope of the metric on x is estimated within text (text fixed effects):

    slope = sum_i S_xy,i / sum_i S_xx,i,
    S_xy,i = sum_v (x_iv - mean_v x_i)(y_iv - mean_v y_i),  S_xx,i = sum_v (x_iv - mean_v x_i)^2

over the variants v of text i with a position and a finite value (texts with fewer than two
distinct positions contribute nothing; a text whose values differ only by rounding, within
1e-9 of their size, contributes S_xy,i = 0: the same tokens reordered at layer 0). CI:
percentile bootstrap over texts (the stats stage's seeded resamples); p: the paired sign-flip
test (``stats.test``) of the S_xy,i (the numerator: under no position effect each is as likely
positive as negative). ``key_control``
(a non-key sentence moved) is not a dose: it is the family's negative control, contrasted in
``contrasts``. The slope is in the metric's unit per unit of x (first word to last word).

Rows (the ``dose_response`` table): ``kind = 'slope'`` (value = slope, intercept = the pooled
line's value at x = 0, p_value, p_holm: Holm over every slope row of the run, its metrics and
bands, the family a reader scans; n texts) and ``kind = 'point'`` (per variant: key_position =
its mean position, value = the metric's mean over the texts, ci_low / ci_high = value -+ a
normal 95 % half-width of the within-text deviations y_iv - mean_v y_i (the between-text
spread, which the paired slope does not see, left out), n texts): the points the figure draws
beside the line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from homog.paired_tests import NUMERIC_TOLERANCE, holm, paired_p, resample_counts

CONTROL = "key_control"
DOSE_COLUMNS = ("run_id", "metric", "band", "kind", "variant", "key_position", "value",
                "ci_low", "ci_high", "p_value", "n", "intercept", "p_holm")  # fmt: skip


def dose_variants(positions: pd.DataFrame) -> list[str]:
    """Variants with a key position, the control left out (sorted by mean position)."""
    p = positions[positions["key_position"].notna() & (positions["variant"] != CONTROL)]
    return list(p.groupby("variant")["key_position"].mean().sort_values().index)


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
    # has no slope: its deviations are set to exactly 0 (homog.paired_tests.NUMERIC_TOLERANCE)
    scale = np.where(m, np.abs(ys), 0.0).max(axis=0)
    dev = np.where((np.abs(dev) <= NUMERIC_TOLERANCE * scale).all(axis=0), 0.0, dev)
    sxy = (xc * dev).sum(0)
    sxx = (xc * xc).sum(0)
    used = (c >= 2) & (sxx > 1e-12)
    return np.where(used, sxy, 0.0), np.where(used, sxx, 0.0), used


def dose_rows(
    tables: dict[str, pd.DataFrame],
    positions: pd.DataFrame,
    run_id: str,
    metric: str,
    bands: dict[str, list[int]],
    *,
    n_boot: int,
    ci: float,
    seed: int,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> list[dict]:
    """The slope and point rows of one metric: ``tables`` variant -> [layer x sample_id]."""
    variants = [v for v in dose_variants(positions) if v in tables]
    if len(variants) < 2:
        return []
    samples = sorted(set.intersection(*(set(tables[v].columns) for v in variants)))
    pos = positions.set_index(["variant", "sample_id"])["key_position"]
    x = np.array([[pos.get((v, s), math.nan) for s in samples] for v in variants], dtype=float)
    y = np.stack(
        [
            np.stack(
                [
                    tables[v].reindex(index=ls, columns=samples).mean(axis=0, skipna=False)
                    for ls in bands.values()
                ]
            )  # fmt: skip
            for v in variants
        ]
    )  # [V, G, n]
    sxy, sxx, used = within_slopes(x, y)
    out: list[dict] = []
    n = len(samples)
    if n >= 2:
        w = resample_counts(n, n_boot, seed)  # [B, n]
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = sxy.sum(1) / sxx.sum(1)
            boot = (sxy @ w.T) / (sxx @ w.T)  # [G, B]
        half = (1 - ci) / 2
        low, high = np.nanquantile(boot, [half, 1 - half], axis=1)
        p = paired_p(sxy, test=test, n_perm=n_perm, seed=seed)
        for g, band in enumerate(bands):
            u = used[g]
            xm = np.nanmean(np.where(np.isfinite(y[:, g, :]), x, np.nan)[:, u])
            ym = np.nanmean(y[:, g, u])
            out.append({"run_id": run_id, "metric": metric, "band": band, "kind": "slope",
                        "variant": None, "key_position": None, "value": float(slope[g]),
                        "ci_low": float(low[g]), "ci_high": float(high[g]),
                        "p_value": float(p[g]), "n": int(u.sum()),
                        "intercept": float(ym - slope[g] * xm)})  # fmt: skip
    m = np.isfinite(y) & np.isfinite(x)[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        text_mean = np.where(m, y, 0.0).sum(0) / m.sum(0)  # [G, n] over the text's variants
    for vi, v in enumerate(variants):
        for g, band in enumerate(bands):
            ok = m[vi, g] & np.isfinite(text_mean[g])
            k = int(ok.sum())
            if k == 0:
                continue
            mean = float(y[vi, g, ok].mean())
            # the interval of the within-text deviation (text means removed): what the slope sees
            dev = y[vi, g, ok] - text_mean[g, ok]
            half_w = 1.959963984540054 * dev.std(ddof=1) / math.sqrt(k) if k > 1 else math.nan
            out.append({"run_id": run_id, "metric": metric, "band": band, "kind": "point",
                        "variant": v, "key_position": float(x[vi, ok].mean()), "value": mean,
                        "ci_low": mean - half_w, "ci_high": mean + half_w, "p_value": None,
                        "n": k, "intercept": None})  # fmt: skip
    return out


def dose_response(
    frame: pd.DataFrame,
    positions: pd.DataFrame | None,
    run_id: str,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    test: str = "sign_flip",
    n_perm: int = 10000,
    exclude: Sequence[str] = (),
) -> pd.DataFrame:
    """DOSE_COLUMNS rows of one run. ``frame``: its layer_metrics rows; ``positions``: rows
    (variant, sample_id, key_position) of the texts (None or no position: no rows);
    ``exclude``: metrics not to model (counts and indices)."""
    from homog.stats import _pivot, band_of_layers

    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in DOSE_COLUMNS})
    if positions is None or positions.empty or "key_position" not in positions:
        return empty
    frame = frame[~frame["metric"].isin(exclude)]
    wanted = set(dose_variants(positions))
    tables = _pivot(frame[frame["variant"].isin(wanted)])
    rows: list[dict] = []
    for metric in sorted({m for _, m in tables}):
        per = {v: t for (v, m), t in tables.items() if m == metric}
        if len(per) < 2:
            continue
        layers = sorted(set.intersection(*(set(t.index) for t in per.values())))
        bands = band_of_layers(layers)
        rows += dose_rows(per, positions, run_id, metric, bands, n_boot=n_boot, ci=ci,
                          seed=seed, test=test, n_perm=n_perm)  # fmt: skip
    if not rows:
        return empty
    out = pd.DataFrame(rows, columns=list(DOSE_COLUMNS))
    slope = out["kind"] == "slope"
    out.loc[slope, "p_holm"] = holm(out.loc[slope, "p_value"].to_numpy(dtype=float))
    return out
