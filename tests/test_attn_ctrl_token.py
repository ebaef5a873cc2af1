"""attn_ctrl_token: the attention the sink_bias control's token receives, measured in every
run of the sink_bias family (eager and blockwise alike) and in no other run."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import extract_config
from test_sink_bias import eager_weights, synthetic_texts

from homog.extract import Extractor, plan_samples
from homog.extract.edits import control_column
from homog.metrics.attn_blockwise import choose_implementation
from homog.models import load_model

LENGTHS = [30, 17, 9]
IVS = ("sink_bias:0", "sink_bias:2", "sink_bias_control:2", "sink_bias_control:-inf")


@pytest.fixture(scope="module")
def llama():
    return load_model("random:tiny-llama", device="cpu", attention=True, attention_impl="blockwise")


def dense_reference(lm, texts, iv, cfg) -> np.ndarray:
    """(B, L) (1/(n-c)) sum_(i>=c) A_ic, mean over heads, from eager output_attentions."""
    weights = eager_weights(lm, texts, iv, cfg)
    cols = [control_column(t, cfg.seed) for t in texts]
    out = np.zeros((len(texts), len(weights)))
    for layer, w in enumerate(weights):
        for b, (t, c) in enumerate(zip(texts, cols, strict=True)):
            n = len(t.input_ids)
            a = w[b, :, c:n, c].double()  # (H, n - c): the queries that see token c
            out[b, layer] = float((a.sum(-1) / (n - c)).mean())
    return out


def run(lm, impl: str, texts, ivs) -> dict:
    cfg = extract_config(attention_impl=impl, attention_block=8, sink_bias_onset=1)
    plan = plan_samples(texts, 10, 2, 0, True)
    if impl == "eager":
        lm.model.set_attn_implementation("eager")
    ex = Extractor(lm, cfg)
    try:
        return {iv: ex.run_batch(texts, iv, plan) for iv in ivs}
    finally:
        ex.close()
        choose_implementation(lm.model, lm.attn_modules, True, "blockwise")


@pytest.mark.parametrize("impl", ["blockwise", "eager"])
def test_attn_ctrl_token_equals_a_dense_computation(llama, impl):
    texts = synthetic_texts(LENGTHS, seed=3)
    cfg = extract_config(sink_bias_onset=1)
    got = run(llama, impl, texts, ("none", *IVS))
    assert got["none"].ctrl_attn is None  # measured in the sink_bias family only
    for iv in IVS:
        want = dense_reference(llama, texts, iv, cfg)
        assert got[iv].ctrl_attn.shape == want.shape
        np.testing.assert_allclose(got[iv].ctrl_attn, want, rtol=1e-5, atol=1e-6, err_msg=iv)
    # the control's bias lands on its own token: it gains attention from dose 0 at every
    # layer from the onset on, and -inf takes all but its own query's away
    zero = got["sink_bias:0"].ctrl_attn
    assert (got["sink_bias_control:2"].ctrl_attn > zero + 1e-3).all()
    assert (got["sink_bias_control:-inf"].ctrl_attn < zero).all()
