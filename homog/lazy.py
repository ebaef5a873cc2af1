"""Lazy package faces: names resolved from a package's submodules on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

SUBMODULE = "<submodule>"  # in lazy_names' names: the attribute is the submodule itself


def lazy_names(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` for ``package`` (PEP 562).

    names: attribute -> the module that defines it: a submodule's name (``package.submodule``),
    an absolute dotted path (``homog.schema.tables``), or ``SUBMODULE`` for an attribute that
    is the submodule of that name itself. A name is imported the first time it is read and
    then cached in ``namespace`` (the package's globals()), so a package face can stay free of
    heavy imports (torch, pandas, DuckDB).
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if module == SUBMODULE:
            value = importlib.import_module(f"{package}.{name}")
        else:
            path = module if "." in module else f"{package}.{module}"
            value = getattr(importlib.import_module(path), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
