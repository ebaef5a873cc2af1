"""The parse rephraser's moves that insert nothing: reorderings of words already there.

The length-matched mode (``synth.length_match``, ``homog.synth.lengthmatch``) keeps a rewrite
only when the text keeps its token count under every model's tokenizer, so it needs rewrites
that add no word. These moves only permute constituents (a capital or a comma may change
with them; the filter decides):

- ``adjunct_swap``: two adjacent clause-final adverbials trade places ("We watched it at home
  on Friday." -> "We watched it on Friday at home.");
- ``adverb_shift``: a manner adverb in ``-ly`` between the subject and the verb to the end of
  its clause ("He quickly lost interest." -> "He lost interest quickly.");
- ``conjunct_swap``: the two conjuncts of "A and B" / "A or B" (nouns or adjectives) trade
  places ("The acting and the music are superb." -> "The music and the acting are superb."),
  alone or after any other move;
- comma twins: a fronted adverbial also without its comma (``adverbial_front_bare``: "In 1995
  the crew filmed it."), an adverbial moved to the end also behind a comma
  (``adverbial_end_comma``: "The story loses its nerve, after the first hour."). The comma a
  move may drop or add is an ``OptionalComma`` item; ``expand`` renders both forms.
"""

from __future__ import annotations

from typing import Any

from homog.synth.rephrase.adverbials import NO_MOVE_ADVERBS, is_adverbial
from homog.synth.rephrase.clauses import Clause, Item, Seg, subject_index

CONJUNCT_POS = frozenset({"NOUN", "PROPN", "ADJ"})
MAX_CONJUNCT_TOKENS = 8


class OptionalComma(str):
    """A comma item a move may go without: ``default`` says whether the first rendering has
    it; the twin (``expand``) flips it and renames ``kind`` to ``twin``."""

    default: bool
    kind: str
    twin: str

    def __new__(cls, default: bool, kind: str, twin: str) -> OptionalComma:
        obj = super().__new__(cls, ",")
        obj.default, obj.kind, obj.twin = default, kind, twin
        return obj


def soft_comma(kind: str) -> OptionalComma:
    """The comma behind a fronted adverbial (present; the twin ``<kind>_bare`` drops it)."""
    return OptionalComma(True, kind, f"{kind}_bare")


def extra_comma(kind: str) -> OptionalComma:
    """A comma before an adverbial moved to the end (absent; the twin ``<kind>_comma`` has it)."""
    return OptionalComma(False, kind, f"{kind}_comma")


def expand(items: tuple[Item, ...], kinds: tuple[str, ...]) -> list[tuple[tuple, tuple]]:
    """Both renderings of a candidate with optional commas: (items, kinds) with every
    ``OptionalComma`` at its default, then (when there is one) with all of them flipped and
    their kinds renamed. Items without one come back as they are."""
    marks = [it for it in items if isinstance(it, OptionalComma)]
    if not marks:
        return [(items, kinds)]

    def resolve(flip: bool) -> tuple:
        out: list[Item] = []
        for it in items:
            if not isinstance(it, OptionalComma):
                out.append(it)
            elif it.default != flip:
                out.append(",")
        return tuple(out)

    renamed = list(kinds)
    for m in marks:
        if m.kind in renamed:
            renamed[renamed.index(m.kind)] = m.twin
    return [(resolve(False), kinds), (resolve(True), tuple(renamed))]


# ---------------------------------------------------------------------------------------------
# clause-level moves


