"""Where position acts: the moved sentence's paired contrasts (docs/sentences.md).

From a run's ``sentence_metrics`` (homog.extract.sentences), per metric, one [layer x
sample_id] table per (whose sentence, variant):

- ``key``: the key sentence's value in each family member;
- ``control``: the value of the sentence key_control moves (its control sentence);
- ``ctrl``: the value of the same-place control sentence (the one ctrl_first, ctrl_mid and
  ctrl_last move to the key sentence's slots).

and the contrasts, each paired within sentence (the same sentence of the same review, moved):

================  ============  ===========  ==============================================
sentence          variant_a     variant_b    meaning
================  ============  ===========  ==============================================
key               key_first     original     the key sentence moved to the front
key               key_mid       original     ... to the middle
key               key_last      original     ... to the end
key               key_ends      key_mid      the U-shape: (first + last) / 2 - middle
control           key_control   original     the control sentence moved as far
key - control     key_far       original     the old position effect: the key sentence moved
                                             the control's way (key_first when the control
                                             moved towards the start, else key_last) minus
                                             the control sentence's own move
key               key_first     key_mid      the key sentence first against the middle
key               key_last      key_mid      ... last against the middle
ctrl              ctrl_first    ctrl_mid     what the first place does to any sentence
ctrl              ctrl_last     ctrl_mid     ... the last place
ctrl              ctrl_ends     ctrl_mid     ... the edges against the middle
key - ctrl        key_first -   ctrl_first   **the key-specific edge effect**: what the
                  key_mid       - ctrl_mid   first place gives the key sentence beyond what
                                             it gives the control sentence on the same slots
key - ctrl        key_last -    ctrl_last    ... the last place
                  key_mid       - ctrl_mid
key - ctrl        key_ends -    ctrl_ends    **the key-specific U-shape**
                  key_mid       - ctrl_mid
================  ============  ===========  ==============================================

In the key-specific rows what a place does to any sentence (the causal mask's and the
attention sink's primacy and recency) cancels, and so does reordering: both sentences make the
same moves between the same slots. A review whose texts make a row cancel for its sentences
(key_first - original where the key sentence is already first) is left out of that row and
counted in ``n_identical`` (homog.stats.combos).

The old position effect is (K_far - K_orig) - (C_ctrl - C_orig), per review: variant_a's table
holds K_far - (C_ctrl - C_orig) and variant_b's K_orig, so every column of the contrasts
table (CIs, dz, TOST against the smallest effect of interest, the layer-0 control) keeps its
meaning. The smallest effect of interest is ``stats.sesoi`` x the key sentence's
between-sentence SD in its original place (homog.stats.margins, basis sd whatever
``stats.sesoi_basis``). Rows per layer and per band
(layer0, early, middle, late, final: homog.stats.bands.band_of_layers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from homog.schema.tables import TABLES
from homog.stats.bands import band_of_layers, pivot_metrics
from homog.stats.combos import combine, identical_samples, without
from homog.stats.contrasts import pair_rows
from homog.stats.pair_columns import rows_frame
from homog.stats.position_curve import predicted_frame
from homog.stats.settings import StatsSettings
from homog.variants import CTRL_ENDS, CTRL_NAMED, KEY_CONTROL, KEY_ENDS, NAMED, side_terms

SENTENCE_CONTRAST_COLUMNS = TABLES["sentence_contrasts"].names
KEY, CONTROL_ROLE, EFFECT = "key", "control", "key - control"
CTRL, KEY_SPECIFIC = "ctrl", "key - ctrl"
ROLES = {KEY: "is_key", CONTROL_ROLE: "is_control", CTRL: "is_ctrl"}  # sentence_metrics' flags
KEY_FAR = "key_far"
MOVES = tuple(NAMED.values())  # key_first, key_mid, key_last
CTRL_MOVES = tuple(CTRL_NAMED.values())  # ctrl_first, ctrl_mid, ctrl_last
ENDS = {KEY: KEY_ENDS, CTRL: CTRL_ENDS}


def sentence_tables(frame: pd.DataFrame) -> dict[tuple[str, str, str], pd.DataFrame]:
    """(KEY, CONTROL_ROLE or CTRL, variant, metric) -> [layer x sample_id] of one run's rows."""
    out = {}
    for who, flag in ROLES.items():
        if flag not in frame.columns:  # an older extraction: no same-place control
            continue
        rows = frame[frame[flag].astype(bool)]
        for (variant, metric), wide in pivot_metrics(rows).items():
            out[(who, variant, metric)] = wide
    return out


