"""What the manipulation changes, as each model sees it: ``report["manipulation"]``.

``token_measures`` (every variant, the paper's too), per model, over the kept texts as
extraction tokenizes them (special tokens dropped, truncated to the model's budget):

- ``token_change_mean``: mean over texts of (variant's tokens - original's tokens);
- ``token_change_zero_share``: share of texts with the same number of tokens;
- ``multiset_equal_share``: share of texts whose token multiset equals the original's.

``key_sentence_measures`` (the position family, from ``homog.synth.position_stage`` records;
each value is the mean over the embedded models of the per-model value, which sits under
``per_model``):

- ``start_token_share_mean``: the key sentence's first-token index / the text's tokens;
- ``shift_mean``: that share minus the original's (signed: < 0 towards the start);
- ``already_first_share`` / ``already_last_share``: texts whose key sentence is the original's
  first / last sentence (so key_first / key_last leaves them unchanged);
- ``unchanged_share``: texts whose key sentence starts at the same token as in the original
  (for key_first / key_last: the already first / last ones; for key_control: the texts
  where the control sentence moved on the far side of the key sentence).

``family_measures``: ``first_last_distance_mean`` (mean of key_last's minus key_first's start
share, i.e. the key sentence's travel as a share of the text's tokens; the lowest and highest
position stand in when 0 or 1 is not asked for), and ``control``: the moved sentence's
absolute start shift (share) beside the family's largest absolute key-sentence shift in the
same text: their means, the mean of their per-text ratio, the mean of
|control - family| / family, the share within 10 %, and the mean ratio apart for texts whose
key sentence sits inside (``ratio_mean_key_inside``) and at an edge (``key_at_edge_share``,
``ratio_mean_key_at_edge``: there the key sentence crosses the whole text and no other sentence
can move as far, so the ratio stays below 1 by about a sentence).

``same_place_control`` (the ctrl_* variants, ``homog.synth.position.choose_ctrl``):
``texts_share``, the share of the family's texts that have them, and per ctrl variant
``same_slot_share``, the share of texts whose control sentence sits at the sentence index the
matching key variant gives the key sentence (ctrl_first / key_first, ...: 1 by construction).

``identical_to_original`` (every variant): per variant the number of texts and the share whose
text is byte-identical to its review's original (a paper rewrite that changed nothing, or
key_first where the key sentence is already first): such a pair is an exact zero that the
stats stage leaves out of every contrast (``n_identical``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from homog.text.sentences import LEAD
from homog.text.tokens import encode
from homog.variants import CTRL_NAMED, KEY_CONTROL, variant_name


def _r(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 4)


def token_measures(
    table: pd.DataFrame, tokenizers: Mapping[str, Any], budgets: Mapping[str, int]
) -> dict[str, dict[str, dict[str, float | None]]]:
    """model -> variant -> measures (see the module doc) of ``table`` (variant, sample_id,
    text; every sample_id has an ``original``)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    texts = table["text"].tolist()
    for key, tok in tokenizers.items():
        ids = [
            [i for i, s in zip(a[: budgets[key]], m[: budgets[key]], strict=True) if not s]
            for a, m in encode(tok, texts)
        ]
        by = dict(zip(zip(table["variant"], table["sample_id"], strict=True), ids, strict=True))
        out[key] = {}
        for v in pd.unique(table["variant"]):
            sids = table.loc[table["variant"] == v, "sample_id"]
            change = np.array([len(by[(v, s)]) - len(by[("original", s)]) for s in sids])
            same = [Counter(by[(v, s)]) == Counter(by[("original", s)]) for s in sids]
            out[key][str(v)] = {
                "token_change_mean": _r(change.mean()) if len(change) else None,
                "token_change_zero_share": _r((change == 0).mean()) if len(change) else None,
                "multiset_equal_share": _r(np.mean(same)) if same else None,
            }
    return out


def _share(records: pd.DataFrame, column: str) -> pd.Series:
    return records[column] / records["total"].where(records["total"] > 0)


