"""The classifier of claim 4 and its AUCs, below both homog.stats.separability and
homog.stats.reordering: the features of a variant, out-of-fold scores of scikit-learn's
pipeline (StandardScaler fitted on the training fold, then an L2 LogisticRegression, C = 1),
and AUCs of fixed scores under bootstrap weights or many label rows.

The pipeline's fits are this module's own (:func:`fit_logistic`): the same penalised
likelihood, solved for many fits at once in NumPy, to sklearn's optimum
(tests/test_separability.py compares the coefficients and the out-of-fold scores). One
claim-4 row fits REPEATS fold assignments x 5 folds plus its label permutations; sklearn's
per-fit overhead made those fits most of ``homog stats``' time."""

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


def _rows(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The fits ``idx`` of a design: all of a shared one [m, k], those of a stack [P, m, k]."""
    return a if a.ndim == 2 else a[idx]


def _linear(xa: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """[P, m] x theta of each fit: one product for a shared design [m, k], else per fit."""
    return theta @ xa.T if xa.ndim == 2 else np.einsum("pmk,pk->pm", xa, theta)


def _objective(
    theta: np.ndarray, xa: np.ndarray, y: np.ndarray, w: np.ndarray, pen: np.ndarray
) -> np.ndarray:
    z = _linear(xa, theta)
    return C * (w * (np.logaddexp(0.0, z) - y * z)).sum(1) + 0.5 * (theta * theta * pen).sum(1)


def fit_logistic(
    x: np.ndarray, y: np.ndarray, tol: float = 1e-8, weights: np.ndarray | None = None
) -> np.ndarray:
    """[P, k + 1] (coefficients, intercept) of P L2 logistic regressions of the label rows y
    [P, m]: on one design x [m, k], or on a design each, x [P, m, k]. Each minimises C sum
    w log-loss + 0.5 |coefficients|^2, the intercept not penalised (sklearn's LogisticRegression
    objective; ``weights`` [P, m] default 1: a 0 row is padding), all P fits at once, until the
    gradient is below ``tol`` x the fit's rows. First Boehning's bound (the fixed curvature C
    x'Wx / 4 + the penalty: one inverse per design, monotone, fast where the probabilities stay
    near 1/2, as under the permutation null), then Newton's method with step halving for the
    fits it leaves unconverged."""
    k = x.shape[-1]
    xa = np.concatenate([x, np.ones((*x.shape[:-1], 1))], axis=-1)
    xt = np.swapaxes(xa, -1, -2)
    w = np.ones(y.shape) if weights is None else weights
    m = w.sum(1)
    pen = np.r_[np.ones(k), 0.0]
    ridge = np.diag(pen + 1e-12)
    theta = np.zeros((y.shape[0], k + 1))
    shared = xa.ndim == 2 and weights is None
    bound = np.linalg.inv(C * (xt if shared else xt * w[:, None, :]) @ xa / 4.0 + ridge)

    def gradient(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xs = _rows(xa, idx)
        p = 1.0 / (1.0 + np.exp(-_linear(xs, theta[idx])))
        resid = w[idx] * (p - y[idx])
        back = resid @ xs if xs.ndim == 2 else np.einsum("pm,pmk->pk", resid, xs)
        return C * back + theta[idx] * pen, p

    todo = np.arange(y.shape[0])
    for _ in range(200):
        grad, _p = gradient(todo)
        going = np.abs(grad).max(1) >= tol * m[todo]
        todo, grad = todo[going], grad[going]
        if todo.size == 0:
            return theta
        if shared:
            theta[todo] -= grad @ bound
        else:
            theta[todo] -= np.einsum("pk,pkl->pl", grad, bound[todo])
    for _ in range(50):
        grad, p = gradient(todo)
        going = np.abs(grad).max(1) >= tol * m[todo]
        todo, grad, p = todo[going], grad[going], p[going]
        if todo.size == 0:
            break
        xs, ys, ws = _rows(xa, todo), y[todo], w[todo]
        curv = C * ws * p * (1.0 - p)  # [T, m]
        hess = (_rows(xt, todo) * curv[:, None, :]) @ xs + ridge
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        f = _objective(theta[todo], xs, ys, ws, pen)
        t = np.ones(todo.size)
        for _ in range(30):  # halve each fit's step until its objective does not rise
            new = theta[todo] - t[:, None] * step
            worse = _objective(new, xs, ys, ws, pen) > f + 1e-12 * np.abs(f)
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        theta[todo] = new
    return theta


def standardize(x: np.ndarray, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, ...]:
    """(train rows, test rows) of x scaled by the training rows' mean and SD (ddof 0; a
    constant feature keeps SD 1): StandardScaler fitted on the training fold."""
    mu = x[train].mean(0)
    sd = x[train].std(0)
    sd = np.where(sd > 10 * np.finfo(float).eps * np.maximum(np.abs(mu), 1.0), sd, 1.0)
    return (x[train] - mu) / sd, (x[test] - mu) / sd


def oof_score_sets(x: np.ndarray, y: np.ndarray, fold_sets: Sequence[Sequence]) -> np.ndarray:
    """[R, rows] out-of-fold decision scores of the pipeline under each of R fold assignments
    (each a list of (train, test) row indices of x [rows, k]; y [rows] 0/1): every fold of
    every assignment is one fit of :func:`fit_logistic`, all solved together (the training
    sets padded to the longest with weight-0 rows)."""
    folds = [(r, tr, te) for r, assignment in enumerate(fold_sets) for tr, te in assignment]
    longest = max(len(train) for _, train, _ in folds)
    xs = np.zeros((len(folds), longest, x.shape[1]))
    ys = np.zeros((len(folds), longest))
    ws = np.zeros((len(folds), longest))
    tests = []
    for i, (_, train, test) in enumerate(folds):
        xtr, xte = standardize(x, train, test)
        xs[i, : len(train)], ys[i, : len(train)], ws[i, : len(train)] = xtr, y[train], 1.0
        tests.append(xte)
    theta = fit_logistic(xs, ys, weights=ws)
    scores = np.zeros((len(fold_sets), y.size))
    for (r, _, test), xte, th in zip(folds, tests, theta, strict=True):
        scores[r, test] = row_scores(xte, th[None])[0]
    return scores


def row_scores(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """[P, m] decision scores x w + b of the rows x [m, k] under each fit theta [P, k + 1],
    each row summed alone: identical rows score identically (a BLAS product may round a row
    differently by where it sits, which would break the tie of a text whose two versions are
    the same: a coin flip in the AUC where it must count a half)."""
    return (x[None, :, :] * theta[:, None, :-1]).sum(-1) + theta[:, -1:]


def oof_scores(x: np.ndarray, y: np.ndarray, folds) -> np.ndarray:
    """[rows] out-of-fold decision scores of the pipeline under one fold assignment."""
    return oof_score_sets(x, y, [folds])[0]


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
