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

The rows are built on arrays (``homog.probe.rows``: no frame per group or pair), each row's
CI and p those ``bootstrap_ci`` and ``paired_p`` give the row alone (tests/test_probe_summary.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from homog.claims import CONTROL_FAMILY, EXPLORATORY
from homog.errors import HomogError
from homog.probe.best import crossfit_rows
from homog.probe.rows import bootstrap_bounds, equal, group_rows, pair_stats, positions
from homog.stats.bands import band_of_layers
from homog.stats.paired_tests import (
    holm,
    paired_difference,
    refine_at_floor,
    resample_counts,
)
from homog.stats.settings import StatsSettings
from homog.stats.verdicts import verdict_of

METRICS: tuple[str, ...] = ("accuracy", "margin")
# the zero-shot log-odds' ROC AUC against the label (level rows of scheme zero_shot only)
AUC_METRIC = "lm_auc"
# the columns of a diff row after its keys, in their order
DIFF_COLUMNS: tuple[str, ...] = (
    "kind",
    "baseline",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "n",
    "sesoi",
    "sesoi_basis",
    "eq_ci_low",
    "eq_ci_high",
    "_d",
)
# the columns of a level row after its keys, in their order
LEVEL_COLUMNS: tuple[str, ...] = ("kind", "metric", "value", "ci_low", "ci_high", "n")
# the columns the verdict rule adds to the diff and slope rows
VERDICT_COLUMNS: tuple[str, ...] = ("family", "sesoi", "sesoi_basis", "eq_ci_low", "eq_ci_high")


def _values(frame: Any, metric: str) -> np.ndarray:
    return frame["correct"].to_numpy(float) if metric == "accuracy" else frame["margin"].to_numpy()


def level_rows(texts: Any, keys: Sequence[str], settings: StatsSettings) -> list[dict[str, Any]]:
    """One row per group of ``keys`` and metric: mean, bootstrap CI, n (reviews); the texts
    of a group in sample_id order, each row's CI the one ``bootstrap_ci`` gives it alone
    (``bootstrap_bounds``)."""
    rows, values = [], []
    ids = texts["sample_id"].to_numpy()
    by_metric = {m: _values(texts, m) for m in METRICS}
    for key, pos in group_rows(texts, keys):
        pos = pos[np.argsort(ids[pos], kind="stable")]
        for metric in METRICS:
            v = by_metric[metric][pos]
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "kind": "level",
                    "metric": metric,
                    "value": float(v[None, :].mean()),
                    "n": v.size,
                }
            )
            values.append(v)
    bounds = bootstrap_bounds(values, [settings.ci], settings)
    for row, (low, high) in zip(rows, bounds, strict=True):
        row.update(ci_low=low[0], ci_high=high[0])
    return [{k: row[k] for k in (*keys, *LEVEL_COLUMNS)} for row in rows]


def sesoi_of(base: Any, metric: str, factor: float) -> tuple[float, str]:
    """(SESOI, basis text) of a difference against the baseline texts ``base``: ``factor`` x
    the baseline's accuracy above chance (the majority label's share; NaN when it reads no
    better) or x its mean |margin| (log-odds)."""
    if metric == "accuracy":
        labels = base["y"] if "y" in base else base["label"].astype(str)
        return _sesoi(base["correct"].to_numpy(float), labels.to_numpy(), metric, factor)
    return _sesoi(base["margin"].to_numpy(float), None, metric, factor)


def _sesoi(
    values: np.ndarray, labels: np.ndarray | None, metric: str, factor: float
) -> tuple[float, str]:
    """``sesoi_of`` on arrays: the baseline's correct (0/1) and labels, or its margins."""
    values = np.asarray(values, dtype=float)
    if metric == "accuracy":
        _, counts = np.unique(labels[pd.notna(labels)], return_counts=True)
        chance = float((counts / counts.sum()).max())  # value_counts(normalize=True).max()
        above = float(values.mean()) - chance
        text = f"{factor:g} x the baseline's accuracy above chance ({above:.3g})"
        return (factor * above if above > 0 else np.nan), text
    size = float(np.abs(values).mean())
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

    The pairs are matched on arrays (sample_id -> row), then the statistics of all rows come
    from ``pair_stats``: each row's resampled means and sign flips by its own product, as
    one row at a time gave (a product over many rows rounds them differently).
    """
    rows, diffs = [], []
    rest = [k for k in keys if k != by]
    all_ids = texts["sample_id"].to_numpy()
    all_by = texts[by].to_numpy()
    all_values = {m: _values(texts, m) for m in METRICS}
    all_labels = (texts["y"] if "y" in texts else texts["label"].astype(str)).to_numpy()
    for key, pos in group_rows(texts, rest):
        fixed = dict(zip(rest, key, strict=True))
        sides, ids, labels = all_by[pos], all_ids[pos], all_labels[pos]
        values = {m: v[pos] for m, v in all_values.items()}
        is_base = equal(sides, base)
        where_base, twice_base = positions(ids, is_base)
        for other in sorted({v for v in sides[~is_base].tolist() if not pd.isna(v)}):
            where, twice = positions(ids, equal(sides, other))
            common = sorted(set(where) & set(where_base))
            if not common:
                continue
            if (twice | twice_base) & set(common):
                raise HomogError(
                    f"a review appears twice in the pair {other} - {base} of {fixed}: "
                    "one row per review"
                )
            rows_a = np.array([where[s] for s in common])
            rows_b = np.array([where_base[s] for s in common])
            for metric in METRICS:
                d = paired_difference(values[metric][rows_a], values[metric][rows_b])
                sesoi, basis = _sesoi(
                    values[metric][rows_b], labels[rows_b], metric, settings.sesoi
                )
                rows.append(
                    {
                        **fixed,
                        by: other,
                        "kind": "diff",
                        "baseline": base,
                        "metric": metric,
                        "value": float(d[None, :].mean()),
                        "n": d.size,
                        "sesoi": sesoi,
                        "sesoi_basis": basis,
                        "_d": d,
                    }
                )
                diffs.append(d)
    for row, stats in zip(rows, pair_stats(diffs, settings), strict=True):
        row.update(stats)
    return [{k: row[k] for k in (*rest, by, *DIFF_COLUMNS)} for row in rows]


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
