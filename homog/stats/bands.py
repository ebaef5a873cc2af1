"""The rows of depth and the per-text tables every stats computation starts from.

A run's layers 0..L become the depth rows ``layer0`` (the token embeddings: no position in
RoPE models, so a difference there is lexical), the bands ``early``, ``middle``, ``late``
(first 25 %, middle 50 %, last 25 % of the layers strictly between 0 and L) and ``final``
(layer L, the final-norm output). A band's value per text is the mean over its layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

BANDS = ("early", "middle", "late")
# layer 0 and layer L are rows of their own, outside the depth bands
ALL_BANDS = ("layer0", *BANDS, "final")


def band_of_layers(layers: Sequence[int]) -> dict[str, list[int]]:
    """The rows of depth of sorted ``layers``: ``layer0`` ([0], when present), ``final`` (the
    last layer L, when above 0) and, over the layers strictly between them, early (first 25 %),
    middle (50 %) and late (last 25 %).

    Band sizes are round(k/4) of the k interior layers (at least 1 when k >= 3); fewer than 3
    interior layers give no depth bands. Keys in the order of ALL_BANDS.
    """
    layers = sorted(set(layers))
    if not layers:
        return {}
    last = layers[-1]
    inner = [x for x in layers if 0 < x < last]
    out: dict[str, list[int]] = {"layer0": [0]} if layers[0] == 0 else {}
    n = len(inner)
    if n >= 3:
        q = max(1, round(n / 4))
        out.update(early=inner[:q], middle=inner[q : n - q], late=inner[n - q :])
    if last > 0:
        out["final"] = [last]
    return out


def pivot_metrics(frame: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """(variant, metric) -> [layer x sample_id] table of values.

    Each table holds the layers and sample_ids its rows have (sorted; index named ``layer``,
    columns ``sample_id``), NaN where a pair has no value and the first non-NaN value where
    it has several: what ``pivot_table(aggfunc="first", dropna=False)`` of each (variant,
    metric) group gives, from one sort of the whole frame instead of a pivot per group.
    """
    if frame.empty:
        return {}
    keys = [pd.factorize(frame[c], sort=True) for c in ("variant", "metric", "layer", "sample_id")]
    (vc, variants), (mc, metrics), (lc, layers), (sc, samples) = keys
    values = frame["value"].to_numpy(dtype=float)
    group = vc.astype(np.int64) * len(metrics) + mc
    order = np.argsort(group, kind="stable")  # stable: a pair's rows keep their frame order
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    out = {}
    for rows in np.split(order, bounds):
        g = int(group[rows[0]])
        out[(variants[g // len(metrics)], metrics[g % len(metrics)])] = _wide(
            lc[rows], sc[rows], values[rows], layers, samples
        )
    return out


def _wide(
    lc: np.ndarray, sc: np.ndarray, values: np.ndarray, layers: pd.Index, samples: pd.Index
) -> pd.DataFrame:
    """The [layer x sample_id] table of one group's rows (codes ``lc``, ``sc`` into the
    sorted ``layers`` and ``samples``), the first non-NaN value of each pair."""
    li, lcode = np.unique(lc, return_inverse=True)
    si, scode = np.unique(sc, return_inverse=True)
    wide = np.full((li.size, si.size), np.nan)
    ok = ~np.isnan(values)
    cell = lcode[ok] * si.size + scode[ok]
    cell, first = np.unique(cell, return_index=True)  # the first row of each cell
    wide.flat[cell] = values[ok][first]
    index = layers.take(li).rename("layer")
    columns = samples.take(si).rename("sample_id")
    # no copy: the frame wraps the array (a layer's texts contiguous, as pivot_table's)
    return pd.DataFrame(wide, index=index, columns=columns, copy=False)


def band_means(
    values: np.ndarray, layers: Sequence[int], bands: dict[str, list[int]]
) -> np.ndarray:
    """[band x text] means over each band's layers of ``values`` [layer x text] (rows labelled
    by ``layers``; NaN where a layer is missing or a value is NaN). The same means as pandas'
    ``mean(axis=0, skipna=False)`` over the band's rows up to the order of the sums (1e-13
    relative; tests/test_pair_columns.py)."""
    out = np.full((len(bands), values.shape[1]), np.nan)
    row_of = {layer: i for i, layer in enumerate(layers)}
    for i, ls in enumerate(bands.values()):
        if all(x in row_of for x in ls):
            out[i] = values[[row_of[x] for x in ls]].mean(axis=0)
    return out
