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
positive as negative). ``key_control`` and ctrl_first / ctrl_mid / ctrl_last
(a non-key sentence moved) are not a dose: they are the family's controls, contrasted in
``contrasts``. The slope is in the metric's unit per unit of x (first word to last word).

Rows (the ``dose_response`` table): ``kind = 'slope'`` (value = slope, intercept = the pooled
line's value at x = 0, p_value, p_holm: Holm over every slope row of the run, its metrics and
bands, the family a reader scans; n texts) and ``kind = 'point'`` (per variant: key_position =
its mean position, value = the metric's mean over the texts, ci_low / ci_high = value -+ a
normal 95 % half-width of the within-text deviations y_iv - mean_v y_i (the between-text
spread, which the paired slope does not see, left out), n texts): the points the figure draws
beside the line.

The U-shape (issue 38): rows ``kind = 'quadratic'`` hold c of y = a_i + b z + c z^2 fitted
within text (text fixed effects, :func:`within_quadratic`), z = x - 0.5 (the centring leaves c
unchanged and makes b the slope at the middle); c > 0 is a U (ends above the middle). With
the three positions first, mid and last per text the quadratic is exactly identified from
them, and c is proportional to the text's (first + last) / 2 - mid (exactly 4 x it when the
positions are 0, 0.5, 1: z^2 = 1/4 at both ends, 0 in the middle). CI: the same bootstrap
of texts, c refitted; p: the paired test (``stats.test``) of the per-text contributions q_i
to c (they sum to c; a linear trend whose per-text design differs adds spread to the null,
which errs towards a larger p). Holm runs over the run's quadratic rows, apart from its
slope rows. ``sesoi``: the slope's is the metric's SESOI (a slope is the change from the
first word to the last); the quadratic's is 4 x it (c / 4 is the ends' rise above the middle
at x = 0 and 1); ``eq_ci_low``, ``eq_ci_high``: the (1 - 2 alpha) interval of the same
resamples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from homog.stats.paired_tests import NUMERIC_TOLERANCE, holm, paired_p, resample_counts
from homog.variants import NOT_KEY_MOVES

DOSE_COLUMNS = ("run_id", "metric", "band", "kind", "variant", "key_position", "value",
                "ci_low", "ci_high", "p_value", "n", "intercept", "p_holm", "sesoi",
                "sesoi_basis", "eq_ci_low", "eq_ci_high")  # fmt: skip
CENTRE = 0.5  # the quadratic's x is centred here: its linear term is the slope at the middle


def dose_variants(positions: pd.DataFrame) -> list[str]:
    """Variants with a key position, the controls left out (sorted by mean position)."""
    p = positions[positions["key_position"].notna() & ~positions["variant"].isin(NOT_KEY_MOVES)]
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
    s11, s12, s22, s1y, s2y = ((a * b).sum(0) @ w.T for a, b in
                               ((c1, c1), (c1, c2), (c2, c2), (c1, dev), (c2, dev)))  # fmt: skip
    det = s11 * s22 - s12 * s12
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.abs(det) > 1e-12 * np.abs(s11 * s22)
        return np.where(ok, (s11 * s2y - s12 * s1y) / det, np.nan)


def _eq(boot: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    h = alpha  # the (1 - 2 alpha) interval
    with np.errstate(invalid="ignore"):
        return tuple(np.nanquantile(boot, [h, 1 - h], axis=1))  # type: ignore[return-value]


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
    sesoi: tuple[np.ndarray, list[str]] | None = None,
    alpha: float = 0.05,
) -> list[dict]:
    """The slope, quadratic and point rows of one metric: ``tables`` variant -> [layer x
    sample_id]. ``sesoi``: per band the slope's smallest effect of interest and its basis text
    (None: NaN); the quadratic's is 4 x it. ``alpha``: the equivalence CI is 1 - 2 alpha."""
    variants = [v for v in dose_variants(positions) if v in tables]
    if len(variants) < 2:
        return []
    x, y = dose_values(tables, positions, variants, bands)
    key = {"run_id": run_id, "metric": metric}
    out: list[dict] = []
    if x.shape[1] >= 2:
        out += _fitted_rows(key, bands, x, y, n_boot=n_boot, ci=ci, seed=seed, test=test,
                            n_perm=n_perm, sesoi=sesoi, alpha=alpha)  # fmt: skip
    return out + _point_rows(key, bands, variants, x, y)


def dose_values(
    tables: dict[str, pd.DataFrame],
    positions: pd.DataFrame,
    variants: list[str],
    bands: dict[str, list[int]],
) -> tuple[np.ndarray, np.ndarray]:
    """(positions x [V, n], band means y [V, G, n]) of ``variants`` over the texts all of them
    have (sorted ``sample_id``s; ``tables``: variant -> [layer x sample_id])."""
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
    return x, y