def far_side(frame: pd.DataFrame) -> pd.Series:
    """sample_id -> 'key_first' or 'key_last': the family member that moves the key sentence
    the way key_control moved its control sentence (towards the start: key_first)."""
    ctrl = frame[
        frame["is_control"].astype(bool) & frame["variant"].isin(["original", KEY_CONTROL])
    ]
    at = ctrl.drop_duplicates(["variant", "sample_id"]).pivot(
        index="sample_id", columns="variant", values="sent_index"
    )
    if not {"original", KEY_CONTROL} <= set(at.columns):
        return pd.Series(dtype=object)
    at = at.dropna()
    return pd.Series(
        np.where(at[KEY_CONTROL] < at["original"], "key_first", "key_last"), index=at.index
    )


Side = tuple[str, str, str, pd.DataFrame, pd.DataFrame, dict[tuple[str, str], float]]


def _moves(t: Any) -> list[Side]:
    """The key sentence's and the same-place control's moves against the middle, and the
    key-specific difference of differences (the module doc's table)."""
    out: list[Side] = []
    for who, (first, mid, last) in ((KEY, MOVES), (CTRL, CTRL_MOVES)):
        # the key sentence's U-shape is contrast_sides' key_ends row
        for side in (first, last) if who == KEY else (first, last, ENDS[CTRL]):
            terms = {(who, v): w for v, w in side_terms(side).items()}
            got = _combine(t, {**terms, (who, mid): -1.0})
            if got is not None:
                out.append((who, side, mid, *got))
    key_mid, ctrl_mid = MOVES[1], CTRL_MOVES[1]
    for k_side, c_side in (
        (MOVES[0], CTRL_MOVES[0]),
        (MOVES[2], CTRL_MOVES[2]),
        (ENDS[KEY], ENDS[CTRL]),
    ):
        a, b = f"{k_side} - {key_mid}", f"{c_side} - {ctrl_mid}"
        terms = {(KEY, v): w for v, w in side_terms(a).items()}
        terms.update({(CTRL, v): -w for v, w in side_terms(b).items()})
        got = _combine(t, terms)
        if got is not None:
            out.append((KEY_SPECIFIC, a, b, *got))
    return out


def _combine(t: Any, terms: dict[tuple[str, str], float]) -> tuple | None:
    """(a, b, terms) for the contrast sum of ``terms``: a holds the positive terms, b minus
    the negative ones (so a - b is the combination); None when a table is missing."""
    tables = {k: t(*k) for k in terms}
    if any(x is None for x in tables.values()):
        return None
    pos = {k: w for k, w in terms.items() if w > 0}
    neg = {k: -w for k, w in terms.items() if w < 0}
    a, b = combine(tables, pos), combine(tables, neg)
    return (a, b, terms) if a is not None and b is not None else None


def contrast_sides(
    tables: Mapping[tuple[str, str, str], pd.DataFrame], far: pd.Series, metric: str
) -> list[Side]:
    """(sentence, variant_a, variant_b, a, b, terms) of every contrast of the module doc that
    the tables allow, for ``metric``; ``terms``: (whose sentence, variant) -> weight of the
    per-text combination a - b (key_far's: the far variant as ``KEY_FAR``)."""

    def t(who: str, v: str) -> pd.DataFrame | None:
        return tables.get((who, v, metric))

    out: list[Side] = []
    orig = t(KEY, "original")
    if orig is None:
        return out
    for v in MOVES:
        if t(KEY, v) is not None:
            out.append((KEY, v, "original", t(KEY, v), orig, {(KEY, v): 1, (KEY, "original"): -1}))
    first, last, mid = t(KEY, "key_first"), t(KEY, "key_last"), t(KEY, "key_mid")
    if first is not None and last is not None and mid is not None:
        a, b = first.align(last, join="inner")
        ends = {(KEY, "key_first"): 0.5, (KEY, "key_last"): 0.5, (KEY, "key_mid"): -1}
        out.append((KEY, KEY_ENDS, "key_mid", (a + b) / 2.0, mid, ends))
    c_orig, c_moved = t(CONTROL_ROLE, "original"), t(CONTROL_ROLE, KEY_CONTROL)
    if c_orig is not None and c_moved is not None:
        moved = {(CONTROL_ROLE, KEY_CONTROL): 1, (CONTROL_ROLE, "original"): -1}
        out.append((CONTROL_ROLE, KEY_CONTROL, "original", c_moved, c_orig, moved))
        if first is not None and last is not None and len(far):
            k_far = pd.concat(
                [
                    first.reindex(columns=far.index[far == "key_first"]),
                    last.reindex(columns=far.index[far == "key_last"]),
                ],
                axis=1,
            )
            shift = (c_moved - c_orig).reindex(columns=k_far.columns)
            terms = {(KEY, KEY_FAR): 1, (KEY, "original"): -1}
            terms.update({k: -w for k, w in moved.items()})
            out.append((EFFECT, KEY_FAR, "original", k_far - shift, orig, terms))
    return out + _moves(t)


