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

The U-shape: rows ``kind = 'quadratic'`` hold c of y = a_i + b z + c z^2 fitted
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

from homog.stats.bands import band_of_layers, pivot_metrics
from homog.stats.dose_fit import quadratic_boot, within_quadratic, within_slopes
from homog.stats.paired_tests import holm, paired_p, resample_counts
from homog.stats.settings import StatsSettings
from homog.variants import NOT_KEY_MOVES

DOSE_COLUMNS = (
    "run_id",
    "metric",
    "band",
    "kind",
    "variant",
    "key_position",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "n",
    "intercept",
    "p_holm",
    "sesoi",
    "sesoi_basis",
    "eq_ci_low",
    "eq_ci_high",
)


def dose_variants(positions: pd.DataFrame) -> list[str]:
    """Variants with a key position, the controls left out (sorted by mean position)."""
    p = positions[positions["key_position"].notna() & ~positions["variant"].isin(NOT_KEY_MOVES)]
    return list(p.groupby("variant")["key_position"].mean().sort_values().index)


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
    settings: StatsSettings,
    sesoi: tuple[np.ndarray, list[str]] | None = None,
) -> list[dict]:
    """The slope, quadratic and point rows of one metric: ``tables`` variant -> [layer x
    sample_id]. ``sesoi``: per band the slope's smallest effect of interest and its basis text
    (None: NaN); the quadratic's is 4 x it. The equivalence CI is 1 - 2 ``settings.alpha``."""
    variants = [v for v in dose_variants(positions) if v in tables]
    if len(variants) < 2:
        return []
    x, y = dose_values(tables, positions, variants, bands)
    key = {"run_id": run_id, "metric": metric}
    out: list[dict] = []
    if x.shape[1] >= 2:
        if sesoi is None:
            sesoi = (np.full(len(bands), np.nan), [None] * len(bands))
        out += _fitted_rows(key, bands, x, y, settings, sesoi)
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
            )
            for v in variants
        ]
    )  # [V, G, n]
    return x, y


def _fitted_rows(
    key: dict,
    bands: dict[str, list[int]],
    x: np.ndarray,
    y: np.ndarray,
    settings: StatsSettings,
    sesoi: tuple[np.ndarray, list[str | None]],
) -> list[dict]:
    """Per band the slope row and, with three variants or more, the quadratic row (``key``:
    run_id and metric) of values y [V, G, n] at positions x [V, n], n >= 2 texts; ``sesoi``:
    per band the slope's SESOI and its basis text."""
    w = resample_counts(x.shape[1], settings.n_boot, settings.seed)  # [B, n]
    slopes = _slope_rows(key, bands, x, y, w, settings, sesoi)
    if x.shape[0] < 3:
        return slopes
    quadratics = _quadratic_rows(key, bands, x, y, w, settings, sesoi)
    return [row for pair in zip(slopes, quadratics, strict=True) for row in pair]


