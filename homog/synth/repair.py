"""Revert the most damaging rewrites of a variant text that fails the BERTScore check.

A variant text below ``synth.bertscore.threshold`` would drop the whole review from every
variant. Instead, its rewritten sentences are put back one per round, the largest word-level
edit first (ties: the later sentence first), and the text is scored again, until it passes or
``synth.bertscore.max_reverts`` rounds are spent (then it is dropped as before). A variant with
every rewrite reverted equals the original (F1 = 1) and counts as unchanged: a text whose
front and end both end up unchanged is dropped as ``not_rewritten``. Every reverted sentence
keeps its row in the sentence table with status ``reverted`` (its text the original's), so
the report's positions, edit distances, kinds and statuses describe the texts as written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from homog.synth.report import word_edit_distance


def damage_order(rows: pd.DataFrame) -> list[int]:
    """Sentence indices of the rewritten ``rows`` (one (sample, variant); columns sentence,
    status, original, text), most damaging first: largest word edit distance, then the later
    sentence (pure)."""
    done = rows[rows["status"] == "rewritten"]
    scored = [
        (word_edit_distance(o, t), int(i))
        for i, o, t in zip(done["sentence"], done["original"], done["text"], strict=True)
    ]
    return [i for _d, i in sorted(scored, reverse=True)]


def revert_failing(
    variants: Any,
    scorer: Any,
    threshold: float,
    max_reverts: int,
    *,
    rebuild: Callable[[Any, str, Any], None],
    on_round: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Revert rewrites of the variant texts in ``variants.table`` below ``threshold``
    (module docstring), in place: the table's text, position, n_rewritten and bertscore_f1,
    the sentence table's status and text, and the status counts. ``rebuild(variants,
    variant, sample_id)`` re-assembles one variant text from ``variants.edits``.

    Returns per variant: ``reverted`` (sentences put back), ``repaired`` (texts below the
    threshold before that pass after), ``failing`` (texts below the threshold before), and
    ``rounds`` (re-scoring rounds run).
    """
    table, rw = variants.table, variants.rewrites
    targets = [v for v in table["variant"].unique() if v != "original"]
    out: dict[str, Any] = {
        "reverted": dict.fromkeys(targets, 0),
        "repaired": dict.fromkeys(targets, 0),
        "failing": dict.fromkeys(targets, 0),
        "rounds": 0,
    }
    if rw is None or max_reverts <= 0:
        return out
    row_of = {
        (v, s): k for k, v, s in zip(table.index, table["variant"], table["sample_id"], strict=True)
    }
    originals = table[table["variant"] == "original"].set_index("sample_id")["text"]
    below = table[(table["variant"] != "original") & (table["bertscore_f1"] < threshold)]
    failing = list(zip(below["variant"], below["sample_id"], strict=True))
    for v, _s in failing:
        out["failing"][v] += 1
    groups = rw.groupby(["variant", "sample_id"], sort=False).groups
    order = {key: damage_order(rw.loc[groups[key]]) if key in groups else [] for key in failing}
    rw_row = {
        (v, s, int(i)): k
        for k, v, s, i in zip(rw.index, rw["variant"], rw["sample_id"], rw["sentence"], strict=True)
    }
    for _round in range(max_reverts):
        open_ = [
            key
            for key in failing
            if table.at[row_of[key], "bertscore_f1"] < threshold and order[key]
        ]
        if not open_:
            break
        out["rounds"] += 1
        for v, s in open_:
            i = order[(v, s)].pop(0)
            del variants.edits[v][s][i]
            k = rw_row[(v, s, i)]
            rw.at[k, "status"] = "reverted"
            rw.at[k, "text"] = rw.at[k, "original"]
            out["reverted"][v] += 1
            rebuild(variants, v, s)
        rows = [row_of[key] for key in open_]
        f1 = scorer.f1(
            table.loc[rows, "text"].tolist(), originals.loc[[s for _v, s in open_]].tolist()
        )
        table.loc[rows, "bertscore_f1"] = f1
        if on_round is not None:
            on_round(len(open_))
    for key in failing:
        out["repaired"][key[0]] += int(table.at[row_of[key], "bertscore_f1"] >= threshold)
    for v, n in out["reverted"].items():
        counts = variants.status.setdefault(v, {})
        if n:
            counts["rewritten"] = counts.get("rewritten", 0) - n
            counts["reverted"] = counts.get("reverted", 0) + n
    return out
