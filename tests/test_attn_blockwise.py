"""The blockwise attention statistics (homog.metrics.attn_blockwise) against eager weights.

Equality is checked in float32 as: relative 1e-5 on every statistic, plus an absolute 1e-8
on the attention masses (attn_first, attn_last, profile, attn_massive; shares of one) and
1e-6 nats on attn_entropy (float32's own error there, in eager as in blockwise, is about
5e-7 nats against a float64 computation, so a relative bound alone fails on heads whose
rows are nearly one-hot, entropy ~0).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from conftest import extract_config, largest_tensor_mode

from homog.config import ExtractConfig, parse_params
from homog.errors import HomogError
from homog.extract import Extractor, plan_samples
from homog.extract.plan import EncodedText
from homog.metrics.attention import attention_stats, stats_from_sums
from homog.metrics.attn_blockwise import (
    ATTENTION_FUNCTION,
    DEFAULT_BLOCK,
    SinkHandle,
    attention_sums,
    block_rows,
    choose_implementation,
    unsupported_reason,
)
from homog.models import load_model

TEXTS = [
    "The film opens slowly, but the last hour is as tense as anything I have seen this year.",
    "Dull.",
    "I expected more from the director; the cast does what it can with a thin script.",
]
ATOL = {"attn_entropy": 1e-6, "sink_rate": 0.0}  # others: 1e-8 (masses)


def assert_stats_equal(got: dict, want: dict, where: object) -> None:
    assert set(got) == set(want)
    for name, value in want.items():
        np.testing.assert_allclose(
            got[name].double().numpy(),
            value.double().numpy(),
            rtol=1e-5,
            atol=ATOL.get(name, 1e-8),
            err_msg=f"{name} at {where}",
        )


def dense_weights(q, k, lengths, scaling, softcap=None, window=None):
    """Float64 softmax(q k^T * scaling + mask) by the textbook formula (GQA by repeat)."""
    g = q.shape[1] // k.shape[1]
    logits = q.double() @ k.double().repeat_interleave(g, 1).transpose(-1, -2) * scaling
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    n = q.shape[2]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = (j <= i)[None] & (j[None] < lengths[:, None, None])
    if window is not None:
        allowed = allowed & (i - j < window)[None]
    weights = torch.softmax(logits.masked_fill(~allowed[:, None], -math.inf), -1)
    return torch.nan_to_num(weights)  # fully masked padding rows (window): never counted


@pytest.mark.parametrize(
    "softcap, window, block",
    [(None, None, 7), (None, None, 64), (3.0, None, 5), (None, 6, 4), (2.0, 9, 100)],
)
def test_block_reduction_equals_dense_weights(softcap, window, block):
    """attention_sums in blocks (n = 23 > block, or one block) == the dense weights' stats."""
    gen = torch.Generator().manual_seed(0)
    b, h, kv, n, d = 3, 6, 2, 23, 8
    q = torch.randn(b, h, n, d, generator=gen) * 2
    k = torch.randn(b, kv, n, d, generator=gen) * 2
    lengths = torch.tensor([23, 11, 1])
    kw = {"sink_epsilon": 0.2, "positions": torch.tensor([5, 0, 0])}
    want = attention_stats(dense_weights(q, k, lengths, 0.3, softcap, window), lengths, **kw)
    sums = attention_sums(
        q, k, lengths, scaling=0.3, softcap=softcap, sliding_window=window, block=block
    )
    assert sums[0].shape == (b, h, n) and sums[1].shape == (b, h)
    assert_stats_equal(stats_from_sums(*sums, lengths, **kw), want, (softcap, window, block))
    if softcap is not None:  # the cap matters here: leaving it out changes the result
        plain = attention_sums(q, k, lengths, scaling=0.3, sliding_window=window, block=block)
        assert (plain[1] - sums[1]).abs().max() > 1e-2


@functools.cache
def blockwise_model(source: str):
    """The model loaded for blockwise statistics, once per test session."""
    return load_model(source, device="cpu", attention=True, attention_impl="blockwise")


@contextmanager
def eager(lm):
    """The same model (same weights) switched to eager attention for the block."""
    lm.model.set_attn_implementation("eager")
    try:
        yield lm
    finally:
        choose_implementation(lm.model, lm.attn_modules, True, "blockwise")


