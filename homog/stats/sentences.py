"""Where position acts: the moved sentence's paired contrasts (issue 40, docs/sentences.md).

From a run's ``sentence_metrics`` (homog.extract.sentences), per metric, one [layer x
sample_id] table per (whose sentence, variant):

- ``key``: the key sentence's value in each family member;
- ``control``: the value of the sentence key_control moves (its control sentence).

and the contrasts, each paired within sentence (the same sentence of the same review, moved):

================  ============  ===========  ==============================================
sentence          variant_a     variant_b    meaning
================  ============  ===========  ==============================================
key               key_first     original     the key sentence moved to the front
key               key_mid       original     ... to the middle
key               key_last      original     ... to the end
key               key_ends      key_mid      the U-shape: (first + last) / 2 - middle
control           key_control   original     the control sentence moved as far
key - control     key_far       original     **the position effect**: the key sentence moved
                                             the control's way (key_first when the control
                                             moved towards the start, else key_last) minus
                                             the control sentence's own move
================  ============  ===========  ==============================================

The position effect is (K_far - K_orig) - (C_ctrl - C_orig), per review: variant_a's table
holds K_far - (C_ctrl - C_orig) and variant_b's K_orig, so every column of the contrasts
table (CIs, dz, TOST against the smallest effect of interest, the layer-0 control) keeps its
meaning. The smallest effect of interest is ``stats.sesoi`` x the key sentence's
between-sentence SD in its original place (homog.stats.margins, basis sd whatever
``stats.sesoi_basis``). Rows per layer and per band
(layer0, early, middle, late, final: homog.stats.contrasts.band_of_layers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from homog.schema.tables import TABLES

SENTENCE_CONTRAST_COLUMNS = TABLES["sentence_contrasts"].names
KEY, CONTROL, EFFECT = "key", "control", "key - control"
KEY_FAR = "key_far"
KEY_ENDS = "key_ends"
MOVES = ("key_first", "key_mid", "key_last")


def sentence_tables(frame: pd.DataFrame) -> dict[tuple[str, str, str], pd.DataFrame]:
    """(KEY or CONTROL, variant, metric) -> [layer x sample_id] of one run's rows."""
    out = {}
    for who, flag in ((KEY, "is_key"), (CONTROL, "is_control")):
        rows = frame[frame[flag].astype(bool)]
        for (variant, metric), g in rows.groupby(["variant", "metric"], sort=True):
            wide = g.pivot_table(index="layer", columns="sample_id", values="value",
                                 aggfunc="first", dropna=False)  # fmt: skip
            out[(who, variant, metric)] = wide.sort_index()
    return out


def far_side(frame: pd.DataFrame) -> pd.Series:
    """sample_id -> 'key_first' or 'key_last': the family member that moves the key sentence
    the way key_control moved its control sentence (towards the start: key_first)."""
    ctrl = frame[
        frame["is_control"].astype(bool) & frame["variant"].isin(["original", "key_control"])
    ]
    at = ctrl.drop_duplicates(["variant", "sample_id"]).pivot(
        index="sample_id", columns="variant", values="sent_index"
    )
    if not {"original", "key_control"} <= set(at.columns):
        return pd.Series(dtype=object)
    at = at.dropna()
    return pd.Series(
        np.where(at["key_control"] < at["original"], "key_first", "key_last"), index=at.index
    )


