"""What position alone does: the positional curve of the followed sentences, and what it
predicts for each sentence contrast (``sentence_contrasts.position_pred``).

Per metric and depth band (the per-text mean over the band's layers), the value of every
followed sentence that is not the key sentence, in every variant, is regressed on its place
with sentence fixed effects (each (review, sentence)'s mean over the variants removed, so a
sentence is compared only with itself elsewhere):

    y = a_first [first] + a_last [last] + sum_k b_k hat_k(relative position) + sentence + e

with hat functions at KNOTS (0.5 the reference). The key sentence is left out of the fit, so
the curve is what the place gives a sentence that is not the key: applied to the key
sentence's own places, it predicts what position alone would do to it. Each contrast row
gets the curve's prediction for its combination (the same terms and reviews as the row's
effect, identity pairs left out): beside a key-only move (key_first - key_mid) it is what any
sentence would get from that move; beside a key-specific difference of differences it is
near 0 by design (the same slots).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KNOTS = (0.0, 0.25, 0.75, 1.0)  # hat functions; 0.5 is the reference (absorbed)
STEP = 0.25


def design(position: np.ndarray, index: np.ndarray, n: np.ndarray) -> np.ndarray:
    """[rows x 6]: first, last, and the hat functions of the relative position at KNOTS."""
    p = np.asarray(position, dtype=float)
    cols = [(np.asarray(index) == 0), (np.asarray(index) == np.asarray(n) - 1)]
    cols += [np.clip(1 - np.abs(p - k) / STEP, 0, None) for k in KNOTS]
    return np.column_stack(cols).astype(float)


def band_values(frame: pd.DataFrame, bands: dict[str, list[int]]) -> pd.DataFrame:
    """One row per (variant, review, sentence, metric, band): the band's mean value, with the
    sentence's place (sent_index, rel_position, n_sentences) and flags."""
    keep = ["variant", "sample_id", "sentence", "sent_index", "rel_position", "metric"]
    flags = [c for c in ("is_key", "is_control", "is_ctrl") if c in frame.columns]
    parts = []
    for band, layers in bands.items():
        sel = frame[frame["layer"].isin(layers)]
        g = sel.groupby(keep, sort=False, observed=True)
        v = g["value"].mean().reset_index()
        f = g[flags].first().reset_index(drop=True) if flags else None
        part = v if f is None else pd.concat([v, f], axis=1)
        parts.append(part.assign(band=band))
    out = pd.concat(parts, ignore_index=True)
    # sentences in the text: from the relative position of any non-first sentence
    ratio = (out["sent_index"] / out["rel_position"].where(out["rel_position"] > 0)).round()
    n = ratio.groupby([out["variant"], out["sample_id"]]).transform("max")
    return out.assign(n_sentences=(n + 1).fillna(1))


def fit(rows: pd.DataFrame) -> np.ndarray | None:
    """The curve's coefficients (len 6) from one metric and band's rows, the key sentence left
    out, each (review, sentence) demeaned; None with too few rows."""
    r = rows[~rows["is_key"].astype(bool)] if "is_key" in rows.columns else rows
    r = r[np.isfinite(r["value"])]
    if len(r) < 12:
        return None
    x = design(
        r["rel_position"].to_numpy(), r["sent_index"].to_numpy(), r["n_sentences"].to_numpy()
    )
    groups = [r["sample_id"].to_numpy(), r["sentence"].to_numpy()]
    key = pd.MultiIndex.from_arrays(groups)
    xd = x - pd.DataFrame(x, index=key).groupby(level=[0, 1]).transform("mean").to_numpy()
    y = r["value"].to_numpy(dtype=float)
    yd = y - pd.Series(y, index=key).groupby(level=[0, 1]).transform("mean").to_numpy()
    beta, *_ = np.linalg.lstsq(xd, yd, rcond=None)
    return beta


def predicted_frame(frame: pd.DataFrame, bands: dict[str, list[int]]) -> pd.DataFrame:
    """``frame``'s rows per band, value replaced by the curve's prediction (the band's fit
    applied to the row's place) and ``layer`` by the band's order (0, 1, ...): the tables of
    homog.stats.sentences read it as they read the measured frame."""
    bv = band_values(frame, bands)
    order = {b: i for i, b in enumerate(bands)}
    parts = []
    for (_metric, band), rows in bv.groupby(["metric", "band"], sort=False):
        beta = fit(rows)
        if beta is None:
            continue
        x = design(
            rows["rel_position"].to_numpy(),
            rows["sent_index"].to_numpy(),
            rows["n_sentences"].to_numpy(),
        )
        parts.append(rows.assign(value=x @ beta, layer=order[band]))
    if not parts:
        return pd.DataFrame(columns=[*frame.columns])
    return pd.concat(parts, ignore_index=True)


def curve_points(frame: pd.DataFrame, bands: dict[str, list[int]]) -> pd.DataFrame:
    """The curve itself for the report: per metric and band, its value at the first place,
    the middle and the last (relative to the middle, in a text of 5 sentences)."""
    bv = band_values(frame, bands)
    out = []
    for (metric, band), rows in bv.groupby(["metric", "band"], sort=False):
        beta = fit(rows)
        if beta is None:
            continue
        x = design(np.array([0.0, 0.5, 1.0]), np.array([0, 2, 4]), np.array([5, 5, 5]))
        f = x @ beta
        out.append({"metric": metric, "band": band, "first": f[0] - f[1], "last": f[2] - f[1]})
    return pd.DataFrame(out)
