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


def _full_path_scores(f: FluencyScorer, texts: list[str]) -> np.ndarray:
    """The scores through the whole model's (B, T, vocab) logits, for comparison."""
    head = f._head
    f._head = None
    try:
        f._cache.clear()
        return f.score(texts)
    finally:
        f._head = head
        f._cache.clear()


TEXTS = [
    "As for the acting, it was far better than I had expected.",
    "Short.",
    "It is the score that carries the second half of this long and uneven film, surely.",
]


@pytest.mark.parametrize("source", ["random:tiny-llama", "random:tiny-gemma", "random:tiny-qwen"])
def test_head_on_real_tokens_only_equals_the_whole_model(source):
    f = FluencyScorer(source, batch_size=3)
    assert f.split_head  # the decoder + chunked head path passed its self-check
    f._head_rows = 5  # several chunks per batch
    split = f.score(TEXTS)
    assert np.allclose(split, _full_path_scores(f, TEXTS), atol=1e-5)


def test_final_logit_softcapping_is_applied_like_the_model():
    f = FluencyScorer("random:tiny-gemma", batch_size=3)
    cfg = f.loaded.model.config
    cfg.final_logit_softcapping = 0.5  # strong: every logit is capped
    assert f._setup_head() and f._softcap == 0.5
    capped = f.score(TEXTS)
    assert np.allclose(capped, _full_path_scores(f, TEXTS), atol=1e-5)
    cfg.final_logit_softcapping = None
    assert f._setup_head()
    assert not np.allclose(capped, f.score(TEXTS), atol=1e-3)  # the cap mattered


def test_a_head_that_disagrees_with_the_model_falls_back_to_the_whole_model():
    import torch

    f = FluencyScorer(TINY, batch_size=3)
    wrong = torch.nn.Linear(f.loaded.d_model, f.loaded.model.config.vocab_size, bias=False)
    f.loaded.model.get_output_embeddings = lambda: wrong
    assert not f._setup_head() and f._head is None
    assert np.allclose(f.score(TEXTS), _full_path_scores(f, TEXTS))


def test_dtype_auto_is_bfloat16_only_where_it_is_native(monkeypatch):
    import homog.synth.fluency as fl

    assert fl.resolve_dtype("float32") == "float32" and fl.resolve_dtype("bfloat16") == "bfloat16"
    monkeypatch.setattr(fl, "bf16_is_fast", lambda device: True)
    assert fl.resolve_dtype("auto") == "bfloat16"
    monkeypatch.setattr(fl, "bf16_is_fast", lambda device: False)
    assert fl.resolve_dtype("auto") == "float32"
    with pytest.raises(ValueError, match="auto, float32 or bfloat16, got 'float16'"):
        fl.resolve_dtype("float16")


def test_bfloat16_scores_follow_float32():
    f32 = FluencyScorer(TINY, batch_size=3)
    f16 = FluencyScorer(TINY, batch_size=3, dtype="bfloat16")
    assert (
        f16.loaded.model.dtype.is_floating_point and str(f16.loaded.model.dtype) == "torch.bfloat16"
    )
    assert f16.split_head and f16.usage()["dtype"] == "bfloat16"
    a, b = f32.score(TEXTS), f16.score(TEXTS)
    assert np.all(np.isfinite(b)) and np.allclose(a, b, atol=0.05)
    assert not np.array_equal(a, b)  # it did run in bfloat16


def test_batches_do_not_depend_on_the_hash_seed():
    """The texts of a batch are the same in every run: a score depends (at rounding level, in
    bfloat16) on the batch it shares, and a set's order follows PYTHONHASHSEED."""
    import os
    import subprocess
    import sys

    code = (
        "from homog.synth.fluency import FluencyScorer\n"
        "s = FluencyScorer.__new__(FluencyScorer)\n"
        "s._cache, s.batch_size = {}, 3\n"
        "s._used = {'texts': 0, 'tokens': 0, 'wall': 0.0, 'cpu': 0.0}\n"
        "s._length = lambda t: len(t.split())\n"
        "batches = []\n"
        "s._score_batch = lambda b: batches.append(b) or [0.0] * len(b)\n"
        "s.score([f'text number {i}' for i in range(12)] + ['a longer text number one'])\n"
        "print(batches)\n"
    )

    def batches(seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return done.stdout

    first = batches("1")
    assert all(batches(seed) == first for seed in ("2", "3", "4"))
