"""The sink_bias intervention (homog.extract.edits, homog.metrics.attn_bias) on tiny random
models: the bias reaches the logits where it must and nowhere else, the sliding window and
causal mask are kept, -inf removes the sink from every head, the blockwise statistics equal
eager's under the bias, and beta = 0 reproduces the unchanged run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import extract_config, forward_edited

from homog.extract import Extractor, plan_samples
from homog.extract.edits import control_column
from homog.extract.local import run_extract
from homog.extract.plan import EncodedText
from homog.metrics.attn_bias import ColumnBias
from homog.metrics.attn_blockwise import choose_implementation
from homog.models import load_model


def synthetic_texts(lengths: list[int], seed: int = 0) -> list[EncodedText]:
    rng = np.random.default_rng(seed)
    return [
        EncodedText(i, "original", f"t{i}", rng.integers(1000, 40000, n), np.zeros(n, bool), False)
        for i, n in enumerate(lengths)
    ]


def eager_weights(lm, texts, intervention, cfg) -> list[torch.Tensor]:
    """Every attention layer's eager weights (B, H, n, n) of one forward under the edits."""
    lm.model.set_attn_implementation("eager")
    try:
        return forward_edited(lm, texts, intervention, cfg, lm.attn_modules, lambda out: out[1])
    finally:
        choose_implementation(lm.model, lm.attn_modules, True, "blockwise")


@pytest.fixture(scope="module")
def llama():
    return load_model("random:tiny-llama", device="cpu", attention=True)


@pytest.mark.parametrize("beta", [2.0, -3.0, -math.inf])
def test_bias_reaches_the_onset_layer_logits_only_towards_the_sink(llama, beta):
    """At the onset layer (its input is unchanged) the biased weights are the unbiased ones
    with the sink's column times e^beta, renormalised, on every row after the sink; the
    sink's own row and the layers before the onset are untouched."""
    texts = synthetic_texts([20, 13])
    cfg = extract_config(sink_bias_onset=2)
    plain = eager_weights(llama, texts, "none", cfg)
    biased = eager_weights(llama, texts, f"sink_bias:{beta}", cfg)
    torch.testing.assert_close(biased[0], plain[0], rtol=0, atol=0)  # layer 1: before onset
    w = plain[1].double()
    factor = torch.ones(w.shape[-1], dtype=torch.float64)
    factor[0] = math.exp(beta) if beta > -math.inf else 0.0
    want = w * factor
    want = want / want.sum(-1, keepdim=True)
    want[:, :, 0] = w[:, :, 0]  # the sink's own query keeps its key
    lengths = [20, 13]
    for b, n in enumerate(lengths):  # real rows (padding rows are never read)
        torch.testing.assert_close(
            biased[1][b, :, :n].double(), want[b, :, :n], rtol=1e-5, atol=1e-6
        )
    assert torch.isfinite(biased[1]).all()


def test_minus_inf_gives_no_attention_to_the_sink_in_any_head_after_the_onset(llama):
    texts = synthetic_texts([17, 9])
    cfg = extract_config(sink_bias_onset=1)
    weights = eager_weights(llama, texts, "sink_bias:-inf", cfg)
    assert len(weights) == 3
    for w in weights:
        assert (w[:, :, 1:, 0] == 0).all()  # every head, every query after the sink
        assert torch.allclose(w[:, :, 0, 0], torch.ones(()))  # the sink's row: itself
        assert torch.isfinite(w).all()


def test_control_biases_one_interior_token_per_text(llama):
    texts = synthetic_texts([21, 16])
    cfg = extract_config(sink_bias_onset=1)
    weights = eager_weights(llama, texts, "sink_bias_control:-inf", cfg)
    cols = [control_column(t, cfg.seed) for t in texts]
    assert all(1 <= c <= len(t.input_ids) - 2 for c, t in zip(cols, texts, strict=True))
    assert cols == [control_column(t, cfg.seed) for t in texts]  # seeded: the same each time
    for b, c in enumerate(cols):
        assert (weights[0][b, :, c + 1 :, c] == 0).all()
        assert (weights[0][b, :, c, c] > 0).all()  # its own query keeps it
        assert (weights[0][b, :, 1:, 0] > 0).all()  # the sink is not touched


def test_sliding_window_and_causal_mask_are_kept():
    """A sink outside a sliding layer's window stays masked under a positive bias, and no
    query sees a later key."""
    lm = load_model("random:tiny-gemma-softcap", device="cpu", attention=True)
    window = lm.model.config.sliding_window
    texts = synthetic_texts([24])
    weights = eager_weights(lm, texts, "sink_bias:4", extract_config(sink_bias_onset=1))
    for layer, w in enumerate(weights):
        assert (torch.triu(w[0], diagonal=1) == 0).all()  # causal
        sliding = lm.model.config.layer_types[layer] == "sliding_attention"
        if sliding:
            assert (w[0, :, window:, 0] == 0).all()
            assert (w[0, :, 1:window, 0] > 0).all()
        else:
            assert (w[0, :, 1:, 0] > 0).all()


