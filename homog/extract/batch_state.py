"""What one forward pass of the ``Extractor`` (``homog.extract.hooks``) reads and fills: a
batch's right-padded inputs (``pack_batch`` -> ``BatchInputs``, pure numpy), the hooks'
per-layer slots (``BatchState``) and the ``BatchResult`` assembled from them
(``batch_result``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from homog.config import ExtractConfig
from homog.extract.batches import stack_layers
from homog.extract.plan import EncodedText, SamplePlan, pad_batch
from homog.extract.result import BatchResult

POOLINGS: tuple[str, ...] = ("mean", "last")


@dataclass
class BatchState:
    """What the hooks read and fill during one forward pass (``Extractor.run_batch``).

    Inputs: the texts' names (for error messages), the metric-token mask (B, n) and real
    lengths (B,) on the input device, the (row, position) pairs of the sampled tokens, the
    device results are gathered on and the dtype vectors are kept in. Outputs, one slot per
    layer (filled by the hooks): metrics and pooled vectors and sampled tokens per hidden
    layer (L+1), heads and profile per attention layer (L).
    """

    names: list[str]
    mask: torch.Tensor
    lengths: torch.Tensor
    sample_b: torch.Tensor
    sample_p: torch.Tensor
    device: Any
    n_layers: int
    # float32: massive activations (gemma3-270m: > 65,504 in layers 11-16) overflow float16
    vec_dtype: torch.dtype = torch.float32
    metrics: list[torch.Tensor | None] = field(init=False)
    pooled: dict[str, list[torch.Tensor | None]] = field(init=False)
    tokens: list[torch.Tensor | None] = field(init=False)
    top: list[torch.Tensor | None] = field(init=False)
    heads: list[torch.Tensor | None] = field(init=False)
    profile: list[torch.Tensor | None] = field(init=False)
    text_attn: list[torch.Tensor | None] = field(init=False)
    # sink_bias family runs: the control's token per text (B,) on the input device, and the
    # attention it receives per attention layer (attn_ctrl_token); None: not measured
    ctrl_columns: torch.Tensor | None = None
    ctrl_attn: list[torch.Tensor | None] = field(init=False)
    # the batch's followed sentences (homog.extract.sentences.gather_index), None: none
    sent_index: tuple[torch.Tensor, ...] | None = None
    sent_hidden: list[torch.Tensor | None] = field(init=False)
    sent_attn: list[torch.Tensor | None] = field(init=False)

    def __post_init__(self) -> None:
        hidden = self.n_layers + 1
        self.metrics = [None] * hidden
        self.pooled = {how: [None] * hidden for how in POOLINGS}
        self.tokens = [None] * hidden
        self.top = [None] * hidden
        self.heads = [None] * self.n_layers
        self.profile = [None] * self.n_layers
        self.text_attn = [None] * self.n_layers
        self.ctrl_attn = [None] * self.n_layers
        self.sent_hidden = [None] * hidden
        self.sent_attn = [None] * self.n_layers


@dataclass
class BatchInputs:
    """One batch's right-padded model inputs (B, n_pad) and what the hooks follow in it.

    ids / attn / special / pos: token ids (pad id after the text), attention mask (1 on real
    tokens), special-token flags and position ids; sample_b / sample_p: (row, position) of
    each sampled token; sent_rows / sent_bounds / sent_meta: per followed sentence, its row,
    its (first, end) token span and its [text index, *sentence fields] row.
    """

    ids: np.ndarray
    attn: np.ndarray
    special: np.ndarray
    pos: np.ndarray
    sample_b: list[int]
    sample_p: list[int]
    sent_rows: list[int]
    sent_bounds: list[tuple[int, int]]
    sent_meta: list[list[int]]


def pack_batch(
    texts: Sequence[EncodedText], intervention: str, plan: SamplePlan, pad_id: int, seed: int
) -> BatchInputs:
    """The ``BatchInputs`` of ``texts`` padded on the right with ``pad_id``, the position ids
    of ``intervention`` (seeded by ``seed``) and the tokens ``plan`` samples."""
    ids, attn, special, pos = pad_batch(texts, pad_id, intervention, seed)
    sample_b, sample_p = [], []
    sent_rows, sent_bounds, sent_meta = [], [], []
    for row, t in enumerate(texts):
        for fields in t.sentences if t.sentences is not None else ():
            sent_rows.append(row)
            sent_bounds.append((int(fields[2]), int(fields[3])))
            sent_meta.append([t.index, *fields.tolist()])
        chosen = plan.tokens.get(t.index, np.zeros(0, dtype=np.int64))
        sample_b += [row] * len(chosen)
        sample_p += chosen.tolist()
    return BatchInputs(
        ids, attn, special, pos, sample_b, sample_p, sent_rows, sent_bounds, sent_meta
    )


def batch_result(
    st: BatchState,
    texts: Sequence[EncodedText],
    inputs: BatchInputs,
    metric_names: Sequence[str],
    config: ExtractConfig,
    follow: bool,
) -> BatchResult:
    """The batch's ``BatchResult`` from the filled ``st``, without the hidden-layer metrics
    (``PendingBatch.result`` fills them); ``follow``: ``st`` holds followed sentences."""
    attention = config.attention
    peers = config.peer_metrics
    measured = attention and st.ctrl_columns is not None
    return BatchResult(
        indices=np.array([t.index for t in texts]),
        n_tokens=inputs.attn.sum(1),
        metrics=None,  # type: ignore[arg-type]  (PendingBatch.result fills it)
        heads=stack_layers(st.heads, 1) if attention else None,
        profile=stack_layers(st.profile, 1) if attention else None,
        pooled_mean=stack_layers(st.pooled["mean"], 1),
        pooled_last=stack_layers(st.pooled["last"], 1),
        tokens=stack_layers(st.tokens, 0),
        token_index=np.array([texts[r].index for r in inputs.sample_b], dtype=np.int64),
        token_pos=np.array(inputs.sample_p, dtype=np.int64),
        metric_names=np.array(metric_names),
        text_attn=stack_layers(st.text_attn, 1) if attention and peers else None,
        top=stack_layers(st.top, 1) if peers else None,
        ctrl_attn=stack_layers(st.ctrl_attn, 1) if measured else None,
        **sentence_fields(st, inputs.sent_meta, follow, config),
    )


def sentence_fields(
    st: BatchState, meta: list[list[int]], follow: bool, config: ExtractConfig
) -> dict:
    """BatchResult's sentence arrays: empty (0 rows) when no text of the batch has
    sentences, so that every batch of a run holds them (``BatchResult.concat``)."""
    from homog.extract.sentences import SENT_HIDDEN, SENTENCE_FIELDS

    if not config.sentence_metrics:
        return {}
    L = st.n_layers
    out = {
        "sent_meta": np.array(meta, dtype=np.int64).reshape(-1, 1 + len(SENTENCE_FIELDS)),
        "sent_hidden": np.zeros((0, L + 1, len(SENT_HIDDEN))),
        "sent_attn": np.zeros((0, L)) if config.attention else None,
    }
    if follow:
        out["sent_hidden"] = stack_layers(st.sent_hidden, 1)
        if config.attention:
            out["sent_attn"] = stack_layers(st.sent_attn, 1)
    return out