def _slope_rows(
    key: dict,
    bands: dict[str, list[int]],
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    settings: StatsSettings,
    sesoi: tuple[np.ndarray, list[str | None]],
) -> list[dict]:
    """Per band the slope row, its CI from the resample weights ``w`` [B, n] of texts."""
    sxy, sxx, used = within_slopes(x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = sxy.sum(1) / sxx.sum(1)
        boot = (sxy @ w.T) / (sxx @ w.T)  # [G, B]
    half = (1 - settings.ci) / 2
    low, high = np.nanquantile(boot, [half, 1 - half], axis=1)
    p = paired_p(sxy, test=settings.test, n_perm=settings.n_perm, seed=settings.seed)
    eq_low, eq_high = _eq(boot, settings.alpha)
    delta, basis = sesoi
    out: list[dict] = []
    for g, band in enumerate(bands):
        u = used[g]
        xm = np.nanmean(np.where(np.isfinite(y[:, g, :]), x, np.nan)[:, u])
        ym = np.nanmean(y[:, g, u])
        out.append(
            {
                **key,
                "band": band,
                "kind": "slope",
                "variant": None,
                "key_position": None,
                "value": float(slope[g]),
                "ci_low": float(low[g]),
                "ci_high": float(high[g]),
                "p_value": float(p[g]),
                "n": int(u.sum()),
                "intercept": float(ym - slope[g] * xm),
                "sesoi": float(delta[g]),
                "sesoi_basis": basis[g],
                "eq_ci_low": float(eq_low[g]),
                "eq_ci_high": float(eq_high[g]),
            }
        )
    return out


def _quadratic_rows(
    key: dict,
    bands: dict[str, list[int]],
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    settings: StatsSettings,
    sesoi: tuple[np.ndarray, list[str | None]],
) -> list[dict]:
    """Per band the quadratic row (three variants or more), its CI refitted on the resample
    weights ``w`` [B, n] of texts; its SESOI is 4 x the slope's."""
    theta, q, qused = within_quadratic(x, y)
    qboot = quadratic_boot(x, y, w)
    half = (1 - settings.ci) / 2
    with np.errstate(invalid="ignore"):
        qlow, qhigh = np.nanquantile(qboot, [half, 1 - half], axis=1)
    qeq_low, qeq_high = _eq(qboot, settings.alpha)
    qp = paired_p(q, test=settings.test, n_perm=settings.n_perm, seed=settings.seed)
    delta, basis = sesoi
    return [
        {
            **key,
            "band": band,
            "kind": "quadratic",
            "variant": None,
            "key_position": None,
            "value": float(theta[g, 1]),
            "ci_low": float(qlow[g]),
            "ci_high": float(qhigh[g]),
            "p_value": float(qp[g]),
            "n": int(qused[g].sum()),
            "intercept": None,
            "sesoi": 4.0 * float(delta[g]),
            "sesoi_basis": None if basis[g] is None else f"4 x ({basis[g]})",
            "eq_ci_low": float(qeq_low[g]),
            "eq_ci_high": float(qeq_high[g]),
        }
        for g, band in enumerate(bands)
    ]


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
            out.append(
                {
                    **key,
                    "band": band,
                    "kind": "point",
                    "variant": v,
                    "key_position": float(x[vi, ok].mean()),
                    "value": mean,
                    "ci_low": mean - half_w,
                    "ci_high": mean + half_w,
                    "p_value": None,
                    "n": k,
                    "intercept": None,
                }
            )
    return out


def dose_response(
    frame: pd.DataFrame,
    positions: pd.DataFrame | None,
    run_id: str,
    settings: StatsSettings,
    *,
    exclude: Sequence[str] = (),
    reference: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """DOSE_COLUMNS rows of one run. ``frame``: its layer_metrics rows; ``positions``: rows
    (variant, sample_id, key_position) of the texts (None or no position: no rows);
    ``exclude``: metrics not to model (counts and indices); the smallest effect of interest
    is ``settings``' rule (homog.stats.margins) of the original of ``reference``
    (layer_metrics rows; default ``frame``: the unchanged run's for an intervention run); the
    equivalence CI is 1 - 2 ``settings.alpha``."""
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
        delta = metric_sesoi(originals.get(metric), bands, settings, metric)
        rows += dose_rows(per, positions, run_id, metric, bands, settings, delta)
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
    settings: StatsSettings,
    metric: str = "",
) -> tuple[np.ndarray, list[str | None]] | None:
    """Per band the slope's SESOI and its basis text (homog.stats.margins, without
    ``stats.sesoi_pin``): the metric's SESOI at that band, as a slope is the change from the
    first word to the last in metric units. None without an original."""
    if original is None:
        return None
    margin = settings.margin(original, metric=metric, pinned=False)
    sd = [
        float(original.reindex(ls).mean(axis=0, skipna=False).std(ddof=1)) for ls in bands.values()
    ]
    rules = [margin.of(band, x) for band, x in zip(bands, sd, strict=True)]
    return np.array([r[0] for r in rules], dtype=float), [r[1] for r in rules]
