"""The rows of depth and the per-text tables every stats computation starts from.

A run's layers 0..L become the depth rows ``layer0`` (the token embeddings: no position in
RoPE models, so a difference there is lexical), the bands ``early``, ``middle``, ``late``
(first 25 %, middle 50 %, last 25 % of the layers strictly between 0 and L) and ``final``
(layer L, the final-norm output). A band's value per text is the mean over its layers.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    """(variant, metric) -> [layer x sample_id] table of values."""
    out = {}
    for (variant, metric), g in frame.groupby(["variant", "metric"], sort=True):
        wide = g.pivot_table(
            index="layer", columns="sample_id", values="value", aggfunc="first", dropna=False
        )
        out[(variant, metric)] = wide.sort_index()
    return out


def band_tables(wide: pd.DataFrame, bands: dict[str, list[int]]) -> pd.DataFrame:
    """[band x sample_id] per-text means over each band's layers (NaN if any layer missing)."""
    return pd.DataFrame(
        {band: wide.loc[ls].mean(axis=0, skipna=False) for band, ls in bands.items()}
    ).T
