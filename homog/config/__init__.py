"""The typed pipeline parameters: one frozen dataclass per ``params.yaml`` section.

This module is the only place where parameter defaults live. ``load_config`` reads
``params.yaml`` and checks it before any work starts: an unknown key in any section is an
error naming the valid keys, and a value of the wrong type names the key, the value and the
expected type (``extract.center: "false"`` is a string, not a boolean, and is refused rather
than read as true). Range checks (``max_tokens >= 1``, ``0 < ci < 1``) live in each
section's ``__post_init__``, so a config built in code is checked the same way.

Sections that depend on the top-level ``seed`` (extract, mauve) carry it as a field that the
loader fills in; it is not a key of the section itself.

Stage functions accept a ``Params`` or a raw mapping (tests and notebooks pass dicts);
``as_params`` turns the latter into the former with the same checks.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

# sections in their own modules (import them from there)
from homog.config.mauve import MauveConfig, RayConfig
from homog.config.posenc import PosencConfig
from homog.config.probe import ProbeConfig, ZeroShotPrompt
from homog.config.stats import StatsConfig
from homog.config.synth import SynthConfig
from homog.errors import HomogError
from homog.interventions import PLAIN, check_names, grid, parse
from homog.typed import coerce, section, value_name
from homog.validate import (
    DuplicateKeyError,
    ParamsValueError,
    check_model_keys,
    check_seed,
    load_yaml,
)
from homog.validate import check as _check

DEFAULT_PARAMS = Path("params.yaml")
DTYPES = ("float32", "bfloat16", "float16")
# the interventions without a dose; every valid name: homog.interventions (the registry)
INTERVENTIONS: tuple[str, ...] = PLAIN
ENGINES: tuple[str, ...] = ("local", "ray")
REPHRASERS: tuple[str, ...] = ("parse", "rule", "llm")
# below this the metrics stop meaning anything (ExtractConfig.__post_init__)
MIN_TOKENS = 8

# ---------------------------------------------------------------------------------------------
# sections


@dataclass(frozen=True)
class CorpusConfig:
    """``corpus:``: where the reviews come from and how they are sampled."""

    source: str = "demo"  # demo | hf:<dataset id> | file:<path>
    split: str = "test"  # for hf: sources
    text_column: str = "text"
    label_column: str | None = "label"  # None: unlabelled texts (all get label "none")
    id_column: str | None = "id"  # the source's ids become sample_id when unique
    n: int = 100  # texts drawn, balanced by label
    min_words: int = 20
    max_words: int | None = 400
    name: str | None = None  # dataset name in the store (default: derived from the source)

    def __post_init__(self) -> None:
        _check(self.n >= 1, f"corpus.n must be >= 1, got {self.n}")
        _check(self.min_words >= 0, f"corpus.min_words must be >= 0, got {self.min_words}")
        _check(
            self.max_words is None or self.max_words >= max(1, self.min_words),
            f"corpus.max_words ({self.max_words}) must be >= corpus.min_words ({self.min_words})",
        )
        for name in ("label_column", "id_column"):
            _check(
                getattr(self, name) != self.text_column,
                f"corpus.{name} must differ from corpus.text_column ({self.text_column!r})",
            )


@dataclass(frozen=True)
class ModelEntry:
    """One ``models.<key>:`` entry (``key: "<source>"`` is short for ``key: {source: ...}``)."""

    SCALAR_FIELD: typing.ClassVar[str] = "source"

    source: str  # embedded:<name> | hf:<id-or-dir>[@revision] | random:<preset> | a path


@dataclass(frozen=True)
class ExtractConfig:
    """``extract:``: how every model is run and what is kept.

    ``result_keys`` names the fields that change results (they enter the run id); engine,
    interventions, device, batching and sharding do not.
    """

    engine: Literal["local", "ray"] = "local"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: str = "auto"  # cpu | cuda | cuda:N | auto
    device_map: str | None = None  # "auto" spreads one model over several GPUs
    max_tokens: int = 128  # longer texts are truncated (and counted)
    batch_tokens: int = 4096  # texts are batched by length up to this many padded tokens
    # names of homog.interventions (kind or kind:dose), plus the runs of the dose grids below
    interventions: tuple[str, ...] = ("none", "zero_pos")
    # the variants the interventions other than none run on (e.g. [original]); empty: all
    intervention_variants: tuple[str, ...] = ()
    # the graded interventions (docs/interventions.md): each dose d adds kind:d and, for d != 0,
    # kind_control:d to interventions; they run on dose_variants (empty: as intervention_variants)
    sink_bias_doses: tuple[float | str, ...] = ()
    sink_bias_onset: int | Literal["middle"] = "middle"  # first attention layer biased
    homogenize_doses: tuple[float | str, ...] = ()
    homogenize_layer: int | Literal["middle"] = "middle"  # the hidden layer homogenized
    dose_variants: tuple[str, ...] = ("original",)
    # the graded runs on a seeded draw of this many reviews of dose_variants (None: all)
    dose_texts: int | None = None
    attention: bool = True  # attention statistics per head (and sink_rate, attn_massive)
    # how they are computed: blockwise from each layer's q and k with an SDPA forward pass, or
    # from eager attention's (heads x n x n) weights; equal results
    attention_impl: Literal["blockwise", "eager"] = "blockwise"
    # query rows per block of the blockwise path; auto: 32 on a CPU (cache-sized blocks ran
    # 2-3x faster there), 256 on a GPU (fewer kernel launches). Memory: heads x block x n.
    attention_block: int | Literal["auto"] = "auto"
    center: bool = False  # center columns over tokens before the spectrum
    exclude_special: bool = True  # drop tokenizer-added special tokens from hidden-state metrics
    sample_tokens: int = 100  # token vectors kept per (variant, layer) for MAUVE
    pooled_texts: int = 32  # texts per variant whose pooled-mean vectors are kept
    shard_texts: int = 64  # texts per resumable shard
    # token sets besides `all` whose metrics are stored as <metric>__<set> (one loud token can
    # fake collapse in `all`)
    token_sets: tuple[Literal["no_sink", "standardized"], ...] = ("no_sink", "standardized")
    # the peers' metrics (prompt_entropy, curvature, twonn_id), massive activations (act_*),
    # sink_rate and attn_massive; false gives the metrics of homog 0.x only
    peer_metrics: bool = True
    # sentence_metrics: every sentence of the position family followed through the layers
    # (homog.extract.sentences; the texts' sentence_spans), one row per sentence, layer and
    # metric in sentence_metrics.parquet; texts without spans get none
    sentence_metrics: bool = True
    sink_epsilon: float = 0.3  # sink_rate: a head is a sink when its first token gets > this
    sink_norm_ratio: float = 10.0  # no_sink drops tokens with norm > this x the median norm
    renyi_alpha: float = 1.0  # order of prompt_entropy (1 = von Neumann / Shannon)
    seed: int = 0  # the top-level seed
    # the probe's text-first zero-shot prompt, answered by continuing each text's pass over
    # its suffix (homog.extract.zero_shot); not a key of extract: but filled from probe: by
    # Params (probe.lm, probe.prompt, the label words); None: no answer
    zero_shot: ZeroShotPrompt | None = None

    def __post_init__(self) -> None:
        _check(
            0 < self.sink_epsilon < 1,
            f"extract.sink_epsilon must lie in (0, 1) (a share of attention), got "
            f"{self.sink_epsilon}",
        )
        _check(
            self.sink_norm_ratio > 1,
            f"extract.sink_norm_ratio must be > 1 (a multiple of the median token norm), got "
            f"{self.sink_norm_ratio}",
        )
        _check(self.renyi_alpha > 0, f"extract.renyi_alpha must be > 0, got {self.renyi_alpha}")
        _check(
            len(set(self.token_sets)) == len(self.token_sets),
            f"extract.token_sets repeats a set: {list(self.token_sets)}",
        )
        object.__setattr__(self, "token_sets", tuple(self.token_sets))
        for name in ("max_tokens", "batch_tokens", "shard_texts", "attention_block"):
            value = getattr(self, name)
            if name == "attention_block" and value == "auto":
                continue
            _check(value >= 1, f"extract.{name} must be >= 1, got {value}")
        _check(
            self.max_tokens >= MIN_TOKENS,
            f"extract.max_tokens must be >= {MIN_TOKENS}, got {self.max_tokens}: the metrics need "
            "several tokens per text (erank and mev of 1-2 tokens are 1 by construction, "
            "mean_cosine needs 2 and twonn_id 3 besides a special token)",
        )
        for name in ("sample_tokens", "pooled_texts"):
            value = getattr(self, name)
            _check(value >= 0, f"extract.{name} must be >= 0, got {value}")
        _check(len(self.interventions) >= 1, "extract.interventions must name at least one")
        _check(
            self.dose_texts is None or (isinstance(self.dose_texts, int) and self.dose_texts >= 1),
            f"extract.dose_texts must be a number of reviews >= 1 or null (all), got "
            f"{self.dose_texts!r}",
        )
        for name in ("sink_bias_onset", "homogenize_layer"):
            value = getattr(self, name)
            _check(
                value == "middle" or (isinstance(value, int) and value >= 1),
                f"extract.{name} must be middle or a layer >= 1, got {value}",
            )
        # canonical names (sink_bias:-2.0 -> sink_bias:-2), the grids' runs appended; a list
        # given in code (tests, the CLI) is stored as a tuple: the config stays hashable
        runs = [*self.interventions]
        for kind in ("sink_bias", "homogenize"):
            try:
                runs += grid(kind, getattr(self, f"{kind}_doses"))
            except HomogError as exc:
                raise HomogError(f"extract.{kind}_doses: {exc}") from None
        object.__setattr__(self, "interventions", check_names(runs))
        for name in ("intervention_variants", "sink_bias_doses", "homogenize_doses"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "dose_variants", tuple(self.dose_variants))
        # a Ray actor rebuilds the config from ``asdict``: the prompt arrives as a mapping
        object.__setattr__(self, "zero_shot", ZeroShotPrompt.of(self.zero_shot))

    def result_keys(self) -> dict[str, Any]:
        """The fields that change results (they enter the run_id).

        The fields added with the token sets and peers' metrics (``_ADDED_KEYS``) enter only
        when they differ from their defaults, so run ids of earlier runs stay the same.
        """
        skip = {"engine", "interventions", "device", "device_map", "batch_tokens", "shard_texts"}
        skip |= {"attention_impl", "attention_block"}  # equal results either way
        skip.add("intervention_variants")  # which texts a run holds: its texts hash says it
        # the graded interventions' settings enter only their own runs' ids (edit_keys)
        skip |= {"sink_bias_doses", "homogenize_doses", "dose_variants", "dose_texts"}
        skip |= {"sink_bias_onset", "homogenize_layer"}
        skip.add("zero_shot")  # the text's own states do not depend on what follows the text
        return {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if k not in skip and not (k in _ADDED_KEYS and v == _ADDED_KEYS[k])
        }

    def edit_keys(self, intervention: str) -> dict[str, Any]:
        """The settings of a graded intervention that change its results (they enter its
        run id only): the onset layer of sink_bias, the layer of homogenize; {} otherwise."""
        family = parse(intervention).family
        if family == "sink_bias":
            return {"onset": self.sink_bias_onset}
        if family == "homogenize":
            return {"layer": self.homogenize_layer}
        return {}

    def run_options(self) -> dict[str, Any]:
        """The per-run options recorded in run.json (everything but engine/interventions)."""
        skip = {"engine", "interventions"}
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in skip}


# ExtractConfig fields added after run ids were in use: they enter the run id only when they
# differ from their defaults (ExtractConfig.result_keys), so earlier run ids stay valid.
_ADDED_KEYS: dict[str, Any] = {
    name: ExtractConfig.__dataclass_fields__[name].default
    for name in (
        "token_sets",
        "peer_metrics",
        "sink_epsilon",
        "sink_norm_ratio",
        "renyi_alpha",
        "sentence_metrics",
    )
}


@dataclass(frozen=True)
class Params:
    """All of ``params.yaml``."""

    seed: int = 0
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    synth: SynthConfig = field(default_factory=SynthConfig)
    models: dict[str, ModelEntry] = field(default_factory=dict)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    mauve: MauveConfig = field(default_factory=MauveConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    posenc: PosencConfig = field(default_factory=PosencConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    db: str = "data/homog.duckdb"

    def __post_init__(self) -> None:
        check_seed(self.seed, "seed")
        check_model_keys(self.models)
        # the extraction answers the probe's text-first prompt in its own pass
        extract = dataclasses.replace(self.extract, zero_shot=self.probe.extraction_prompt())
        object.__setattr__(self, "extract", extract)

    def model_sources(self) -> dict[str, str]:
        """Model key -> source string."""
        return {key: entry.source for key, entry in self.models.items()}


# ---------------------------------------------------------------------------------------------
# reading params.yaml


def parse_params(data: Mapping[str, Any], where: str = "params.yaml") -> Params:
    """A checked ``Params`` from a params mapping (missing sections get their defaults)."""
    if not isinstance(data, Mapping):
        raise HomogError(f"{where} must hold a mapping at the top level")
    known = [f.name for f in dataclasses.fields(Params)]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise HomogError(
            f"{where} has unknown top-level key(s) {', '.join(unknown)}; valid: {', '.join(known)}"
        )
    if "models" in data and not data["models"]:  # `homog load` would drop every run
        raise HomogError(
            f"{where}: 'models:' is empty; name at least one model (key: source, e.g. "
            "'models: {smollm2-135m: embedded:smollm2-135m}')"
        )
    try:
        return _parse_sections(data, where)
    except ParamsValueError as exc:  # name the file the bad value came from
        raise ParamsValueError(exc.detail, where) from None


def _parse_sections(data: Mapping[str, Any], where: str) -> Params:
    hints = typing.get_type_hints(Params)
    seed = coerce(data.get("seed", 0), int, "seed")
    kwargs: dict[str, Any] = {"seed": seed}
    for name, tp in hints.items():
        value = data.get(name)
        if dataclasses.is_dataclass(tp):  # a section; absent ones still get the seed
            if value is not None and not isinstance(value, Mapping):
                raise HomogError(f"{where} '{name}:' must be a mapping, got {value_name(value)}")
            top = {"seed": seed} if "seed" in {x.name for x in dataclasses.fields(tp)} else {}
            kwargs[name] = section(tp, value, name, **top)
        elif name != "seed" and value is not None:
            kwargs[name] = coerce(value, tp, name)
    return Params(**kwargs)


def read_yaml(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> dict[str, Any]:
    """The raw mapping of a params file; HomogError when missing or not a YAML mapping."""
    path = Path(path)
    if not path.exists():
        raise HomogError(
            f"params file {path} not found: run from the project root or pass --params PATH"
        )
    try:
        data = load_yaml(path.read_text())
    except DuplicateKeyError as exc:
        raise HomogError(
            f"params file {path} repeats the key {exc.key!r} (lines {exc.first} and "
            f"{exc.second}); keep one of them (the later one would silently replace the earlier)"
        ) from exc
    except yaml.YAMLError as exc:
        raise HomogError(f"params file {path} is not valid YAML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise HomogError(f"params file {path} cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise HomogError(f"params file {path} must hold a mapping at the top level")
    return data


def load_config(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Params:
    """Read and check a params file (see the module docstring for what is checked)."""
    return parse_params(read_yaml(path), where=f"params file {path}")


def as_params(params: Params | Mapping[str, Any]) -> Params:
    """``params`` as a checked ``Params`` (a mapping is parsed; a Params is returned as is)."""
    return params if isinstance(params, Params) else parse_params(params)
