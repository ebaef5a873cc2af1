"""The classifier of claim 4 and its AUCs, below both homog.stats.separability and
homog.stats.reordering: the features of a variant, out-of-fold scores of scikit-learn's
pipeline (StandardScaler fitted on the training fold, then an L2 LogisticRegression, C = 1),
and AUCs of fixed scores under bootstrap weights or many label rows.

The pipeline's fits are this module's own (:func:`fit_logistic`): the same penalised
likelihood, solved for many fits at once in NumPy, to sklearn's optimum
(tests/test_separability.py compares the coefficients and the out-of-fold scores). One
claim-4 row fits REPEATS fold assignments x 5 folds plus its label permutations; sklearn's
per-fit overhead made those fits most of ``homog stats``' time.

The probe stage (``homog.probe.fit``) fits the same objective with its own C (``c``, a
number or one per fit) on a design per layer: :func:`fit_logistic` when the training rows
are at least the features, else :func:`fit_logistic_dual`, which solves each fit in the span
of its rows (m + 1 unknowns on the Gram matrix, not k + 1)."""

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
    theta: np.ndarray,
    xa: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    pen: np.ndarray,
    c: float | np.ndarray = C,
) -> np.ndarray:
    z = _linear(xa, theta)
    return c * (w * (np.logaddexp(0.0, z) - y * z)).sum(1) + 0.5 * (theta * theta * pen).sum(1)


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    tol: float = 1e-8,
    weights: np.ndarray | None = None,
    c: float | np.ndarray = C,
    bound_steps: int = 200,
) -> np.ndarray:
    """[P, k + 1] (coefficients, intercept) of P L2 logistic regressions of the label rows y
    [P, m]: on one design x [m, k], or on a design each, x [P, m, k]. Each minimises c sum
    w log-loss + 0.5 |coefficients|^2, the intercept not penalised (sklearn's LogisticRegression
    objective with C = ``c``: a number, default the module's C = 1, or one per fit [P];
    ``weights`` [P, m] default 1: a 0 row is padding), all P fits at once, until the gradient
    is below ``tol`` x the fit's rows. First Boehning's bound (the fixed curvature c x'Wx / 4
    + the penalty: one inverse per design, or per fit with a c per fit; monotone, fast where
    the probabilities stay near 1/2, as under the permutation null), then Newton's method with
    step halving for the fits it leaves unconverged."""
    k = x.shape[-1]
    xa = np.concatenate([x, np.ones((*x.shape[:-1], 1))], axis=-1)
    xt = np.swapaxes(xa, -1, -2)
    w = np.ones(y.shape) if weights is None else weights
    m = w.sum(1)
    pen = np.r_[np.ones(k), 0.0]
    ridge = np.diag(pen + 1e-12)
    theta = np.zeros((y.shape[0], k + 1))
    per_fit = np.ndim(c) > 0
    shared = xa.ndim == 2 and weights is None and not per_fit
    cw = np.asarray(c, dtype=float)[:, None] if per_fit else c  # [P, 1] or a number
    if per_fit:  # a bound per fit, even on one design
        bound = np.linalg.inv(cw[:, :, None] * xt * w[:, None, :] @ xa / 4.0 + ridge)
    else:
        bound = np.linalg.inv(c * (xt if shared else xt * w[:, None, :]) @ xa / 4.0 + ridge)

    def gradient(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xs = _rows(xa, idx)
        p = 1.0 / (1.0 + np.exp(-_linear(xs, theta[idx])))
        resid = w[idx] * (p - y[idx])
        back = resid @ xs if xs.ndim == 2 else np.einsum("pm,pmk->pk", resid, xs)
        return (cw[idx] if per_fit else c) * back + theta[idx] * pen, p

    todo = np.arange(y.shape[0])
    for _ in range(bound_steps):
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
        ct = cw[todo] if per_fit else c  # [T, 1] or a number
        curv = ct * ws * p * (1.0 - p)  # [T, m]
        hess = (_rows(xt, todo) * curv[:, None, :]) @ xs + ridge
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        ct = ct[:, 0] if per_fit else c  # [T]
        f = _objective(theta[todo], xs, ys, ws, pen, ct)
        t = np.ones(todo.size)
        for _ in range(30):  # halve each fit's step until its objective does not rise
            new = theta[todo] - t[:, None] * step
            worse = _objective(new, xs, ys, ws, pen, ct) > f + 1e-12 * np.abs(f)
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        theta[todo] = new
    return theta


def fit_logistic_dual(
    x: np.ndarray, y: np.ndarray, tol: float = 1e-8, c: float | np.ndarray = C
) -> np.ndarray:
    """[P, k + 1] (coefficients, intercept): the fits of :func:`fit_logistic` on a design
    each, x [P, m, k] (no padding rows), solved in the span of each design's rows, for fewer
    rows than features (m < k). The penalty puts the optimum's coefficients at x'a for some
    a [m] (the representer theorem; the intercept is not penalised), so each fit has m + 1
    unknowns on its Gram matrix K = x x' [m, m], whatever k. Newton's method with step
    halving from 0, to the same gradient test as :func:`fit_logistic` (``tol`` x m, on the
    coefficients' gradient x'(a + c (p - y)) and the intercept's). Each step is the primal
    Newton step in these coordinates: the intercept eliminated (its Schur complement), then
    Woodbury's identity turns the [k, k] system into the positive definite [m, m] one
    I + B K B' (B = (I - v v') diag(sqrt(c p (1 - p))), v the unit vector along those roots)."""
    fits, m, _ = x.shape
    gram = x @ np.swapaxes(x, 1, 2)  # [P, m, m]
    cw = np.broadcast_to(np.asarray(c, dtype=float), (fits,))[:, None]  # [P, 1]
    y = np.asarray(y, dtype=float)
    a, b = np.zeros((fits, m)), np.zeros(fits)
    diag = np.arange(m)

    def objective(a: np.ndarray, b: np.ndarray, idx: np.ndarray, ka: np.ndarray) -> np.ndarray:
        z = ka + b[:, None]  # ka: K a
        loss = (np.logaddexp(0.0, z) - y[idx] * z).sum(1)
        return cw[idx, 0] * loss + 0.5 * (a * ka).sum(1)

    todo = np.arange(fits)
    k_t = gram
    for _ in range(50):
        c_t = cw[todo]
        ka = np.einsum("pij,pj->pi", k_t, a[todo])
        p = 1.0 / (1.0 + np.exp(-(ka + b[todo, None])))
        resid = p - y[todo]
        f1 = a[todo] + c_t * resid  # the coefficients' gradient is x'f1
        g_b = c_t[:, 0] * resid.sum(1)
        g_w = np.sqrt(np.maximum((f1 * np.einsum("pij,pj->pi", k_t, f1)).sum(1), 0.0))
        going = np.maximum(g_w, np.abs(g_b)) >= tol * m
        if not going.any():
            break
        if not going.all():
            todo, k_t, c_t, ka, p, f1, g_b = (v[going] for v in (todo, k_t, c_t, ka, p, f1, g_b))
        d = c_t * p * (1.0 - p)  # [T, m] the curvature c p (1 - p)
        s = d.sum(1)
        h = f1 - d * (g_b / s)[:, None]  # the coefficients' right side, intercept eliminated
        root = np.sqrt(d)
        v = root / np.sqrt(s)[:, None]
        # (I + P A P) u = P e, A = diag(root) K diag(root), P = I - v v': the bordered
        # system [[I + A, v], [v', 0]] [u, l] = [P e, 0] (u in P's range), one Cholesky
        lhs = k_t * root[:, :, None]
        lhs *= root[:, None, :]
        lhs[:, diag, diag] += 1.0
        rk = root * np.einsum("pij,pj->pi", k_t, h)
        both = _solve_spd(lhs, np.stack([rk - v * (v * rk).sum(1, keepdims=True), v], axis=2))
        lam = (v * both[..., 0]).sum(1) / (v * both[..., 1]).sum(1)
        u = both[..., 0] - lam[:, None] * both[..., 1]  # G^-1 B K h
        step_a = h - root * (u - v * (v * u).sum(1, keepdims=True))  # h - B'u
        step_b = (g_b - (d * np.einsum("pij,pj->pi", k_t, step_a)).sum(1)) / s
        f = objective(a[todo], b[todo], todo, ka)
        t = np.ones(todo.size)
        for _ in range(30):  # halve each fit's step until its objective does not rise
            new_a = a[todo] - t[:, None] * step_a
            new_b = b[todo] - t * step_b
            new_ka = np.einsum("pij,pj->pi", k_t, new_a)
            worse = objective(new_a, new_b, todo, new_ka) > f + 1e-12 * np.abs(f)
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        a[todo], b[todo] = new_a, new_b
    return np.concatenate([np.einsum("pmk,pm->pk", x, a), b[:, None]], axis=1)


def _solve_spd(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """[T, m, r] solutions of the positive definite systems lhs [T, m, m] (their lower
    triangles read) for rhs [T, m, r]: NumPy's batched solve for small m, Cholesky per
    system above (half the flops; 40 against 60 ms for 31 systems of 250)."""
    if lhs.shape[1] <= 64:
        return np.linalg.solve(lhs, rhs)
    from scipy.linalg import cho_factor, cho_solve

    return np.stack(
        [
            cho_solve(cho_factor(g, lower=True, check_finite=False), r, check_finite=False)
            for g, r in zip(lhs, rhs, strict=True)
        ]
    )


def standardize(x: np.ndarray, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, ...]:
    """(train rows, test rows) of x scaled by the training rows' mean and SD (ddof 0; a
    constant feature keeps SD 1): StandardScaler fitted on the training fold."""
    return scale_rows(x[train], x[test])


def scale_rows(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) scaled by the mean and SD over the rows (axis 0) of ``train`` (ddof 0; a
    constant feature keeps SD 1), whatever the trailing axes: StandardScaler fitted on
    ``train``, feature by feature."""
    mu = train.mean(0)
    sd = train.std(0)
    sd = np.where(sd > 10 * np.finfo(float).eps * np.maximum(np.abs(mu), 1.0), sd, 1.0)
    return (train - mu) / sd, (test - mu) / sd


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
