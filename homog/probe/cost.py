"""Cost against homogenization, within text: does a lower erank go with a worse reading?

Pure (numpy and pandas on frames). Per model, outcome, band and contrast, a least-squares
slope of the outcome on erank with two-way fixed effects:

- contrast ``variant`` (unchanged model): the texts of every variant of a review; fixed
  effects for the review (only within-review differences count) and for the variant (what
  a variant does to every review on average is absorbed, so the slope says whether the reviews
  whose erank a variant lowers more also lose more);
- contrast ``zero_pos``: each text under ``none`` and ``zero_pos``; fixed effects for the
  text and for the intervention (the average change is absorbed in the same way).

Outcomes: ``probe_margin`` (scheme ``train_original``: one probe reads every variant; the
margin averaged over the band's layers) and ``lm_margin`` (the zero-shot margin). Bands (from
``homog.stats.bands.band_of_layers``): ``late`` (the late band's mean erank and mean margin) and
``final`` (the final-norm layer). The slope is in margin units per unit of erank: positive
means a lower erank (more homogenization) goes with a smaller margin on the true label, a
cost. CI: percentile bootstrap over reviews (``homog.stats.paired_tests.resample_counts``, a
review's texts drawn together); p: 2 (1 + k) / (B + 1), k the draws in the smaller tail at 0
(``homog.stats.paired_tests.bootstrap_p``: never 0); Holm over the
model's rows (family ``primary``: the cost question's pre-registered endpoints); the
equivalence CI (1 - 2 alpha) from the same draws; and the project's verdict
(``homog.stats.verdicts``) with the claimed sign +1: ``supported`` (a cost shown, its CI
beyond the margin), ``reversed`` (a benefit), ``nonzero``, ``negligible``, ``equivalent`` or
``inconclusive``. The
SESOI (``slope_sesoi``) is ``stats.sesoi`` x the original's mean |margin| over its
early-to-late erank change: at a slope inside it, all the homogenization the network does
between its early and late layers would move the margin by less than that share of its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from homog.claims import PRIMARY
from homog.stats.bands import band_of_layers
from homog.stats.margins import depth_change
from homog.stats.paired_tests import bootstrap_p, holm, resample_counts
from homog.stats.settings import StatsSettings
from homog.stats.verdicts import verdict_of

OUTCOMES: tuple[str, ...] = ("probe_margin", "lm_margin")
BANDS: tuple[str, ...] = ("late", "final")


def fe_design(
    y: np.ndarray, x: np.ndarray, unit: np.ndarray, cond: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(Z, y~): x and the condition dummies (first level dropped) as columns of Z, and y, each
    demeaned within unit. By Frisch-Waugh-Lovell the coefficient of Z's first column in
    y~ ~ Z is that of x in y ~ x + unit FE + condition FE, also under weights that are
    constant within a unit (a review's bootstrap count)."""
    _, ui = np.unique(unit, return_inverse=True)
    conds, ci = np.unique(cond, return_inverse=True)
    z = np.zeros((len(y), len(conds)))
    z[:, 0] = x
    rows = np.flatnonzero(ci > 0)
    z[rows, ci[rows]] = 1.0
    size = np.bincount(ui).astype(float)

    def demean(a: np.ndarray) -> np.ndarray:
        sums = np.zeros((len(size), *a.shape[1:]))
        np.add.at(sums, ui, a)
        return a - (sums / size.reshape(-1, *[1] * (a.ndim - 1)))[ui]

    return demean(z), demean(np.asarray(y, dtype=float))


