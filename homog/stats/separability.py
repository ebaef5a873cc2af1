"""Claim 4 as separability: can a classifier tell a variant from the original by its profile?

For every unchanged run (intervention ``none``), every variant of SEP_VARIANTS against the
original and every metric of SEP_METRICS plus ``profile`` (the four metrics' values side by
side), each text gives two feature rows, its original's and its variant's:

- scope ``layers``: the metric's per-text values at layers 1..L (``profile``: every metric's,
  concatenated);
- scope ``layer0``: layer 0 alone, the token embeddings, the negative control (the attention
  metrics have no layer 0 and get no row; ``profile`` uses the metrics that have it).

A scikit-learn pipeline (StandardScaler fitted on the training fold, then an L2
LogisticRegression, C = 1) is cross-validated with GroupKFold (FOLDS folds, fewer when there
are fewer texts) grouped by text, so a review's two versions are never split between training
and test. ``auc``: roc_auc_score of the out-of-fold decision scores (0.5: chance). ``ci_low``,
``ci_high``: the ``stats.ci`` percentile bootstrap over texts (a resampled text brings both
its rows) of that AUC, min(``stats.n_boot``, MAX_BOOT) seeded resamples, the scores fixed.
``p_value``: a permutation test of exchangeability within text: each of
``stats.separability_perm`` (default 999) seeded permutations swaps the two labels of a random
half of the texts and reruns the whole cross-validation; p = (1 + #{null AUC >= auc}) /
(1 + n_perm) (one-sided: a classifier that separates scores above chance). The permutations
refit the same penalised likelihood with a batched solver (:func:`fit_logistic`: Boehning's
bound, then Newton): the scaler does not depend on the labels, and
the solver reaches sklearn's optimum (tests/test_separability.py compares them).

Rows whose two versions are identical within rounding for every text (1e-9 of the values:
the position family at layer 0, the same tokens reordered) get auc 0.5, CI [0.5, 0.5] and
p 1.0 without a fit: a classifier cannot tell identical rows apart, and a fit would only read
rounding noise. ``n``: texts with every feature finite in both versions (fewer than 4: NaN);
``n_layers``: the layers whose values are features.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from homog.schema.tables import TABLES
from homog.stats.paired_tests import NUMERIC_TOLERANCE, resample_counts

SEP_VARIANTS = ("front", "end", "key_first", "key_last", "key_control")
SEP_METRICS = ("erank", "mev", "resultant_length", "attn_first")
PROFILE = "profile"
SCOPES = ("layers", "layer0")
REFERENCE = "original"
FOLDS = 5
MIN_TEXTS = 4  # paired texts a classifier needs (fewer: AUC NaN)
MAX_BOOT = 1000
C = 1.0  # sklearn's default inverse penalty
SEP_COLUMNS = tuple(TABLES["separability"].names)  # the store's schema is the one definition


def identical(xa: np.ndarray, xb: np.ndarray) -> bool:
    """True when every text's two feature rows agree within rounding (NUMERIC_TOLERANCE)."""
    with np.errstate(invalid="ignore"):
        return bool(
            (np.abs(xa - xb) <= NUMERIC_TOLERANCE * np.maximum(np.abs(xa), np.abs(xb))).all()
        )


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


def _objective(theta: np.ndarray, xa: np.ndarray, y: np.ndarray, pen: np.ndarray) -> np.ndarray:
    z = theta @ xa.T
    return C * (np.logaddexp(0.0, z) - y * z).sum(1) + 0.5 * (theta * theta * pen).sum(1)


