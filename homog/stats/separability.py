"""Claim 4 as separability: can a classifier tell a variant from the original by its profile?

For every unchanged run (intervention ``none``), every variant of SEP_VARIANTS against the
original and every metric of SEP_METRICS plus ``profile`` (the four metrics' values side by
side), each text gives two feature rows, its original's and its variant's:

- scope ``layers``: the metric's per-text values at layers 1..L (``profile``: every metric's,
  concatenated);
- scope ``layer0``: layer 0 alone, the token embeddings, the negative control (the attention
  metrics have no layer 0 and get no row; ``profile`` uses the metrics that have it).

scikit-learn's pipeline (StandardScaler fitted on the training fold, then an L2
LogisticRegression, C = 1; fitted by :func:`homog.stats.classifier.fit_logistic`, the same
penalised likelihood solved for many fits at once) is cross-validated with GroupKFold (FOLDS
folds, fewer when there are fewer texts) grouped by text, so a review's two versions are never
split between training and test. ``auc``: roc_auc_score of the out-of-fold decision scores
(0.5: chance). ``ci_low``, ``ci_high``: the ``stats.ci`` percentile bootstrap over texts (a
resampled text brings both its rows) of that AUC, min(``stats.n_boot``, MAX_BOOT) seeded
resamples, the scores fixed. ``p_value``: a permutation test of exchangeability within text:
each of ``stats.separability_perm`` (default 999) seeded permutations swaps the two labels of a
random half of the texts and reruns the cross-validation of the first fold assignment; p = (1 +
#{null AUC >= that assignment's AUC}) / (1 + n_perm) (one-sided: a classifier that separates
scores above chance). The permutations refit the same penalised likelihood with the same
batched solver (Boehning's bound, then Newton) on one design: the scaler does not depend on the
labels. The solver reaches sklearn's optimum (tests/test_separability.py compares them).

A text whose variant is the original's text (``key_first`` where the key sentence already
opened the review) is left out of that variant's rows and counted in ``n_identical``, as the
contrasts leave out and count such pairs: its two rows are the same, so it could only tie,
and ties would pull the AUC towards 0.5 by the share of unchanged texts (None: no texts table,
not checked).

Rows whose two versions are identical within rounding for every text (1e-9 of the values:
the position family at layer 0, the same tokens reordered) get auc 0.5, CI [0.5, 0.5] and
p 1.0 without a fit: a classifier cannot tell identical rows apart, and a fit would only read
rounding noise. ``n``: texts with every feature finite in both versions (fewer than 4: NaN);
``n_layers``: the layers whose values are features.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from homog.schema.tables import TABLES
from homog.stats.classifier import (
    REFERENCE,
    features_of,
    fit_logistic,
    rank_auc,
    row_scores,
    standardize,
)
from homog.stats.combos import pair_identical
from homog.stats.paired_tests import NUMERIC_TOLERANCE
from homog.stats.reordering import (
    REPEATS,
    auc_of,
    changed_samples,
    control_rows,
    cv_scores,
    repeated_folds,
    split_rows,
    summary,
)
from homog.stats.settings import StatsSettings
from homog.variants import KEY_CONTROL, SEPARABLE

SEP_VARIANTS = SEPARABLE
SEP_METRICS = ("erank", "mev", "resultant_length", "attn_first")
PROFILE = "profile"
SCOPES = ("layers", "layer0")
AUC_STAT = "auc"  # the separability table's statistic of a plain AUC row
FOLDS = 5
MIN_TEXTS = 4  # paired texts a classifier needs (fewer: AUC NaN)
MAX_BOOT = 1000
SEP_COLUMNS = tuple(TABLES["separability"].names)  # the store's schema is the one definition


def identical(xa: np.ndarray, xb: np.ndarray) -> bool:
    """True when every text's two feature rows agree within rounding (NUMERIC_TOLERANCE)."""
    with np.errstate(invalid="ignore"):
        return bool(
            (np.abs(xa - xb) <= NUMERIC_TOLERANCE * np.maximum(np.abs(xa), np.abs(xb))).all()
        )


def null_aucs(x: np.ndarray, flips: np.ndarray, folds, chunk: int = 64) -> np.ndarray:
    """[P] out-of-fold AUCs of the whole cross-validation with each text's labels swapped where
    ``flips`` [P, n] is True (the rows of x [2n, k] as in
    :func:`homog.stats.reordering.repeated_folds`)."""
    n = flips.shape[1]
    base = np.r_[np.zeros(n), np.ones(n)]
    labels = np.where(np.hstack([flips, flips]), 1.0 - base, base)  # [P, 2n]
    out = np.empty(flips.shape[0])
    for start in range(0, flips.shape[0], chunk):
        lab = labels[start : start + chunk]
        scores = np.zeros(lab.shape)
        for train, test in folds:
            xtr, xt = standardize(x, train, test)
            theta = fit_logistic(xtr, lab[:, train])
            scores[:, test] = row_scores(xt, theta)
        out[start : start + chunk] = rank_auc(scores, lab)
    return out


def separate(
    xa: np.ndarray, xb: np.ndarray, *, n_boot: int, n_perm: int, seed: int, ci: float = 0.95
) -> dict[str, float]:
    """auc, ci_low, ci_high, p_value, n of telling rows ``xa`` [n, k] (the variant) from
    ``xb`` [n, k] (the original; row i of both is text i). Texts with a non-finite feature on
    either side are dropped; fewer than MIN_TEXTS left: NaN."""
    return separate_scores(xa, xb, n_boot=n_boot, n_perm=n_perm, seed=seed, ci=ci)[0]


