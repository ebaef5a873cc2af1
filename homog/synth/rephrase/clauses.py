"""Read a spaCy-parsed sentence into clauses and constituent slots, and render rewrites.

A sentence is read as at most two top-level clauses (the root's clause and one conjoined
clause with its own subject, joined by ", and|but|or|yet|so" or ";", or by a comma and an
adverb "so|then|yet|thus|hence|therefore", which keeps the clauses in their order), each a
list of *slots*: the verb and the whole subtree of each of its dependents (a constituent), in
order. A rewrite is a sequence of *items*: token indices of the parsed doc, or literal words
("it", "was", "that", ","); ``render`` turns it into text; ``homog.synth.rephrase.moves``
holds the moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Item = int | str  # a token index of the sentence's doc, or a literal word
Seg = list[Item]
SUBJECT_DEPS = ("nsubj", "nsubjpass")


@dataclass
class Clause:
    """A clause: its verb's index and its slots in order (each slot a list of token indices)."""

    head: int
    slots: list[Seg]
    deps: list[str]  # dependency label of each slot's top token ("HEAD" for the verb)
    tops: list[int]  # the top token of each slot


def read_clause(doc: Any, head: int, tokens: set[int]) -> Clause | None:
    """The clause of verb ``head`` over ``tokens`` (None unless its slots are contiguous)."""
    h = doc[head]
    slots: list[tuple[int, Seg, str, int]] = [(head, [head], "HEAD", head)]
    for c in h.children:
        if c.i not in tokens:
            continue
        sub = sorted(t.i for t in c.subtree if t.i in tokens)
        if sub != list(range(sub[0], sub[-1] + 1)):
            return None
        slots.append((sub[0], sub, c.dep_, c.i))
    slots.sort()
    flat = [i for _, s, _, _ in slots for i in s]
    if sorted(flat) != sorted(tokens) or flat != sorted(flat):
        return None
    return Clause(
        head, [s for _, s, _, _ in slots], [d for *_, d, _ in slots], [t for *_, t in slots]
    )


@dataclass
class Sentence:
    """A parsed sentence: lead connective, one or two clauses, their joiner, final punct."""

    doc: Any
    lead: Seg
    clauses: list[Clause]
    joiner: Seg
    final: Seg
    # may the two clauses trade places? not across ", so" / ", then" (cause, sequence)
    swappable: bool = True


# adverbs that open a second clause after a bare comma: "A, so B" is two clauses whose
# order carries meaning
CLAUSE_ADVERBS = frozenset("so then yet thus hence therefore".split())


def analyse(doc: Any) -> Sentence | None:
    """Read a parsed one-sentence doc into a ``Sentence``; None when the parse does not fit
    (no verb at the root, a constituent that is not contiguous, ...)."""
    toks = list(doc)
    if not toks:
        return None
    n = len(toks)
    final: Seg = []
    while n and toks[n - 1].is_punct and toks[n - 1].text in (".", "!", "...", "\u2026", "!!"):
        final.insert(0, n - 1)
        n -= 1
    roots = [t for t in toks[:n] if t.dep_ == "ROOT"]
    if len(roots) != 1 or roots[0].pos_ not in ("VERB", "AUX"):
        return None
    root = roots[0]
    lead: Seg = []
    if toks[0].dep_ == "cc" and toks[0].head.i == root.i and n > 4:
        lead = [0]
    start = len(lead)
    conj = [
        c
        for c in root.children
        if c.dep_ == "conj"
        and c.pos_ in ("VERB", "AUX")
        and any(g.dep_ in SUBJECT_DEPS + ("expl",) for g in c.children)
        and c.i < n
    ]
    if len(conj) > 1:
        conj = []
    everything = set(range(start, n))
    if not conj:
        c1 = read_clause(doc, root.i, everything)
        return Sentence(doc, lead, [c1], [], final) if c1 else None
    c = conj[0]
    c2_tokens = {t.i for t in c.subtree if t.i < n}
    c2_start = min(c2_tokens)
    if sorted(c2_tokens) != list(range(c2_start, n)):
        return None
    j = c2_start
    # the joiner: "and"/"but"/","/";" on the root, or (a common misparse) a bare "and"
    # or comma that the parser hung on a word of the first clause
    while (
        j - 1 >= start
        and toks[j - 1].dep_ in ("cc", "punct")
        and (
            toks[j - 1].head.i == root.i
            or (
                (toks[j - 1].text in (",", ";") or toks[j - 1].dep_ == "cc")
                and not list(toks[j - 1].children)
            )
        )
    ):
        j -= 1
    joiner = list(range(j, c2_start))
    swappable = True
    if (
        joiner
        and toks[joiner[-1]].text == ","
        and toks[c2_start].lower_ in CLAUSE_ADVERBS
        and toks[c2_start].head.i == c.i
        and not list(toks[c2_start].children)
    ):  # "A, so B": the adverb joins, and the clauses keep their order
        joiner.append(c2_start)
        c2_tokens = c2_tokens - {c2_start}
        swappable = False
    elif not joiner or not any(toks[i].dep_ == "cc" or toks[i].text == ";" for i in joiner):
        return None
    c1 = read_clause(doc, root.i, set(range(start, j)))
    c2 = read_clause(doc, c.i, c2_tokens)
    if c1 is None or c2 is None:
        return None
    return Sentence(doc, lead, [c1, c2], joiner, final, swappable)


