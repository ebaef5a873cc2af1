"""Named configurations of the positional-encoding lab, and how params.yaml overrides them.

A preset holds four sections: ``model`` (EncoderConfig fields other than the ones the task
decides: vocab_size, n_classes, block_size), ``train``, and one per task (``distance``,
``count``: n_samples plus the generator's keywords). ``params.yaml``'s ``posenc:`` section
names the preset and may override any key of any section, e.g.
``dvc exp run -S '+posenc.train.epochs=20'`` (Hydra's '+' adds a key).

- ``reference``: the paper's setup (arXiv 2505.13027) for a GPU: 6 layers, 16 heads, d 256,
  FFN 512, sequences up to 120 tokens padded to 128, AdamW lr 1e-4, batch 512, 100 epochs,
  cosine schedule with 6% warm-up, 70/30 split. The summary we work from does not give the
  number of samples or the vocabulary size; 50,000 per task and 128 ids are our choice.
- ``cpu``: every encoding on both tasks in a few minutes on 2 CPU cores: 2 layers, 4 heads,
  d 64, 24-token sequences with proportionally shorter segments and fewer classes.
- ``tiny``: for the tests (a fraction of a second per training run).

``train.amp`` trains with bfloat16 autocast on a CUDA device (ignored on the CPU).
``train.threads`` is the number of CPU threads torch uses on a CPU device (0 = torch's
default). The small models here are faster on one thread than on two contended ones: with
both cores busy (another stage, a test run) a tiny training run took 36 s on two OpenMP
threads and 5 s on one. ``train.workers`` is the number of processes that train the
(task, seed) runs side by side on a CPU device (0 = as many as the cores allow at
``threads`` each, 1 = one after another in this process; ``homog.posenc.runs.train_workers``):
the CPU preset's two tasks train on both cores at once. ``tiny`` trains in the test's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from homog.config.posenc import PosencConfig
from homog.config.posenc_presets import apply_overrides
from homog.typed import section


def resolve(posenc: PosencConfig | Mapping[str, Any], preset: str | None = None) -> dict[str, Any]:
    """The preset named by ``preset`` (or ``posenc.preset``) with posenc's overrides on top.

    posenc: the typed ``posenc:`` section (a mapping is checked into one). Returns a new dict
    with the four SECTIONS. Raises HomogError for an unknown preset or an override key the
    preset does not have (a typo would otherwise be ignored silently).
    """
    posenc = as_posenc(posenc)
    return apply_overrides(preset or posenc.preset, posenc.overrides())


def as_posenc(posenc: PosencConfig | Mapping[str, Any]) -> PosencConfig:
    """The typed ``posenc:`` section (a raw mapping is checked like params.yaml's)."""
    return posenc if isinstance(posenc, PosencConfig) else section(PosencConfig, posenc, "posenc")
