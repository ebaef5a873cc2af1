"""Checking mappings against typed, frozen dataclasses: the machinery of ``homog.config``.

``section(cls, data, name)`` builds the dataclass ``cls`` from a mapping: an unknown key is an
error naming the valid keys, a value of the wrong type names the key, the value and the
expected type (ints widen to floats, lists become tuples, a nested dataclass is a nested
mapping). Fields named in ``FROM_TOP`` (the top-level seed; the extraction's zero-shot
prompt, from ``probe:``) are filled in by the caller, never read from the section. A
dataclass with a ``SCALAR_FIELD`` class attribute also accepts a bare string for that field
(``models: {m: "hf:x"}``).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from homog.errors import HomogError
from homog.validate import ParamsValueError

FROM_TOP = {"seed", "zero_shot"}


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = " or ".join(type_name(a) for a in args)
        return f"{inner} or null" if len(args) < len(typing.get_args(tp)) else inner
    if origin is tuple:
        return f"a list of {type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    names = {bool: "a boolean (true/false)", int: "an integer", float: "a number", str: "a string"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def value_name(value: Any) -> str:
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
        type(None): "null",
    }
    return f"{value!r} ({kind.get(type(value), type(value).__name__)})"


def coerce(value: Any, tp: Any, key: str) -> Any:
    """``value`` checked against the annotation ``tp`` (ints widen to floats, lists become
    tuples); raises HomogError naming the key, the value and the expected type."""
    origin = typing.get_origin(tp)

    def wrong() -> HomogError:
        return ParamsValueError(f"{key}: expected {type_name(tp)}, got {value_name(value)}")

    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise wrong()
        if isinstance(value, float) and not math.isfinite(value) and str in args:
            # YAML's -.inf / .nan where the field also takes a string: its spelling ("-inf",
            # "nan"), which the field's own check takes or names (a dose may be -inf)
            return str(value)
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, key)
            except HomogError:
                continue
        raise wrong()
    if origin is Literal:
        if value in typing.get_args(tp) and isinstance(value, str | int):
            return value
        raise wrong()
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise wrong()
        item = typing.get_args(tp)[0]
        return tuple(coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise wrong()
        item = typing.get_args(tp)[1]
        return {str(k): coerce(v, item, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        scalar = getattr(tp, "SCALAR_FIELD", None)
        if scalar and isinstance(value, str):  # e.g. `models: {m: "hf:..."}`
            value = {scalar: value}
        if not isinstance(value, Mapping):
            raise wrong()
        return section(tp, value, key)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise wrong()
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(2**63) <= value < 2**63:  # numpy, torch and DuckDB take 64-bit integers
                raise ParamsValueError(f"{key}: {value} is out of range (a 64-bit integer)")
            return value
        raise wrong()
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value if isinstance(value, float) else 0.0) or (
                isinstance(value, int) and abs(value) > 2**63
            ):
                raise ParamsValueError(f"{key}: {value} is not a finite number")
            return float(value)
        raise wrong()
    if tp is str:
        if isinstance(value, str):
            return value
        raise wrong()
    raise TypeError(f"config field {key} has an unsupported annotation {tp!r}")


def section(cls: type, data: Mapping[str, Any] | None, name: str, **values: Any) -> Any:
    """Build the section dataclass ``cls`` from the mapping ``data`` (None: all defaults).

    ``values`` set fields from outside the section (the top-level seed, CLI overrides; None is
    ignored). Raises HomogError for an unknown key (naming the valid ones) or a wrong type.
    """
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise ParamsValueError(f"'{name}:' must be a mapping, got {value_name(data)}")
    hints = typing.get_type_hints(cls)
    settable = [f.name for f in dataclasses.fields(cls) if f.name not in FROM_TOP]
    unknown = sorted(str(k) for k in data if k not in settable)
    if unknown:
        raise ParamsValueError(
            f"'{name}:' has unknown key(s) {', '.join(unknown)}; "
            f"valid {name} keys: {', '.join(settable)}"
        )
    kwargs = {k: coerce(v, hints[k], f"{name}.{k}") for k, v in data.items()}
    kwargs.update({k: v for k, v in values.items() if v is not None})
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [k for k in required if k not in kwargs]
    if missing:
        raise ParamsValueError(f"'{name}:' needs {', '.join(repr(k) for k in missing)}")
    return cls(**kwargs)
