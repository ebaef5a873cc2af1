"""Linear sentiment probes per layer: NumPy on arrays (no I/O, no model; scikit-learn for the
folds only).

``assign_folds`` fixes each review's outer fold once (``StratifiedGroupKFold`` over the
reviews of the original texts, seeded): every text of a review, in every variant and
intervention, is in that review's fold, so no review is ever in train and test. A fit
standardizes the features on its training rows (as ``StandardScaler``) and trains an
L2-regularised logistic regression with C = ``probe.c``: scikit-learn's pipeline
``StandardScaler`` + ``LogisticRegression(C)``, the same penalised likelihood, but solved by
``homog.stats.classifier``'s batched Newton solvers, every layer of a fold one fit of a batch
(``fit_layers``): with fewer training rows than features (the usual case: a few dozen to a few
hundred reviews, 576 or 640 features) in the span of the rows (``fit_logistic_dual``, m + 1
unknowns per fit), else in the features (``fit_logistic``). They reach the optimum itself, to
which scikit-learn's lbfgs converges only as far as its tol (its default 1e-4 leaves the
logits up to ~1e-2 away: bench/probe_fit.py); tests/test_probe_fit.py compares them with a
tightly converged pipeline. With one value of ``probe.c`` it is used as is, with several the
value is chosen per fit (fold and layer) by an inner grouped CV on the training rows (mean
accuracy, ties to the smaller C; every value, split and layer one batch). The probe's output on
a test text is its decision function (the logit toward the positive class); the **margin** is
that logit signed toward the text's true label, and the text is correct when its margin is > 0.

Two schemes (``probe_texts``):

- ``train_original``: per fold, trained on the originals of the other folds, applied to every
  variant of the held-out reviews (the same probe reads every variant);
- ``per_variant``: per variant and fold, trained and tested on that variant alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from homog.errors import HomogError
from homog.stats.classifier import fit_logistic, fit_logistic_dual, scale_rows

SCHEMES: tuple[str, ...] = ("train_original", "per_variant")
ORIGINAL = "original"
# the fits' gradient test (x the training rows): Newton converges quadratically, so 1e-10
# costs about one step more than 1e-8 and puts the logits within ~1e-5 of a tightly
# converged scikit-learn fit (tests/test_probe_fit.py, bench/probe_fit.py)
TOL = 1e-10


def assign_folds(
    sample_ids: Sequence[str], labels: Sequence[Any], folds: int, seed: int
) -> dict[str, int]:
    """sample_id -> outer fold, stratified by label and seeded (one row per review).

    HomogError when there are fewer reviews of some label than folds.
    """
    from sklearn.model_selection import StratifiedGroupKFold

    ids = np.asarray(sample_ids, dtype=str)
    y = np.asarray(labels)
    if len(np.unique(ids)) != len(ids):
        raise HomogError("assign_folds needs one row per review")
    values, counts = np.unique(y, return_counts=True)
    if len(values) != 2:
        raise HomogError(f"the probe needs two labels, the texts have {sorted(map(str, values))}")
    if counts.min() < folds:
        raise HomogError(
            f"{counts.min()} reviews of label {values[counts.argmin()]!r} for {folds} folds: "
            "use more reviews or fewer probe.folds"
        )
    order = np.argsort(ids, kind="stable")  # independent of the row order given
    cv = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    out: dict[str, int] = {}
    for k, (_, test) in enumerate(cv.split(np.zeros(len(ids)), y[order], ids[order])):
        out.update((str(s), k) for s in ids[order][test])
    return out


def _logits(x_train: np.ndarray, y: np.ndarray, x_test: np.ndarray, c: np.ndarray) -> np.ndarray:
    """[t, n, L] decision values of the test rows x_test [t, L, k] under the L2 logistic
    regression of y (0/1) on x_train [m, L, k] with C = c [n, L] (n values per layer),
    each layer standardized on its training rows (``scale_rows``: StandardScaler), every
    layer and value one fit of a batch: ``fit_logistic_dual`` with fewer rows than features
    (m < k), else ``fit_logistic`` (Newton from the start)."""
    n, layers = c.shape
    train, test = scale_rows(x_train, x_test)
    design = np.ascontiguousarray(np.swapaxes(train, 0, 1))  # [L, m, k]
    designs = np.broadcast_to(design, (n, *design.shape)).reshape(n * layers, *design.shape[1:])
    ys = np.broadcast_to(np.asarray(y, dtype=float), (n * layers, len(y)))
    if design.shape[1] < design.shape[2]:
        theta = fit_logistic_dual(designs, ys, tol=TOL, c=c.reshape(-1))
    else:
        theta = fit_logistic(designs, ys, tol=TOL, c=c.reshape(-1), bound_steps=0)
    theta = theta.reshape(n, layers, -1)
    # each row summed alone: a text equal to another scores the same (row_scores)
    return (test[:, None, :, :] * theta[None, ..., :-1]).sum(-1) + theta[None, ..., -1]


def _two_labels(y: np.ndarray, what: str) -> None:
    if len(np.unique(y)) < 2:
        raise HomogError(f"{what} holds one label only: use fewer probe.folds")


def choose_c(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    cs: Sequence[float],
    inner: int,
    seed: int,
    max_iter: int | None = None,
) -> np.ndarray:
    """[L] per layer of x [m, L, k] (or a number for x [m, k]) the C of ``cs`` with the best
    mean inner grouped-CV accuracy (ties: the smaller); one value: that value. Every C,
    split and layer is one fit of a batch (``_logits``). ``max_iter``: not used
    (``fit_layers``)."""
    from sklearn.model_selection import StratifiedGroupKFold

    x = np.asarray(x, dtype=np.float64)
    flat = x.ndim == 2
    x = x[:, None, :] if flat else x
    y = np.asarray(y, dtype=np.int64)
    cs = sorted(float(c) for c in cs)
    if len(cs) == 1:
        out = np.full(x.shape[1], cs[0])
    elif (n_splits := min(inner, int(np.bincount(y).min()))) < 2:
        out = np.full(x.shape[1], cs[0])
    else:
        cv = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        grid = np.repeat(np.array(cs)[:, None], x.shape[1], axis=1)  # [n, L]
        acc = []
        for tr, te in cv.split(x[:, 0], y, groups):
            _two_labels(y[tr], "an inner training fold")
            logits = _logits(x[tr], y[tr], x[te], grid)  # [t, n, L]
            acc.append(((logits > 0) == y[te][:, None, None]).mean(0))
        out = np.array(cs)[np.argmax(np.mean(acc, axis=0), axis=0)]
    return float(out[0]) if flat else out


def fit_layers(
    x_train: np.ndarray,
    y_train: np.ndarray,
    groups_train: np.ndarray,
    x_test: np.ndarray,
    *,
    cs: Sequence[float] = (0.01,),
    inner: int = 3,
    seed: int = 0,
    max_iter: int = 2000,
) -> np.ndarray:
    """[t, L] the logit toward class 1 of each test row x_test [t, L, k] at each layer, from
    the probe of that layer fitted on the training rows x_train [m, L, k] (standardized on
    them; C per layer from ``choose_c``): every layer one fit of a batch. y is 0/1.
    ``max_iter`` (``probe.max_iter``, scikit-learn's lbfgs limit) is not used: Newton's
    method reaches the optimum in about ten steps."""
    x_train = np.asarray(x_train, dtype=np.float64)
    y_train = np.asarray(y_train, dtype=np.int64)
    _two_labels(y_train, "a training fold")
    c = choose_c(x_train, y_train, groups_train, cs, inner, seed, max_iter)
    return _logits(x_train, y_train, np.asarray(x_test, dtype=np.float64), c[None])[:, 0]


def fit_predict(
    x_train: np.ndarray,
    y_train: np.ndarray,
    groups_train: np.ndarray,
    x_test: np.ndarray,
    *,
    cs: Sequence[float] = (0.01,),
    inner: int = 3,
    seed: int = 0,
    max_iter: int = 2000,
) -> np.ndarray:
    """The logit toward class 1 of each test row, from a probe fitted on the training rows
    (standardized on them; C from ``choose_c``). y is 0/1. One layer of ``fit_layers``."""
    x_train = np.asarray(x_train, dtype=np.float64)[:, None, :]
    x_test = np.asarray(x_test, dtype=np.float64)[:, None, :]
    fit = dict(cs=cs, inner=inner, seed=seed, max_iter=max_iter)
    return fit_layers(x_train, y_train, groups_train, x_test, **fit)[:, 0]


def probe_texts(
    vectors: np.ndarray,
    variants: Sequence[str],
    sample_ids: Sequence[str],
    y: Sequence[int],
    folds: dict[str, int],
    *,
    schemes: Sequence[str] = SCHEMES,
    layers: Sequence[int] | None = None,
    **fit: Any,
) -> Any:
    """Cross-validated probe outputs of every text at every layer, per scheme.

    vectors: (texts, layers, d); variants, sample_ids, y (0/1): per text; folds: sample_id ->
    fold (``assign_folds``; texts of reviews without a fold are left out). fit: keywords of
    ``fit_layers`` (one call per scheme, training set and fold: every layer at once).
    Returns a frame (scheme, train_set, variant, sample_id, layer, fold, y, logit, margin,
    correct): margin = logit signed toward the true class; train_set is the variant whose
    reviews the probe was trained on (``_fit_sets``).
    """
    # batches of small matrices (a fold's layers): one BLAS thread, as for the thousands of
    # scikit-learn fits before them (a 42 x 576 fit took 146 ms with the default threads on
    # the loaded 2-core machine, 11 ms with one)
    with threadpool_limits(1):
        return _probe_texts(vectors, variants, sample_ids, y, folds, schemes, layers, fit, pd)


def _probe_texts(
    vectors: np.ndarray,
    variants: Any,
    sample_ids: Any,
    y: Any,
    folds: dict[str, int],
    schemes: Sequence[str],
    layers: Sequence[int] | None,
    fit: dict[str, Any],
    pd: Any,
) -> Any:
    variants = np.asarray(variants, dtype=str)
    ids = np.asarray(sample_ids, dtype=str)
    y = np.asarray(y, dtype=np.int64)
    fold = np.array([folds.get(s, -1) for s in ids])
    keep = fold >= 0
    n_layers = vectors.shape[1]
    layers = list(range(n_layers)) if layers is None else list(layers)
    bad = [s for s in schemes if s not in SCHEMES]
    if bad:
        raise HomogError(f"unknown probe scheme(s) {bad}: use {', '.join(SCHEMES)}")
    frames = []
    for scheme in schemes:
        for train_rows, test_rows, train_set in _fit_sets(scheme, variants, ids):
            train_rows, test_rows = train_rows & keep, test_rows & keep
            if not train_rows.any():
                continue
            logits = np.full((len(ids), len(layers)), np.nan)
            for k in sorted(set(fold[test_rows])):
                tr = np.flatnonzero(train_rows & (fold != k))
                te = np.flatnonzero(test_rows & (fold == k))
                logits[te] = fit_layers(
                    vectors[tr][:, layers], y[tr], ids[tr], vectors[te][:, layers], **fit
                )
            rows = np.flatnonzero(test_rows)
            sign = np.where(y[rows] == 1, 1.0, -1.0)
            for j, layer in enumerate(layers):
                margin = sign * logits[rows, j]
                frames.append(
                    pd.DataFrame(
                        {
                            "scheme": scheme,
                            "train_set": train_set,
                            "variant": variants[rows],
                            "sample_id": ids[rows],
                            "layer": layer,
                            "fold": fold[rows],
                            "y": y[rows],
                            "logit": logits[rows, j],
                            "margin": margin,
                            "correct": margin > 0,
                        }
                    )
                )
    if not frames:
        raise HomogError("no probe was fitted: the texts have no original variant")
    return pd.concat(frames, ignore_index=True)


def _fit_sets(
    scheme: str, variants: np.ndarray, ids: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """(train rows, test rows, train_set) of a scheme, before the folds split them.

    ``train_original``: the originals, tested on every text. ``per_variant``: each variant on
    itself, and, for a variant that holds fewer reviews than the original (the paper's
    rewrites), the original again on that variant's reviews only (train_set = the variant):
    its paired baseline, trained on as many reviews.
    """
    if scheme == "train_original":
        return [(variants == ORIGINAL, np.ones(len(ids), dtype=bool), ORIGINAL)]
    sets = []
    originals = set(ids[variants == ORIGINAL])
    for v in sorted(set(variants)):
        rows = variants == v
        sets.append((rows, rows, str(v)))
        reviews = set(ids[rows])
        if v != ORIGINAL and originals and reviews != originals:
            base = (variants == ORIGINAL) & np.isin(ids, sorted(reviews))
            if base.any():
                sets.append((base, base, str(v)))
    return sets
