"""Salience (TF-IDF of a phrase within a review) against an independent numpy computation, and
the token helpers against the tokenizers themselves."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from homog.synth.salience import Salience, content_words, stop_words, words

DOCS = [
    "The acting was wooden. The plot, however, was clever and the score soared.",
    "A clever plot! I loved the score; the acting didn't matter.",
    "Wooden dialogue, wooden acting, and a director's cut nobody asked for.",
]


def numpy_score(docs: list[str], phrase: str, doc: str) -> float:
    """TF-IDF from a dense document-term matrix built with numpy (independent of Salience)."""
    vocab = sorted({w for d in docs for w in words(d)} | set(words(phrase)) | set(words(doc)))
    index = {w: j for j, w in enumerate(vocab)}
    present = np.zeros((len(docs), len(vocab)))
    for i, d in enumerate(docs):
        for w in words(d):
            present[i, index[w]] = 1
    idf = np.log((1 + len(docs)) / (1 + present.sum(axis=0))) + 1
    tf = np.zeros(len(vocab))
    toks = words(doc)
    for w in toks:
        tf[index[w]] += 1
    tf /= len(toks)
    terms = [w for w in words(phrase) if w not in stop_words()]
    return float(np.mean([tf[index[w]] * idf[index[w]] for w in terms])) if terms else 0.0


@pytest.mark.parametrize(
    "phrase", ["wooden acting", "the plot", "clever", "director's cut", "soared", "unseen word"]
)
@pytest.mark.parametrize("doc", range(3))
def test_score_matches_numpy(phrase: str, doc: int) -> None:
    sal = Salience.fit(DOCS)
    assert sal.score(phrase, DOCS[doc]) == pytest.approx(numpy_score(DOCS, phrase, DOCS[doc]))


def test_rare_repeated_word_beats_common_one() -> None:
    sal = Salience.fit(DOCS)
    # "wooden" is in 2 documents but twice in doc 2; "acting" in all 3, once there
    assert sal.score("wooden", DOCS[2]) > sal.score("acting", DOCS[2]) > 0


def test_stop_words_and_empty_score_zero() -> None:
    sal = Salience.fit(DOCS)
    assert sal.score("the and of", DOCS[0]) == 0.0
    assert sal.score("plot", "") == 0.0
    assert content_words("The plot of it") == ["plot"]


def test_no_position_term() -> None:
    """Moving a sentence (or a word) changes no score: tf counts, not places."""
    sal = Salience.fit(DOCS)
    a = "Wooden acting ruins it. The score soars."
    b = "The score soars. Wooden acting ruins it."
    for phrase in ("wooden acting", "score", "soars"):
        assert sal.score(phrase, a) == sal.score(phrase, b)


def test_words_lowercase_apostrophes() -> None:
    assert words("Don\u2019t STOP, director's_cut") == ["don't", "stop", "director's", "cut"]


def test_document_frequency_counts_once_per_document() -> None:
    sal = Salience.fit(["a wooden wooden door", "wooden"])
    assert sal.document_frequency["wooden"] == 2
    assert sal.idf("wooden") == pytest.approx(np.log(3 / 3) + 1)
    assert sal.idf("never") == pytest.approx(np.log(3 / 1) + 1)


def test_token_helpers_match_extraction() -> None:
    import pandas as pd

    from homog.extract.plan import encode_texts
    from homog.models import load_tokenizer
    from homog.text.tokens import token_counts, token_ids, token_multisets

    tok, _ = load_tokenizer("random:tiny-llama")
    texts = [" Great film. It was fun.", "It was fun. Great film."]
    df = pd.DataFrame({"variant": ["a", "b"], "sample_id": ["1", "1"], "text": texts})
    enc = encode_texts(tok, df, max_tokens=4)
    assert token_ids(tok, texts[0], max_tokens=4) == enc[0].input_ids.tolist()
    full = token_ids(tok, texts[0])
    assert token_counts(tok, texts)[0] == len(full)
    plain = token_ids(tok, texts[0], special=False)
    assert token_counts(tok, texts, special=False)[0] == len(plain)
    assert token_multisets(tok, texts)[0] == Counter(plain)
    # the leading space is a different first token
    assert token_ids(tok, " Great") != token_ids(tok, "Great")
