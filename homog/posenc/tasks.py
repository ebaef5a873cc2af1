"""Synthetic tasks for the positional-encoding lab (after arXiv 2505.13027).

Both tasks share one token layout: id 0 is padding, the trigger tokens come next, and every
other id is a filler. Fillers are drawn from the filler ids only, so a filler never equals a
trigger (the paper's reference code drew fillers from the whole vocabulary, which can plant
extra triggers and make a few labels wrong).

- ``distance`` (position-sensitive): the sequence is three segments. The left segment ends
  with trigger A, the middle segment holds fillers only, the right segment starts with
  trigger B. The label is the middle length M (class ``M - middle[0]``), so the two triggers
  sit M + 1 positions apart. Reference lengths: left 1-25, middle 1-70, right 1-25, so at most
  120 tokens (padded to 128) and 70 classes.
- ``count`` (position-agnostic): a fixed-length sequence of fillers with ``label`` tokens
  replaced by triggers (drawn with replacement from the trigger set) at random positions. The
  label is drawn uniformly from 0..max_count. Reference: 30 triggers, 120 tokens, 0-100.

Labels are drawn uniformly, so classes are balanced up to sampling noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from homog.io import HomogError

PAD = 0
TASKS = ("distance", "count")


@dataclass
class TaskData:
    """Token ids [N, seq_len] (0 = padding), labels [N] and the number of classes."""

    tokens: torch.Tensor
    labels: torch.Tensor
    n_classes: int

    def split(self, train_fraction: float, seed: int) -> tuple[TaskData, TaskData]:
        """A seeded random train/test split (the paper's 70/30)."""
        n = len(self.labels)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        cut = int(round(train_fraction * n))
        if not 0 < cut < n:
            raise HomogError(f"train_fraction {train_fraction} leaves an empty split of {n}")
        pick = [order[:cut], order[cut:]]
        return tuple(TaskData(self.tokens[i], self.labels[i], self.n_classes) for i in pick)


def _check_range(name: str, lo_hi: list[int] | tuple[int, int], low: int) -> tuple[int, int]:
    lo, hi = (int(v) for v in lo_hi)
    if not low <= lo <= hi:
        raise HomogError(f"posenc task range {name}={[lo, hi]} must satisfy {low} <= min <= max")
    return lo, hi


def _fillers(shape: tuple[int, ...], first: int, vocab_size: int, g: torch.Generator):
    if vocab_size - first < 1:
        raise HomogError(f"vocab_size {vocab_size} leaves no filler ids after the triggers")
    return torch.randint(first, vocab_size, shape, generator=g)


def make_distance(
    n_samples: int,
    *,
    vocab_size: int,
    seq_len: int,
    left: list[int],
    middle: list[int],
    right: list[int],
    seed: int,
) -> TaskData:
    """The distance task: triggers are ids 1 (A) and 2 (B); fillers 3..vocab_size-1.

    Raises HomogError when the segment ranges do not fit in ``seq_len`` or are not ranges.
    """
    (l0, l1), (m0, m1), (r0, r1) = (
        _check_range("left", left, 1),
        _check_range("middle", middle, 1),
        _check_range("right", right, 1),
    )
    if l1 + m1 + r1 > seq_len:
        raise HomogError(f"distance segments reach {l1 + m1 + r1} tokens > seq_len {seq_len}")
    g = torch.Generator().manual_seed(seed)
    ln = torch.randint(l0, l1 + 1, (n_samples,), generator=g)
    mid = torch.randint(m0, m1 + 1, (n_samples,), generator=g)
    rn = torch.randint(r0, r1 + 1, (n_samples,), generator=g)
    tokens = _fillers((n_samples, seq_len), 3, vocab_size, g)
    rows = torch.arange(n_samples)
    pos_a = ln - 1
    pos_b = ln + mid
    tokens[rows, pos_a] = 1
    tokens[rows, pos_b] = 2
    length = ln + mid + rn
    tokens[torch.arange(seq_len)[None, :] >= length[:, None]] = PAD
    return TaskData(tokens, mid - m0, m1 - m0 + 1)


def make_count(
    n_samples: int,
    *,
    vocab_size: int,
    seq_len: int,
    n_triggers: int,
    max_count: int,
    seed: int,
) -> TaskData:
    """The count task: triggers are ids 1..n_triggers; fillers n_triggers+1..vocab_size-1.

    Every sequence is ``seq_len`` tokens long (no padding). Raises HomogError when
    ``max_count`` exceeds ``seq_len`` or there are no triggers.
    """
    if n_triggers < 1 or not 0 <= max_count <= seq_len:
        raise HomogError(
            f"count task needs n_triggers >= 1 and 0 <= max_count <= seq_len, got "
            f"n_triggers={n_triggers}, max_count={max_count}, seq_len={seq_len}"
        )
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, max_count + 1, (n_samples,), generator=g)
    tokens = _fillers((n_samples, seq_len), n_triggers + 1, vocab_size, g)
    # the first `label` positions of a random permutation get a trigger
    rank = torch.rand(n_samples, seq_len, generator=g).argsort(dim=1).argsort(dim=1)
    is_trigger = rank < labels[:, None]
    triggers = torch.randint(1, n_triggers + 1, (n_samples, seq_len), generator=g)
    tokens = torch.where(is_trigger, triggers, tokens)
    return TaskData(tokens, labels, max_count + 1)


def make_task(name: str, spec: dict[str, Any], seed: int) -> TaskData:
    """Build task ``name`` from its params mapping (n_samples plus the generator's keys)."""
    makers = {"distance": make_distance, "count": make_count}
    if name not in makers:
        raise HomogError(f"unknown posenc task {name!r}; choose from {', '.join(TASKS)}")
    spec = dict(spec)
    n = int(spec.pop("n_samples"))
    try:
        return makers[name](n, seed=seed, **spec)
    except TypeError as exc:
        raise HomogError(f"posenc task {name!r} params are wrong: {exc}") from exc
