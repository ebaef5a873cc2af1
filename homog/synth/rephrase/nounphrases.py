"""The parse rephraser's noun-phrase moves: clefts, pseudo-clefts, dislocations, topicalization.

A subject, an object, the object of a prepositional phrase on the verb (the preposition stays
behind: "It was the sequel that we waited for") or the object of an infinitival complement is
moved by rebuilding its clause around it (``np_moves``); a pronoun (``it``/``they``/``them``)
stands in for it where the construction needs one, never for people. The catalogue and the
other moves are in ``homog.synth.rephrase.moves``.
"""

from __future__ import annotations

from typing import Any

from homog.synth.rephrase.clauses import (
    SUBJECT_DEPS,
    Clause,
    Seg,
    is_past,
    is_plural,
    subject_index,
)

ARG_DEPS = ("nsubj", "nsubjpass", "dobj")
# the slots whose noun phrase np_moves may take (see _np_site)
NP_SLOTS = (*ARG_DEPS, "prep", "xcomp")
# prepositions of adjuncts (time, concession): their object is no argument of the verb, so
# "The move, my brother lost the DVD during it" is out
ADJUNCT_PREPOSITIONS = frozenset(
    "during after before since until till throughout despite within without upon via amid "
    "amidst besides beyond except per".split()
)
# objects of fixed prepositional phrases ("in the end", "at first", "in fact")
IDIOM_OBJECTS = frozenset(
    "end beginning start fact way case time meantime general addition particular short sum "
    "least most all first last moment whole".split()
)
QUANTIFIERS = frozenset("no any every each all some".split())
# nouns for people: "it" cannot stand for them (the clefts still apply)
PERSON_NOUNS = frozenset(
    """man woman men women boy girl guy child kid baby mother father mom dad parent sister
    brother son daughter wife husband friend girlfriend boyfriend family people person actor
    actress director writer producer viewer audience cast crew character hero heroine villain
    protagonist star lead kid teacher student doctor cop officer soldier king queen prince
    princess lady gentleman fan critic filmmaker team group couple neighbour neighbor""".split()
)


def _pronoun(doc: Any, top: int, subject: bool) -> str | None:
    """The pronoun that can stand for the noun phrase headed by ``top`` (None: people,
    pronouns, quantifiers)."""
    t = doc[top]
    if t.pos_ in ("PRON", "NUM") or t.ent_type_ in ("PERSON", "NORP", "ORG"):
        return None
    if t.lemma_.lower() in PERSON_NOUNS or t.lower_.endswith(("ess", "ist", "ian")):
        return None
    if t.pos_ not in ("NOUN", "PROPN"):
        return None
    if is_plural(doc, top) and not (subject and _singular_verb(t.head)):
        return "they" if subject else "them"
    return "it"


def _singular_verb(verb: Any) -> bool:
    """Does the verb (or its first auxiliary) agree with a singular subject? A plural-looking
    title takes one ("Little Fires is ..."): its pronoun is "it", not "they is"."""
    first = next((c for c in verb.children if c.dep_ in ("aux", "auxpass")), verb)
    return first.tag_ == "VBZ" or first.lower_ == "was"


def _np_site(doc: Any, cl: Clause, k: int) -> tuple[Seg, Any, str, Seg, int] | None:
    """The noun phrase slot k offers to NP moves: (its items, head token, role, the slot
    without it, where it was in the slot); None if none. A subject or object is the whole
    slot; in a prepositional phrase on the verb the preposition stays behind ("waited for");
    in an infinitival complement its object ("wanted to see [the sequel]")."""
    dep, top, slot = cl.deps[k], doc[cl.tops[k]], cl.slots[k]
    if dep in ARG_DEPS:
        return list(slot), top, dep, [], 0
    if dep == "prep":
        pobj = [c for c in top.children if c.dep_ == "pobj"]
        if (
            len(pobj) != 1
            or len(list(top.children)) != 1
            or top.lower_ in ("by", "than", "as", "like")
            or top.lower_ in ADJUNCT_PREPOSITIONS
            or pobj[0].lemma_.lower() in IDIOM_OBJECTS
        ):
            return None
        return list(slot[1:]), pobj[0], "pobj", [slot[0]], 1
    if dep == "xcomp" and top.pos_ == "VERB":
        objs = [c for c in top.children if c.dep_ == "dobj"]
        if len(objs) != 1 or "prt" in {c.dep_ for c in top.children}:
            return None
        np = sorted(t.i for t in objs[0].subtree)
        if np != list(range(np[0], np[-1] + 1)) or not set(np) <= set(slot):
            return None
        at = slot.index(np[0])
        return np, objs[0], "dobj", [i for i in slot if i not in set(np)], at
    return None


def _has_clause(doc: Any, slot: Seg) -> bool:
    """Does ``slot`` hold a conjoined clause with its own subject?"""
    return any(
        isinstance(i, int)
        and doc[i].dep_ == "conj"
        and any(c.dep_ in SUBJECT_DEPS for c in doc[i].children)
        for i in slot
    )


def np_moves(doc: Any, cl: Clause, k: int) -> list[tuple[list[Seg], str]]:
    """Cleft, pseudo-cleft, dislocations and topicalization of the noun phrase in slot k: a
    subject, an object, the object of a prepositional phrase on the verb (the preposition
    stays behind: "It was the sequel that I waited for") or of an infinitival complement."""
    out: list[tuple[list[Seg], str]] = []
    site = _np_site(doc, cl, k)
    if site is None:
        return out
    np, top, dep, gap, at = site
    deps, slots = cl.deps, cl.slots
    if top.pos_ not in ("NOUN", "PROPN") or not np or len(np) > 10:
        return out
    if any(c.dep_ == "det" and c.lower_ in QUANTIFIERS for c in top.children):
        return out
    h = deps.index("HEAD")
    subj = subject_index(cl)
    if subj is None or any(d in ("ccomp", "csubj") for d in deps):
        return out
    if dep not in SUBJECT_DEPS and k < h:
        return out
    last = len(slots) - 1 if deps[-1] == "punct" else len(slots)
    pre = [slots[j] for j in range(subj)]
    rest = [slots[j] if j != k else gap for j in range(subj, last)]
    copula = "was" if is_past(doc, cl) else "is"
    out.append(([*pre, ["it", copula], np, ["that"], *rest], "cleft"))
    pron = _pronoun(doc, top.i, subject=dep in SUBJECT_DEPS)
    if dep == "dobj" and ("prt" in deps or "dative" in deps):
        pron = None  # "picked up it", "gave my brother it"
    with_pron = [slots[j] if j != k else [*gap[:at], pron, *gap[at:]] for j in range(subj, last)]
    # a phrase dislocated to the end must end its own clause: not past a conjoined clause
    # the parser hung inside a constituent
    inner = any(_has_clause(doc, slots[j]) for j in range(subj, last) if j != k)
    if pron:
        out.append(([*pre, ["as", "for"], np, [","], *with_pron], "as_for"))
        if dep != "pobj" and not inner:
            out.append(([*pre, *with_pron, [","], np], "right_dislocation"))
    if dep in ("dobj", "pobj"):
        if pron:
            out.append(([*pre, np, [","], *with_pron], "left_dislocation"))
        if dep == "dobj" and doc[cl.tops[subj]].pos_ != "PRON":
            out.append(([*pre, np, *rest], "topicalization"))
        if not pre and not inner and top.ent_type_ != "PERSON" and top.lemma_ not in PERSON_NOUNS:
            out.append(([["what"], *rest, [copula], np], "pseudo_cleft"))
    return out
