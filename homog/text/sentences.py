"""Sentences and the leading-space convention, below the corpus and synth stages.

- ``split_sentences(text)`` -> sentence spans (start, end) so variants can be rebuilt by
  replacing sentences in place, keeping everything between them (the corpus stage cuts
  reviews at these boundaries; synth moves and rewrites these sentences).
- ``LEAD``: every text the models see starts with one space, so a sentence's first word is
  tokenized the same wherever it is placed (the position family keeps every token).
"""

from __future__ import annotations

import re

LEAD = " "
# A sentence ends at . ! ? (repeats allowed) plus closing quotes/brackets, followed by space
# and something that opens a sentence. Reviews often open a sentence in lower case: a lone
# "." before a lower-case word splits too ("It was pointless. every episode ..."), but not
# "..", "?" or "!" ("Really? yes, really."; "like the Avon Lady.. and lost big time").
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[^\W_])")
_LOWER_OK = re.compile(r"\.\s+$")
_ABBREV = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "jr",
    "sr",
    "vs",
    "etc",
    "no",
    "vol",
    "prof",
    "mt",
    "ft",
    "e.g",
    "i.e",
    "approx",
    "dept",
    "inc",
    "ltd",
    "co",
    "a.k.a",
    "aka",
    "a.m",
    "p.m",
    "u.s",
    "u.k",
    "cf",
}


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans [(start, end), ...] of ``text`` (pure).

    Splits after . ! ? when the next word starts with a capital or a digit (after an
    optional opening quote), and after a lone "." before a lower-case word; not after
    abbreviations (Mr., Dr., e.g.) or single-letter initials (J. R.). Spans cover sentences
    without the whitespace between them.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        opening = text[m.end() : m.end() + 2].lstrip("\"'\u201c\u2018([")[:1]
        if opening.islower() and not _LOWER_OK.fullmatch(m.group()):
            continue
        head = text[start : m.start()]
        last = head.rsplit(None, 1)[-1] if head.split() else ""
        token = last.lower().rstrip(".")
        if text[m.start()] == "." and (token in _ABBREV or (len(token) == 1 and token.isalpha())):
            continue
        end = m.end() - (len(m.group()) - len(m.group().rstrip()))
        spans.append((start, end))
        start = m.end()
    if text[start:].strip():
        end = len(text.rstrip())
        spans.append((start, end))
    return spans
