"""Names of the extract outputs that the outputs writer and later stages share (below
``homog.extract``'s package init, so its submodules import them without a circle)."""

from __future__ import annotations

# layer_metrics' per-text token count: one row per text at layer 0 (the metric tokens after
# truncation). A count, not a curve: stats adjusts contrasts for it and never contrasts it,
# and the metric lists of curves leave it out (PER_TEXT_METRICS).
TOKEN_COUNT = "n_tokens"
PER_TEXT_METRICS = (TOKEN_COUNT,)
