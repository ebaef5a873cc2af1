"""``BatchResult``: what the extractor returns for a batch or a shard (arrays on the CPU),
with its concatenation and its ``.npz`` form (a shard's file in the work dir)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from homog.errors import HomogError


@dataclass
class BatchResult:
    """Summaries of a batch (or, concatenated, of a shard); arrays are on the CPU.

    indices (B,); metrics (B, L+1, M) float64 with the names ``metric_names`` (M,) (str;
    None in shards of homog before the token sets: then ``METRIC_NAMES``); heads (B, L, H, 3)
    float32 with HEAD_METRICS (None without attention); profile (B, L, H, N_BINS) float32
    (or None); text_attn (B, L, 2) float64 with TEXT_METRICS (None without attention or peer
    metrics); top (B, L+1, TOP_K, 3) float64 [position, feature, value] of the largest
    |activations| (None without peer metrics); pooled_mean, pooled_last (B, L+1, d) float32;
    tokens (L+1, K, d) float32 with token_index / token_pos (K,) naming the text and position
    of each sampled token; n_tokens (B,) real tokens per text.
    """

    indices: np.ndarray
    n_tokens: np.ndarray
    metrics: np.ndarray
    heads: np.ndarray | None
    profile: np.ndarray | None
    pooled_mean: np.ndarray
    pooled_last: np.ndarray
    tokens: np.ndarray
    token_index: np.ndarray
    token_pos: np.ndarray
    metric_names: np.ndarray | None = None
    text_attn: np.ndarray | None = None
    top: np.ndarray | None = None
    # sink_bias family runs: ctrl_attn (B, L) float64, attn_ctrl_token per attention layer
    # (homog.extract.attn_summary); None: another intervention, or no attention
    ctrl_attn: np.ndarray | None = None
    # the followed sentences (homog.extract.sentences): sent_meta (S, 1 + 7) int64 [text
    # index, *SENTENCE_FIELDS], sent_hidden (S, L+1, 5) float64 (SENT_HIDDEN), sent_attn
    # (S, L) float64 (sent_attn_in; None without attention); None: not measured
    sent_meta: np.ndarray | None = None
    sent_hidden: np.ndarray | None = None
    sent_attn: np.ndarray | None = None
    # the zero-shot prompt continued from the text's pass (homog.extract.zero_shot):
    # log_odds (B,) float64 and prompt_tokens (B,) (text + suffix); None: not asked for
    log_odds: np.ndarray | None = None
    prompt_tokens: np.ndarray | None = None

    @property
    def names(self) -> list[str]:
        """The metric names of ``metrics`` (``METRIC_NAMES`` for shards that lack them)."""
        from homog.metrics.spectra import METRIC_NAMES

        return list(METRIC_NAMES) if self.metric_names is None else self.metric_names.tolist()

    @classmethod
    def concat(cls, parts: Sequence[BatchResult]) -> BatchResult:
        """The parts one after the other. Raises HomogError when they hold different metrics
        (e.g. a shard left by an older homog in a resumed run)."""
        names = {tuple(p.names) for p in parts}
        if len(names) > 1:
            raise HomogError(
                "shards hold different metric sets (a work dir left by another homog version "
                "or other extract params?): delete the work dir and run again"
            )

        def cat(name: str, axis: int = 0) -> Any:
            values = [getattr(p, name) for p in parts]
            if name == "metric_names" or values[0] is None:
                return values[0]
            if any(v is None for v in values):
                raise HomogError(f"some shards lack {name!r}: delete the work dir and run again")
            return np.concatenate(values, axis=axis)

        return cls(
            **{
                name: cat(name, axis=1 if name == "tokens" else 0)
                for name in cls.__dataclass_fields__
            }
        )

    def save(self, path: Path) -> None:
        arrays = {k: v for k, v in asdict(self).items() if v is not None}
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: Path) -> BatchResult:
        with np.load(path) as data:
            fields = cls.__dataclass_fields__
            return cls(**{k: (data[k] if k in data.files else None) for k in fields})
