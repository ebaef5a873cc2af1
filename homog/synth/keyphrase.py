"""Sentences, key phrases and where a key phrase sits in its sentence.

- ``split_sentences(text)`` -> sentence spans (start, end) so variants can be rebuilt by
  replacing sentences in place, keeping everything between them.
- ``KeyphraseExtractor``: a small interface (``extract(text, top_k) -> list[str]``, best first);
  ``YakeExtractor`` is the default. Add an extractor by writing a class with that method and
  registering it in ``EXTRACTORS``.
- ``phrase_span`` / ``edges`` / ``relative_position``: where a phrase is, in words.

Relative position (used by the synth report and the rephrasers' checks): a sentence of n words
(``\\w+`` tokens, apostrophes kept inside words) holding a phrase of k words whose first word is
word i (0-based, first occurrence, case-insensitive) has relative position i / (n - k): 0 when
the phrase opens the sentence, 1 when it closes it, 0.5 when it sits in the middle. It is
undefined (None) when the phrase is not found or is the whole sentence.
"""

from __future__ import annotations

import re
from typing import Protocol

from homog.config import KeyphraseConfig
from homog.errors import HomogError

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")
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


def words(text: str) -> list[str]:
    """The words of ``text`` (lower-cased ``\\w+`` tokens)."""
    return [w.lower() for w in _WORD.findall(text)]


def phrase_span(sentence: str, phrase: str) -> tuple[int, int, int] | None:
    """(first word index, phrase length in words, sentence length in words) or None."""
    sw, pw = words(sentence), words(phrase)
    k = len(pw)
    if k == 0:
        return None
    for i in range(len(sw) - k + 1):
        if sw[i : i + k] == pw:
            return i, k, len(sw)
    return None


def edges(sentence: str, phrase: str) -> tuple[int, int] | None:
    """(words before the phrase, words after it) in ``sentence``; None if not found."""
    span = phrase_span(sentence, phrase)
    if span is None:
        return None
    i, k, n = span
    return i, n - k - i


def relative_position(sentence: str, phrase: str) -> float | None:
    """i / (n - k) as defined in the module docstring; None if not found or the whole sentence."""
    span = phrase_span(sentence, phrase)
    if span is None:
        return None
    i, k, n = span
    if n <= k:
        return None
    return i / (n - k)


class KeyphraseExtractor(Protocol):
    """Anything that ranks key phrases of a text: ``extract(text, top_k)``, best first."""

    name: str

    def extract(self, text: str, top_k: int = 1) -> list[str]: ...


class YakeExtractor:
    """YAKE! (unsupervised, statistical, offline) key phrases of up to ``ngram`` words."""

    name = "yake"

    def __init__(
        self, ngram: int = KeyphraseConfig.ngram, language: str = "en", dedup: float = 0.9
    ) -> None:
        import yake

        self.ngram = ngram
        self._make = lambda top: yake.KeywordExtractor(
            lan=language, n=ngram, dedup_lim=dedup, top=top
        )
        self._cache: dict[int, object] = {}

    def extract(self, text: str, top_k: int = 1) -> list[str]:
        """Up to ``top_k`` phrases (best first) that occur verbatim (ignoring case) in text."""
        if top_k not in self._cache:
            self._cache[top_k] = self._make(top_k)
        try:
            found = self._cache[top_k].extract_keywords(text)  # type: ignore[attr-defined]
        except (ValueError, ZeroDivisionError, IndexError):
            # yake fails on texts without any candidate words (e.g. only punctuation).
            return []
        phrases = [p for p, _score in found]
        return [p for p in phrases if phrase_span(text, p) is not None][:top_k]


EXTRACTORS: dict[str, type] = {"yake": YakeExtractor}


def make_extractor(name: str, **options: object) -> KeyphraseExtractor:
    """Build a registered extractor by name; HomogError for an unknown name."""
    cls = EXTRACTORS.get(name)
    if cls is None:
        raise HomogError(
            f"unknown key-phrase extractor {name!r}; available: {', '.join(sorted(EXTRACTORS))}"
        )
    return cls(**options)


def extractor_from_config(cfg: KeyphraseConfig) -> KeyphraseExtractor:
    """The extractor ``synth.keyphrase`` configures (``extractor``, ``ngram``)."""
    return make_extractor(cfg.extractor, ngram=cfg.ngram)
