"""Linear sentiment probes per layer: pure scikit-learn and numpy on arrays (no I/O, no model).

``assign_folds`` fixes each review's outer fold once (``StratifiedGroupKFold`` over the
reviews of the original texts, seeded): every text of a review, in every variant and
intervention, is in that review's fold, so no review is ever in train and test. A fit
standardizes the features on its training rows (``StandardScaler``) and trains an
L2-regularised ``LogisticRegression`` (lbfgs); with one value of ``probe.c`` it is used as is,
with several the value is chosen per fit by an inner grouped CV on the training rows (mean
accuracy, ties to the smaller C). The probe's output on a test text is its decision function
(the logit toward the positive class); the **margin** is that logit signed toward the text's
true label, and the text is correct when its margin is > 0.

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

SCHEMES: tuple[str, ...] = ("train_original", "per_variant")
ORIGINAL = "original"


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


def _model(c: float, max_iter: int, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(
        StandardScaler(),
        LogisticRegression(C=c, l1_ratio=0, max_iter=max_iter, random_state=seed),
    )


def choose_c(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    cs: Sequence[float],
    inner: int,
    seed: int,
    max_iter: int,
) -> float:
    """The C of ``cs`` with the best mean inner grouped-CV accuracy (ties: the smaller)."""
    from sklearn.model_selection import StratifiedGroupKFold

    if len(cs) == 1:
        return float(cs[0])
    n_splits = min(inner, int(np.bincount(y).min()))
    if n_splits < 2:
        return float(min(cs))
    cv = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    splits = list(cv.split(x, y, groups))
    scores = []
    for c in sorted(cs):
        acc = [
            (_model(c, max_iter, seed).fit(x[tr], y[tr]).predict(x[te]) == y[te]).mean()
            for tr, te in splits
        ]
        scores.append(float(np.mean(acc)))
    return float(sorted(cs)[int(np.argmax(scores))])


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
    (standardized on them; C from ``choose_c``). y is 0/1."""
    x_train = np.asarray(x_train, dtype=np.float64)
    y_train = np.asarray(y_train, dtype=np.int64)
    if len(np.unique(y_train)) < 2:
        raise HomogError("a training fold holds one label only: use fewer probe.folds")
    c = choose_c(x_train, y_train, groups_train, cs, inner, seed, max_iter)
    model = _model(c, max_iter, seed).fit(x_train, y_train)
    return model.decision_function(np.asarray(x_test, dtype=np.float64))


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
    ``fit_predict``. Returns a frame (scheme, train_set, variant, sample_id, layer, fold, y,
    logit, margin, correct): margin = logit signed toward the true class; train_set is the
    variant whose reviews the probe was trained on (``_fit_sets``).
    """
    # thousands of small fits: one BLAS thread (a 42 x 576 fit took 146 ms with the default
    # threads on the loaded 2-core machine, 11 ms with one)
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
                for j, layer in enumerate(layers):
                    logits[te, j] = fit_predict(
                        vectors[tr, layer], y[tr], ids[tr], vectors[te, layer], **fit
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
