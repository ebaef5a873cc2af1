"""A parsed sentence's pieces for the parse rephraser (``homog.synth.rephrase.parse``): its
rendered rewrites (``Option``) and parse outcome (``Parsed``), its noun phrases as key-phrase
candidates (``noun_chunks``), its quoted or bracketed stretches (which no move may break:
``quote_spans``, ``keeps_spans``), and a displaced first name's capital (``displaced_name``,
``restore_name``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

QUOTES = frozenset('"\u201c\u201d')
# a noun chunk offered as a key phrase: words, hyphens, apostrophes and spaces only
CHUNK_TEXT = re.compile(r"\w+(?:['\u2019-]\w+)*(?: \w+(?:['\u2019-]\w+)*)*")
CHUNK_LEAD = frozenset({"DET", "PRON", "PART", "CCONJ", "ADP", "PUNCT", "NUM", "ADV"})
MAX_CHUNK_WORDS = 4
CHUNK_SKIP = frozenset({"one", "ones"})  # "this one": a pronoun in all but its tag


@dataclass(frozen=True)
class Option:
    """A rendered rewrite: text, kinds of its moves."""

    text: str
    kinds: tuple[str, ...]


FIRST_WORD = re.compile(r"[A-Z][a-z]+\b")


def displaced_name(sentence: str, context: str) -> re.Pattern[str] | None:
    """The sentence's first word in lower case, as a pattern, when ``context`` (the whole
    review) shows it is a name: not a stop word, written capitalised after a lower-case word,
    a digit or a comma somewhere, and never in lower case. Rewrites give it back its capital
    (:func:`restore_name`): the parser's rendering lower-cases a displaced first word unless
    the tagger calls it a name, and it misses some ("Lumet was ..." -> "What lumet was ...");
    rewrites are cached per sentence, so only the review can tell.
    """
    from spacy.lang.en.stop_words import STOP_WORDS

    first = FIRST_WORD.match(sentence)
    if first is None or not context or first.group(0).lower() in STOP_WORDS:
        return None  # "These", "There", ...: never a name, whatever the review capitalises
    word = first.group(0)
    low = re.compile(rf"\b{word.lower()}\b")
    if low.search(context) or not re.search(rf"[a-z0-9,] +{word}\b", context):
        return None  # a common word, or only capitalised after a colon ("City: These")
    return low


def restore_name(text: str, name: re.Pattern[str] | None) -> str:
    """``text`` with the first lower-case ``name`` (:func:`displaced_name`) capitalised."""
    if name is None:
        return text
    return name.sub(lambda m: m.group(0)[:1].upper() + m.group(0)[1:], text, count=1)


@dataclass
class Parsed:
    """A sentence's parse outcome: its status (``ok`` or why not), its rewrites and its noun
    phrases (key-phrase candidates)."""

    status: str
    options: list[Option]
    chunks: list[str] = field(default_factory=list)


def noun_chunks(doc: Any) -> list[str]:
    """The noun phrases of a parsed sentence as key-phrase candidates: spaCy's noun chunks
    headed by a noun or proper noun, without leading determiners, pronouns, numbers or
    adverbs ("the opening sequence" -> "opening sequence"), at most MAX_CHUNK_WORDS words,
    only words (no punctuation inside), each once, in order."""
    out: list[str] = []
    seen: set[str] = set()
    for chunk in doc.noun_chunks:
        root = chunk.root
        if root.pos_ not in ("NOUN", "PROPN") or root.lower_ in CHUNK_SKIP:
            continue
        start = chunk.start
        while start < root.i and doc[start].pos_ in CHUNK_LEAD:
            start += 1
        text = doc[start : chunk.end].text
        if (
            len(text.split()) <= MAX_CHUNK_WORDS
            and CHUNK_TEXT.fullmatch(text)
            and text.lower() not in seen
        ):
            seen.add(text.lower())
            out.append(text)
    return out


def quote_spans(doc: Any) -> list[tuple[int, int]]:
    """(first, last) token of each quoted or bracketed stretch."""
    spans, open_q = [], None
    stack = []
    for t in doc:
        if t.text in QUOTES:
            if open_q is None:
                open_q = t.i
            else:
                spans.append((open_q, t.i))
                open_q = None
        elif t.text in "([":
            stack.append(t.i)
        elif t.text in ")]" and stack:
            spans.append((stack.pop(), t.i))
    if open_q is not None or stack:
        spans.append((0, len(doc) - 1))  # unbalanced: nothing may move inside the sentence
    return spans


def keeps_spans(items: tuple, spans: list[tuple[int, int]]) -> bool:
    """Does every quoted stretch stay together and in order among ``items``?"""
    if not spans:
        return True
    where = {it: k for k, it in enumerate(items) if isinstance(it, int)}
    for a, b in spans:
        if a not in where or b not in where or where[b] - where[a] != b - a:
            return False
        if any(where.get(a + j) != where[a] + j for j in range(b - a + 1)):
            return False
    return True
