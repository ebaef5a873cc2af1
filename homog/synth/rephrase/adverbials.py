"""What may move to the other edge of its clause: the adverbial slots (subordinate clauses,
prepositional phrases, time expressions, -ly adverbs) and the word lists they are judged by.
Below ``moves`` and ``shifts``, which both ask it."""

from __future__ import annotations

from typing import Any

from homog.synth.rephrase.clauses import Clause, slot_tokens
from homog.synth.rephrase.lexicon import FRONTABLE_PREPOSITIONS, SELECTED_BY

SUBORDINATORS = frozenset(
    "because although though while when whenever if since after before until unless as once "
    "whereas whilst even".split()
)
PREPOSITIONS = frozenset(p for p in FRONTABLE_PREPOSITIONS if " " not in p) | frozenset(
    "through across among over under near around throughout within".split()
)
TIME_WORDS = frozenset(
    "today yesterday tonight recently nowadays later afterwards eventually finally however "
    "overall sometimes occasionally again once".split()
)
NO_MOVE_ADVERBS = frozenset(
    "not never also just only even really very so too still yet already always almost quite "
    "rather simply actually probably certainly definitely surely obviously clearly merely "
    "hardly barely nearly truly".split()
)
MAX_SLOT_TOKENS = 14
# verbs whose prepositional complement cannot open the sentence ("looking for a film"); the
# rule rephraser's list, less "shot"/"filmed in" (a place or time, which can)
SELECTED = {p: frozenset(v.split()) - {"shot", "filmed"} for p, v in SELECTED_BY.items()}


def is_adverbial(doc: Any, cl: Clause, k: int) -> bool:
    """May slot k of ``cl`` move to the other edge of its clause?"""
    dep, top, slot = cl.deps[k], doc[cl.tops[k]], cl.slots[k]
    head = doc[cl.head]
    if len(slot) > MAX_SLOT_TOKENS or any(
        t.text in ('"', "(", ")") for t in slot_tokens(doc, slot)
    ):
        return False
    if dep == "advcl":
        marks = [c.lower_ for c in top.children if c.dep_ == "mark"]
        if marks:
            return marks[0] in SUBORDINATORS
        return top.tag_ in ("VBG", "VBN") and top.i > head.i or top.i < head.i
    if dep == "prep":
        if top.lower_ not in PREPOSITIONS or not any(c.dep_ == "pobj" for c in top.children):
            return False
        if head.lemma_ == "be" or head.lower_ in SELECTED.get(top.lower_, frozenset()):
            return False
        # a clause-final PP right after an object may modify the object; only short objects
        return len(slot) >= 2
    if dep in ("npadvmod", "tmod"):
        return len(slot) <= 4 and any(
            t.ent_type_ in ("DATE", "TIME") for t in slot_tokens(doc, slot)
        )
    if dep == "advmod":
        low = top.lower_
        if len(slot) > 3 or low in NO_MOVE_ADVERBS or head.lemma_ == "be":
            return False
        return low in TIME_WORDS or (low.endswith("ly") and len(low) >= 5 and top.tag_ == "RB")
    return False
