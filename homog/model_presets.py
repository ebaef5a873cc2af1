"""The random-initialised architectures behind ``random:<preset>`` model sources.

Tiny presets (``tiny-llama``, ``tiny-gemma``, ``tiny-qwen``, ``tiny-qwen3``,
``tiny-gemma-softcap``) keep tests fast; real-size ones
(``llama-8b``, ``gemma-7b``, ``qwen2.5-7b``) follow the published configs and stand in for
models that cannot be downloaded, in GPU benchmarks (speed does not depend on weight values).
``random_config`` turns a preset into a transformers config, ``count_params`` sizes it without
memory, and ``build_random`` builds and seeds the weights (for ``homog.models.load_model``).
"""

from __future__ import annotations

from typing import Any

from homog.config import DTYPES
from homog.errors import HomogError
from homog.validate import env_flag

# Random models above this size are refused on the CPU (minutes to initialise, tens of GiB).
CPU_MAX_RANDOM_PARAMS = 2_000_000_000

# Random-initialised architectures. Real sizes follow the published configs (speed does not
# depend on weight values, so these stand in for models that cannot be downloaded here).
_TINY: dict[str, Any] = {  # the sizes the tiny test presets share
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "max_position_embeddings": 512,
}
RANDOM_PRESETS: dict[str, dict[str, Any]] = {
    "tiny-llama": {"model_type": "llama", **_TINY, "num_key_value_heads": 2},
    "tiny-gemma": {
        "model_type": "gemma3_text",
        **_TINY,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "sliding_window": 64,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    },
    "tiny-qwen": {"model_type": "qwen2", **_TINY, "num_key_value_heads": 2},
    # q_norm / k_norm before RoPE (Qwen 3)
    "tiny-qwen3": {"model_type": "qwen3", **_TINY, "num_key_value_heads": 2, "head_dim": 16},
    # attention logit soft-capping and a short sliding window (Gemma 2 style, in Gemma 3
    # code); larger initial weights so logits reach the cap (tests of the blockwise path)
    "tiny-gemma-softcap": {
        "model_type": "gemma3_text",
        **_TINY,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "attn_logit_softcapping": 2.0,
        "initializer_range": 0.2,
    },
    "llama-8b": {  # Meta-Llama-3-8B
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
    },
    "gemma-7b": {  # google/gemma-7b
        "model_type": "gemma",
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "vocab_size": 256000,
    },
    "qwen2.5-7b": {  # Qwen/Qwen2.5-7B
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
}


def random_config(preset: str, vocab_size: int) -> Any:
    """A transformers config for a random preset (HomogError listing presets when unknown)."""
    from transformers import AutoConfig

    if preset not in RANDOM_PRESETS:
        raise HomogError(
            f"unknown random preset {preset!r}; known: {', '.join(sorted(RANDOM_PRESETS))}"
        )
    spec = dict(RANDOM_PRESETS[preset])
    model_type = spec.pop("model_type")
    spec.setdefault("vocab_size", vocab_size)
    # Random models use the SmolLM2 tokenizer: ids must stay below its vocabulary.
    spec["vocab_size"] = max(spec["vocab_size"], vocab_size)
    spec.setdefault("tie_word_embeddings", True)
    return AutoConfig.for_model(model_type, **spec)


def count_params(config: Any) -> int:
    """Parameter count of a config's model, built on the meta device (no memory used)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def build_random(
    preset: str, tokenizer: Any, dtype: str, device: str, seed: int, attn_impl: str
) -> Any:
    """The ``random:<preset>`` model with weights drawn from ``seed`` (see the comment below
    for which device draws them); HomogError for a real-size preset on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    config = random_config(preset, len(tokenizer))
    n_params = count_params(config)
    allow_big = env_flag("HOMOG_ALLOW_BIG_CPU")  # read every time: a bad value is named
    if device == "cpu" and n_params > CPU_MAX_RANDOM_PARAMS and not allow_big:
        raise HomogError(
            f"random:{preset} has {n_params / 1e9:.1f}B parameters: it needs a GPU "
            "(--device cuda); on the CPU only its shapes can be built (device='meta'), "
            "or set HOMOG_ALLOW_BIG_CPU=1 to build it in RAM anyway"
        )
    torch.manual_seed(seed)  # same weights on every load
    # The CPU's and CUDA's generators draw different numbers from one seed, and a draw in
    # bfloat16 is not the float32 draw rounded; so a model the CPU can hold is drawn there in
    # float32, then cast and moved: one seed gives the same weights (rounded to the dtype) on
    # every device. A real-size preset (GPU only) is drawn on its device in its dtype.
    if n_params <= CPU_MAX_RANDOM_PARAMS and device != "meta":
        with torch.device("cpu"):
            model = AutoModelForCausalLM.from_config(
                config, dtype=torch.float32, attn_implementation=attn_impl
            )
        model.config.dtype = torch_dtype(dtype)  # what from_config in that dtype records
        return model.to(device=device, dtype=torch_dtype(dtype))
    with torch.device(device):
        return AutoModelForCausalLM.from_config(
            config, dtype=torch_dtype(dtype), attn_implementation=attn_impl
        )


def torch_dtype(dtype: str) -> Any:
    import torch

    if dtype not in DTYPES:
        raise HomogError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return getattr(torch, dtype)
