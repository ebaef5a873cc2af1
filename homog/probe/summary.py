"""Per-text probe and zero-shot outputs -> the rows of the ``probe_metrics`` table (pure).

Every row is a mean over reviews with a percentile bootstrap CI over reviews
(``homog.stats.paired_tests.bootstrap_ci``, the stats stage's draws). Kinds:

- ``level``: the accuracy (share of texts with margin > 0) or the mean margin of one
  (intervention, scheme, variant, layer); the zero-shot rows have scheme ``zero_shot`` and
  layer NULL, and beside them ``lm_auc``: the ROC AUC of the zero-shot log-odds against the
  label, with a bootstrap CI over the same resamples of reviews (``auc_rows``);
- ``diff``: the paired difference against a baseline over the reviews both hold, per review
  (correct as 0/1, margin), with a sign-flip p (``homog.stats.paired_tests.paired_p``), Holm over
  the family of the stage's diff rows of one metric (``p_holm``) and a verdict: ``lower`` or
  ``higher`` when p_holm < alpha, else ``no difference shown``. ``baseline`` names what is
  subtracted: ``original`` (the variant against the original, same intervention) or ``none``
  (the intervention against the unchanged model, same variant).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from homog.stats.paired_tests import (
    bootstrap_ci,
    holm,
    paired_difference,
    paired_p,
    resample_counts,
)

METRICS: tuple[str, ...] = ("accuracy", "margin")
# the zero-shot log-odds' ROC AUC against the label (level rows of scheme zero_shot only)
AUC_METRIC = "lm_auc"
NO_DIFFERENCE = "no difference shown"


def _values(frame: Any, metric: str) -> np.ndarray:
    return frame["correct"].to_numpy(float) if metric == "accuracy" else frame["margin"].to_numpy()


def level_rows(texts: Any, keys: Sequence[str], stats: Any) -> list[dict[str, Any]]:
    """One row per group of ``keys`` and metric: mean, bootstrap CI, n (reviews)."""
    rows = []
    for key, g in texts.groupby(list(keys), sort=True, dropna=False):
        g = g.sort_values("sample_id")
        for metric in METRICS:
            v = _values(g, metric)[None, :]
            low, high = bootstrap_ci(v, n_boot=stats.n_boot, ci=stats.ci, seed=stats.seed)
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "kind": "level",
                    "metric": metric,
                    "value": float(v.mean()),
                    "ci_low": float(low[0]),
                    "ci_high": float(high[0]),
                    "n": v.shape[1],
                }  # fmt: skip
            )
    return rows


def diff_rows(
    texts: Any, keys: Sequence[str], by: str, base: str, stats: Any
) -> list[dict[str, Any]]:
    """Paired differences (value - baseline, per review) of the groups of ``keys``.

    ``by`` is the column whose value ``base`` is the baseline (``variant``: ``original``;
    ``intervention``: ``none``); the other keys stay fixed within a pair, reviews are matched
    by sample_id. p_holm and verdict are filled by ``finish``.
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
                low, high = bootstrap_ci(d, n_boot=stats.n_boot, ci=stats.ci, seed=stats.seed)
                p = paired_p(d, test=stats.test, n_perm=stats.n_perm, seed=stats.seed)
                rows.append(
                    {**fixed, by: other, "kind": "diff", "baseline": base, "metric": metric,
                     "value": float(d.mean()), "ci_low": float(low[0]),
                     "ci_high": float(high[0]), "p_value": float(p[0]), "n": d.shape[1]}
                )  # fmt: skip
    return rows


