"""Batches through an ``Extractor`` (homog.extract.hooks): one forward at a time, the next
batch's forward started before the previous batch's metrics are waited for, and a shard as
the concatenation of its batches (``compute_shard``, which every engine calls)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from homog.extract.plan import EncodedText, SamplePlan, make_batches, n_tokens
from homog.extract.result import BatchResult


def stack_layers(values: list[torch.Tensor | None], dim: int) -> np.ndarray:
    return torch.stack(values, dim).cpu().numpy()  # type: ignore[arg-type]


@dataclass
class PendingBatch:
    """A batch whose forward has run; ``result()`` is its ``BatchResult`` once the metrics of
    every hidden layer are there (``metrics``: (B, M) tensors, or Futures of them while the
    host solves their spectra, ``homog.extract.host_spectra``)."""

    partial: BatchResult
    metrics: list[Any]

    def result(self) -> BatchResult:
        from homog.extract.host_spectra import resolved

        if self.partial.metrics is None:
            # each layer's from where it was finished (the host, or a layer's own GPU)
            values = [v.cpu() for v in resolved(self.metrics)]
            self.partial.metrics = stack_layers(values, 1)  # type: ignore[arg-type]
        return self.partial


def run_batches(
    extractor: Any,  # a homog.extract.hooks.Extractor (its start_batch)
    batches: Sequence[Sequence[EncodedText]],
    intervention: str,
    plan: SamplePlan,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[BatchResult]:
    """``extractor.run_batch`` of each batch, in order, but batch i + 1's forward starts
    before batch i's metrics are waited for (the host solves them meanwhile when the extractor
    has a host thread, ``HOMOG_GPU_EIGENSOLVER=host``): at most one batch in flight.
    ``on_batch(texts, tokens)`` is called as each batch's result is complete."""
    parts: list[BatchResult] = []
    waiting: tuple[PendingBatch, Sequence[EncodedText]] | None = None

    def done(pending: PendingBatch, batch: Sequence[EncodedText]) -> None:
        parts.append(pending.result())
        if on_batch:
            on_batch(len(batch), n_tokens(batch))

    for batch in batches:
        started = extractor.start_batch(batch, intervention, plan)
        if waiting is not None:
            done(*waiting)
        waiting = (started, batch)
    if waiting is not None:
        done(*waiting)
    return parts


def compute_shard(
    extractor: Any,  # a homog.extract.hooks.Extractor (its start_batch)
    shard: Sequence[EncodedText],
    intervention: str,
    plan: SamplePlan,
    batch_tokens: int,
    on_batch: Callable[[int, int], None] | None = None,
) -> BatchResult:
    """One shard -> its ``BatchResult``: the shard's texts in ``make_batches`` batches of at
    most ``batch_tokens`` padded tokens, one ``extractor.start_batch`` each
    (``run_batches``), concatenated.

    Every engine computes shards with this function, so a shard holds the same batches (and
    the same values) wherever it runs. ``on_batch(texts, tokens)`` is called after each batch.
    Raises what ``Extractor.run_batch`` raises (HomogError on NaN/inf).
    """
    batches = make_batches(shard, batch_tokens)
    return BatchResult.concat(run_batches(extractor, batches, intervention, plan, on_batch))
