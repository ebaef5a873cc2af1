"""The parse rephraser's catalogue of licensed rewrites, applied to a spaCy-parsed sentence.

A sentence is read into clauses and constituent *slots* by ``homog.synth.rephrase.clauses``.
Rewrites reorder slots or rebuild a clause around one of them; the words of every constituent
stay as they were (verbs are re-inflected with lemminflect for a change of voice, pronouns
change case).

The catalogue (the ``kind`` of each move, reported by the synth stage):

- ``adverbial_front``: a clause-final adverbial (prepositional phrase, subordinate clause,
  participle clause, time noun phrase, -ly adverb) to the front, with a comma;
- ``adverbial_end``: a clause-initial adverbial (before the subject) to the end;
- ``adverbial_raised``: the final adverbial of a clause-final to-infinitive after a verb that
  adds no event of its own (have to, need to, seem to, used to, ...) to the front of the
  whole clause ("You have to watch it with subtitles." -> "With subtitles, you have to
  watch it.");
- ``clause_swap``: "A, but B." -> "B, but A.";
- ``passive``: active -> passive ("The crew shot the scenes" -> "The scenes were shot by the
  crew"); ``active``: passive with a by-agent -> active (in ``homog.synth.rephrase.voice``);
- ``dative``: "gave my brother the DVD" <-> "gave the DVD to my brother";
- ``particle``: "picked up the phone" <-> "picked the phone up";
- ``matrix_end``: "I think (that) S." -> "S, I think." (a short parenthetical matrix clause);
- ``fragment_swap``: a sentence without a verbal clause (a fragment or a list, which the
  clause reader cannot follow) has its comma-, semicolon- or dash-separated items
  reordered, one item to the front or the end; a coordinating conjunction stays before the
  last item ("Really heartwarming, and definitely recommended." -> "Definitely recommended,
  and really heartwarming."; in ``homog.synth.rephrase.fragments``);
- noun-phrase moves for a subject, an object, a prepositional object (the preposition stays)
  or the object of an infinitival complement: ``cleft`` ("It was X that ..."),
  ``pseudo_cleft`` ("What ... was X", objects), ``as_for`` ("As for X, ... it ..."),
  ``left_dislocation`` ("X, ... it ...", objects), ``right_dislocation`` ("... it ..., X"),
  ``topicalization`` ("X the crew shot", objects); in ``homog.synth.rephrase.nounphrases``;
- ``reverse_pseudo_cleft``: the predicate noun phrase of a copular clause first ("It's a
  real mess." -> "A real mess is what it is."; in ``homog.synth.rephrase.predicates``).
- moves that insert nothing (``adjunct_swap``, ``adverb_shift``, ``conjunct_swap``) and the
  comma twins ``adverbial_front_bare`` / ``adverbial_end_comma``: ``homog.synth.rephrase.shifts``.

Nothing here decides which rewrite is wanted: ``candidates`` lists every rewrite reachable in
up to ``depth`` moves with its kinds; the rephraser chooses (position, then fluency).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from homog.synth.rephrase.adverbials import is_adverbial
from homog.synth.rephrase.clauses import (
    Clause,
    Item,
    Seg,
    Sentence,
    drop_comma,
    read_clause,
    subject_index,
)
from homog.synth.rephrase.nounphrases import NP_SLOTS, np_moves
from homog.synth.rephrase.predicates import predicate_moves
from homog.synth.rephrase.shifts import (
    expand,
    extra_comma,
    shift_moves,
    soft_comma,
    with_conjunct_swaps,
)
from homog.synth.rephrase.voice import voice_moves

DATIVE_TO = frozenset(
    "give show send offer hand tell teach lend sell bring owe promise pay".split()
)
DATIVE_FOR = frozenset("buy make get find build cook".split())
# verbs before a to-infinitive that add no event of their own, so an adverbial of the
# infinitive may open the whole clause ("I had to see it in daylight" -> "In daylight, I had
# to see it"); "want", "try", "decide" are out (the adverbial would change what is wanted)
RAISING_VERBS = frozenset(
    "have need seem appear use tend begin start continue get manage happen ought go".split()
)
# structural moves that may follow an adverbial move (the others would put an adverbial
# before "as for X" or "it was X that")
AFTER = {
    "adverbial_front": frozenset("passive active dative particle right_dislocation".split()),
    "adverbial_end": frozenset(
        "passive active dative particle cleft as_for left_dislocation topicalization".split()
    ),
}


@dataclass(frozen=True)
class Candidate:
    """A rewrite: its items (rendered by ``render``) and the kinds of the moves applied."""

    items: tuple[Item, ...]
    kinds: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# clause-level moves: each returns (segments, kind) variants of a clause


def adverbial_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str, int]]:
    """Every single adverbial move: (new segments, kind, top token of the moved slot)."""
    out = []
    subj = subject_index(cl)
    h = cl.deps.index("HEAD")
    for k in range(len(cl.slots)):
        if not is_adverbial(doc, cl, k):
            continue
        slots, deps = [list(s) for s in cl.slots], list(cl.deps)
        moved = slots[k]
        if k > h:  # clause-final: to the front
            del slots[k]
            del deps[k]
            drop_comma(doc, slots, deps, k)
            while slots and deps[-1] == "punct":
                slots.pop()
                deps.pop()
            out.append(
                ([moved, [soft_comma("adverbial_front")], *slots], "adverbial_front", cl.tops[k])
            )
        elif subj is not None and k < subj:  # clause-initial: to the end
            del slots[k]
            del deps[k]
            drop_comma(doc, slots, deps, k)
            while slots and deps[0] == "punct":
                slots.pop(0)
                deps.pop(0)
            lead = [","] if cl.deps[k] == "advmod" else [extra_comma("adverbial_end")]
            out.append(([*slots, [*lead, *moved]], "adverbial_end", cl.tops[k]))
    return out


def raised_adverbial_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str, int]]:
    """``adverbial_raised``: "S have to V O ADV" -> "ADV, S have to V O" (module docstring)."""
    deps = cl.deps
    last = len(deps) - 1
    while last >= 0 and deps[last] == "punct":
        last -= 1
    if (
        last < 0
        or deps[last] != "xcomp"
        or doc[cl.head].lemma_ not in RAISING_VERBS
        or subject_index(cl) is None
    ):
        return []
    verb = doc[cl.tops[last]]
    if verb.pos_ not in ("VERB", "AUX") or not any(
        c.dep_ == "aux" and c.lower_ == "to" for c in verb.children
    ):
        return []
    inner = read_clause(doc, verb.i, {i for i in cl.slots[last] if isinstance(i, int)})
    if inner is None:
        return []
    k = len(inner.deps) - 1
    if k <= inner.deps.index("HEAD") or not is_adverbial(doc, inner, k):
        return []
    slots, ideps = [list(x) for x in inner.slots], list(inner.deps)
    moved = slots.pop(k)
    ideps.pop(k)
    drop_comma(doc, slots, ideps, k)
    outer = [list(x) for x in cl.slots[: last + 1]]
    outer[last] = [i for x in slots for i in x]
    return [([moved, [soft_comma("adverbial_raised")], *outer], "adverbial_raised", inner.tops[k])]


def object_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str]]:
    """Dative and particle alternations."""
    out = []
    deps, slots = cl.deps, cl.slots
    h = doc[cl.head]
    if "dobj" not in deps:
        return out
    o = deps.index("dobj")
    obj_pron = doc[cl.tops[o]].pos_ == "PRON"
    if "dative" in deps:
        d = deps.index("dative")
        top = doc[cl.tops[d]]
        if top.lower_ in ("to", "for") and d > o and not obj_pron and len(slots[d]) <= 4:
            new = [list(s) for s in slots]
            new[o], new[d] = [i for i in slots[d] if i != top.i], slots[o]
            if all(deps[k] != "punct" for k in range(o, d + 1)):
                out.append((new, "dative"))
        elif top.pos_ in ("NOUN", "PROPN", "PRON") and d < o and not obj_pron:
            prep = "to" if h.lemma_ in DATIVE_TO else "for" if h.lemma_ in DATIVE_FOR else None
            if prep and d + 1 == o:
                new = [list(s) for s in slots]
                new[d], new[o] = slots[o], [prep, *slots[d]]
                out.append((new, "dative"))
    if "prt" in deps:
        p = deps.index("prt")
        new = [list(s) for s in slots]
        if p + 1 == o and not obj_pron and len(slots[o]) <= 4:
            new[p], new[o] = slots[o], slots[p]
            out.append((new, "particle"))
        elif o + 1 == p and not obj_pron:
            new[o], new[p] = slots[p], slots[o]
            out.append((new, "particle"))
    return out


PARENTHETICAL = frozenset(
    "think thought believe guess suppose say said feel felt admit bet mean imagine reckon "
    "hope know must sure afraid convinced confess".split()
)


def matrix_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str]]:
    """ "I think (that) S." -> "S, I think.": a short matrix clause behind its complement."""
    deps, slots = cl.deps, cl.slots
    h = deps.index("HEAD")
    if "ccomp" not in deps:
        return []
    c = deps.index("ccomp")
    last = len(slots) - 1 if deps[-1] == "punct" else len(slots)
    if c != last - 1 or c < h:
        return []
    matrix = [i for s in slots[:c] for i in s]
    head = doc[cl.head]
    words_ = {doc[i].lower_ for i in matrix} | {head.lemma_}
    if len(matrix) > 7 or not (PARENTHETICAL & words_) or subject_index(cl) is None:
        return []
    # "I do not think S" -> "S, I do not think" turns the negation around
    if any(doc[i].dep_ == "neg" for i in matrix):
        return []
    if any(deps[j] in ("advcl", "prep", "dobj") for j in range(c)):
        return []
    comp = list(slots[c])
    if doc[comp[0]].lower_ == "that" and doc[comp[0]].dep_ == "mark":
        comp = comp[1:]
    if len(comp) < 3:
        return []
    return [([comp, [","], matrix], "matrix_end")]


# ---------------------------------------------------------------------------------------------
# candidates and rendering


def clause_variants(doc: Any, cl: Clause, phrase: set[int], depth: int) -> list[tuple[Seg, tuple]]:
    """(items, kinds) variants of a clause: the clause itself, every single move, and
    structural moves combined with one adverbial move (at most ``depth`` moves)."""
    base: Seg = [i for s in cl.slots for i in s]
    out: list[tuple[Seg, tuple]] = [(base, ())]
    adv = adverbial_moves(doc, cl)
    for segs, kind, _top in adv + raised_adverbial_moves(doc, cl):
        out.append(([i for s in segs for i in s], (kind,)))
    structural: list[tuple[list[Seg], str]] = []
    structural += voice_moves(doc, cl)
    structural += object_moves(doc, cl)
    structural += matrix_moves(doc, cl)
    structural += predicate_moves(doc, cl)
    structural += shift_moves(doc, cl)
    for k in range(len(cl.slots)):
        if cl.deps[k] in NP_SLOTS:
            structural += np_moves(doc, cl, k)
    for segs, kind in structural:
        out.append(([i for s in segs for i in s], (kind,)))
    if depth >= 2:
        # an adverbial move followed by a structural one: rebuild the clause from the moved
        # slots (the moved adverbial keeps its place at the clause's edge)
        for segs, kind, _top in adv:
            moved = _reclause(doc, cl, segs)
            if moved is None:
                continue
            more: list[tuple[list[Seg], str]] = voice_moves(doc, moved) + object_moves(doc, moved)
            for k in range(len(moved.slots)):
                # not the adverbial just moved ("In the end, S" -> "S in the end" -> "The
                # end, S in it")
                if moved.deps[k] in NP_SLOTS and moved.tops[k] != _top:
                    more += np_moves(doc, moved, k)
            for segs2, kind2 in more:
                if kind2 not in AFTER[kind]:
                    continue
                out.append(([i for s in segs2 for i in s], (kind, kind2)))
        for i, (_s1, k1, t1) in enumerate(adv):
            for _s2, k2, t2 in adv[i + 1 :]:
                both = _two_adverbials(doc, cl, t1, t2)
                if both is not None:
                    out.append((both, (k1, k2)))
    return out


def _reclause(doc: Any, cl: Clause, segs: list[Seg]) -> Clause | None:
    """A clause whose slots are ``segs`` (after an adverbial move), with labels carried over."""
    label = {tuple(s): (d, t) for s, d, t in zip(cl.slots, cl.deps, cl.tops, strict=True)}
    deps, tops = [], []
    for s in segs:
        d, t = label.get(tuple(i for i in s if isinstance(i, int)), ("punct", -1))
        deps.append(d)
        tops.append(t)
    if "HEAD" not in deps:
        return None
    return Clause(cl.head, [list(s) for s in segs], deps, tops)


def _two_adverbials(doc: Any, cl: Clause, t1: int, t2: int) -> Seg | None:
    """Both adverbials (tops t1, t2) moved at once, when one is final and one initial."""
    first = [m for m in adverbial_moves(doc, cl) if m[2] == t1][0]
    moved = _reclause(doc, cl, first[0])
    if moved is None:
        return None
    for segs, _kind, top in adverbial_moves(doc, moved):
        if top == t2:
            return [i for s in segs for i in s]
    return None


def candidates(doc: Any, sent: Sentence, phrase: set[int], depth: int = 2) -> list[Candidate]:
    """Every rewrite of the sentence reachable in up to ``depth`` moves (not the original),
    each optional comma in both forms, and conjunct swaps (``homog.synth.rephrase.shifts``)."""
    per_clause = [clause_variants(doc, cl, phrase, depth) for cl in sent.clauses]
    found: list[tuple[tuple, tuple]] = []
    if len(per_clause) == 1:
        for items, kinds in per_clause[0]:
            if kinds:
                found.append(((*sent.lead, *items, *sent.final), kinds))
    else:
        c1, c2 = per_clause
        for swap in (False, True) if sent.swappable else (False,):
            for (i1, k1), (i2, k2) in [(a, c2[0]) for a in c1] + [(c1[0], b) for b in c2[1:]]:
                kinds = (*k1, *k2, *(("clause_swap",) if swap else ()))
                if not kinds or len(kinds) > depth + 1:
                    continue
                a, b = (i2, i1) if swap else (i1, i2)
                found.append(((*sent.lead, *a, *sent.joiner, *b, *sent.final), kinds))
    found = [e for items, kinds in found for e in expand(items, kinds)]
    found += with_conjunct_swaps(doc, tuple(range(len(doc))), found, depth)
    return [Candidate(items, kinds) for items, kinds in found]