def finish(rows: list[dict[str, Any]], alpha: float) -> Any:
    """The rows as a frame with p_holm (Holm per metric over the diff rows) and verdict."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    for col in ("baseline", "p_value", "p_holm", "verdict", "layer"):
        if col not in frame:
            frame[col] = None
    frame["p_holm"] = np.nan
    diff = frame["kind"] == "diff"
    for _, idx in frame[diff].groupby("metric").groups.items():
        frame.loc[idx, "p_holm"] = holm(frame.loc[idx, "p_value"].to_numpy(float))
    p = frame["p_holm"].to_numpy(float)
    v = frame["value"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        sig = diff.to_numpy() & (p < alpha) & (v != 0)
    frame["verdict"] = np.where(
        ~diff.to_numpy(), None, np.where(sig, np.where(v < 0, "lower", "higher"), NO_DIFFERENCE)
    )
    return frame


def summarise(probe: Any, lm: Any | None, stats: Any, positive_label: str | None = None) -> Any:
    """The ``probe_metrics`` rows (without model) of per-text outputs of every intervention.

    probe: ``homog.probe.fit.probe_texts`` frames with an ``intervention`` column; lm:
    ``homog.probe.lm.with_margin`` frames with ``intervention`` (or None); stats: the
    ``StatsConfig`` (n_boot, ci, alpha, test, n_perm, seed). In scheme ``per_variant`` a
    variant with fewer reviews than the original is compared with the original's probe
    trained on its reviews (train_set); the level rows are each variant's own probe. With
    ``positive_label`` the zero-shot answers also get ``lm_auc`` rows (``auc_rows``).
    """
    import pandas as pd

    keys = ["intervention", "scheme", "variant", "layer"]
    own = (probe["scheme"] != "per_variant") | (probe["train_set"] == probe["variant"])
    main = probe[own]
    rows = level_rows(main, keys, stats)
    rows += diff_rows(main[main["scheme"] != "per_variant"], keys, "variant", "original", stats)
    per = probe[probe["scheme"] == "per_variant"]
    for v in sorted(set(per["variant"]) - {"original"}):
        # the original trained on this variant's reviews when it has fewer (homog.probe.fit)
        base = per[(per["variant"] == "original") & (per["train_set"] == v)]
        if base.empty:
            base = per[(per["variant"] == "original") & (per["train_set"] == "original")]
        pair = pd.concat([per[(per["variant"] == v) & (per["train_set"] == v)], base])
        rows += diff_rows(pair, keys, "variant", "original", stats)
    rows += diff_rows(main, keys, "intervention", "none", stats)
    if lm is not None and len(lm):
        lm = lm.assign(scheme="zero_shot")
        lkeys = ["intervention", "scheme", "variant"]
        rows += level_rows(lm, lkeys, stats)
        if positive_label is not None:
            rows += auc_rows(lm, positive_label, stats)
        rows += diff_rows(lm, lkeys, "variant", "original", stats)
        rows += diff_rows(lm, lkeys, "intervention", "none", stats)
    frame = finish(rows, stats.alpha)
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
    draws = np.concatenate([weighted_auc(y, score, counts[i : i + 256])
                            for i in range(0, n_boot, 256)])  # fmt: skip
    alpha = (1.0 - ci) / 2.0
    low, high = np.nanquantile(draws, [alpha, 1.0 - alpha])
    return float(roc_auc_score(y, score)), float(low), float(high)


def auc_rows(lm: Any, positive_label: str, stats: Any) -> list[dict[str, Any]]:
    """One ``lm_auc`` level row per intervention and variant of the zero-shot answers: the ROC
    AUC of the log-odds against the label (positive class ``positive_label``), with its
    bootstrap CI over reviews (none for a group holding one label)."""
    rows = []
    for (iv, variant), g in lm.groupby(["intervention", "variant"], sort=True):
        g = g.sort_values("sample_id")
        y = (g["label"].astype(str) == positive_label).to_numpy()
        value, low, high = bootstrap_auc(y, g["log_odds"].to_numpy(float), n_boot=stats.n_boot,
                                         ci=stats.ci, seed=stats.seed)  # fmt: skip
        if np.isfinite(value):
            rows.append({"intervention": iv, "scheme": "zero_shot", "variant": variant,
                         "kind": "level", "metric": AUC_METRIC, "value": value, "ci_low": low,
                         "ci_high": high, "n": len(g)})  # fmt: skip
    return rows