@pytest.mark.parametrize("source", ["random:tiny-llama", "random:tiny-gemma-softcap"])
def test_blockwise_statistics_equal_eager_under_the_bias(source):
    """The blockwise path (SDPA or the soft-capped blocks, the sums with the bias) gives
    eager's statistics under the sink bias and its control."""
    lm = load_model(source, device="cpu", attention=True, attention_impl="blockwise")
    texts = synthetic_texts([40, 23, 9])
    plan = plan_samples(texts, 10, 2, 0, True)
    ivs = ("sink_bias:2", "sink_bias:-inf", "sink_bias_control:-2")

    def run(impl: str) -> dict:
        ex = Extractor(
            lm, extract_config(attention_impl=impl, attention_block=8, sink_bias_onset=1)
        )
        try:
            return {iv: ex.run_batch(texts, iv, plan) for iv in ("none", *ivs)}
        finally:
            ex.close()

    blockwise = run("blockwise")
    lm.model.set_attn_implementation("eager")
    try:
        eager = run("eager")
    finally:
        choose_implementation(lm.model, lm.attn_modules, True, "blockwise")
    for iv in ivs:
        got, want = blockwise[iv], eager[iv]
        np.testing.assert_allclose(got.heads, want.heads, rtol=1e-5, atol=1e-6, err_msg=iv)
        np.testing.assert_allclose(got.profile, want.profile, rtol=1e-5, atol=1e-7, err_msg=iv)
        np.testing.assert_allclose(got.metrics, want.metrics, rtol=1e-4, atol=1e-6, err_msg=iv)
        assert not np.allclose(got.heads, blockwise["none"].heads)  # the bias acted


def test_column_bias_mask_matches_a_dense_reference():
    """The float mask from each kind of input mask (None, boolean, float) equals a direct
    construction; forbidden entries stay forbidden."""
    n, low = 6, torch.finfo(torch.float32).min
    bias = ColumnBias(torch.tensor([0, 2]), -1.5)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = (j <= i) & (i - j < 4)
    want = torch.where(allowed, 0.0, low).expand(2, 1, n, n).clone()
    for b, c in enumerate([0, 2]):
        rows = (torch.arange(n) > c) & allowed[:, c]
        want[b, 0, rows, c] += -1.5
    for given in (None, allowed[None, None], torch.where(allowed, 0.0, low)[None, None]):
        got = bias.mask(given, n, n, 4, torch.float32, torch.device("cpu"))
        torch.testing.assert_close(got, want)


def test_beta_zero_reproduces_the_unchanged_run(llama, tmp_path):
    """sink_bias:0 (and its layer settings) gives the none run's layer_metrics to 1e-6
    relative, and adds attn_ctrl_token at every attention layer of every text (the control
    arm's dose 0); the run keeps its own name and id."""
    texts = pd.DataFrame(
        {
            "variant": "original",
            "sample_id": ["a", "b", "c"],
            "text": [
                "A quiet film about a loud family, and it works well.",
                "The plot is thin but the acting keeps it going to the end.",
                "I would not watch it again; the jokes land once and then they do not.",
            ],
        }
    )
    cfg = extract_config(sink_bias_onset=1)
    records = run_extract(
        "tiny",
        "random:tiny-llama",
        texts,
        cfg,
        ["none", "sink_bias:0"],
        tmp_path,
        loaded=llama,
        show_progress=False,
    )
    assert [r["intervention"] for r in records] == ["none", "sink_bias:0"]
    assert records[0]["run_id"] != records[1]["run_id"]
    keys = ["variant", "sample_id", "layer", "metric"]
    a = pd.read_parquet(tmp_path / "none/layer_metrics.parquet").sort_values(keys)
    b = pd.read_parquet(tmp_path / "sink_bias:0/layer_metrics.parquet").sort_values(keys)
    ctrl = b["metric"] == "attn_ctrl_token"
    assert ctrl.sum() == 3 * llama.n_layers and b.loc[ctrl, "value"].between(0, 1).all()
    assert "attn_ctrl_token" not in set(a["metric"])
    b = b[~ctrl]
    assert a[keys].to_numpy().tolist() == b[keys].to_numpy().tolist()
    np.testing.assert_allclose(b["value"], a["value"], rtol=1e-6, atol=1e-12)
