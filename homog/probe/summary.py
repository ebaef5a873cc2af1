"""Per-text probe and zero-shot outputs -> the rows of the ``probe_metrics`` table (pure).

Every row is a mean over reviews with a percentile bootstrap CI over reviews
(``homog.stats.paired_tests.bootstrap_ci``, the stats stage's draws). Kinds:

- ``level``: the accuracy (share of texts with margin > 0) or the mean margin of one
  (intervention, scheme, variant, layer); the zero-shot rows have scheme ``zero_shot`` and
  layer NULL, and beside them ``lm_auc``: the ROC AUC of the zero-shot log-odds against the
  label, with a bootstrap CI over the same resamples of reviews (``auc_rows``);
- ``diff``: the paired difference against a baseline over the reviews both hold, per review
  (correct as 0/1, margin), with a sign-flip p (``homog.stats.paired_tests.paired_p``) and the
  project's verdict (``homog.stats.verdicts``, docs/statistics.md) against a SESOI of
  ``stats.sesoi`` x a basis (``sesoi_of``): for accuracy the baseline's accuracy above
  chance (the majority label's share), for the margin the baseline's mean |margin|. Layer-0
  rows are controls (family ``control``: no Holm family, the verdict reads the raw p); every
  other diff row is in the family of its metric (``exploratory``: Holm over the model's diff
  rows of that metric). ``eq_ci_low`` / ``eq_ci_high``: the (1 - 2 alpha) CI of the same
  resamples, which the equivalence reads. ``baseline`` names what is subtracted:
  ``original`` (the variant against the original, same intervention) or ``none`` (the
  intervention against the unchanged model, same variant).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from homog.claims import CONTROL_FAMILY, EXPLORATORY
from homog.probe.best import crossfit_rows
from homog.stats.bands import band_of_layers
from homog.stats.paired_tests import (
    bootstrap_ci,
    holm,
    paired_difference,
    paired_p,
    refine_at_floor,
    resample_counts,
)
from homog.stats.settings import StatsSettings
from homog.stats.verdicts import verdict_of

METRICS: tuple[str, ...] = ("accuracy", "margin")
# the zero-shot log-odds' ROC AUC against the label (level rows of scheme zero_shot only)
AUC_METRIC = "lm_auc"
# the columns the verdict rule adds to the diff and slope rows
VERDICT_COLUMNS: tuple[str, ...] = ("family", "sesoi", "sesoi_basis", "eq_ci_low", "eq_ci_high")


def _values(frame: Any, metric: str) -> np.ndarray:
    return frame["correct"].to_numpy(float) if metric == "accuracy" else frame["margin"].to_numpy()


def level_rows(texts: Any, keys: Sequence[str], settings: StatsSettings) -> list[dict[str, Any]]:
    """One row per group of ``keys`` and metric: mean, bootstrap CI, n (reviews)."""
    rows = []
    for key, g in texts.groupby(list(keys), sort=True, dropna=False):
        g = g.sort_values("sample_id")
        for metric in METRICS:
            v = _values(g, metric)[None, :]
            low, high = bootstrap_ci(v, n_boot=settings.n_boot, ci=settings.ci, seed=settings.seed)
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "kind": "level",
                    "metric": metric,
                    "value": float(v.mean()),
                    "ci_low": float(low[0]),
                    "ci_high": float(high[0]),
                    "n": v.shape[1],
                }
            )
    return rows


def sesoi_of(base: Any, metric: str, factor: float) -> tuple[float, str]:
    """(SESOI, basis text) of a difference against the baseline texts ``base``: ``factor`` x
    the baseline's accuracy above chance (the majority label's share; NaN when it reads no
    better) or x its mean |margin| (log-odds)."""
    if metric == "accuracy":
        labels = base["y"] if "y" in base else base["label"].astype(str)
        chance = float(labels.value_counts(normalize=True).max())
        above = float(base["correct"].to_numpy(float).mean()) - chance
        text = f"{factor:g} x the baseline's accuracy above chance ({above:.3g})"
        return (factor * above if above > 0 else np.nan), text
    size = float(np.abs(base["margin"].to_numpy(float)).mean())
    return factor * size, f"{factor:g} x the baseline's mean |margin| ({size:.3g})"


def diff_rows(
    texts: Any, keys: Sequence[str], by: str, base: str, settings: StatsSettings
) -> list[dict[str, Any]]:
    """Paired differences (value - baseline, per review) of the groups of ``keys``.

    ``by`` is the column whose value ``base`` is the baseline (``variant``: ``original``;
    ``intervention``: ``none``); the other keys stay fixed within a pair, reviews are matched
    by sample_id. Each row has its CI, its equivalence CI (1 - 2 alpha, the same resamples)
    and SESOI (``sesoi_of``, factor ``stats.sesoi``); p_holm, family and verdict are filled
    by ``finish``.
    """
    rows = []
    rest = [k for k in keys if k != by]
    for key, g in texts.groupby(rest, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        fixed = dict(zip(rest, key, strict=True))
        baseline = g[g[by] == base].set_index("sample_id")
        for other, h in g[g[by] != base].groupby(by, sort=True):
            h = h.set_index("sample_id")
            common = sorted(set(h.index) & set(baseline.index))
            if not common:
                continue
            for metric in METRICS:
                a = _values(h.loc[common], metric)
                b = _values(baseline.loc[common], metric)
                d = paired_difference(a, b)[None, :]
                draws = dict(n_boot=settings.n_boot, seed=settings.seed)
                low, high = bootstrap_ci(d, ci=settings.ci, **draws)
                eq_low, eq_high = bootstrap_ci(d, ci=1 - 2 * settings.alpha, **draws)
                p = paired_p(d, test=settings.test, n_perm=settings.n_perm, seed=settings.seed)
                sesoi, basis = sesoi_of(baseline.loc[common], metric, settings.sesoi)
                rows.append(
                    {
                        **fixed,
                        by: other,
                        "kind": "diff",
                        "baseline": base,
                        "metric": metric,
                        "value": float(d.mean()),
                        "ci_low": float(low[0]),
                        "ci_high": float(high[0]),
                        "p_value": float(p[0]),
                        "n": d.shape[1],
                        "sesoi": sesoi,
                        "sesoi_basis": basis,
                        "eq_ci_low": float(eq_low[0]),
                        "eq_ci_high": float(eq_high[0]),
                        "_d": d[0],
                    }
                )
    return rows


def refine_family(frame: Any, idx: Any, settings: StatsSettings) -> None:
    """The sign-flip p of the family ``idx`` of ``frame`` (rows holding their per-review
    differences in ``_d``) redrawn where it sits at the floor and the family is too large for
    it (``homog.stats.paired_tests.refine_at_floor``), rows of one length at a time."""
    if settings.test != "sign_flip":
        return
    sub = frame.loc[idx]
    for _, same in sub.groupby(sub["_d"].map(len)).groups.items():
        d = np.stack(frame.loc[same, "_d"].to_list())
        frame.loc[same, "p_value"] = refine_at_floor(
            d,
            frame.loc[same, "p_value"].to_numpy(float),
            n_perm=settings.n_perm,
            family=len(idx),
            alpha=settings.alpha,
            seed=settings.seed,
        )


def finish(rows: list[dict[str, Any]], settings: StatsSettings) -> Any:
    """The rows as a frame with family, p_holm (Holm per metric over the non-control diff
    rows, the per-layer rows apart from the band and zero-shot rows; NaN on level rows and
    controls) and verdict (``homog.stats.verdicts``: a diff row claims no direction, so a
    significant difference outside the margin is ``supported`` whichever its sign; a
    control's verdict reads its raw p). A family's p-values at the sign-flip floor are
    redrawn first (``refine_family``)."""
    alpha = settings.alpha

    frame = pd.DataFrame(rows)
    for col in ("baseline", "p_value", "p_holm", "verdict", "layer", "band", *VERDICT_COLUMNS):
        if col not in frame:
            frame[col] = None
    diff = frame["kind"] == "diff"
    layer0 = (frame["layer"] == 0).fillna(False).astype(bool)
    if "band" in frame:
        layer0 |= (frame["band"] == "layer0").fillna(False).astype(bool)
    control = diff & layer0
    frame["family"] = np.where(control, CONTROL_FAMILY, np.where(diff, EXPLORATORY, None))
    frame["p_holm"] = np.nan
    # Holm per metric, the per-layer rows apart from the band and zero-shot rows
    level = np.where(frame["layer"].notna(), "layer", "band")
    family = frame[diff & ~control].assign(_level=level[diff & ~control])
    for _, idx in family.groupby(["metric", "_level"]).groups.items():
        if "_d" in frame:
            refine_family(frame, idx, settings)
        frame.loc[idx, "p_holm"] = holm(frame.loc[idx, "p_value"].to_numpy(float))
    frame["verdict"] = [
        None
        if not is_diff
        else verdict_of(
            r["value"],
            r["ci_low"],
            r["ci_high"],
            r["eq_ci_low"],
            r["eq_ci_high"],
            r["sesoi"],
            r["p_value"] if is_control else r["p_holm"],
            alpha,
            n=float(r.get("n", math.nan)),
        )
        for r, is_diff, is_control in zip(frame.to_dict("records"), diff, control, strict=True)
    ]
    return frame.drop(columns=["_d"], errors="ignore")


def band_texts(probe: Any) -> Any:
    """Per text and band (``homog.stats.bands.band_of_layers`` of the probe's layers:
    layer0, early, middle, late, final): the share of the band's layers where the text is read
    right (``correct``) and its mean margin, beside intervention, scheme, train_set, variant,
    sample_id and y."""
    keys = ["intervention", "scheme", "train_set", "variant", "sample_id"]
    parts = []
    for band, layers in band_of_layers(sorted(set(probe["layer"]))).items():
        sub = probe[probe["layer"].isin(layers)]
        agg = sub.groupby(keys, as_index=False).agg(
            correct=("correct", "mean"), margin=("margin", "mean"), y=("y", "first")
        )
        parts.append(agg.assign(band=band))
    return pd.concat(parts, ignore_index=True) if parts else probe.iloc[:0].assign(band=None)


def probe_rows(probe: Any, unit: str, settings: StatsSettings) -> list[dict[str, Any]]:
    """The level and diff rows of the probes' per-text outputs per ``unit`` (``layer``, or
    ``band`` for ``band_texts`` frames): against the original (train_original; per_variant
    against the original's probe on the same reviews) and against ``none``."""
    keys = ["intervention", "scheme", "variant", unit]
    own = (probe["scheme"] != "per_variant") | (probe["train_set"] == probe["variant"])
    main = probe[own]
    rows = level_rows(main, keys, settings)
    rows += diff_rows(main[main["scheme"] != "per_variant"], keys, "variant", "original", settings)
    per = probe[probe["scheme"] == "per_variant"]
    for v in sorted(set(per["variant"]) - {"original"}):
        # the original trained on this variant's reviews when it has fewer (homog.probe.fit)
        base = per[(per["variant"] == "original") & (per["train_set"] == v)]
        if base.empty:
            base = per[(per["variant"] == "original") & (per["train_set"] == "original")]
        pair = pd.concat([per[(per["variant"] == v) & (per["train_set"] == v)], base])
        rows += diff_rows(pair, keys, "variant", "original", settings)
    rows += diff_rows(main, keys, "intervention", "none", settings)
    return rows


def summarise(
    probe: Any, lm: Any | None, settings: StatsSettings, positive_label: str | None = None
) -> Any:
    """The ``probe_metrics`` rows (without model) of per-text outputs of every intervention.

    probe: ``homog.probe.fit.probe_texts`` frames with an ``intervention`` column; lm:
    ``homog.probe.lm.with_margin`` frames with ``intervention`` (or None); settings: the
    bootstrap, test and equivalence settings (the probe's seed). In scheme ``per_variant`` a
    variant with fewer reviews than the original is compared with the original's probe
    trained on its reviews (train_set); the level rows are each variant's own probe. With
    ``positive_label`` the zero-shot answers also get ``lm_auc`` rows (``auc_rows``).
    """
    rows = probe_rows(probe, "layer", settings)
    rows += probe_rows(band_texts(probe), "band", settings)
    if "fold" in probe.columns:
        rows += crossfit_rows(probe, settings)
    if lm is not None and len(lm):
        lm = lm.assign(scheme="zero_shot")
        lkeys = ["intervention", "scheme", "variant"]
        rows += level_rows(lm, lkeys, settings)
        if positive_label is not None:
            rows += auc_rows(lm, positive_label, settings)
        rows += diff_rows(lm, lkeys, "variant", "original", settings)
        rows += diff_rows(lm, lkeys, "intervention", "none", settings)
    frame = finish(rows, settings)
    for col in ("layer", "n"):
        frame[col] = frame[col].astype("Int64")
    return frame


def weighted_auc(y: np.ndarray, score: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC AUC of ``score`` against the 0/1 labels ``y`` [n] under each row of ``weights``
    [B, n] (bootstrap counts): the weighted Mann-Whitney share of (positive, negative) pairs
    ordered right, ties counting half, as ``sklearn.metrics.roc_auc_score`` with
    ``sample_weight``. NaN for a row whose weights leave one class empty."""
    y = np.asarray(y, dtype=bool)
    score = np.asarray(score, dtype=float)
    w = np.atleast_2d(np.asarray(weights, dtype=float))
    order = np.argsort(score, kind="stable")
    s, ys, w = score[order], y[order], w[:, order]
    first = np.searchsorted(s, s, side="left")  # a tie group's first and past-last positions
    last = np.searchsorted(s, s, side="right")
    pos = np.flatnonzero(ys)
    neg_w = np.where(ys, 0.0, w)
    cum = np.concatenate([np.zeros((len(w), 1)), np.cumsum(neg_w, axis=1)], axis=1)
    below = cum[:, first[pos]]
    equal = cum[:, last[pos]] - below
    u = (w[:, pos] * (below + 0.5 * equal)).sum(1)
    n_pos, n_neg = w[:, pos].sum(1), neg_w.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)


def bootstrap_auc(
    y: np.ndarray, score: np.ndarray, *, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(AUC, CI low, CI high): ``sklearn.metrics.roc_auc_score(y, score)`` and the percentile
    bootstrap CI over the n items (one per review: ``homog.stats.paired_tests.resample_counts``, the
    stats stage's draws; resamples holding one class only are left out). NaN when ``y``
    holds one class."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(y, dtype=bool)
    if y.all() or not y.any():
        return np.nan, np.nan, np.nan
    counts = resample_counts(len(y), n_boot, seed)
    draws = np.concatenate(
        [weighted_auc(y, score, counts[i : i + 256]) for i in range(0, n_boot, 256)]
    )
    alpha = (1.0 - ci) / 2.0
    low, high = np.nanquantile(draws, [alpha, 1.0 - alpha])
    return float(roc_auc_score(y, score)), float(low), float(high)


def auc_rows(lm: Any, positive_label: str, settings: StatsSettings) -> list[dict[str, Any]]:
    """One ``lm_auc`` level row per intervention and variant of the zero-shot answers: the ROC
    AUC of the log-odds against the label (positive class ``positive_label``), with its
    bootstrap CI over reviews (none for a group holding one label)."""
    rows = []
    for (iv, variant), g in lm.groupby(["intervention", "variant"], sort=True):
        g = g.sort_values("sample_id")
        y = (g["label"].astype(str) == positive_label).to_numpy()
        value, low, high = bootstrap_auc(
            y,
            g["log_odds"].to_numpy(float),
            n_boot=settings.n_boot,
            ci=settings.ci,
            seed=settings.seed,
        )
        if np.isfinite(value):
            rows.append(
                {
                    "intervention": iv,
                    "scheme": "zero_shot",
                    "variant": variant,
                    "kind": "level",
                    "metric": AUC_METRIC,
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                    "n": len(g),
                }
            )
    return rows
