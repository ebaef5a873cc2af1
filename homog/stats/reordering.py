"""Claim 4 against reordering: repeated cross-validation, each variant's AUC minus
key_control's, and every AUC split by whether the variant changed the first sentence
(docs/statistics.md, "Separability (claim 4)").

``key_control`` moves a non-key sentence as far as the key sentence moves: a classifier that
tells it from the original sees reordering, not position. So the claim that position itself
separates is the difference AUC(variant vs original) - AUC(key_control vs original), paired
over the same texts and the same fold assignments.

- Fold assignments: ``REPEATS`` seeded random assignments of the texts to folds (a text's two
  versions in one fold). A row's AUC is the mean over them of the out-of-fold AUC.
- CIs: percentile bootstrap over texts; each resample is paired with one fold assignment drawn
  at random, so the interval covers both the texts and the fold variability.
- The difference's p: the two-sided bootstrap p (``homog.stats.paired_tests.bootstrap_p``).
- The split: a text's first sentence changed when the variant's first sentence (the
  splitter of ``homog.text.sentences``) differs from the original's. A changed first
  sentence changes the attention sink, which the metrics see at once; each AUC is also
  given on each part alone (same out-of-fold scores, the part's texts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from homog.stats.classifier import REFERENCE, features_of, oof_score_sets, rank_auc, weighted_auc
from homog.stats.paired_tests import bootstrap_p, resample_counts
from homog.text.sentences import split_sentences
from homog.variants import KEY_CONTROL

REPEATS = 10
DIFF, AUC = f"auc - {KEY_CONTROL}", "auc"


def repeated_folds(n: int, folds: int, repeats: int = REPEATS, seed: int = 0) -> list[list]:
    """``repeats`` seeded assignments of n texts to min(folds, n) folds, each a list of
    (train, test) row indices of the 2n rows (the original's 0..n-1, the variant's n..2n-1)."""
    rng = np.random.default_rng([seed, n, 0xF01D])
    k = min(folds, n)
    out = []
    for _ in range(repeats):
        fold = rng.permutation(n) % k
        rows = np.r_[fold, fold]
        out.append([(np.flatnonzero(rows != f), np.flatnonzero(rows == f)) for f in range(k)])
    return out


def cv_scores(xa: np.ndarray, xb: np.ndarray, fold_sets: list[list]) -> np.ndarray:
    """[R, 2n] out-of-fold decision scores of telling ``xa`` (variant) from ``xb`` (original)
    under each fold assignment (the pipeline of homog.stats.separability)."""
    x = np.vstack([xb, xa])
    y = np.r_[np.zeros(len(xb)), np.ones(len(xa))]
    return oof_score_sets(x, y, fold_sets)


def _boot_aucs(scores: np.ndarray, keep: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """[B] AUCs of the texts ``keep`` (bool [n]): resampled texts, each draw with one fold
    assignment drawn at random."""
    n = keep.size
    y = np.r_[np.zeros(n), np.ones(n)]
    w = resample_counts(n, n_boot, seed) * keep[None, :]
    pick = np.random.default_rng([seed, n, 0xB007]).integers(scores.shape[0], size=n_boot)
    out = np.full(n_boot, np.nan)
    for r in range(scores.shape[0]):
        sel = pick == r
        if sel.any():
            out[sel] = weighted_auc(scores[r], y, np.hstack([w[sel], w[sel]]))
    return out


def auc_of(scores: np.ndarray, keep: np.ndarray | None = None) -> float:
    """The mean over fold assignments of the out-of-fold AUC of the texts ``keep``."""
    n = scores.shape[1] // 2
    keep = np.ones(n, bool) if keep is None else keep
    rows = np.r_[keep, keep]
    if keep.sum() < 2:
        return math.nan
    y = np.r_[np.zeros(n), np.ones(n)][rows]
    return float(rank_auc(scores[:, rows], np.tile(y, (scores.shape[0], 1))).mean())


def summary(
    scores: np.ndarray, *, n_boot: int, seed: int, ci: float, keep: np.ndarray | None = None
) -> dict[str, float]:
    """auc (mean over assignments), ci_low, ci_high of the texts ``keep`` (None: all)."""
    n = scores.shape[1] // 2
    keep = np.ones(n, bool) if keep is None else keep
    auc = auc_of(scores, keep)
    if not math.isfinite(auc):
        return {"auc": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": int(keep.sum())}
    boot = _boot_aucs(scores, keep, n_boot, seed)
    low, high = np.nanquantile(boot, [(1 - ci) / 2, (1 + ci) / 2])
    return {"auc": auc, "ci_low": float(low), "ci_high": float(high), "n": int(keep.sum())}


def difference(
    scores: np.ndarray, control: np.ndarray, *, n_boot: int, seed: int, ci: float
) -> dict[str, float]:
    """AUC(scores) - AUC(control) over the same texts and fold assignments, with its
    bootstrap CI (the same resamples and drawn assignments on both sides) and bootstrap p."""
    n = scores.shape[1] // 2
    keep = np.ones(n, bool)
    diff = auc_of(scores) - auc_of(control)
    boot = _boot_aucs(scores, keep, n_boot, seed) - _boot_aucs(control, keep, n_boot, seed)
    low, high = np.nanquantile(boot, [(1 - ci) / 2, (1 + ci) / 2])
    return {
        "auc": diff,
        "ci_low": float(low),
        "ci_high": float(high),
        "p_value": bootstrap_p(boot),
        "n": n,
    }


def first_sentence_changed(texts: pd.DataFrame) -> dict[str, pd.Series]:
    """variant -> sample_id -> whether its first sentence differs from the original's
    (``texts``: variant, sample_id, text)."""

    def first(text: str) -> str:
        spans = split_sentences(str(text))
        return " ".join(str(text)[spans[0][0] : spans[0][1]].split()) if spans else ""

    heads = texts.assign(head=texts["text"].map(first))
    orig = heads[heads["variant"] == "original"].set_index("sample_id")["head"]
    out = {}
    for variant, g in heads[heads["variant"] != "original"].groupby("variant"):
        h = g.set_index("sample_id")["head"]
        common = h.index.intersection(orig.index)
        out[str(variant)] = h.loc[common] != orig.loc[common]
    return out


def first_changes(path: Path) -> dict[str, pd.Series] | None:
    """:func:`first_sentence_changed` of the texts table at ``path`` (None without one)."""
    if not path.exists():
        return None
    return first_sentence_changed(pd.read_parquet(path, columns=["variant", "sample_id", "text"]))


def split_rows(
    scores: np.ndarray,
    samples: list[str],
    changed: pd.Series | None,
    base: dict,
    *,
    n_boot: int,
    seed: int,
    ci: float,
) -> list[dict]:
    """The rows of one AUC on the texts whose first sentence the variant changed and on the
    others (none without ``changed``, or when either part has fewer than 2 texts: the other
    part would repeat the whole)."""
    if changed is None:
        return []
    flag = changed.reindex(samples)
    parts = {value: (flag == value).fillna(False).to_numpy(bool) for value in (True, False)}
    if min(keep.sum() for keep in parts.values()) < 2:
        return []
    return [
        {
            **base,
            **summary(scores, n_boot=n_boot, seed=seed, ci=ci, keep=keep),
            "p_value": math.nan,
            "first_changed": value,
        }
        for value, keep in parts.items()
    ]


def control_rows(
    tables: Mapping[tuple[str, str], pd.DataFrame],
    names: list[str],
    variants: list[str] | tuple[str, ...],
    base: dict,
    *,
    folds: int,
    n_boot: int,
    seed: int,
    ci: float,
    unchanged: Mapping[str, set[str] | None] | None = None,
) -> list[dict]:
    """The rows 'variant - key_control' (scope ``layers``) of the metrics ``names`` (one, or
    the profile's): each variant's AUC against the original minus key_control's, over the
    texts all three have with every feature finite, under the same fold assignments.
    ``unchanged``: variant -> the sample_ids whose text it left as the original's (None: not
    checked); a text either variant left unchanged is left out of the pair and counted in
    ``n_identical``."""
    names = [m for m in names if (REFERENCE, m) in tables and (KEY_CONTROL, m) in tables]
    if not names:
        return []
    layers = {m: [x for x in tables[(REFERENCE, m)].index if x >= 1] for m in names}
    control_cache: dict[tuple[str, ...], np.ndarray] = {}
    rows = []
    for variant in variants:
        if variant == KEY_CONTROL or not all((variant, m) in tables for m in names):
            continue
        sides = [{m: tables[(v, m)] for m in names} for v in (variant, KEY_CONTROL, REFERENCE)]
        samples = sorted(set.intersection(*(set(t.columns) for d in sides for t in d.values())))
        samples, n_same = changed_samples(samples, unchanged, (variant, KEY_CONTROL))
        xa, xc, xo = (features_of(d, layers, samples) for d in sides)
        ok = np.isfinite(xa).all(1) & np.isfinite(xc).all(1) & np.isfinite(xo).all(1)
        if ok.sum() < 4:
            continue
        kept = tuple(x for x, k in zip(samples, ok, strict=True) if k)
        fold_sets = repeated_folds(len(kept), folds, seed=seed)
        if kept not in control_cache:
            control_cache[kept] = cv_scores(xc[ok], xo[ok], fold_sets)
        got = difference(
            cv_scores(xa[ok], xo[ok], fold_sets),
            control_cache[kept],
            n_boot=n_boot,
            seed=seed,
            ci=ci,
        )
        rows.append(
            {
                **base,
                "variant_a": variant,
                **got,
                "statistic": DIFF,
                "n_layers": len(set().union(*layers.values())),
                "n_repeats": REPEATS,
                "n_identical": n_same,
            }
        )
    return rows


def changed_samples(
    samples: list, unchanged: Mapping[str, set[str] | None] | None, variants: tuple[str, ...]
) -> tuple[list, int | None]:
    """``samples`` without those any of ``variants`` left unchanged, and how many those were
    (None when ``unchanged`` does not know every variant's)."""
    sets = [(unchanged or {}).get(v) for v in variants]
    if any(s is None for s in sets):
        return samples, None
    drop = set().union(*sets)
    kept = [x for x in samples if str(x) not in drop]
    return kept, len(samples) - len(kept)
