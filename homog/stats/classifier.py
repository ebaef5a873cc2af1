"""The classifier of claim 4 and its AUCs, below both homog.stats.separability and
homog.stats.reordering: the features of a variant, the out-of-fold scores of the scikit-learn
pipeline (StandardScaler fitted on the training fold, then an L2 LogisticRegression, C = 1),
and AUCs of fixed scores under bootstrap weights or many label rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

C = 1.0  # sklearn's default inverse penalty
REFERENCE = "original"


def weighted_auc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """AUC [B] of fixed ``scores`` [m] and ``labels`` [m] (0/1) under each row of row weights
    ``weights`` [B, m] (ties count a half; roc_auc_score's sample_weight)."""
    values, inv = np.unique(scores, return_inverse=True)
    onehot = np.zeros((scores.size, values.size))
    onehot[np.arange(scores.size), inv] = 1.0
    neg = weights * (labels == 0)  # [B, m]
    pos = weights * (labels == 1)
    per_bin = neg @ onehot  # [B, U] negative weight at each distinct score
    below = np.cumsum(per_bin, axis=1) - per_bin
    beaten = below[:, inv] + 0.5 * per_bin[:, inv]  # [B, m]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * beaten).sum(1) / (pos.sum(1) * neg.sum(1))


def rank_auc(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUC [P] of score rows ``scores`` [P, m] against label rows ``labels`` [P, m] (0/1)."""
    ranks = rankdata(scores, axis=1)
    n_pos = labels.sum(1)
    n_neg = labels.shape[1] - n_pos
    return ((ranks * labels).sum(1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def oof_scores(x: np.ndarray, y: np.ndarray, folds) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores = np.zeros(y.size)
    for train, test in folds:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, tol=1e-8))
        model.fit(x[train], y[train])
        scores[test] = model.decision_function(x[test])
    return scores


def features_of(
    tables: dict[str, pd.DataFrame], layers: dict[str, list[int]], samples: Sequence[str]
) -> np.ndarray:
    """[n, k] features of the texts ``samples``: per metric of ``tables`` (metric -> [layer x
    sample_id] of one variant) its values at ``layers[metric]``, side by side."""
    blocks = [
        t.reindex(index=layers[m], columns=samples).to_numpy(dtype=float).T
        for m, t in tables.items()
    ]
    return np.hstack(blocks)