def fit_logistic(x: np.ndarray, y: np.ndarray, tol: float = 1e-8) -> np.ndarray:
    """[P, k + 1] (coefficients, intercept) of L2 logistic regressions of the label rows y
    [P, m] on one design x [m, k]: minimises C sum log-loss + 0.5 |w|^2, the intercept not
    penalised (sklearn's LogisticRegression objective), all P fits at once, until the gradient
    is below ``tol`` x m. First Boehning's bound (the fixed curvature C x'x / 4 + the penalty:
    one inverse for every fit and step, monotone, fast where the probabilities stay near 1/2,
    as under the permutation null), then Newton's method with step halving for the fits it
    leaves unconverged."""
    m, k = x.shape
    xa = np.hstack([x, np.ones((m, 1))])
    pen = np.r_[np.ones(k), 0.0]
    theta = np.zeros((y.shape[0], k + 1))
    bound = np.linalg.inv(C * xa.T @ xa / 4.0 + np.diag(pen + 1e-12))

    def gradient(th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(th @ xa.T)))
        return C * (p - y) @ xa + th * pen, p

    for _ in range(200):
        grad, _p = gradient(theta)
        todo = np.abs(grad).max(1) >= tol * m
        if not todo.any():
            return theta
        theta[todo] -= grad[todo] @ bound
    for _ in range(50):
        grad, p = gradient(theta)
        todo = np.flatnonzero(np.abs(grad).max(1) >= tol * m)
        if todo.size == 0:
            break
        w = C * p[todo] * (1.0 - p[todo])  # [T, m]
        hess = (xa.T[None, :, :] * w[:, None, :]) @ xa + np.diag(pen + 1e-12)
        step = np.linalg.solve(hess, grad[todo][:, :, None])[:, :, 0]
        f = _objective(theta[todo], xa, y[todo], pen)
        t = np.ones(todo.size)
        for _ in range(30):  # halve each fit's step until its objective does not rise
            new = theta[todo] - t[:, None] * step
            worse = _objective(new, xa, y[todo], pen) > f + 1e-12 * np.abs(f)
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        theta[todo] = new
    return theta


def _folds(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """GroupKFold splits of the 2n rows (the original's rows 0..n-1, the variant's n..2n-1;
    text i is group i)."""
    from sklearn.model_selection import GroupKFold

    groups = np.r_[np.arange(n), np.arange(n)]
    splitter = GroupKFold(n_splits=min(FOLDS, n))
    return list(splitter.split(np.zeros((2 * n, 1)), groups=groups))


def _oof_sklearn(x: np.ndarray, y: np.ndarray, folds) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores = np.zeros(y.size)
    for train, test in folds:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, tol=1e-8))
        model.fit(x[train], y[train])
        scores[test] = model.decision_function(x[test])
    return scores


def null_aucs(x: np.ndarray, flips: np.ndarray, folds, chunk: int = 64) -> np.ndarray:
    """[P] out-of-fold AUCs of the whole cross-validation with each text's labels swapped where
    ``flips`` [P, n] is True (the rows of x [2n, k] as in :func:`_folds`)."""
    n = flips.shape[1]
    base = np.r_[np.zeros(n), np.ones(n)]
    labels = np.where(np.hstack([flips, flips]), 1.0 - base, base)  # [P, 2n]
    out = np.empty(flips.shape[0])
    for start in range(0, flips.shape[0], chunk):
        lab = labels[start : start + chunk]
        scores = np.zeros(lab.shape)
        for train, test in folds:
            mu = x[train].mean(0)
            sd = x[train].std(0)
            sd = np.where(sd > 10 * np.finfo(float).eps * np.maximum(np.abs(mu), 1.0), sd, 1.0)
            theta = fit_logistic((x[train] - mu) / sd, lab[:, train])
            xt = (x[test] - mu) / sd
            scores[:, test] = theta[:, :-1] @ xt.T + theta[:, -1:]
        out[start : start + chunk] = rank_auc(scores, lab)
    return out


