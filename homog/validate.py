"""Range and shape checks of user-set values: params, environment variables, YAML files.

``homog.config`` uses these in its sections' ``__post_init__`` (a config built in code is
checked the same way as one read from params.yaml); the rest of homog uses ``env_flag`` for
every ``HOMOG_*`` boolean. Every failure is a HomogError that names the value and says what
to do.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from homog.errors import HomogError

# Seeds go to numpy, torch and Python's random: all take 0 .. 2**32 - 1.
SEED_MAX = 2**32 - 1
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")
# A model key names folders (data/extract/<key>) and files: a name, never a path.
MODEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class ParamsValueError(HomogError):
    """A section's own check failed: ``detail`` says what, the message names the file
    (``params.yaml`` unless ``parse_params`` knows better)."""

    def __init__(self, detail: str, where: str = "params.yaml") -> None:
        super().__init__(f"{where} {detail}")
        self.detail = detail


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ParamsValueError(message)


def check_seed(value: Any, key: str) -> None:
    check(
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= SEED_MAX,
        f"{key} must be an integer in [0, 2**32 - 1] (numpy and torch seeds), got {value!r}",
    )


def check_model_keys(keys: Iterable[str]) -> None:
    for key in keys:
        check(
            isinstance(key, str) and bool(MODEL_KEY.match(key)) and ".." not in key,
            f"models: key {key!r} is not a name (it names folders such as data/extract/<key>): "
            "use letters, digits and . _ + - (e.g. smollm2-135m), and put paths in `source:`",
        )


# ---------------------------------------------------------------------------------------------
# posenc: the preset's sections with params' overrides on top

_POSITIVE = {
    "model": ("n_layer", "n_head", "n_embd", "d_ff", "mla_latent", "mla_rope_dim"),
    "train": ("epochs", "batch_size", "eval_batch_size"),
    "distance": ("n_samples", "vocab_size", "seq_len"),
    "count": ("n_samples", "vocab_size", "seq_len", "n_triggers", "max_count"),
}
_NON_NEGATIVE = {"model": ("rope_heads",), "train": ("threads", "workers")}
_SHARES = {  # key: (low, high, low inclusive, high inclusive)
    ("model", "dropout"): (0.0, 1.0, True, False),
    ("train", "warmup"): (0.0, 1.0, True, False),
    ("train", "train_fraction"): (0.0, 1.0, False, False),
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_posenc(config: Mapping[str, Mapping[str, Any]]) -> None:
    """Ranges of a resolved posenc config (``homog.posenc.presets.resolve``'s sections):
    sizes and counts >= 1, shares in their interval, ``lr > 0``, seeds in the seed range,
    ``[lo, hi]`` spans with ``0 <= lo <= hi``."""
    minimum = {
        (sec, key): low
        for low, table in ((1, _POSITIVE), (0, _NON_NEGATIVE))
        for sec, keys in table.items()
        for key in keys
    }
    for (sec, key), low in minimum.items():
        if key in config.get(sec, {}):
            value = config[sec][key]
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= low,
                f"posenc.{sec}.{key} must be an integer >= {low}, got {value!r}",
            )
    for (sec, key), (lo, hi, lo_in, hi_in) in _SHARES.items():
        if key in config.get(sec, {}):
            v = config[sec][key]
            ok = _number(v) and (lo <= v if lo_in else lo < v) and (v <= hi if hi_in else v < hi)
            span = f"{'[' if lo_in else '('}{lo:g}, {hi:g}{']' if hi_in else ')'}"
            check(ok, f"posenc.{sec}.{key} must lie in {span}, got {v!r}")
    train = config.get("train", {})
    for key in ("lr", "weight_decay"):
        if key in train:
            v = train[key]
            check(
                _number(v) and (v > 0 if key == "lr" else v >= 0),
                f"posenc.train.{key} must be a number {'> 0' if key == 'lr' else '>= 0'}, "
                f"got {v!r}",
            )
    if "seeds" in train:
        seeds = train["seeds"]
        check(
            isinstance(seeds, list | tuple) and len(seeds) >= 1,
            f"posenc.train.seeds must be a non-empty list, got {seeds!r}",
        )
        for seed in seeds:
            check_seed(seed, "posenc.train.seeds[]")
    if "data_seed" in train:
        check_seed(train["data_seed"], "posenc.train.data_seed")
    for key in ("left", "middle", "right"):
        span = config.get("distance", {}).get(key)
        if span is not None:
            check(
                isinstance(span, list | tuple)
                and len(span) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in span)
                and 0 <= span[0] <= span[1],
                f"posenc.distance.{key} must be [lo, hi] with 0 <= lo <= hi, got {span!r}",
            )


# ---------------------------------------------------------------------------------------------
# environment variables


def env_flag(name: str) -> bool:
    """The boolean environment variable ``name``: unset, empty, 0/false/no/off are false,
    1/true/yes/on true (any case); anything else is a HomogError naming it."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise HomogError(
        f"environment variable {name}={raw!r} is not a boolean: set it to 1/true/yes/on or "
        "0/false/no/off, or unset it"
    )


def env_choice(name: str, choices: tuple[str, ...]) -> str:
    """The environment variable ``name`` as one of ``choices`` (trimmed, lower case; unset or
    empty: the first); anything else is a HomogError naming it and the choices."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower() or choices[0]
    if value not in choices:
        raise HomogError(
            f"environment variable {name}={raw!r}: use one of {', '.join(choices)}, or unset it"
        )
    return value


def env_int(name: str, default: int, minimum: int = 0) -> int:
    """The integer environment variable ``name`` (unset or empty: ``default``); anything that
    is not a whole number >= ``minimum`` is a HomogError naming it."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise HomogError(
            f"environment variable {name}={raw!r} is not a whole number >= {minimum}: set it "
            f"to one (e.g. {default}), or unset it"
        )
    return value


# ---------------------------------------------------------------------------------------------
# YAML without duplicate keys


class DuplicateKeyError(yaml.YAMLError):
    """A mapping repeats a key: ``key`` at lines ``first`` and ``second`` (1-based)."""

    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"the key {key!r} appears twice (lines {first} and {second})")
        self.key, self.first, self.second = key, first, second


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping with a repeated key (the last would win and
    an earlier section be dropped silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise DuplicateKeyError(key, seen[key], line)
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that raises DuplicateKeyError for a repeated key."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
