"""The fluency scorer (mean token log-probability under a causal LM) and its summaries."""

from __future__ import annotations

import numpy as np
import pytest

from homog.synth.fluency import FluencyScorer, summary

TINY = "random:tiny-llama"


@pytest.fixture(scope="module")
def scorer() -> FluencyScorer:
    return FluencyScorer(TINY, batch_size=2)


def test_score_is_the_mean_token_log_probability(scorer):
    import torch

    text = "The crew filmed the last chase in a quarry."
    ids = [scorer._start, *scorer.tokenizer(text, add_special_tokens=False)["input_ids"]]
    with torch.no_grad():
        logits = scorer.loaded.model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(ids[1:])[:, None])
    assert scorer.score([text])[0] == pytest.approx(float(logp.mean()), abs=1e-4)


def test_score_does_not_depend_on_the_batch(scorer):
    texts = ["Short one.", "A much longer sentence that needs padding in its batch, surely.", "Mid"]
    together = scorer.score(texts)
    alone = [FluencyScorer.score.__get__(scorer)([t])[0] for t in texts]
    scorer._cache.clear()
    fresh = np.array([scorer.score([t])[0] for t in texts])
    assert np.allclose(together, alone) and np.allclose(together, fresh, atol=1e-4)
    d = scorer.delta(texts[:1], texts[1:2])
    assert d[0] == pytest.approx(together[0] - together[1])


def test_summary():
    s = summary([-1.0, 0.0, 1.0, float("nan")])
    assert s["n"] == 3 and s["median"] == 0.0 and s["mean"] == 0.0
    assert summary([])["n"] == 0


def test_usage_counts_each_distinct_text_once():
    f = FluencyScorer(TINY, batch_size=2)
    texts = ["The crew filmed it.", "A quarry.", "The crew filmed it.", "A quarry at dusk, then."]
    f.score(texts)
    f.score(texts[:2])  # cached: no new work
    ids = [f.tokenizer(t, add_special_tokens=False)["input_ids"] for t in dict.fromkeys(texts)]
    used = f.usage()
    assert used["model"] == TINY and used["texts"] == 3
    assert used["tokens"] == sum(len(x) + 1 for x in ids)  # + the start token
    assert used["cpu"] >= 0 and used["wall"] > 0