def encode(lm, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    enc = lm.tokenizer(texts, return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]


def random_batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    n = max(lengths)
    ids = torch.tensor(rng.integers(1000, 40000, (len(lengths), n)))
    mask = (torch.arange(n)[None] < torch.tensor(lengths)[:, None]).long()
    return ids, mask


@pytest.mark.parametrize(
    "source",
    [
        "random:tiny-llama",
        "random:tiny-gemma",  # sliding window 64 < 90 tokens
        "random:tiny-gemma-softcap",  # soft-capping, window 8
        "random:tiny-qwen",
        "random:tiny-qwen3",  # q_norm / k_norm
        # ~15 s of CPU each (two forward passes with eager weights of 30 / 18 layers)
        pytest.param("embedded:smollm2-135m", marks=pytest.mark.slow),
        pytest.param("embedded:gemma3-270m", marks=pytest.mark.slow),
    ],
)
def test_blockwise_equals_eager_weights(source):
    """Per layer, the statistics from the sink's blockwise sums == attention_stats of the
    eager model's weights (``output_attentions``), on a right-padded batch.

    The blockwise model is run with output_attentions too, so its layers' outputs come from
    eager maths and both models see the same hidden states; the test then isolates the
    statistics. (With SDPA's output the hidden states differ from eager's by float32
    rounding; test_extractor_blockwise_equals_eager covers that path.)"""
    blockwise = blockwise_model(source)
    assert blockwise.model.config._attn_implementation == ATTENTION_FUNCTION
    if source.startswith("embedded:"):
        ids, mask = encode(blockwise, TEXTS)
    else:
        ids, mask = random_batch([90, 37, 5])
    lengths = mask.sum(1)
    assert lengths.min() < ids.shape[1]  # padding in the batch
    sums: dict[int, tuple] = {}
    handles = [
        SinkHandle(
            a,
            lambda q, k, i=i, **kw: sums.__setitem__(
                i, attention_sums(q, k, lengths, block=8, **kw)
            ),
        )
        for i, a in enumerate(blockwise.attn_modules)
    ]
    try:
        with torch.inference_mode():
            args = dict(input_ids=ids, attention_mask=mask, output_attentions=True, use_cache=False)
            got = blockwise.decoder(**args)
        with eager(blockwise) as lm, torch.inference_mode():
            assert lm.model.config._attn_implementation == "eager"
            want = lm.decoder(**args)
    finally:
        for h in handles:
            h.remove()
    assert sorted(sums) == list(range(blockwise.n_layers))
    positions = torch.clamp(lengths - 2, min=0)  # a token inside every text
    kw = {"sink_epsilon": 0.3, "positions": positions}
    for layer in range(blockwise.n_layers):
        stats = stats_from_sums(*sums[layer], lengths, **kw)
        assert_stats_equal(stats, attention_stats(want.attentions[layer], lengths, **kw), layer)
        # the blockwise model's own weights (eager maths, in blocks) are eager's weights
        real = (torch.arange(ids.shape[1])[None] < lengths[:, None])[:, None, :, None]
        np.testing.assert_allclose(
            torch.where(real, got.attentions[layer], 0).numpy(),
            torch.where(real, want.attentions[layer], 0).numpy(),
            atol=1e-5,
        )


def synthetic_texts(lengths: list[int], seed: int = 0) -> list[EncodedText]:
    rng = np.random.default_rng(seed)
    return [
        EncodedText(i, "v", f"t{i}", rng.integers(1000, 40000, n), np.zeros(n, bool), False)
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("source", ["random:tiny-llama", "random:tiny-gemma", "random:tiny-qwen3"])
def test_extractor_blockwise_equals_eager(source):
    """The whole engine path (SDPA forward, sinks, block 16 < 90 tokens) against the eager
    engine: every attention statistic, under none and the position interventions."""
    texts = synthetic_texts([90, 37, 5])
    plan = plan_samples(texts, 10, 2, 0, True)
    lm = blockwise_model(source)

    def run(impl: str) -> dict:
        ex = Extractor(lm, extract_config(attention_impl=impl, attention_block=16))
        try:
            return {iv: ex.run_batch(texts, iv, plan) for iv in ("none", "shuffle_pos")}
        finally:
            ex.close()

    out = {"blockwise": run("blockwise")}
    with eager(lm):
        out["eager"] = run("eager")
    for iv in ("none", "shuffle_pos"):
        got, want = out["blockwise"][iv], out["eager"][iv]
        np.testing.assert_allclose(got.heads, want.heads, rtol=1e-5, atol=1e-6, err_msg=iv)
        np.testing.assert_allclose(got.profile, want.profile, rtol=1e-5, atol=1e-8, err_msg=iv)
        np.testing.assert_allclose(got.text_attn, want.text_attn, rtol=1e-5, atol=1e-8)
    # the interventions reach the attention statistics (position ids enter RoPE's q and k)
    assert not np.allclose(out["blockwise"]["none"].heads, out["blockwise"]["shuffle_pos"].heads)


def test_forward_is_sdpa_and_never_holds_heads_n_n(monkeypatch):
    """Blockwise: every layer's output comes from torch's SDPA, the hidden states equal a
    plain SDPA model's, and no tensor of (heads x n x n) elements is ever made."""
    source, n = "random:tiny-llama", 96
    lm = blockwise_model(source)
    plain = load_model(source, device="cpu", attention=False)
    assert lm.model.config._attn_implementation == ATTENTION_FUNCTION
    assert plain.model.config._attn_implementation == "sdpa"
    assert lm.info["attn_implementation"] == ATTENTION_FUNCTION
    texts = synthetic_texts([n])
    plan = plan_samples(texts, 0, 0, 0, True)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    ex = Extractor(lm, extract_config(attention_block=16))
    mode = largest_tensor_mode()
    try:
        with mode:
            result = ex.run_batch(texts, "none", plan)
    finally:
        ex.close()
    assert len(calls) == lm.n_layers
    assert np.isfinite(result.heads).all()
    # the biggest tensors made: the MLP's (n x 128), HF's (n x n) mask, (heads x 16 x n)
    assert 0 < mode.largest <= n * 128 < lm.n_heads * n * n / 2
    ids = torch.tensor(np.stack([t.input_ids for t in texts]))
    with torch.inference_mode():
        a = lm.decoder(input_ids=ids, use_cache=False).last_hidden_state
        b = plain.decoder(input_ids=ids, use_cache=False).last_hidden_state
    assert torch.equal(a, b)


def test_unknown_architecture_falls_back_to_eager(capsys):
    """An attention module the blockwise path does not know: eager, with a one-line
    warning naming the model class and the module."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "mistral",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=100,
    )
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    modules = [layer.self_attn for layer in model.model.layers]
    assert "MistralAttention" in unsupported_reason(modules)
    assert choose_implementation(model, modules, True, "blockwise") == "eager"
    assert model.config._attn_implementation == "eager"
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "MistralForCausalLM" in err and "MistralAttention" in err and "eager" in err


def test_options_and_errors():
    cfg = ExtractConfig()
    assert cfg.attention_impl == "blockwise" and cfg.attention_block == "auto"
    # results are equal either way: the run id does not change, run.json records them
    other = dataclasses.replace(cfg, attention_impl="eager", attention_block=64)
    assert other.result_keys() == cfg.result_keys()
    assert other.run_options()["attention_impl"] == "eager"
    assert other.run_options()["attention_block"] == 64
    with pytest.raises(HomogError, match="attention_block must be >= 1"):
        ExtractConfig(attention_block=0)
    # auto: cache-sized blocks on a CPU, big ones on a GPU; a number is taken as it is
    assert block_rows("auto", "cpu") == 32 and block_rows("auto", torch.device("cpu")) == 32
    assert block_rows("auto", "cuda:0") == DEFAULT_BLOCK == 256
    assert block_rows(64, "cuda") == 64 and block_rows(7, "cpu") == 7
    params = parse_params({"extract": {"attention_block": "auto"}})
    assert params.extract.attention_block == "auto"
    assert parse_params({"extract": {"attention_block": 48}}).extract.attention_block == 48
    with pytest.raises(HomogError, match=r"attention_block.*'fast'"):
        parse_params({"extract": {"attention_block": "fast"}})
    with pytest.raises(HomogError, match="unknown attention_impl"):
        load_model("random:tiny-llama", device="cpu", attention_impl="flash")
    # a model loaded without attention cannot give attention statistics
    lm = load_model("random:tiny-llama", device="cpu", attention=False)
    with pytest.raises(HomogError, match="attention=True"):
        Extractor(lm, extract_config())
    # ... but runs the hidden-state metrics, and a blockwise model runs them without sinks
    lm = load_model("random:tiny-llama", device="cpu", attention=True)
    ex = Extractor(lm, extract_config(attention=False))
    try:
        texts = synthetic_texts([12, 7])
        result = ex.run_batch(texts, "zero_pos", plan_samples(texts, 4, 1, 0, True))
        assert result.heads is None and np.isfinite(result.metrics).all()
    finally:
        ex.close()
    assert all(not hasattr(a, "_homog_attention_sink") for a in lm.attn_modules)
