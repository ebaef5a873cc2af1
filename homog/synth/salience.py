"""How salient a phrase is within one review: TF-IDF against the corpus, with no position term.

YAKE ranks a phrase higher the earlier it first occurs, so "the most salient phrase" by YAKE
sits in a review's first sentence most of the time. ``Salience`` scores a phrase by what it
says about this review compared with the others, and nothing else: moving a sentence does not
change any score.

Definitions (all pure, deterministic):

- word tokens: ``words(text)``, the lower-cased ``[^\\W_]+`` runs with inner apostrophes kept
  ("don't", "director's"); stop words are spaCy's English list (``STOP_WORDS``).
- document frequency df(w): the number of the fitted documents whose word tokens contain w;
  N: the number of fitted documents.
- idf(w) = ln((1 + N) / (1 + df(w))) + 1 (the smoothed idf of scikit-learn; a word no fitted
  document holds has df 0).
- tf(w, d) = count of w in d's word tokens / the number of d's word tokens (0 for an empty d).
- score(phrase, d) = the mean of tf(w, d) * idf(w) over the phrase's content (non-stop) word
  tokens, repeats included; 0 when the phrase has no content word or d has no words.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from spacy.lang.en.stop_words import STOP_WORDS as _SPACY_STOP_WORDS

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
STOP_WORDS: frozenset[str] = frozenset(_SPACY_STOP_WORDS)


def words(text: str) -> list[str]:
    """The lower-cased word tokens of ``text`` (see the module docstring)."""
    return [w.lower().replace("\u2019", "'") for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    """``words(text)`` without the stop words."""
    return [w for w in words(text) if w not in STOP_WORDS]


@dataclass(frozen=True)
class Salience:
    """TF-IDF salience fitted on a corpus of documents (reviews). Build with ``fit``."""

    n_documents: int
    document_frequency: dict[str, int] = field(default_factory=dict)

    @classmethod
    def fit(cls, documents: Sequence[str]) -> Salience:
        """Document frequencies of every word over ``documents`` (each counted once per
        document). An empty corpus is allowed: every idf is then ln(1) + 1 = 1."""
        df: Counter[str] = Counter()
        for doc in documents:
            df.update(set(words(doc)))
        return cls(len(documents), dict(df))

    def idf(self, word: str) -> float:
        """ln((1 + N) / (1 + df(word))) + 1; ``word`` is taken as given (lower-case it)."""
        return math.log((1 + self.n_documents) / (1 + self.document_frequency.get(word, 0))) + 1

    def score(self, phrase: str, document: str) -> float:
        """Mean tf-idf within ``document`` of the phrase's content words (0 if none)."""
        terms = content_words(phrase)
        tokens = words(document)
        if not terms or not tokens:
            return 0.0
        counts = Counter(tokens)
        return sum(counts[w] / len(tokens) * self.idf(w) for w in terms) / len(terms)