def fe_slopes(z: np.ndarray, yt: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The x coefficient of ``fe_design``'s system under each row of weights w [B, n]."""
    w = np.atleast_2d(w)
    a = np.einsum("bn,ni,nj->bij", w, z, z)
    b = np.einsum("bn,ni,n->bi", w, z, yt)
    # a condition no drawn text holds leaves its column empty: a tiny ridge on the dummies
    ridge = 1e-9 * np.maximum(np.einsum("bii->b", a) / a.shape[1], 1e-300)
    eye = np.eye(a.shape[1])
    eye[0, 0] = 0.0
    return np.linalg.solve(a + ridge[:, None, None] * eye, b[..., None])[:, 0, 0]


def fe_slope(
    y: np.ndarray, x: np.ndarray, unit: np.ndarray, cond: np.ndarray, w: np.ndarray | None = None
) -> float:
    """The coefficient of x in y ~ x + unit FE + condition FE (least squares; weights, if
    given, constant within a unit)."""
    z, yt = fe_design(y, x, unit, cond)
    return float(fe_slopes(z, yt, np.ones(len(yt)) if w is None else w)[0])


def slope_row(frame: Any, settings: StatsSettings, review: str = "review") -> dict[str, Any]:
    """Slope, bootstrap CI over reviews (``settings``), equivalence CI (1 - 2 alpha, the same
    draws), p and n of ``frame`` (columns y, x, unit, cond and ``review``; complete rows
    only)."""
    frame = frame.dropna(subset=["y", "x"])
    y, x = frame["y"].to_numpy(float), frame["x"].to_numpy(float)
    unit, cond = frame["unit"].to_numpy(str), frame["cond"].to_numpy(str)
    reviews, ri = np.unique(frame[review].to_numpy(str), return_inverse=True)
    out = {
        "value": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "eq_ci_low": np.nan,
        "eq_ci_high": np.nan,
        "p_value": np.nan,
        "n": len(reviews),
        "n_texts": len(y),
    }
    if len(reviews) < 3 or np.ptp(x) == 0:
        return out
    z, yt = fe_design(y, x, unit, cond)
    slope = float(fe_slopes(z, yt, np.ones(len(yt)))[0])
    boot = fe_slopes(z, yt, resample_counts(len(reviews), settings.n_boot, settings.seed)[:, ri])
    tail, alpha = (1 - settings.ci) / 2, settings.alpha
    low, high, eq_low, eq_high = np.quantile(boot, [tail, 1 - tail, alpha, 1 - alpha])
    p = bootstrap_p(boot)
    out.update(
        value=slope,
        ci_low=float(low),
        ci_high=float(high),
        eq_ci_low=float(eq_low),
        eq_ci_high=float(eq_high),
        p_value=float(p),
    )
    return out


def slope_sesoi(
    y: Any, erank: Any, bands: dict[str, list[int]], factor: float
) -> tuple[float, str]:
    """(SESOI in margin per erank, basis text): ``factor`` x the original's mean |margin|
    (``y``: the merged frame's outcome ``y`` of intervention none, variant original) over the
    original's early-to-late erank change (``homog.stats.margins.depth_change`` of
    ``erank``'s none / original rows). NaN where either is 0 or missing."""
    orig = erank[(erank["intervention"] == "none") & (erank["variant"] == "original")]
    table = (
        orig.pivot_table(index="layer", columns="sample_id", values="value") if len(orig) else None
    )
    depth = depth_change(table, bands)
    size = float(np.abs(y.to_numpy(float)).mean()) if len(y) else np.nan
    text = (
        f"{factor:g} x the original's mean |margin| ({size:.3g}) / its early-to-late erank "
        f"change ({depth:.3g})"
    )
    ok = np.isfinite(size) and np.isfinite(depth) and depth > 0 and size > 0
    return (factor * size / depth if ok else np.nan), text


def _band_mean(frame: Any, layers: Sequence[int], keys: list[str], col: str) -> Any:
    sub = frame[frame["layer"].isin(list(layers))]
    return sub.groupby(keys, as_index=False)[col].mean()


SLOPE_COLUMNS = [
    "outcome",
    "band",
    "contrast",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
    "n",
    "n_texts",
    "verdict",
    "family",
    "sesoi",
    "sesoi_basis",
    "eq_ci_low",
    "eq_ci_high",
]


def cost_slopes(
    probe: Any | None, lm: Any | None, erank: Any, settings: StatsSettings
) -> pd.DataFrame:
    """The slope rows of one model.

    probe: per-text probe outputs (intervention, scheme, variant, sample_id, layer, margin);
    lm: zero-shot outputs (intervention, variant, sample_id, margin); erank: per-text erank
    (intervention, variant, sample_id, layer, value), e.g. ``layer_metrics`` rows of metric
    ``erank`` joined to their runs' intervention; settings: the bootstrap, the equivalence CI
    and ``sesoi``, the factor of ``slope_sesoi``.
    Returns a frame of SLOPE_COLUMNS; empty without erank.
    """
    if erank is None or not len(erank):
        return pd.DataFrame(columns=SLOPE_COLUMNS)
    keys = ["intervention", "variant", "sample_id"]
    bands = band_of_layers(sorted(set(erank["layer"])))
    outcomes: dict[str, Any] = {}
    if probe is not None and len(probe):
        outcomes["probe_margin"] = probe[probe["scheme"] == "train_original"]
    if lm is not None and len(lm):
        outcomes["lm_margin"] = lm
    rows = []
    for band in BANDS:
        if band not in bands:
            continue
        x = _band_mean(erank, bands[band], keys, "value").rename(columns={"value": "x"})
        for outcome, data in outcomes.items():
            if outcome == "probe_margin":
                y = _band_mean(data, bands[band], keys, "margin")
            else:
                y = data[keys + ["margin"]]
            both = x.merge(y.rename(columns={"margin": "y"}), on=keys)
            orig = both[(both["intervention"] == "none") & (both["variant"] == "original")]
            bound, basis = slope_sesoi(orig["y"], erank, bands, settings.sesoi)
            for contrast, sub in _contrasts(both):
                rows.append(
                    {
                        "outcome": outcome,
                        "band": band,
                        "contrast": contrast,
                        "sesoi": bound,
                        "sesoi_basis": basis,
                        **slope_row(sub, settings),
                    }
                )
    return _judged(rows, settings.alpha)


def _judged(rows: list[dict[str, Any]], alpha: float) -> pd.DataFrame:
    """The slope ``rows`` with Holm's p over them all, their family and verdict."""
    frame = pd.DataFrame(
        rows, columns=[c for c in SLOPE_COLUMNS if c not in ("p_holm", "verdict", "family")]
    )
    frame["p_holm"] = holm(frame["p_value"].to_numpy(float)) if len(frame) else []
    frame["family"] = PRIMARY
    frame["verdict"] = [
        verdict_of(
            r["value"],
            r["ci_low"],
            r["ci_high"],
            r["eq_ci_low"],
            r["eq_ci_high"],
            r["sesoi"],
            r["p_holm"],
            alpha,
            sign=1,
            n=r["n"],
        )
        for r in frame.to_dict("records")
    ]
    return frame[SLOPE_COLUMNS]


def _contrasts(both: Any) -> list[tuple[str, Any]]:
    """(contrast, frame with y, x, unit, cond, review) of the merged outcome and erank."""
    out = []
    none = both[both["intervention"] == "none"]
    if none["variant"].nunique() > 1:
        out.append(
            (
                "variant",
                none.assign(unit=none["sample_id"], cond=none["variant"], review=none["sample_id"]),
            )
        )
    if "zero_pos" in set(both["intervention"]) and len(none):
        zp = both[both["intervention"].isin(["none", "zero_pos"])]
        texts = zp.groupby(["variant", "sample_id"])["intervention"].transform("nunique") == 2
        zp = zp[texts]
        if len(zp):
            out.append(
                (
                    "zero_pos",
                    zp.assign(
                        unit=zp["variant"] + "/" + zp["sample_id"],
                        cond=zp["intervention"],
                        review=zp["sample_id"],
                    ),
                )
            )
    return out
