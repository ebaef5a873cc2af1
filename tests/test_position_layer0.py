"""The negative control the position family is built for: at layer 0 (the token embeddings;
these RoPE models give them no position) a text whose tokens are only reordered has the same
Gram spectrum, so erank, mev, schatten_1, schatten_4 and resultant_length of every family
variant equal the original's (1e-6 relative). Texts are built by the stage's own
``build_family`` and tokenized exactly as extraction does (``encode_texts``); the metrics are
``homog.metrics.spectra.layer_metrics`` on the model's input embeddings (hidden_states[0]).

Fast: 8 demo reviews, smollm2-135m. Slow: 6 real IMDB reviews (../shared), both models."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import IMDB_SAMPLE

from homog.corpus.cut import budget_check, cut_texts
from homog.corpus.sources import DEMO_PATH
from homog.corpus.stage import clean_text
from homog.synth.position_stage import build_family
from homog.synth.salience import Salience, content_words
from homog.synth.variants import Sentences
from homog.text.sentences import split_sentences

LAYER0 = ("erank", "mev", "schatten_1", "schatten_4", "resultant_length")


def family_texts(texts: list[str], tokenizers: dict) -> pd.DataFrame:
    """The family (and original) of every text, candidates = each sentence's content words."""
    docs = {}
    for k, text in enumerate(texts):
        spans = split_sentences(text)
        opts = [content_words(text[a:b]) for a, b in spans]
        docs[f"t{k}"] = Sentences(text, spans, [None] * len(spans), opts)
    build = build_family(docs, Salience.fit(texts), tokenizers, [0, 0.5, 1])
    assert build.kept, build.dropped
    from homog.synth.position import join

    originals = [
        {
            "sample_id": s,
            "variant": "original",
            "text": join(docs[s].sentence(i) for i in range(len(docs[s].spans))),
        }
        for s in build.kept
    ]
    return pd.concat([pd.DataFrame(originals), build.rows[["sample_id", "variant", "text"]]])


def layer0(source: str, df: pd.DataFrame) -> pd.DataFrame:
    """Layer-0 metrics of every text (variant, sample_id) -> columns LAYER0."""
    import torch

    from homog.extract.plan import encode_texts
    from homog.metrics.spectra import layer_metrics, token_mask
    from homog.models import load_model

    loaded = load_model(source, device="cpu", attention=False)
    embed = loaded.model.get_input_embeddings()
    rows = []
    for t in encode_texts(loaded.tokenizer, df.reset_index(drop=True), 10**6):
        ids = torch.as_tensor(t.input_ids)[None]
        mask = token_mask(torch.ones_like(ids), torch.as_tensor(t.special)[None])
        with torch.no_grad():
            m = layer_metrics(embed(ids).float(), mask)
        rows.append(
            {"variant": t.variant, "sample_id": t.sample_id, **{k: float(m[k][0]) for k in LAYER0}}
        )
    return pd.DataFrame(rows).set_index(["sample_id", "variant"])


def assert_family_equals_original(metrics: pd.DataFrame) -> int:
    orig = metrics.xs("original", level="variant")
    n = 0
    for (sid, variant), row in metrics.iterrows():
        for k in LAYER0:
            assert row[k] == pytest.approx(orig.at[sid, k], rel=1e-6, abs=1e-12), (sid, variant, k)
        n += variant != "original"
    return n


def test_layer0_family_equals_original_demo() -> None:
    from homog.models import load_tokenizer

    source = "embedded:smollm2-135m"
    tok = load_tokenizer(source)[0]
    reviews = pd.read_json(DEMO_PATH, lines=True)["text"].head(8).map(clean_text).tolist()
    df = family_texts(reviews, {"smollm2-135m": tok})
    metrics = layer0(source, df)
    # every family text is checked: key_first/mid/last, key_control and the same-place
    # controls ctrl_first/mid/last of each review
    assert assert_family_equals_original(metrics) == (df["variant"] != "original").sum()
    assert {"ctrl_first", "ctrl_mid", "ctrl_last"} <= set(df["variant"])
    # and the check can fail: without its last sentence a text's spectrum moves
    shorter = df[df["variant"] == "original"].head(3).copy()
    shorter["text"] = shorter["text"].str.rsplit(". ", n=1).str[0] + "."
    shorter["variant"] = "shorter"
    moved = layer0(source, shorter)
    orig = metrics.xs("original", level="variant")
    for sid, row in moved.xs("shorter", level="variant").iterrows():
        assert abs(row["erank"] / orig.at[sid, "erank"] - 1) > 1e-4


@pytest.mark.slow
@pytest.mark.skipif(not IMDB_SAMPLE.exists(), reason="no shared IMDB sample")
def test_layer0_family_equals_original_real_reviews_both_models() -> None:
    from homog.models import load_tokenizer

    sources = {k: f"embedded:{k}" for k in ("smollm2-135m", "gemma3-270m")}
    toks = {k: load_tokenizer(s)[0] for k, s in sources.items()}
    raw = pd.read_json(IMDB_SAMPLE, lines=True)["text"].head(6).map(clean_text).tolist()
    cut = cut_texts(raw, budget_check(toks, dict.fromkeys(toks, 96)))
    df = family_texts([t for t in cut if t], toks)
    for source in sources.values():
        assert assert_family_equals_original(layer0(source, df)) >= 4 * 4
