"""The model registry: key resolution, random presets, device and path errors, the cache."""

from __future__ import annotations

import pytest
import torch

from homog.config import as_params
from homog.errors import HomogError
from homog.model_presets import RANDOM_PRESETS, count_params
from homog.models import (
    load_model,
    random_config,
    resolve_device,
    resolve_source,
)
from homog.models_gguf import embedded_tokenizer

MODELS = {"smollm2-135m": {"source": "embedded:smollm2-135m"}, "plain": "hf:some/model"}


def test_resolve_source():
    assert resolve_source("smollm2-135m", MODELS) == "embedded:smollm2-135m"
    assert resolve_source("plain", MODELS) == "hf:some/model"
    assert resolve_source("random:tiny-llama", MODELS) == "random:tiny-llama"
    with pytest.raises(HomogError, match=r"unknown model key 'gpt5'.*plain, smollm2-135m"):
        resolve_source("gpt5", MODELS)
    with pytest.raises(HomogError, match="needs a 'source:'"):
        resolve_source("broken", {"broken": {"path": "x"}})
    # the typed params: key -> source strings, or key -> ModelEntry
    params = as_params({"models": MODELS})
    for models in (params.model_sources(), params.models):
        assert resolve_source("smollm2-135m", models) == "embedded:smollm2-135m"
        assert resolve_source("plain", models) == "hf:some/model"


def test_resolve_device():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(HomogError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(HomogError, match="CUDA is not available"):
            resolve_device("cuda")


@pytest.mark.parametrize(
    "preset", ["tiny-llama", "tiny-gemma", "tiny-qwen", "tiny-qwen3", "tiny-gemma-softcap"]
)
def test_tiny_presets_load_with_each_attention(preset):
    from homog.metrics.attn_blockwise import ATTENTION_FUNCTION

    lm = load_model(f"random:{preset}", device="cpu", attention=True)
    spec = RANDOM_PRESETS[preset]
    assert lm.n_layers == spec["num_hidden_layers"] == len(lm.layers) == len(lm.attn_modules)
    assert lm.d_model == spec["hidden_size"] and lm.n_heads == spec["num_attention_heads"]
    # attention statistics blockwise by default (SDPA forward), eager on request
    assert lm.model.config._attn_implementation == ATTENTION_FUNCTION
    assert lm.info["attn_implementation"] == ATTENTION_FUNCTION
    assert lm.tokenizer.padding_side == "right"
    eager = load_model(f"random:{preset}", device="cpu", attention=True, attention_impl="eager")
    assert eager.model.config._attn_implementation == eager.info["attn_implementation"] == "eager"
    # the same seed gives the same weights; SDPA is used without attention statistics
    again = load_model(f"random:{preset}", device="cpu", attention=False)
    assert again.model.config._attn_implementation == "sdpa"
    assert torch.equal(lm.embed.weight, again.embed.weight)


def test_real_size_presets():
    vocab = len(embedded_tokenizer())
    n = count_params(random_config("llama-8b", vocab))
    assert 7.9e9 < n < 8.1e9  # Meta-Llama-3-8B has 8.03B parameters
    with pytest.raises(HomogError, match="needs a GPU"):
        load_model("random:llama-8b", device="cpu")
    meta = load_model("random:llama-8b", device="meta")  # shapes only, no memory
    assert (meta.n_layers, meta.d_model, meta.n_heads) == (32, 4096, 32)
    with pytest.raises(HomogError, match="unknown random preset 'huge'.*tiny-llama"):
        load_model("random:huge", device="cpu")


def test_missing_path_and_unknown_embedded(tmp_path):
    with pytest.raises(HomogError, match="does not exist"):
        load_model(str(tmp_path / "nope"), device="cpu")
    with pytest.raises(HomogError, match="unknown embedded model"):
        load_model("embedded:gpt2", device="cpu")
    with pytest.raises(HomogError, match="unknown dtype"):
        load_model("random:tiny-llama", device="cpu", dtype="int8")


def test_embedded_cache_is_reused(tmp_path, monkeypatch):
    """A converted model is loaded from the cache dir ($HOMOG_CACHE), not re-converted."""
    from homog import models_gguf

    first = models_gguf.embedded_dir("smollm2-135m")  # converts once (or reuses the user cache)
    assert (first / "model.safetensors").exists() and (first / "tokenizer.json").exists()
    monkeypatch.setattr(models_gguf, "_embedded_gguf", lambda name: pytest.fail("re-converted"))
    assert models_gguf.embedded_dir("smollm2-135m") == first
    monkeypatch.setenv("HOMOG_CACHE", str(tmp_path))
    assert models_gguf.cache_dir() == tmp_path


def test_hf_revision_parsing_loading_and_run_id(tmp_path, tiny):
    """hf:<id>@<revision>: the revision is parsed off, passed to from_pretrained (a local
    directory ignores it), recorded in the model info, and changes the run id."""
    from homog.config import ExtractConfig
    from homog.extract.plan import RunSpec
    from homog.models import parse_source, split_revision

    assert split_revision("EleutherAI/pythia-160m@step1000") == (
        "EleutherAI/pythia-160m",
        "step1000",
    )
    assert split_revision("EleutherAI/pythia-160m") == ("EleutherAI/pythia-160m", None)
    assert split_revision("/data/run@2/model") == ("/data/run@2/model", None)  # a path
    with pytest.raises(HomogError, match="non-empty"):
        split_revision("EleutherAI/pythia-160m@")
    assert parse_source("hf:org/m@v1") == ("hf", "org/m@v1")

    model_dir = tmp_path / "tiny"
    tiny.model.save_pretrained(model_dir)
    tiny.tokenizer.save_pretrained(model_dir)
    plain = load_model(f"hf:{model_dir}", device="cpu", attention=False)
    pinned = load_model(f"hf:{model_dir}@main", device="cpu", attention=False)
    assert pinned.info["revision"] == "main" and "revision" not in plain.info
    assert pinned.n_layers == plain.n_layers
    cfg = ExtractConfig()
    ids = {
        RunSpec("m", f"hf:{model_dir}{rev}", "none", cfg, "t").run_id
        for rev in ("", "@main", "@step1000")
    }
    assert len(ids) == 3
