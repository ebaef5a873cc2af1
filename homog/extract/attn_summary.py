"""One attention layer's statistics put into the ``BatchState`` slots (``Extractor``'s
attention hooks, eager and blockwise): the per-head statistics and profile, the per-text
``TEXT_METRICS`` (with peer metrics) and, in sink_bias family runs, ``attn_ctrl_token`` at the
control's token (``BatchState.ctrl_columns``)."""

from __future__ import annotations

from typing import Any

import torch

from homog.config import ExtractConfig
from homog.extract.batch_state import BatchState
from homog.metrics.attention import (
    CTRL_METRIC,
    HEAD_METRICS,
    TEXT_METRICS,
    attention_stats,
    stats_from_sums,
)


def summarise_attention(
    st: BatchState,
    config: ExtractConfig,
    index: int,
    weights: Any,
    sums: tuple[Any, Any] | None = None,
) -> None:
    """Attention layer ``index``'s statistics from its (B, H, n, n) weights (eager) or from
    ``sums`` = (column_sum, entropy_sum) of ``attention_sums`` (blockwise), into ``st``."""
    peers = config.peer_metrics
    # the token holding the largest |activation| of the block's input (hidden layer index)
    top = st.top[index] if peers else None
    extra = {
        "sink_epsilon": config.sink_epsilon if peers else None,
        "positions": top[:, 0, 0].long() if top is not None else None,
        "ctrl_positions": st.ctrl_columns,
    }
    if sums is None:
        stats = attention_stats(weights, st.lengths, **extra)
    else:
        lengths = st.lengths.to(sums[0].device)
        stats = stats_from_sums(sums[0], sums[1], lengths, **extra)
    st.heads[index] = torch.stack([stats[m] for m in HEAD_METRICS], -1).to(st.device)
    st.profile[index] = stats["profile"].to(st.device)
    if peers:
        text = torch.stack([stats[m].double() for m in TEXT_METRICS], -1)
        st.text_attn[index] = text.to(st.device)
    if st.ctrl_columns is not None:
        st.ctrl_attn[index] = stats[CTRL_METRIC].double().to(st.device)
