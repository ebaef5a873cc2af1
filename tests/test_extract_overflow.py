"""Issue 16.6: activations beyond the float16 range (gemma3-270m's massive activations
exceed 65,504) are stored without overflow, and an overflow of the stored dtype is a clean
error at the layer where it arises, never a crash at the merge."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TINY, extract_config
from test_extract import make_texts, read_outputs, run_tiny

from homog.errors import HomogError
from homog.extract import Extractor, encode_texts, plan_samples
from homog.models import load_model

F16_MAX = float(torch.finfo(torch.float16).max)


@pytest.fixture(scope="module")
def loud():
    """The tiny random LLaMA with block 1's MLP output scaled so the residual stream of
    hidden layers 1..L-1 exceeds the float16 range (the final norm brings it back)."""
    lm = load_model(TINY, device="cpu", attention=True)
    with torch.no_grad():
        lm.layers[0].mlp.down_proj.weight.mul_(1e8)
    return lm


def test_activations_beyond_float16_are_stored(loud, tmp_path):
    texts = make_texts(5)
    (rec,) = run_tiny(loud, texts, extract_config(sample_tokens=40), ["none"], tmp_path)
    out = read_outputs(tmp_path / "none")
    vec = out["vectors"]
    big = max(float(np.abs(v).max()) for k, v in vec.items() if k.startswith("tokens__"))
    assert big > 10 * F16_MAX  # the case that crashed: now kept exactly, in float32
    for k, v in vec.items():
        if v.dtype.kind == "f":
            assert v.dtype == np.float32 and np.isfinite(v).all(), k
    assert out["dataset_spectra"].value.notna().all()
    lm = out["layer_metrics"].set_index(["variant", "sample_id", "layer", "metric"])["value"]
    assert lm.xs(1, level="layer").xs("act_top1", level="metric").min() > F16_MAX
    assert rec["n_texts"] == len(texts)


def test_overflow_of_the_stored_dtype_is_a_clean_error(loud):
    texts = make_texts(2)
    enc = encode_texts(loud.tokenizer, texts, 64)
    plan = plan_samples(enc, 1000, 10, 0, True)
    ex = Extractor(loud, extract_config())
    ex.vec_dtype = torch.float16  # what homog stored before: fails where it arises
    try:
        with pytest.raises(HomogError, match=r"at layer 1 overflow float16"):
            ex.run_batch(enc, "none", plan)
    finally:
        ex.close()


def test_old_shards_are_a_clean_error(tiny, tmp_path):
    """A work dir holding shards of another metric set (an older homog) is refused by name."""
    from homog.extract.result import BatchResult

    texts = make_texts(3)
    enc = encode_texts(tiny.tokenizer, texts, 64)
    plan = plan_samples(enc, 10, 2, 0, True)
    ex = Extractor(tiny, extract_config())
    try:
        res = ex.run_batch(enc, "none", plan)
    finally:
        ex.close()
    old = BatchResult(**{**res.__dict__, "metric_names": None, "metrics": res.metrics[..., :7]})
    with pytest.raises(HomogError, match="different metric sets"):
        BatchResult.concat([res, old])


def test_too_few_tokens_after_sink_removal_is_nan_with_a_reason(tiny, tmp_path):
    """A one-token text has no token left once its first token is removed: NaN no_sink
    metrics and a run.json warning naming the text, never an error that stops the run."""
    texts = make_texts(3)
    texts.loc[0, "text"] = "great"
    name = f"{texts.loc[0, 'variant']}/{texts.loc[0, 'sample_id']}"
    (rec,) = run_tiny(tiny, texts, extract_config(), ["none"], tmp_path)
    lm = read_outputs(tmp_path / "none")["layer_metrics"]
    one = lm[(lm.sample_id == texts.loc[0, "sample_id"]) & (lm.variant == texts.loc[0, "variant"])]
    one = one.set_index(["layer", "metric"])["value"]
    assert one.xs("erank__no_sink", level="metric").isna().all()
    assert (one.xs("n_removed__no_sink", level="metric") == 1).all()
    assert one.xs("erank", level="metric").notna().all()
    assert any("no_sink metrics are NaN" in w and name in w for w in rec["warnings"])
    others = lm[lm.sample_id != texts.loc[0, "sample_id"]]
    assert others[others.metric == "erank__no_sink"].value.notna().all()