def key_sentence_measures(records: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """variant -> key-sentence measures (see the module doc) from the kept texts' records."""
    r = records.assign(share=_share(records, "key_start"))
    orig = r[r["variant"] == "original"].set_index(["sample_id", "model"])
    out: dict[str, dict[str, Any]] = {}
    for v, g in r.groupby("variant", sort=False):
        g = g.set_index(["sample_id", "model"])
        o = orig.loc[g.index]
        per_model = {}
        for m in pd.unique(g.index.get_level_values("model")):
            gm, om = g.xs(m, level="model"), o.xs(m, level="model")
            per_model[str(m)] = {
                "start_token_share_mean": float(gm["share"].mean()),
                "shift_mean": float((gm["share"] - om["share"]).mean()),
                "already_first_share": float((om["key_index"] == 0).mean()),
                "already_last_share": float((om["key_index"] == om["n_sentences"] - 1).mean()),
                "unchanged_share": float((gm["key_start"] == om["key_start"]).mean()),
            }
        names = next(iter(per_model.values())).keys() if per_model else []
        out[str(v)] = {k: _r(np.mean([pm[k] for pm in per_model.values()])) for k in names}
        out[str(v)]["per_model"] = {
            m: {k: _r(x) for k, x in pm.items()} for m, pm in per_model.items()
        }
    return out


def family_measures(records: pd.DataFrame, positions: Sequence[float]) -> dict[str, Any]:
    """The key sentence's travel and key_control's shift beside the family's (module doc)."""
    r = records.assign(
        share=_share(records, "key_start"), moved=_share(records, "moved_start")
    ).set_index(["sample_id", "model"])
    orig = r[r["variant"] == "original"]
    names = [variant_name(p) for p in positions]
    shifts = pd.concat(
        {v: (r[r["variant"] == v]["share"] - orig["share"]).abs() for v in names}, axis=1
    )
    largest = shifts.max(axis=1)
    ctrl = (r[r["variant"] == KEY_CONTROL]["moved"] - orig["moved"]).abs().reindex(largest.index)
    lo, hi = variant_name(min(positions)), variant_name(max(positions))
    travel = r[r["variant"] == hi]["share"] - r[r["variant"] == lo]["share"]
    valid = largest > 0
    ratio = ctrl[valid] / largest[valid]
    edge = (orig["key_index"] == 0) | (orig["key_index"] == orig["n_sentences"] - 1)
    edge = edge.reindex(ratio.index).astype(bool)
    return {
        "first_last_distance_mean": _r(travel.mean()),
        "first_last_variants": [lo, hi],
        "control": {
            "shift_mean": _r(ctrl.mean()),
            "family_largest_shift_mean": _r(largest.mean()),
            "ratio_of_means": _r(ctrl.mean() / largest.mean()) if largest.mean() else None,
            "ratio_mean": _r(ratio.mean()),
            "abs_relative_difference_mean": _r((ratio - 1).abs().mean()),
            "within_10pct_share": _r(((ratio - 1).abs() <= 0.1).mean()),
            "key_at_edge_share": _r(edge.mean()),
            "ratio_mean_key_inside": _r(ratio[~edge].mean()),
            "ratio_mean_key_at_edge": _r(ratio[edge].mean()),
        },
    }


def same_place_control(records: pd.DataFrame) -> dict[str, Any]:
    """``texts_share`` and per ctrl variant ``same_slot_share`` (module doc) of the records."""
    r = records.set_index(["sample_id", "model"])
    texts = r.index.get_level_values("sample_id")
    have = set(r[r["variant"].isin(list(CTRL_NAMED.values()))].index.get_level_values(0))
    out: dict[str, Any] = {"texts_share": _r(len(have) / max(len(set(texts)), 1))}
    for p, ctrl in CTRL_NAMED.items():
        c, k = r[r["variant"] == ctrl], r[r["variant"] == variant_name(p)]
        if len(c) and len(k):
            same = c["ctrl_index"] == k["key_index"].reindex(c.index)
            out.setdefault("same_slot_share", {})[ctrl] = _r(same.mean())
    return out


def identical_to_original(table: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """variant -> texts and the share byte-identical to their original (module doc)."""
    orig = table[table["variant"] == "original"].set_index("sample_id")["text"]
    out = {}
    for v, g in table[table["variant"] != "original"].groupby("variant", sort=False):
        o = orig.reindex(g["sample_id"]).to_numpy()
        same = g["text"].to_numpy() == o
        out[str(v)] = {"texts": int(len(g)), "share": _r(same.mean()) if len(g) else None}
    return out


def family_report(build: Any, kept: set[Any], positions: Sequence[float]) -> dict[str, Any]:
    """The family's part of ``report["manipulation"]``: drops, multiset shares before the
    drop (model -> variant -> share), separability, key-sentence and control measures."""
    rec = build.records
    before = {
        str(m): {str(v): _r(g["multiset_equal"].mean()) for v, g in gm.groupby("variant")}
        for m, gm in rec.groupby("model")
    }
    rec = rec[rec["sample_id"].isin(kept)]
    return {
        "key_sentence": key_sentence_measures(rec) if len(rec) else {},
        "position_family": {
            "lead": LEAD,
            "dropped": build.dropped,
            "texts": len(set(rec["sample_id"])),
            "multiset_equal_share_before_drop": before,
            "separable_share": _r(rec["separable"].mean()) if len(rec) else None,
            **(family_measures(rec, positions) if len(rec) else {}),
            "same_place_control": same_place_control(rec) if len(rec) else {},
        },
    }


def manipulation(
    table: pd.DataFrame,
    tokenizers: Mapping[str, Any],
    budgets: Mapping[str, int],
    build: Any,
    cfg: Any,
) -> dict[str, Any]:
    """``report["manipulation"]``: ``per_model`` token measures of every variant of the
    written ``table``, and (family on) the family's measures (``family_report``)."""
    out: dict[str, Any] = {
        "per_model": token_measures(table, tokenizers, budgets),
        "identical_to_original": identical_to_original(table),
    }
    if build is not None:
        out.update(family_report(build, set(table["sample_id"]), cfg.positions))
    return out
