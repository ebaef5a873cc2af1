"""The probe's reading of the sentiment under the homogenize doses: the ``probe_accuracy`` and
``probe_margin`` rows of ``intervention_cost`` (homog.stats.intervention_cost).

The scheme is the probe stage's ``train_original`` (docs/probe.md): per layer and fold, a
logistic probe (standardized features, L2, ``probe.c``'s first value, ``probe.max_iter``)
trained on the unchanged run's originals of the other folds reads the held-out texts under
every dose of both arms, from the runs' own ``pooled_mean.npy`` (the extraction keeps every
text's mean-pooled vectors, so no forward pass is needed). The folds are stratified by label
and seeded; the graded runs hold one text per review (the originals), so no review is ever in
train and test. Per text and band (``final``: the last layer; ``late``: the mean over the late
band's layers) the margin is the probe's logit signed by the label and the accuracy the share
of the band's layers read right.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from homog.stats.bands import band_of_layers
from homog.stats.cost_rows import ARMS, BANDS, CostInputs, mean_row
from homog.stats.settings import StatsSettings

PROBE_METRICS = ("probe_accuracy", "probe_margin")


def fold_of(positive: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """(n,) the outer fold of each text, stratified by label and seeded."""
    from sklearn.model_selection import StratifiedKFold

    out = np.empty(len(positive), dtype=int)
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for k, (_, test) in enumerate(cv.split(np.zeros(len(positive)), positive)):
        out[test] = k
    return out


def held_out_margins(
    train: np.ndarray,
    tests: Sequence[np.ndarray],
    positive: np.ndarray,
    fold: np.ndarray,
    c: float,
    max_iter: int,
    seed: int,
) -> np.ndarray:
    """[V, n] margins of each text of each ``tests`` [n, d] read by the probe trained on the
    other folds' rows of ``train`` [n, d] (the label's sign applied)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    out = np.empty((len(tests), len(positive)))
    for k in np.unique(fold):
        tr, te = fold != k, fold == k
        scaler = StandardScaler().fit(train[tr])
        clf = LogisticRegression(C=c, max_iter=max_iter, random_state=seed)
        clf.fit(scaler.transform(train[tr]), positive[tr])
        for v, x in enumerate(tests):
            out[v, te] = clf.decision_function(scaler.transform(x[te]))
    return out * np.where(positive, 1.0, -1.0)


def probe_bands(
    base: np.ndarray,
    arms: dict[str, list[np.ndarray]],
    positive: np.ndarray,
    *,
    folds: int,
    c: float,
    max_iter: int,
    seed: int,
) -> dict[str, np.ndarray]:
    """arm -> [V, len(BANDS), 2, n]: per dose and band the texts' probe accuracy (the share of
    the band's layers read right) and mean margin. ``base`` [n, L+1, d]: the unchanged run's
    vectors (the probes' training rows); ``arms``: arm -> per dose [n, L+1, d]."""
    bands = band_of_layers(list(range(base.shape[1])))
    bands = {b: bands.get(b, []) for b in BANDS}  # a shallow model may have no late band
    layers = sorted({la for b in BANDS for la in bands[b]})
    fold = fold_of(positive, folds, seed)
    flat = [x for xs in arms.values() for x in xs]
    per_layer = {
        la: held_out_margins(
            base[:, la], [x[:, la] for x in flat], positive, fold, c, max_iter, seed
        )
        for la in layers
    }
    n = len(positive)

    def band(v: int, b: str) -> list[np.ndarray]:
        if not bands[b]:
            return [np.full(n, np.nan), np.full(n, np.nan)]
        margins = np.stack([per_layer[la][v] for la in bands[b]])
        return [(margins > 0).mean(0), margins.mean(0)]

    out, start = {}, 0
    for arm, xs in arms.items():
        rows = [[band(v, b) for b in BANDS] for v in range(start, start + len(xs))]
        out[arm], start = np.array(rows, dtype=float), start + len(xs)
    return out


def probe_rows(
    probe: dict[str, np.ndarray], inp: CostInputs, key: dict, settings: StatsSettings
) -> list[dict]:
    """Per arm, dose, band and metric the level row, and each dose's change against dose 0
    (SESOI: ``stats.cost_accuracy_margin`` for the accuracy, ``stats.cost_margin`` for the
    margin, in the probe's logit)."""
    sesoi = {"probe_accuracy": settings.cost_accuracy_margin, "probe_margin": settings.cost_margin}
    basis = {"probe_accuracy": "stats.cost_accuracy_margin", "probe_margin": "stats.cost_margin"}
    rows: list[dict] = []
    for arm in ARMS:
        values = probe[arm]
        for v, dose in enumerate(inp.doses[arm]):
            for g, band in enumerate(BANDS):
                for j, metric in enumerate(PROBE_METRICS):
                    k = {**key, "arm": arm, "dose": float(dose), "band": band, "metric": metric}
                    y = values[v, g, j]
                    if not np.isfinite(y).any():  # no such band in this model
                        continue
                    rows.append(mean_row(y, {**k, "kind": "level"}, settings, math.nan, ""))
                    if v:
                        d = y - values[0, g, j]
                        rows.append(
                            mean_row(
                                d, {**k, "kind": "dose"}, settings, sesoi[metric], basis[metric]
                            )
                        )
    return rows
