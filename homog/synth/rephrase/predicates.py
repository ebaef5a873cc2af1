"""``reverse_pseudo_cleft``: the parse rephraser's move for a copular clause's predicate noun.

Reviews are full of copular sentences ("It's a really bad mess.", "The acting is a
disaster."), where the key phrase sits in the predicate noun phrase and no other move of the
catalogue reaches it: the noun-phrase moves of ``homog.synth.rephrase.moves`` take subjects and
objects, not predicates. The reverse pseudo-cleft puts the predicate first and the subject
last: "A really bad mess is what it is.", "A disaster is what the acting is."
"""

from __future__ import annotations

from typing import Any

from homog.synth.rephrase.clauses import Clause, Seg, is_past, subject_index

# a copula that ends its clause cannot stay contracted ("... what it's")
FULL_COPULA = {"'s": "is", "'re": "are", "'m": "am", "’s": "is", "’re": "are", "’m": "am"}
# slots allowed between the subject and the predicate: the copula, auxiliaries, adverbs
MIDDLE_DEPS = frozenset({"HEAD", "aux", "advmod"})
MAX_PREDICATE_TOKENS = 12
MAX_SUBJECT_TOKENS = 3
RELATIVE_OPENERS = frozenset("that who which".split())
SUBJECT_PRONOUNS = frozenset("it this that these those he she they i we you".split())
# what may stand before the subject and stay there: adverbials and connectives
PRE_DEPS = frozenset({"advmod", "prep", "advcl", "npadvmod", "punct", "intj", "cc"})
# "The problem is the script": a subject that names a role the predicate fills
# (specificational) reads wrongly reversed ("The script is what the problem is")
SPECIFICATIONAL = frozenset(
    "one problem thing point question reason result answer issue idea trouble truth fact part "
    "plan goal aim highlight downside upside difference exception rest only first last main "
    "real whole same other".split()
)


def predicate_moves(doc: Any, cl: Clause) -> list[tuple[list[Seg], str]]:
    """ "S be (adverbs) X." -> "X is|was what S (adverbs) be.": the predicate noun phrase X of
    a copular clause to the front, the subject to the end.

    Only for a predicate that describes its subject ("It's a real mess"), not one that
    identifies it ("He is the killer" -> "The killer is what he is" reads wrongly): X ends the
    clause (nothing after it but the final punctuation) and is an indefinite noun phrase of
    at most MAX_PREDICATE_TOKENS tokens without a comma ("a disaster", "two different
    animals", "utter crap", "one of her best performances"; not "the ...", "his ...", "no
    ...", a bare name); the subject is a pronoun or a short noun phrase that names no role
    ("the problem", "the only one"); nothing but adverbials before the subject; the clause
    not negated ("Not a good film is what it is" says something else). "It is X that/who
    ..." is a cleft already and is left alone. Adverbs between subject and copula go before
    the copula ("It was probably X" -> "X was what it probably was"); a contracted copula is
    written out."""
    deps, slots, tops = cl.deps, cl.slots, cl.tops
    head = doc[cl.head]
    if head.lemma_.lower() != "be" or deps.count("attr") != 1:
        return []
    h, a, subj = deps.index("HEAD"), deps.index("attr"), subject_index(cl)
    last = len(slots) - 1 if deps[-1] == "punct" else len(slots)
    if subj is None or not subj < h < a or a != last - 1:
        return []
    if any(deps[j] not in MIDDLE_DEPS for j in range(subj + 1, a)):
        return []
    if any(t.dep_ == "neg" for j in range(subj, a) for t in _tokens(doc, slots[j])):
        return []
    pred, subject = slots[a], slots[subj]
    top = doc[tops[a]]
    if not _predicate_noun(doc, top, pred) or not _plain_subject(doc, subject, tops[subj]):
        return []
    pre_toks = [t for j in range(subj) for t in _tokens(doc, slots[j])]
    if any(deps[j] not in PRE_DEPS for j in range(subj)) or (
        pre_toks and pre_toks[-1].pos_ == "ADP"
    ):
        return []  # only adverbials stay before the subject (and none cut off: "viewed in")
    if doc[tops[subj]].lower_ == "it" and any(
        c.dep_ == "relcl" and doc[c.left_edge.i].lower_ in RELATIVE_OPENERS for c in top.children
    ):
        return []  # "It is the music that I remember": a cleft, not a predicate
    copula = "was" if is_past(doc, cl) else "is"
    middle = [slots[j] for j in range(subj + 1, a) if deps[j] != "HEAD"]
    verb: Seg = [FULL_COPULA.get(head.text.lower(), cl.head)]
    pre = [slots[j] for j in range(subj)]
    return [([*pre, pred, [copula, "what"], subject, *middle, verb], "reverse_pseudo_cleft")]


def _tokens(doc: Any, seg: Seg) -> list[Any]:
    return [doc[i] for i in seg if isinstance(i, int)]


def _predicate_noun(doc: Any, top: Any, pred: Seg) -> bool:
    """Is the predicate an indefinite noun phrase that describes (see predicate_moves)?"""
    toks = _tokens(doc, pred)
    if len(toks) > MAX_PREDICATE_TOKENS or any(t.text in (",", ";", ":") for t in toks):
        return False
    if top.lower_ == "one":  # "one of her best performances"
        return any(c.dep_ == "prep" and c.lower_ == "of" for c in top.children)
    if top.pos_ not in ("NOUN", "PROPN"):
        return False
    deps = {c.dep_: c for c in top.children}
    if "poss" in deps:
        return False
    if "det" in deps:
        return deps["det"].lower_ in ("a", "an")
    # no determiner: a plural or a modified mass noun ("utter crap"), never a bare name
    return top.pos_ == "NOUN" and (top.tag_ == "NNS" or "amod" in deps or "nummod" in deps)


def _plain_subject(doc: Any, subject: Seg, top: int) -> bool:
    """A personal or demonstrative pronoun, or a short noun phrase that names no role (see
    SPECIFICATIONAL); never "there" ("Lots of scenes is what there are")."""
    head = doc[top]
    toks = _tokens(doc, subject)
    if len(toks) == 1 and head.lower_ in SUBJECT_PRONOUNS:
        return True
    if head.pos_ == "PRON" or head.lower_ in ("there", "here"):
        return False  # "all of the acting", "there are ...": not a subject to put last
    if len(toks) > MAX_SUBJECT_TOKENS or head.pos_ not in ("NOUN", "PROPN"):
        return False
    return not any(
        t.lower_ in SPECIFICATIONAL
        or t.lemma_.lower() in SPECIFICATIONAL
        or t.tag_ in ("JJS", "RBS")
        for t in toks
    )
