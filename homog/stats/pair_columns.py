"""One contrast's rows as column arrays, and the table of many contrasts' rows.

The stats stage computes several hundred contrasts a - b per run (every variant pair and
metric), each a handful of rows (its layers, then its rows of depth). Built as data frames
row by row, the bookkeeping cost ten times the arithmetic; here a contrast is NumPy arrays
from end to end and the table is assembled once (:func:`rows_frame`), with the columns and
dtypes that a concatenation of per-contrast frames gives. Every bootstrap and test sees the
same arrays in the same order as the frames did; the band means sum in NumPy's order, not
pandas', and agree with them to rounding (:func:`homog.stats.bands.band_means`).

- :func:`difference_stats`: n, mean_diff, CI, p and Holm of per-text differences [G, n]
  (:func:`homog.stats.contrasts.paired_contrasts` in arrays);
- :func:`pair_parts`: the layer rows and the band rows of one contrast, every computed
  column (:func:`homog.stats.contrasts.pair_rows` adds the contrast's labels);
- :func:`rows_frame`: the table of many parts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from homog.stats.bands import band_means, band_of_layers
from homog.stats.contrast_rows import extra_arrays
from homog.stats.margins import Margin
from homog.stats.mixed import MIXED_COLUMNS
from homog.stats.paired_tests import bootstrap_ci, holm, paired_difference, paired_p
from homog.stats.settings import StatsSettings

# column -> an array of the part's rows, or one value for all of them
Part = dict[str, Any]


def difference_stats(d: np.ndarray, settings: StatsSettings) -> dict[str, np.ndarray]:
    """n, mean_diff, ci_low, ci_high, p_value and p_holm [G] of the rows of ``d`` [G, n]
    (per-text differences; NaN where a text is missing).

    A row's texts are its finite values; the mean needs one, the CI and test two (else NaN).
    Complete rows share one bootstrap and one test call; rows with a missing text are
    computed one at a time. Holm is across the rows given.
    """
    g, n = d.shape
    finite = np.isfinite(d)
    full = finite.all(axis=1)
    mean = np.full(g, math.nan)
    if n >= 1 and full.any():  # each row's texts contiguous: summed as a row on its own
        mean[full] = np.ascontiguousarray(d[full]).mean(axis=1)
    low, high, p = np.full(g, math.nan), np.full(g, math.nan), np.full(g, math.nan)
    boot = {"n_boot": settings.n_boot, "ci": settings.ci, "seed": settings.seed}
    test = {"test": settings.test, "n_perm": settings.n_perm, "seed": settings.seed}
    complete = full & (n >= 2)
    if complete.any():
        low[complete], high[complete] = bootstrap_ci(d[complete], **boot)
        p[complete] = paired_p(d[complete], **test)
    for i in np.flatnonzero(~full):  # ragged rows (missing values): one at a time
        di = d[i][finite[i]]
        if di.size >= 1:
            mean[i] = di.mean()
        if di.size >= 2:
            (low[i],), (high[i],) = bootstrap_ci(di[None, :], **boot)
            p[i] = paired_p(di[None, :], **test)[0]
    # Exact zeros everywhere: the bootstrap already gives [0, 0] and the test p = 1.0.
    stats = {"n": finite.sum(axis=1).astype(np.int64), "mean_diff": mean}
    return {**stats, "ci_low": low, "ci_high": high, "p_value": p, "p_holm": holm(p)}


def pair_parts(
    side_a: pd.DataFrame,
    side_b: pd.DataFrame,
    settings: StatsSettings,
    margin: Margin,
    *,
    tokens: tuple[pd.Series | None, pd.Series | None] = (None, None),
    baseline: pd.DataFrame | None = None,
    mixed: Mapping[str, Mapping[str, float]] | None = None,
) -> list[Part]:
    """The layer rows and the band rows (layer0, early, middle, late, final) of a - b for
    [layer x sample_id] tables ``side_a``, ``side_b`` (their shared layers and texts), each a
    :data:`Part` of the computed columns: layer or band, difference_stats' columns,
    homog.stats.contrast_rows.EXTRA_COLUMNS, and for the band rows MIXED_COLUMNS.

    margin: the run and metric's SESOI rule; tokens: per-text metric-token counts of a and
    b; baseline: the original's [layer x sample_id] table (default: b's); mixed: band -> the
    mixed model's columns for this pair.
    """
    a, b = side_a.align(side_b, join="inner")
    layers = a.index
    if len(layers) == 0:
        return []
    va, vb = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    # the baseline as a fresh [layer x text] copy, the layout its statistics were summed in
    base = np.ascontiguousarray(vb) if baseline is None else _reindexed(baseline, layers, a.columns)
    more: dict[str, Any] = {"t": _token_difference(tokens, a.columns), "margin": margin}
    more["d0"] = (
        paired_difference(va[layers.get_loc(0)], vb[layers.get_loc(0)]) if 0 in layers else None
    )
    d = paired_difference(va, vb)
    scopes = list(layers)
    parts = [{"layer": scopes, "band": None, **_rows(d, base, scopes, settings, more)}]
    bands = band_of_layers(scopes)
    if bands:
        ta = band_means(va, layers, bands)
        tb = band_means(vb, layers, bands)
        tbase = band_means(base, layers, bands)
        names = list(bands)
        part = _rows(paired_difference(ta, tb), tbase, names, settings, more)
        got = mixed or {}
        for col in MIXED_COLUMNS:
            part[col] = np.array([got.get(bd, {}).get(col, math.nan) for bd in names], dtype=float)
        parts.append({"band": names, "layer": None, **part})
    return parts


def _rows(
    d: np.ndarray, base: np.ndarray, scopes: list, settings: StatsSettings, more: dict
) -> dict[str, np.ndarray]:
    return {**difference_stats(d, settings), **extra_arrays(d, base, scopes, settings, **more)}


def _reindexed(table: pd.DataFrame, layers: pd.Index, samples: pd.Index) -> np.ndarray:
    """``table``'s values [layers x samples] (NaN where it has no such layer or text)."""
    return table.reindex(index=layers, columns=samples).to_numpy(dtype=float)