def sentence_ids(
    ids: pd.DataFrame | None, frame: pd.DataFrame, far: pd.Series
) -> pd.DataFrame | None:
    """[sample_id x (whose sentence, variant)] of (text, sentence) identities: equal only
    for the same sentence of byte-identical texts (homog.stats.combos.identical_samples);
    (KEY, KEY_FAR) is each review's far variant's."""
    if ids is None:
        return None
    cols = {}
    for who, flag in ROLES.items():
        if flag not in frame.columns or not frame[flag].astype(bool).any():
            continue
        sent = frame[frame[flag].astype(bool)].groupby("sample_id")["sentence"].first()
        sent.index = sent.index.astype(str)
        s = sent.reindex(ids.index).to_numpy(dtype=float)
        for v in ids.columns:
            cols[(who, v)] = ids[v].to_numpy(dtype=float) * 1e4 + s
    out = pd.DataFrame(cols, index=ids.index)
    if (KEY, "key_first") in out and (KEY, "key_last") in out:
        f = far.copy()
        f.index = f.index.astype(str)
        f = f.reindex(out.index)
        out[(KEY, KEY_FAR)] = np.where(
            f == "key_first",
            out[(KEY, "key_first")],
            np.where(f == "key_last", out[(KEY, "key_last")], np.nan),
        )
    return out


def _predictions(
    frame: pd.DataFrame, bands: dict[str, list[int]], far: pd.Series, metric: str
) -> dict[tuple[str, str, str], tuple[pd.DataFrame, pd.DataFrame]]:
    """(sentence, variant_a, variant_b) -> the position curve's (a, b) tables of that contrast
    ([band order x sample_id], homog.stats.position_curve)."""
    pred = predicted_frame(frame, bands)
    if pred.empty:
        return {}
    sides = contrast_sides(sentence_tables(pred), far, metric)
    return {(s, va, vb): (a, b) for s, va, vb, a, b, _ in sides}


def _predicted(
    pred: tuple[pd.DataFrame, pd.DataFrame] | None, a: pd.DataFrame, b: pd.DataFrame, bands
) -> dict[str, float]:
    """band -> the curve's mean a - b over the reviews the measured row pairs."""
    if pred is None:
        return {}
    d = pred[0] - pred[1]
    d = d.reindex(columns=a.columns.intersection(b.columns))
    return {bands[int(i)]: float(row.mean()) for i, row in d.iterrows() if int(i) < len(bands)}


def run_sentence_contrasts(
    frame: pd.DataFrame,
    run_id: str,
    settings: StatsSettings,
    *,
    text_ids: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """SENTENCE_CONTRAST_COLUMNS rows of one run's sentence_metrics ``frame``, with the
    bootstrap, test and equivalence settings of ``settings``; ``text_ids``
    (homog.stats.combos.text_ids of the texts table): a review whose texts make a contrast
    cancel for that sentence is left out of it and counted in ``n_identical`` (None: not
    checked, null)."""
    tables = sentence_tables(frame)
    far = far_side(frame)
    ids = sentence_ids(text_ids, frame, far)
    parts = []
    for metric in sorted({m for _, _, m in tables}):
        base = tables.get((KEY, "original", metric))
        if base is None:
            continue
        # the sentence's own basis, whatever stats.sesoi_basis: its between-sentence SD in its
        # original place (a sentence has no depth course of its own to scale)
        rule = settings.margin(
            base, who="the key sentence's", metric=metric, basis="sd", pinned=False
        )
        bands = band_of_layers(list(base.index))
        pred = _predictions(frame[frame["metric"] == metric], bands, far, metric)
        for sentence, va, vb, a, b, terms in contrast_sides(tables, far, metric):
            a, b, n_same = without(a, b, identical_samples(terms, ids))
            meta = {
                "run_id": run_id,
                "variant_a": va,
                "variant_b": vb,
                "metric": metric,
                "baseline_run_id": None,
                "sentence": sentence,
                "n_identical": n_same if ids is not None else None,
            }
            per_band = _predicted(pred.get((sentence, va, vb)), a, b, list(bands))
            for part in pair_rows(a, b, meta, settings, rule, baseline=base):
                names = part["band"]  # None: the layer rows, which the curve does not predict
                part["position_pred"] = (
                    np.nan
                    if names is None
                    else np.array([per_band.get(bd, np.nan) for bd in names], dtype=float)
                )
                parts.append(part)
    if not parts:
        return pd.DataFrame(columns=SENTENCE_CONTRAST_COLUMNS)
    return rows_frame(parts, SENTENCE_CONTRAST_COLUMNS)


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