def separate_scores(
    xa: np.ndarray, xb: np.ndarray, *, n_boot: int, n_perm: int, seed: int, ci: float = 0.95
) -> tuple[dict[str, float], np.ndarray | None, np.ndarray]:
    """:func:`separate`'s row, the [R, 2n] out-of-fold scores of its REPEATS fold assignments
    (None without a fit) and the mask of the texts kept. The AUC is the mean over the
    assignments, its CI pairs each text resample with a drawn assignment
    (homog.stats.reordering). The p compares like with like: the first assignment's own AUC
    against the null of the same cross-validation under permuted labels, an exact test (the
    mean over assignments against one assignment's wider null would err large)."""
    ok = np.isfinite(xa).all(1) & np.isfinite(xb).all(1)
    xa, xb = xa[ok], xb[ok]
    n = int(ok.sum())
    out = {"auc": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "n": n}
    if n < MIN_TEXTS:
        return out, None, ok
    if identical(xa, xb):
        return {**out, "auc": 0.5, "ci_low": 0.5, "ci_high": 0.5, "p_value": 1.0}, None, ok
    fold_sets = repeated_folds(n, FOLDS, seed=seed)
    scores = cv_scores(xa, xb, fold_sets)
    out.update(summary(scores, n_boot=min(n_boot, MAX_BOOT), seed=seed, ci=ci))
    if n_perm > 0:
        rng = np.random.default_rng([seed, n, 0x5E9])
        null = null_aucs(np.vstack([xb, xa]), rng.random((n_perm, n)) < 0.5, fold_sets[0])
        first = auc_of(scores[:1])
        out["p_value"] = float((1 + np.count_nonzero(null >= first - 1e-12)) / (1 + n_perm))
    return out, scores, ok


def run_separability(
    tables: dict[tuple[str, str], pd.DataFrame],
    run_id: str,
    settings: StatsSettings,
    *,
    variants: Sequence[str] = SEP_VARIANTS,
    metrics: Sequence[str] = SEP_METRICS,
    first_changed: Mapping[str, pd.Series] | None = None,
    text_ids: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """SEP_COLUMNS rows of one unchanged run; ``tables``: (variant, metric) -> [layer x
    sample_id] (homog.stats.bands.pivot_metrics of its layer_metrics); ``first_changed``:
    variant -> sample_id -> whether it changed the first sentence (the split rows;
    homog.stats.reordering); ``text_ids`` (homog.stats.combos.text_ids of the texts table):
    the texts a variant left as they were, left out and counted in ``n_identical`` (None: not
    checked, ``n_identical`` null). The label permutations of the classifier's p:
    ``settings.separability_perm``."""
    draws = {"n_boot": settings.n_boot, "seed": settings.seed, "ci": settings.ci}
    same = {v: unchanged(v, text_ids) for v in {*variants, KEY_CONTROL}}
    with threadpool_limits(1):  # small matrices: BLAS threads only wait for each other
        rows = _run(tables, run_id, settings, variants, metrics, first_changed or {}, same)
        for metric in [*metrics, PROFILE]:
            names = [m for m in metrics if m != PROFILE] if metric == PROFILE else [metric]
            base = {"run_id": run_id, "variant_b": REFERENCE, "metric": metric, "scope": "layers"}
            rows += control_rows(
                tables, names, variants, base, folds=FOLDS, unchanged=same, **draws
            )
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SEP_COLUMNS})
    out = pd.DataFrame(rows, columns=list(SEP_COLUMNS))
    out["statistic"] = out["statistic"].astype(object).where(out["statistic"].notna(), AUC_STAT)
    return out


def unchanged(variant: str, text_ids: pd.DataFrame | None) -> set[str] | None:
    """The sample_ids whose ``variant`` text is the original's (None without ``text_ids``)."""
    if text_ids is None:
        return None
    return {str(s) for s in pair_identical(variant, REFERENCE, text_ids)}


def _run(
    tables: Mapping[tuple[str, str], pd.DataFrame],
    run_id: str,
    settings: StatsSettings,
    variants: Sequence[str],
    metrics: Sequence[str],
    first_changed: Mapping[str, pd.Series],
    same: Mapping[str, set[str] | None],
) -> list[dict]:
    """The AUC rows of every variant, metric (and the profile) and scope, and their split
    rows by a changed first sentence; the texts of ``same[variant]`` (unchanged by it) are
    left out and counted."""
    n_boot, seed, ci = settings.n_boot, settings.seed, settings.ci
    n_perm = settings.separability_perm
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
                layers = {
                    m: [x for x in t.index if (x >= 1 if scope == "layers" else x == 0)]
                    for m, t in b.items()
                }
                n_layers = len(set().union(*layers.values()))
                every = [set(t.columns) for t in (*a.values(), *b.values())]
                samples = sorted(set.intersection(*every))
                if n_layers == 0:
                    continue
                samples, n_same = changed_samples(samples, same, (variant,))
                xa, xb = features_of(a, layers, samples), features_of(b, layers, samples)
                got, scores, ok = separate_scores(
                    xa, xb, n_boot=n_boot, n_perm=n_perm, seed=seed, ci=ci
                )
                base = {
                    "run_id": run_id,
                    "variant_a": variant,
                    "variant_b": REFERENCE,
                    "metric": metric,
                    "scope": scope,
                    "n_layers": n_layers,
                    "n_repeats": REPEATS if scores is not None else 0,
                    "n_identical": n_same,
                }
                rows.append({**base, **got})
                if scores is not None:
                    kept = [x for x, k in zip(samples, ok, strict=True) if k]
                    rows += split_rows(
                        scores,
                        kept,
                        first_changed.get(variant),
                        base,
                        n_boot=min(n_boot, MAX_BOOT),
                        seed=seed,
                        ci=ci,
                    )
    return rows
