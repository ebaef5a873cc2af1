"""The parse rephraser's change of voice (``voice_moves``): active -> passive (``passive``:
"The crew shot the scenes" -> "The scenes were shot by the crew") and passive with a by-agent
-> active (``active``); verbs are re-inflected with lemminflect, pronouns change case. One of
the clause-level moves of ``homog.synth.rephrase.moves``."""

from __future__ import annotations

from typing import Any

from homog.synth.rephrase.clauses import Clause, Seg, is_past, is_plural, subject_index

SUBJ_TO_OBJ = {"i": "me", "he": "him", "she": "her", "we": "us", "they": "them", "who": "whom"}
OBJ_TO_SUBJ = {v: k for k, v in SUBJ_TO_OBJ.items() if k != "who"}
PERSONAL_PRONOUNS = frozenset("i you we he she they one".split())
# verbs of having, measure or likeness take no passive ("a dream movie is had by you", "the
# book is resembled by it")
NO_PASSIVE = frozenset(
    "have lack resemble cost weigh fit suit get possess contain equal mean last total".split()
)


def _inflect(lemma: str, tag: str) -> str | None:
    """The lemma's first inflection for the Penn tag (None when lemminflect has none)."""
    from lemminflect import getInflection

    forms = getInflection(lemma, tag=tag)
    return forms[0] if forms else None


def _case(doc: Any, seg: Seg, table: dict[str, str]) -> Seg:
    """A one-word pronoun slot in the other case (he -> him); other slots unchanged."""
    if len(seg) == 1 and isinstance(seg[0], int) and doc[seg[0]].lower_ in table:
        return [table[doc[seg[0]].lower_]]
    return list(seg)


def _frame(doc: Any, cl: Clause, subj: int) -> tuple[list[int], list[Seg], list[Seg], bool, list]:
    """What both voices keep: the auxiliaries' slot indices, the material before the subject,
    the slots between subject and head (auxiliaries left out), negation, the modal slots."""
    deps = cl.deps
    aux = [k for k, d in enumerate(deps) if d in ("aux", "auxpass", "neg")]
    pre = [cl.slots[k] for k in range(subj)]  # material before the subject stays first
    mid = [cl.slots[k] for k in range(subj + 1, deps.index("HEAD")) if k not in aux]
    neg = any(deps[k] == "neg" for k in aux)
    modal = [cl.slots[k] for k in aux if doc[cl.tops[k]].tag_ == "MD"]
    return aux, pre, mid, neg, modal


def _passive(doc: Any, cl: Clause, subj: int) -> tuple[list[Seg], str] | None:
    """Active -> passive (the subject an ``nsubj``, a direct object), None when not licensed."""
    h = doc[cl.head]
    deps = cl.deps
    aux, pre, mid, neg, modal = _frame(doc, cl, subj)
    o = deps.index("dobj")
    if o < deps.index("HEAD") or "dative" in deps or "ccomp" in deps or "xcomp" in deps:
        return None
    if doc[cl.tops[subj]].lower_ in ("it", "there", "that", "this", "which", "who"):
        return None
    # "... is played by you", "was liked by me": a personal pronoun makes a poor agent
    if doc[cl.tops[subj]].lower_ in PERSONAL_PRONOUNS and len(cl.slots[subj]) == 1:
        return None
    if h.lemma_ in NO_PASSIVE:
        return None
    other_aux = [k for k in aux if deps[k] == "aux" and doc[cl.tops[k]].tag_ != "MD"]
    if any(doc[cl.tops[k]].lemma_ != "do" for k in other_aux) or h.tag_ == "VBG":
        return None
    vbn = _inflect(h.lemma_, "VBN")
    if vbn is None:
        return None
    obj = _case(doc, cl.slots[o], OBJ_TO_SUBJ)
    plural = is_plural(doc, cl.tops[o])
    first = isinstance(obj[0], str) and obj[0] == "i"
    if modal:
        be: Seg = [*modal[0], *(["not"] if neg else []), "be"]
    else:
        if is_past(doc, cl):
            word = "were" if plural and not first else "was"
        else:
            word = "am" if first else ("are" if plural else "is")
        be = [word, *(["not"] if neg else [])]
    if first:
        obj = ["I"]
    prt = [cl.slots[k] for k, d in enumerate(deps) if d == "prt"]
    rest = [
        cl.slots[k] for k in range(deps.index("HEAD") + 1, len(deps)) if k != o and deps[k] != "prt"
    ]
    agent = ["by", *_case(doc, cl.slots[subj], SUBJ_TO_OBJ)]
    return [*pre, obj, be, *mid, [vbn], *prt, agent, *rest], "passive"


def _active(doc: Any, cl: Clause, subj: int) -> tuple[list[Seg], str] | None:
    """Passive with a by-agent -> active, None when not licensed."""
    h = doc[cl.head]
    deps = cl.deps
    aux, pre, mid, neg, modal = _frame(doc, cl, subj)
    a = deps.index("agent")
    agent_np = [i for i in cl.slots[a] if i != cl.tops[a]]
    if not agent_np:
        return None
    new_subj = _case(doc, agent_np, OBJ_TO_SUBJ)
    atop = [c for c in doc[cl.tops[a]].children if c.dep_ == "pobj"]
    if not atop:
        return None
    plural = is_plural(doc, atop[0].i) or (isinstance(new_subj[0], str) and new_subj[0] == "i")
    have = [k for k in aux if doc[cl.tops[k]].lemma_ == "have"]
    if modal:
        verb: Seg = [*modal[0], *(["not"] if neg else []), h.lemma_]
    elif have:
        hv = doc[cl.tops[have[0]]]
        word = "had" if hv.tag_ == "VBD" else ("have" if plural else "has")
        verb = [word, *(["not"] if neg else []), h.text]
    else:
        past = is_past(doc, cl)
        if neg:
            do = "did" if past else ("do" if plural else "does")
            verb = [do, "not", h.lemma_]
        else:
            form = _inflect(h.lemma_, "VBD" if past else ("VBP" if plural else "VBZ"))
            if form is None:
                return None
            verb = [form]
    if any(doc[cl.tops[k]].lemma_ not in ("be", "have") for k in aux if deps[k] != "neg"):
        if not modal:
            return None
    obj = _case(doc, cl.slots[subj], SUBJ_TO_OBJ)
    rest = [cl.slots[k] for k in range(deps.index("HEAD") + 1, len(deps)) if k != a]
    return [*pre, new_subj, *mid, verb, obj, *rest], "active"


def voice_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str]]:
    """Active <-> passive for a clause with a subject and an object (or a by-agent)."""
    subj = subject_index(cl)
    if subj is None:
        return []
    h = doc[cl.head]
    deps = cl.deps
    move = None
    if deps[subj] == "nsubj" and "dobj" in deps and h.pos_ == "VERB":
        move = _passive(doc, cl, subj)
    elif deps[subj] == "nsubjpass" and "agent" in deps and h.tag_ == "VBN":
        move = _active(doc, cl, subj)
    return [] if move is None else [move]