def contrast_sides(
    tables: Mapping[tuple[str, str, str], pd.DataFrame], far: pd.Series, metric: str
) -> list[tuple[str, str, str, pd.DataFrame, pd.DataFrame]]:
    """(sentence, variant_a, variant_b, a, b) of every contrast of the module doc that the
    tables allow, for ``metric``."""

    def t(who: str, v: str) -> pd.DataFrame | None:
        return tables.get((who, v, metric))

    out = []
    orig = t(KEY, "original")
    if orig is None:
        return out
    for v in MOVES:
        if t(KEY, v) is not None:
            out.append((KEY, v, "original", t(KEY, v), orig))
    first, last, mid = t(KEY, "key_first"), t(KEY, "key_last"), t(KEY, "key_mid")
    if first is not None and last is not None and mid is not None:
        a, b = first.align(last, join="inner")
        out.append((KEY, KEY_ENDS, "key_mid", (a + b) / 2.0, mid))
    c_orig, c_moved = t(CONTROL, "original"), t(CONTROL, "key_control")
    if c_orig is not None and c_moved is not None:
        out.append((CONTROL, "key_control", "original", c_moved, c_orig))
        if first is not None and last is not None and len(far):
            k_far = pd.concat(
                [
                    first.reindex(columns=far.index[far == "key_first"]),
                    last.reindex(columns=far.index[far == "key_last"]),
                ],
                axis=1,
            )
            moved = (c_moved - c_orig).reindex(columns=k_far.columns)
            out.append((EFFECT, KEY_FAR, "original", k_far - moved, orig))
    return out


def run_sentence_contrasts(
    frame: pd.DataFrame, run_id: str, *, stats: Any, seed: int = 0
) -> pd.DataFrame:
    """SENTENCE_CONTRAST_COLUMNS rows of one run's sentence_metrics ``frame``, with the
    bootstrap, test and equivalence options of ``stats`` (``params.stats``)."""
    from homog.stats.contrasts import pair_rows, sesoi_of_table

    opts = {"n_boot": stats.n_boot, "ci": stats.ci, "seed": seed, "test": stats.test,
            "n_perm": stats.n_perm}  # fmt: skip
    tables = sentence_tables(frame)
    far = far_side(frame)
    parts = []
    for metric in sorted({m for _, _, m in tables}):
        base = tables.get((KEY, "original", metric))
        if base is None:
            continue
        # the sentence's own basis, whatever stats.sesoi_basis: its between-sentence SD in its
        # original place (a sentence has no depth course of its own to scale)
        rule = sesoi_of_table(stats.sesoi, "sd", base, "the key sentence's", metric)
        for sentence, va, vb, a, b in contrast_sides(tables, far, metric):
            meta = {"run_id": run_id, "variant_a": va, "variant_b": vb, "metric": metric,
                    "baseline_run_id": None, "sentence": sentence}  # fmt: skip
            parts += pair_rows(
                a, b, meta, **opts, baseline=base, sesoi=stats.sesoi, margin=rule,
                alpha=stats.alpha,
            )  # fmt: skip
    if not parts:
        return pd.DataFrame(columns=SENTENCE_CONTRAST_COLUMNS)
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    for col in SENTENCE_CONTRAST_COLUMNS:
        if col not in out.columns:
            out[col] = None
    out["layer"] = out["layer"].astype("Int64")
    return out[SENTENCE_CONTRAST_COLUMNS]


def sentence_dose(frame: pd.DataFrame, bins: int = 5) -> pd.DataFrame:
    """The dose view: every followed sentence's value against its relative position, with
    sentence fixed effects (each (review, sentence)'s mean over the family's members removed),
    averaged per position bin of width 1 / ``bins``: columns metric, layer, bin, position (the
    bin's centre), value, n."""
    f = frame[["sample_id", "sentence", "rel_position", "layer", "metric", "value"]]
    centre = f.groupby(["sample_id", "sentence", "layer", "metric"])["value"].transform("mean")
    f = f.assign(value=f["value"] - centre)
    f = f.assign(bin=np.minimum((f["rel_position"] * bins).astype(int), bins - 1))
    out = f.groupby(["metric", "layer", "bin"])["value"].agg(["mean", "count"]).reset_index()
    out = out.rename(columns={"mean": "value", "count": "n"})
    out["position"] = (out["bin"] + 0.5) / bins
    return out[["metric", "layer", "bin", "position", "value", "n"]]
