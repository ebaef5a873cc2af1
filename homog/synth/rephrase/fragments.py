"""``fragment_swap``: the parse rephraser's move for a sentence without a clause.

Real reviews hold many sentences that the clause reader (``homog.synth.rephrase.clauses``)
cannot follow because they have no verb or subject: fragments and lists ("Great acting,
great story, and a brilliant score!"). Their comma-, semicolon- or dash-separated items can
still be reordered, one item to the front or the end, a coordinating conjunction staying
before the last item.
"""

from __future__ import annotations

from typing import Any

from homog.synth.rephrase.clauses import SUBJECT_DEPS, Item
from homog.synth.rephrase.moves import Candidate

FRAGMENT_SEPARATORS = frozenset({",", ";", "-", "--", "\u2013", "\u2014"})
FRAGMENT_QUOTES = frozenset({'"', "\u201c", "\u201d"})
FRAGMENT_FINAL = frozenset({".", "!", "?", "...", "\u2026", "!!", "?!"})
MAX_FRAGMENT_ITEMS = 4
MAX_FRAGMENT_ITEM_TOKENS = 15


def fragment_candidates(doc: Any) -> list[Candidate]:
    """``fragment_swap`` rewrites of a sentence the clause reader cannot follow and that has
    no subject (a fragment or a list of phrases): its top-level items (split at commas,
    semicolons and dashes outside quotes and brackets; 2 to MAX_FRAGMENT_ITEMS items of at
    most MAX_FRAGMENT_ITEM_TOKENS tokens) with one item moved to the front or to the end, the
    others in order. A conjunction opening an item ("and definitely recommended") stays
    before the last item."""
    if any(t.dep_ in SUBJECT_DEPS or t.dep_ == "expl" or t.tag_ == "MD" for t in doc):
        return []  # a clause the reader could not follow: its items are not a list
    end = len(doc)
    while end > 0 and (
        doc[end - 1].text in FRAGMENT_FINAL or set(doc[end - 1].text) <= {"!", "?", "."}
    ):
        end -= 1
    final = list(range(end, len(doc)))
    items: list[list[int]] = [[]]
    depth, quoted = 0, False
    for i in range(end):
        text = doc[i].text
        if text in FRAGMENT_QUOTES:
            quoted = not quoted
        elif text in ("(", "["):
            depth += 1
        elif text in (")", "]"):
            depth -= 1
        elif depth == 0 and not quoted and text in FRAGMENT_SEPARATORS:
            items.append([])
            continue
        items[-1].append(i)
    if not 2 <= len(items) <= MAX_FRAGMENT_ITEMS or depth or quoted:
        return []
    conj = None
    stripped = []
    for item in items:
        if item and doc[item[0]].lower_ in ("and", "but", "or", "yet"):
            if conj is not None:
                return []
            conj, item = item[0], item[1:]
        if not item or len(item) > MAX_FRAGMENT_ITEM_TOKENS:
            return []
        stripped.append(item)
    if conj is not None and items[-1][0] != conj:
        return []  # "and" in the middle of the list: its place is not clear
    n = len(stripped)
    orders = dict.fromkeys(
        [(i, *(j for j in range(n) if j != i)) for i in range(1, n)]
        + [(*(j for j in range(n) if j != i), i) for i in range(n - 1)]
    )
    out = []
    for order in orders:
        seq: list[Item] = []
        for pos, j in enumerate(order):
            if pos:
                seq.append(",")
                if conj is not None and pos == n - 1:
                    seq.append(conj)
            seq.extend(stripped[j])
        out.append(Candidate((*seq, *final), ("fragment_swap",)))
    return out