def _fitted_rows(
    key: dict,
    bands: dict[str, list[int]],
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_boot: int,
    ci: float,
    seed: int,
    test: str,
    n_perm: int,
    sesoi: tuple[np.ndarray, list[str]] | None,
    alpha: float,
) -> list[dict]:
    """Per band the slope row and, with three variants or more, the quadratic row (``key``:
    run_id and metric) of values y [V, G, n] at positions x [V, n], n >= 2 texts."""
    sxy, sxx, used = within_slopes(x, y)
    w = resample_counts(x.shape[1], n_boot, seed)  # [B, n]
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = sxy.sum(1) / sxx.sum(1)
        boot = (sxy @ w.T) / (sxx @ w.T)  # [G, B]
    half = (1 - ci) / 2
    low, high = np.nanquantile(boot, [half, 1 - half], axis=1)
    p = paired_p(sxy, test=test, n_perm=n_perm, seed=seed)
    eq_low, eq_high = _eq(boot, alpha)
    delta, basis = sesoi if sesoi is not None else (np.full(len(bands), np.nan),
                                                    [None] * len(bands))  # fmt: skip
    quad = x.shape[0] >= 3
    if quad:
        theta, q, qused = within_quadratic(x, y)
        qboot = quadratic_boot(x, y, w)
        with np.errstate(invalid="ignore"):
            qlow, qhigh = np.nanquantile(qboot, [half, 1 - half], axis=1)
        qeq_low, qeq_high = _eq(qboot, alpha)
        qp = paired_p(q, test=test, n_perm=n_perm, seed=seed)
    out: list[dict] = []
    for g, band in enumerate(bands):
        u = used[g]
        xm = np.nanmean(np.where(np.isfinite(y[:, g, :]), x, np.nan)[:, u])
        ym = np.nanmean(y[:, g, u])
        out.append({**key, "band": band, "kind": "slope",
                    "variant": None, "key_position": None, "value": float(slope[g]),
                    "ci_low": float(low[g]), "ci_high": float(high[g]),
                    "p_value": float(p[g]), "n": int(u.sum()),
                    "intercept": float(ym - slope[g] * xm), "sesoi": float(delta[g]),
                    "sesoi_basis": basis[g], "eq_ci_low": float(eq_low[g]),
                    "eq_ci_high": float(eq_high[g])})  # fmt: skip
        if quad:
            out.append({**key, "band": band,
                        "kind": "quadratic", "variant": None, "key_position": None,
                        "value": float(theta[g, 1]), "ci_low": float(qlow[g]),
                        "ci_high": float(qhigh[g]), "p_value": float(qp[g]),
                        "n": int(qused[g].sum()),
                        "intercept": None, "sesoi": 4.0 * float(delta[g]),
                        "sesoi_basis": None if basis[g] is None else f"4 x ({basis[g]})",
                        "eq_ci_low": float(qeq_low[g]),
                        "eq_ci_high": float(qeq_high[g])})  # fmt: skip
    return out


def _point_rows(
    key: dict, bands: dict[str, list[int]], variants: list[str], x: np.ndarray, y: np.ndarray
) -> list[dict]:
    """Per variant and band the point row (``key``: run_id and metric): the mean position and
    value over the texts, with the interval of the within-text deviations."""
    m = np.isfinite(y) & np.isfinite(x)[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        text_mean = np.where(m, y, 0.0).sum(0) / m.sum(0)  # [G, n] over the text's variants
    out: list[dict] = []
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
            out.append({**key, "band": band, "kind": "point",
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
    sesoi: float = 0.1,
    sesoi_basis: str = "sd",
    alpha: float = 0.05,
    reference: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """DOSE_COLUMNS rows of one run. ``frame``: its layer_metrics rows; ``positions``: rows
    (variant, sample_id, key_position) of the texts (None or no position: no rows);
    ``exclude``: metrics not to model (counts and indices); ``sesoi``, ``sesoi_basis``: the
    smallest effect of interest (homog.stats.margins) of the original of
    ``reference`` (layer_metrics rows; default ``frame``: the unchanged run's for an
    intervention run); ``alpha``: the equivalence CI is 1 - 2 alpha."""
    from homog.stats.contrasts import band_of_layers, pivot_metrics

    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in DOSE_COLUMNS})
    if positions is None or positions.empty or "key_position" not in positions:
        return empty
    frame = frame[~frame["metric"].isin(exclude)]
    wanted = set(dose_variants(positions))
    tables = pivot_metrics(frame[frame["variant"].isin(wanted)])
    ref = frame if reference is None else reference[~reference["metric"].isin(exclude)]
    originals = {m: t for (v, m), t in pivot_metrics(ref[ref["variant"] == "original"]).items()}
    rows: list[dict] = []
    for metric in sorted({m for _, m in tables}):
        per = {v: t for (v, m), t in tables.items() if m == metric}
        if len(per) < 2:
            continue
        layers = sorted(set.intersection(*(set(t.index) for t in per.values())))
        bands = band_of_layers(layers)
        delta = metric_sesoi(originals.get(metric), bands, sesoi, sesoi_basis, metric)
        rows += dose_rows(per, positions, run_id, metric, bands, n_boot=n_boot, ci=ci,
                          seed=seed, test=test, n_perm=n_perm, sesoi=delta,
                          alpha=alpha)  # fmt: skip
    if not rows:
        return empty
    out = pd.DataFrame(rows, columns=list(DOSE_COLUMNS))
    for kind in ("slope", "quadratic"):  # one Holm family per kind
        sel = out["kind"] == kind
        out.loc[sel, "p_holm"] = holm(out.loc[sel, "p_value"].to_numpy(dtype=float))
    return out


def metric_sesoi(
    original: pd.DataFrame | None,
    bands: dict[str, list[int]],
    factor: float,
    basis: str,
    metric: str = "",
) -> tuple[np.ndarray, list[str | None]] | None:
    """Per band the slope's SESOI and its basis text (homog.stats.margins): the metric's
    SESOI at that band, as a slope is the change from the first word to the last in metric
    units. None without an original."""
    from homog.stats.contrasts import band_of_layers
    from homog.stats.margins import margin_of

    if original is None:
        return None
    margin = margin_of(factor, basis, original, band_of_layers(list(original.index)), metric=metric)
    sd = [
        float(original.reindex(ls).mean(axis=0, skipna=False).std(ddof=1)) for ls in bands.values()
    ]
    rules = [margin.of(band, x) for band, x in zip(bands, sd, strict=True)]
    return np.array([r[0] for r in rules], dtype=float), [r[1] for r in rules]