def shift_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str]]:
    """``adjunct_swap`` and ``adverb_shift`` variants of a clause (module docstring)."""
    out: list[tuple[list[Seg], str]] = []
    deps, slots = cl.deps, cl.slots
    h = deps.index("HEAD")
    for k in range(h + 1, len(slots) - 1):
        if (
            deps[k] != "punct"
            and deps[k + 1] != "punct"
            and is_adverbial(doc, cl, k)
            and is_adverbial(doc, cl, k + 1)
        ):
            new = [list(s) for s in slots]
            new[k], new[k + 1] = slots[k + 1], slots[k]
            out.append((new, "adjunct_swap"))
    subj = subject_index(cl)
    if subj is None:
        return out
    end = len(slots)
    while end > 0 and deps[end - 1] == "punct":
        end -= 1
    for k in range(subj + 1, h):
        top = doc[cl.tops[k]]
        low = top.lower_
        if (
            deps[k] == "advmod"
            and len(slots[k]) == 1
            and top.tag_ == "RB"
            and low.endswith("ly")
            and len(low) >= 5
            and low not in NO_MOVE_ADVERBS
            and end - 1 > h  # the verb has something after it
        ):
            new = [list(s) for i, s in enumerate(slots) if i != k]
            new.insert(end - 1, slots[k])  # after the clause's last word, before its punct
            out.append((new, "adverb_shift"))
    return out


# ---------------------------------------------------------------------------------------------
# conjunct swaps, applied to whole candidates


def _nominal(t: Any) -> bool:
    """A noun or adjective, or a participle used as one ("the acting", "funny and moving"):
    no subject, object or auxiliary of its own."""
    if t.pos_ in CONJUNCT_POS:
        return True
    return t.tag_ in ("VBG", "VBN") and not any(
        c.dep_ in ("nsubj", "nsubjpass", "dobj", "aux", "auxpass") for c in t.children
    )


def conjunct_pairs(doc: Any) -> list[tuple[list[int], list[int], list[int]]]:
    """(first conjunct, what joins them, second conjunct) token spans of every two-part
    coordination of nouns or adjectives that can trade places: exactly one ``conj``, joined
    by "and"/"or" alone, no "both"/"either"/"neither", no modifier that may be shared (a
    longer first conjunct before a one-word second: "the cast and crew")."""
    out = []
    for h in doc:
        conj = [c for c in h.children if c.dep_ == "conj"]
        if len(conj) != 1 or not _nominal(h):
            continue
        c = conj[0]
        cc = [t for t in h.children if t.dep_ == "cc" and h.i < t.i < c.i]
        if (
            not _nominal(c)
            or len(cc) != 1
            or cc[0].lower_ not in ("and", "or")
            or cc[0].i + 1 != c.left_edge.i
            or any(t.dep_ == "preconj" for t in h.children)
            or c.right_edge.i != h.right_edge.i
        ):
            continue
        first = list(range(h.left_edge.i, cc[0].i))
        second = list(range(c.left_edge.i, c.right_edge.i + 1))
        if (
            not first
            or doc[first[-1]].is_punct
            or any(t.is_punct for t in (doc[i] for i in first + second))
            or len(first) > MAX_CONJUNCT_TOKENS
            or len(second) > MAX_CONJUNCT_TOKENS
            or (len(first) > 1 and len(second) == 1)
        ):
            continue
        out.append((first, [cc[0].i], second))
    return out


def swap_conjuncts(
    items: tuple[Item, ...], pair: tuple[list[int], list[int], list[int]]
) -> tuple[Item, ...] | None:
    """``items`` with the pair's conjuncts swapped, when both and their joiner stand together
    and in order there; else None."""
    first, mid, second = pair
    run = [*first, *mid, *second]
    pos = {it: k for k, it in enumerate(items) if isinstance(it, int)}
    if run[0] not in pos:
        return None
    start = pos[run[0]]
    if tuple(items[start : start + len(run)]) != tuple(run):
        return None
    return (*items[:start], *second, *mid, *first, *items[start + len(run) :])


def with_conjunct_swaps(
    doc: Any, base: tuple[Item, ...], found: list[tuple[tuple, tuple]], depth: int
) -> list[tuple[tuple, tuple]]:
    """``conjunct_swap`` applied to the original (``base``) and to every (items, kinds) in
    ``found`` with fewer than ``depth`` moves; the new candidates only."""
    pairs = conjunct_pairs(doc)
    out = []
    for items, kinds in [(base, ()), *found]:
        if len(kinds) >= depth:
            continue
        for pair in pairs:
            swapped = swap_conjuncts(items, pair)
            if swapped is not None:
                out.append((swapped, (*kinds, "conjunct_swap")))
    return out