def _token_difference(
    tokens: tuple[pd.Series | None, pd.Series | None], samples: pd.Index
) -> np.ndarray:
    """[n] token-count differences a - b of the texts ``samples`` (NaN without counts)."""
    ta, tb = tokens
    if ta is None or tb is None:
        return np.full(len(samples), math.nan)
    return (ta.reindex(samples) - tb.reindex(samples)).to_numpy(dtype=float)


def rows_frame(parts: Sequence[Part], columns: Sequence[str]) -> pd.DataFrame:
    """The table of ``parts`` (each a :data:`Part`; a missing column is NaN), ``columns`` in
    order, dtypes as ``pd.concat`` of one frame per part gives them: a text column (labels,
    ``band``, ``sesoi_basis``) is pandas' string dtype where every part has a text in it and
    object (None kept) where a part has none; ``layer`` and ``n_identical`` are Int64."""
    sizes = [_size(p) for p in parts]
    out = {}
    for col in columns:
        chunks = [_chunk(p.get(col, math.nan), k) for p, k in zip(parts, sizes, strict=True)]
        if col in ("layer", "n_identical"):
            out[col] = pd.array(np.concatenate(chunks) if chunks else [], dtype="Int64")
        elif chunks and any(c.dtype == object for c in chunks):
            out[col] = _text_column(chunks)
        else:
            out[col] = np.concatenate(chunks) if chunks else np.array([], dtype=object)
    return pd.DataFrame(out, columns=list(columns))


def _size(part: Part) -> int:
    return next(len(v) for v in part.values() if isinstance(v, (list, np.ndarray)))


def _chunk(value: Any, size: int) -> np.ndarray:
    """A part's column as an array of its ``size`` rows (a scalar repeated; text as object)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list):
        return np.array(value, dtype=object)
    if value is None or isinstance(value, str):
        return np.full(size, value, dtype=object)
    return np.full(size, value)


def _text_column(chunks: list[np.ndarray]) -> pd.Series:
    """One text column of many parts (see :func:`rows_frame`)."""
    has_text = [any(isinstance(v, str) for v in c) for c in chunks]
    if all(has_text):
        return pd.Series(np.concatenate(chunks))  # pandas infers the text dtype
    # a part without text: pandas' concatenation keeps object, with the texts' missing
    # values as NaN where their part was a string column and None where it was not
    fixed = [
        np.array([math.nan if v is None else v for v in c], dtype=object) if t else c
        for c, t in zip(chunks, has_text, strict=True)
    ]
    return pd.Series(np.concatenate(fixed), dtype=object)