def is_plural(doc: Any, top: int) -> bool:
    """Is the noun phrase headed by ``top`` plural (a plural tag, a plural pronoun, or
    conjoined: "the cast and the crew")?"""
    t = doc[top]
    return (
        t.tag_ in ("NNS", "NNPS")
        or t.lower_ in ("they", "them", "we", "us", "you")
        or any(c.dep_ == "conj" for c in t.children)
    )


def is_past(doc: Any, cl: Clause) -> bool:
    """Is the clause in the past tense (its first auxiliary, else its verb)?"""
    h = doc[cl.head]
    auxes = [doc[t] for t, d in zip(cl.tops, cl.deps, strict=True) if d in ("aux", "auxpass")]
    first = auxes[0] if auxes else h
    return first.tag_ in ("VBD", "VBN") or first.lower_ in ("had", "was", "were", "did")


def slot_tokens(doc: Any, slot: Seg) -> list[Any]:
    return [doc[i] for i in slot if isinstance(i, int)]


def subject_index(cl: Clause) -> int | None:
    for k, d in enumerate(cl.deps):
        if d in SUBJECT_DEPS or d == "expl":
            return k
    return None


def drop_comma(doc: Any, slots: list[Seg], deps: list[str], k: int) -> None:
    """Remove the comma slot next to slot k (after it if it is first, else before it)."""
    for j in (k + 1, k - 1) if k == 0 or deps[k - 1] != "punct" else (k - 1, k + 1):
        if 0 <= j < len(slots) and deps[j] == "punct" and _text(doc, slots[j]) == ",":
            del slots[j]
            del deps[j]
            return


def _text(doc: Any, seg: Seg) -> str:
    return " ".join(doc[i].text if isinstance(i, int) else i for i in seg)


NO_SPACE_BEFORE = frozenset(
    {
        ",",
        ".",
        "!",
        "?",
        ";",
        ":",
        "%",
        "n't",
        "'s",
        "'re",
        "'ve",
        "'ll",
        "'d",
        "'m",
        "\u2026",
        "...",
    }
)


def render(doc: Any, items: tuple[Item, ...]) -> str:
    """The text of ``items``: original spacing between neighbours, one space elsewhere, no
    doubled commas, the first word capitalised and a displaced first word lower-cased unless
    it is a name or "I"."""
    words: list[str] = []
    prev: Item | None = None
    for it in items:
        if isinstance(it, int):
            tok = doc[it]
            text = tok.text
            if it == 0 and words and not _keeps_capital(tok):
                text = text[:1].lower() + text[1:]
        else:
            text = it
        if text == "," and (not words or words[-1].endswith((",", " ,")) or prev is None):
            continue
        if words and text in (",",) and words[-1] == ",":
            continue
        if not words:
            words.append(text)
        elif isinstance(it, int) and isinstance(prev, int) and it == prev + 1:
            words.append(doc[prev].whitespace_ + text)
        elif text in NO_SPACE_BEFORE or text.lower() in NO_SPACE_BEFORE:
            words.append(text)
        else:
            words.append(" " + text)
        prev = it
    out = "".join(words).replace(" ,", ",").replace(",,", ",").replace(",.", ".")
    out = out.replace(", ,", ",").replace(",!", "!")
    return out[:1].upper() + out[1:]


def _keeps_capital(tok: Any) -> bool:
    text = tok.text
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    return (
        text == "I"
        or tok.pos_ == "PROPN"
        or bool(tok.ent_type_)
        or (len(text) > 1 and text.isupper())
        # the first word of a name or title the tagger missed ("Little Fires is ..."); not a
        # determiner ("The Matrix" -> "the Matrix")
        or (
            nxt is not None
            and tok.pos_ != "DET"
            and nxt.pos_ == "PROPN"
            and nxt.text[:1].isupper()
            and tok.head.i == nxt.i
        )
    )
