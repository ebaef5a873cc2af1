"""Sentences, key phrases and where a key phrase sits in its sentence.

- Sentences are split by ``homog.text.sentences.split_sentences``.
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

from homog.config.synth import KeyphraseConfig
from homog.errors import HomogError

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


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
