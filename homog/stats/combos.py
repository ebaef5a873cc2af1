"""Contrast sides as per-text combinations of variants, and the identity pairs left out.

A contrast is ``a - b`` of two sides (``homog.variants.contrast_name``): a side is a text
variant, a derived one (key_ends: the per-text mean of key_first and key_last; ctrl_ends) or a
difference of two ("key_first - key_mid"). :func:`with_sides` adds every side the pairs name
to the [layer x sample_id] tables as its per-text combination (NaN where a term is missing),
so the key-specific effect (key_first - key_mid) - (ctrl_first - ctrl_mid) is one paired
contrast whose columns (CI, test, dz, TOST, layer-0 control) keep their meaning.

**Identity pairs.** A review whose texts make the contrast cancel term by term (key_first -
original where the key sentence is already first: the same bytes on both sides) adds an exact
zero that says nothing about position and dilutes the mean. :func:`identical_samples` finds
them from the texts (per review: the contrast's weights summed per distinct text, all zero);
the contrast leaves them out and counts them in ``n_identical``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from homog.io import read_output
from homog.variants import contrast_terms, side_terms

TOLERANCE = 1e-12  # a weight sum this close to 0 cancels (0.5 + 0.5 - 1 is exact anyway)


def combine(
    tables: Mapping[Hashable, pd.DataFrame], terms: Mapping[Hashable, float]
) -> pd.DataFrame | None:
    """sum_v w_v tables[v] over the layers and texts every term has; None when one is absent."""
    if not terms or any(v not in tables for v in terms):
        return None
    parts = [tables[v] for v in terms]
    rows = parts[0].index
    cols = parts[0].columns
    for p in parts[1:]:
        rows, cols = rows.intersection(p.index), cols.intersection(p.columns)
    out = sum(w * tables[v].loc[rows, cols] for v, w in terms.items())
    return out.sort_index()


def with_sides(
    tables: dict[tuple[str, str], pd.DataFrame],
    tokens: dict[str, pd.Series],
    pairs: Sequence[tuple[str, str]],
) -> tuple[dict[tuple[str, str], pd.DataFrame], dict[str, pd.Series]]:
    """``tables`` ((variant, metric) -> [layer x sample_id]) and ``tokens`` (variant ->
    sample_id -> token count) with every side of ``pairs`` that is not a text variant added
    as its combination (:func:`combine`), for every metric that has all its terms."""
    tables, tokens = dict(tables), dict(tokens)
    sides = {s for pair in pairs for s in pair if side_terms(s) != {s: 1.0}}
    metrics = {m for _, m in tables}
    for side in sorted(sides):
        terms = side_terms(side)
        for metric in metrics:
            got = combine({v: t for (v, m), t in tables.items() if m == metric}, terms)
            if got is not None:
                tables[(side, metric)] = got
        if all(v in tokens for v in terms):
            frame = pd.DataFrame({v: tokens[v] for v in terms}).dropna()
            tokens[side] = sum(w * frame[v] for v, w in terms.items())
    return tables, tokens


def text_ids(texts: pd.DataFrame | None) -> pd.DataFrame | None:
    """[sample_id x variant] of a code per distinct text (equal codes: byte-identical texts)
    of a texts table (variant, sample_id, text); None without one."""
    if texts is None or texts.empty:
        return None
    codes, _ = pd.factorize(texts["text"])
    frame = texts.assign(code=codes, sample_id=texts["sample_id"].astype(str))
    return frame.pivot_table(index="sample_id", columns="variant", values="code", aggfunc="first")


def texts_identity(path: Path) -> pd.DataFrame | None:
    """:func:`homog.stats.combos.text_ids` of the texts table at ``path`` (None when absent:
    identity pairs are then not checked)."""
    if not path.exists():
        return None
    cols = ["variant", "sample_id", "text"]
    return text_ids(
        read_output(path, lambda p: pd.read_parquet(p, columns=cols), "rerun `homog synth`")
    )


def identical_samples(terms: Mapping[Hashable, float], ids: pd.DataFrame | None) -> pd.Index:
    """The sample_ids whose ``terms`` (key -> weight; the keys are columns of ``ids``, each
    review's identity of that term's text) cancel: the weights summed per distinct identity
    are all 0. Reviews missing a term's identity are never identical; no ``ids``: none."""
    if ids is None or not terms or any(k not in ids.columns for k in terms):
        return pd.Index([])
    keys = list(terms)
    codes = ids[keys].to_numpy(dtype=float)
    weights = np.array([terms[k] for k in keys], dtype=float)
    known = np.isfinite(codes).all(axis=1)
    same = np.zeros(len(ids), dtype=bool)
    for i in np.flatnonzero(known):
        sums: dict[float, float] = {}
        for c, w in zip(codes[i], weights, strict=True):
            sums[c] = sums.get(c, 0.0) + w
        same[i] = all(abs(s) < TOLERANCE for s in sums.values())
    return ids.index[same]


def pair_identical(a: str, b: str, ids: pd.DataFrame | None) -> pd.Index:
    """The reviews whose texts make ``a - b`` cancel (:func:`identical_samples`)."""
    return identical_samples(contrast_terms(a, b), ids)


def without(
    a: pd.DataFrame, b: pd.DataFrame, samples: pd.Index
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """a and b without the columns ``samples`` (as strings or as they are), and how many of
    the texts both had were dropped."""
    both = a.columns.intersection(b.columns)
    names = {str(s) for s in samples}
    drop = both[[str(c) in names for c in both]]  # a set, not Index.astype: once per pair
    return a.drop(columns=drop), b.drop(columns=drop), int(len(drop))