def separate(
    xa: np.ndarray, xb: np.ndarray, *, n_boot: int, n_perm: int, seed: int, ci: float = 0.95
) -> dict[str, float]:
    """auc, ci_low, ci_high, p_value, n of telling rows ``xa`` [n, k] (the variant) from
    ``xb`` [n, k] (the original; row i of both is text i). Texts with a non-finite feature on
    either side are dropped; fewer than MIN_TEXTS left: NaN."""
    ok = np.isfinite(xa).all(1) & np.isfinite(xb).all(1)
    xa, xb = xa[ok], xb[ok]
    n = int(ok.sum())
    out = {"auc": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "n": n}
    if n < MIN_TEXTS:
        return out
    if identical(xa, xb):
        return {**out, "auc": 0.5, "ci_low": 0.5, "ci_high": 0.5, "p_value": 1.0}
    x = np.vstack([xb, xa])
    y = np.r_[np.zeros(n), np.ones(n)]
    folds = _folds(n)
    scores = _oof_sklearn(x, y, folds)
    from sklearn.metrics import roc_auc_score

    auc = float(roc_auc_score(y, scores))
    w = resample_counts(n, min(n_boot, MAX_BOOT), seed)
    boot = weighted_auc(scores, y, np.hstack([w, w]))
    low, high = np.nanquantile(boot, [(1 - ci) / 2, (1 + ci) / 2])
    out.update(auc=auc, ci_low=float(low), ci_high=float(high))
    if n_perm > 0:
        rng = np.random.default_rng([seed, n, 0x5E9])
        null = null_aucs(x, rng.random((n_perm, n)) < 0.5, folds)
        out["p_value"] = float((1 + np.count_nonzero(null >= auc - 1e-12)) / (1 + n_perm))
    return out


def _features(
    tables: dict[str, pd.DataFrame], layers: dict[str, list[int]], samples: Sequence[str]
) -> np.ndarray:
    """[n, k] features of the texts ``samples``: per metric of ``tables`` (metric -> [layer x
    sample_id] of one variant) its values at ``layers[metric]``, side by side."""
    blocks = [t.reindex(index=layers[m], columns=samples).to_numpy(dtype=float).T
              for m, t in tables.items()]  # fmt: skip
    return np.hstack(blocks)


def run_separability(
    tables: dict[tuple[str, str], pd.DataFrame],
    run_id: str,
    *,
    n_boot: int,
    n_perm: int,
    seed: int,
    ci: float = 0.95,
    variants: Sequence[str] = SEP_VARIANTS,
    metrics: Sequence[str] = SEP_METRICS,
) -> pd.DataFrame:
    """SEP_COLUMNS rows of one unchanged run; ``tables``: (variant, metric) -> [layer x
    sample_id] (homog.stats.contrasts.pivot_metrics of its layer_metrics)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # small matrices: BLAS threads only wait for each other
        return _run(tables, run_id, n_boot=n_boot, n_perm=n_perm, seed=seed, ci=ci,
                    variants=variants, metrics=metrics)  # fmt: skip


def _run(tables, run_id, *, n_boot, n_perm, seed, ci, variants, metrics) -> pd.DataFrame:
    rows = []
    for variant in variants:
        for metric in [*metrics, PROFILE]:
            names = [m for m in metrics if m != PROFILE] if metric == PROFILE else [metric]
            names = [m for m in names if (variant, m) in tables and (REFERENCE, m) in tables]
            if not names:
                continue
            for scope in SCOPES:
                if scope == "layer0":
                    names0 = [m for m in names if 0 in tables[(REFERENCE, m)].index]
                else:
                    names0 = names
                if not names0 or (metric != PROFILE and names0 != [metric]):
                    continue
                a = {m: tables[(variant, m)] for m in names0}
                b = {m: tables[(REFERENCE, m)] for m in names0}
                layers = {m: [x for x in t.index if (x >= 1 if scope == "layers" else x == 0)]
                          for m, t in b.items()}  # fmt: skip
                n_layers = len(set().union(*layers.values()))
                every = [set(t.columns) for t in (*a.values(), *b.values())]
                samples = sorted(set.intersection(*every))
                if n_layers == 0:
                    continue
                xa, xb = _features(a, layers, samples), _features(b, layers, samples)
                got = separate(xa, xb, n_boot=n_boot, n_perm=n_perm, seed=seed, ci=ci)
                rows.append({"run_id": run_id, "variant_a": variant, "variant_b": REFERENCE,
                             "metric": metric, "scope": scope, **got,
                             "n_layers": n_layers})  # fmt: skip
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SEP_COLUMNS})
    return pd.DataFrame(rows, columns=list(SEP_COLUMNS))
