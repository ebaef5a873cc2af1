"""Every variant fits extraction's token budget: rewrites that overflow it are reverted.

The corpus stage cuts each review so that its original fits every model's budget
(``homog.corpus.cut``). The paper's rewrites can add tokens; a variant text (``LEAD`` + text)
that no longer fits under some model gets its rewrites put back one at a time, the one that
grew the sentence most (in characters; ties: the later sentence) first, until it fits. Reverted
sentences keep their row in the sentence table with status ``over_budget`` (text = the
original's), as ``homog.synth.repair`` does. The original always fits once every rewrite is
back, unless the corpus was cut for another budget: such texts are returned to be dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from homog.text.sentences import LEAD


def fit_budget(
    variants: Any, fits: Callable[[list[str]], list[bool]], rebuild: Callable[..., None]
) -> tuple[dict[str, Any], set[Any]]:
    """Revert overflowing rewrites in place (module doc). Returns ({"over_budget": variant ->
    texts that did not fit, "reverted": variant -> sentences put back, "original_over_budget":
    originals that do not fit}, the sample_ids whose original does not fit)."""
    table, rw = variants.table, variants.rewrites
    ok = fits([LEAD + t for t in table["text"]])
    over = table[[not x for x in ok]]
    too_long = set(over.loc[over["variant"] == "original", "sample_id"])
    todo = [
        (v, s)
        for v, s in zip(over["variant"], over["sample_id"], strict=True)
        if v != "original" and s not in too_long
    ]
    targets = [v for v in table["variant"].unique() if v != "original"]
    report = {
        "over_budget": {v: sum(1 for w, _ in todo if w == v) for v in targets},
        "reverted": dict.fromkeys(targets, 0),
        "original_over_budget": len(too_long),
    }
    row_of = {
        (v, s): k for k, v, s in zip(table.index, table["variant"], table["sample_id"], strict=True)
    }
    rw_row = {}
    if rw is not None:
        cols = (rw.index, rw["variant"], rw["sample_id"], rw["sentence"])
        rw_row = {(v, s, int(i)): k for k, v, s, i in zip(*cols, strict=True)}
    todo = [(v, s) for v, s in todo if variants.edits[v].get(s)]
    while todo:
        for v, s in todo:
            doc, edits = variants.docs[s], variants.edits[v].get(s, {})
            i = max(edits, key=lambda j: (len(edits[j]) - len(doc.sentence(j)), j))
            del edits[i]
            if (v, s, i) in rw_row:
                k = rw_row[(v, s, i)]
                rw.at[k, "status"] = "over_budget"
                rw.at[k, "text"] = rw.at[k, "original"]
            report["reverted"][v] += 1
            rebuild(variants, v, s)
        still = fits([LEAD + table.at[row_of[key], "text"] for key in todo])
        # a text without edits left is the original's, which fits
        todo = [
            (v, s)
            for (v, s), good in zip(todo, still, strict=True)
            if not good and variants.edits[v].get(s)
        ]
    for v, n in report["reverted"].items():
        counts = variants.status.setdefault(v, {})
        if n:
            counts["rewritten"] = counts.get("rewritten", 0) - n
            counts["over_budget"] = counts.get("over_budget", 0) + n
    return report, too_long
