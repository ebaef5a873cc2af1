"""The maths of homog: what the pipeline computes from hidden states and attention.

- ``spectra``: the spectral metrics of one layer's token matrix (erank, mev, schatten, ...)
  and of a variant's pooled vectors (rankme, alpha_req);
- ``sets``: the token sets (no_sink, standardized) and the peers' metrics, in one pass;
- ``pending``: the spectra step of ``sets`` apart (solved later or elsewhere);
- ``massive``: massive activations (act_*);
- ``eigensolver``, ``eigensolver_gpu``: where the symmetric eigenvalues are solved;
- ``attention``: per-head attention statistics; ``attn_blockwise``: attention computed in row
  blocks with its statistics (the models install it);
- ``curvature``: the peers' trajectory curvature;
- ``registry``: every metric's name, unit, direction and glossary sentence (no torch);
- ``calibrate``: checks of the metrics on matrices whose truth is known.

``homog.metrics.<submodule>`` is imported on first use, so importing one submodule does not
load torch through the others. Names are imported from the submodule that defines them.
"""

from __future__ import annotations

from homog.lazy import SUBMODULE, lazy_names

SUBMODULES = (
    "spectra",
    "sets",
    "pending",
    "massive",
    "eigensolver",
    "eigensolver_gpu",
    "attention",
    "attn_blockwise",
    "curvature",
    "registry",
    "calibrate",
)


__getattr__, __dir__ = lazy_names(__name__, dict.fromkeys(SUBMODULES, SUBMODULE), globals())
