"""The maths of homog: what the pipeline computes from hidden states and attention.

- ``spectra``: the spectral metrics of one layer's token matrix (erank, mev, schatten, ...)
  and of a variant's pooled vectors (rankme, alpha_req);
- ``sets``: the token sets (no_sink, standardized) and the peers' metrics, in one pass;
- ``pending``: the spectra step of ``sets`` apart (solved later or elsewhere);
- ``massive``: massive activations (act_*);
- ``eigensolver``, ``eigensolver_gpu``: where the symmetric eigenvalues are solved;
- ``attention``: per-head attention statistics;
- ``calibrate``: checks of the metrics on matrices whose truth is known.

``homog.metrics.X`` for a name of ``spectra`` (what the flat metrics module held before
this package) still works: it is looked up there when first read, so importing a submodule
does not load torch through the spectra.
"""

from __future__ import annotations

import importlib
from typing import Any

SUBMODULES = ("spectra", "sets", "pending", "massive", "eigensolver", "eigensolver_gpu",
              "attention", "calibrate")  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("__"):
        raise AttributeError(name)
    spectra = importlib.import_module(f"{__name__}.spectra")
    try:
        return getattr(spectra, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    spectra = importlib.import_module(f"{__name__}.spectra")
    return sorted(set(globals()) | set(SUBMODULES) | set(dir(spectra)))
