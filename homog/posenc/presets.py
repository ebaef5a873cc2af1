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
``threads`` each, 1 = one after another in this process; ``homog.posenc.train.train_workers``):
the CPU preset's two tasks train on both cores at once. ``tiny`` trains in the test's process.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from homog.errors import HomogError

if TYPE_CHECKING:
    from homog.config import PosencConfig

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "reference": {
        "model": {
            "n_layer": 6,
            "n_head": 16,
            "n_embd": 256,
            "d_ff": 512,
            "dropout": 0.0,
            "rope_heads": 4,
            "mla_latent": 64,
            "mla_rope_dim": 16,
        },
        "train": {
            "epochs": 100,
            "batch_size": 512,
            "lr": 1.0e-4,
            "weight_decay": 0.01,
            "warmup": 0.06,
            "train_fraction": 0.7,
            "seeds": [0],
            "data_seed": 0,
            "eval_batch_size": 1024,
            "threads": 0,
            "workers": 0,
            "amp": True,
        },
        "distance": {
            "n_samples": 50000,
            "vocab_size": 128,
            "seq_len": 128,
            "left": [1, 25],
            "middle": [1, 70],
            "right": [1, 25],
        },
        "count": {
            "n_samples": 50000,
            "vocab_size": 128,
            "seq_len": 120,
            "n_triggers": 30,
            "max_count": 100,
        },
    },
    "cpu": {
        "model": {
            "n_layer": 2,
            "n_head": 4,
            "n_embd": 64,
            "d_ff": 128,
            "dropout": 0.0,
            "rope_heads": 1,
            "mla_latent": 32,
            "mla_rope_dim": 16,  # 8 (half the head) learns the distance task far slower
        },
        "train": {
            "epochs": 6,
            "batch_size": 32,
            "lr": 2.0e-3,
            "weight_decay": 0.01,
            "warmup": 0.06,
            "train_fraction": 0.7,
            "seeds": [0],
            "data_seed": 0,
            "eval_batch_size": 512,
            "threads": 1,
            "workers": 0,
            "amp": False,
        },
        "distance": {
            "n_samples": 3000,
            "vocab_size": 32,
            "seq_len": 24,
            "left": [1, 4],
            "middle": [1, 16],
            "right": [1, 4],
        },
        "count": {
            "n_samples": 3000,
            "vocab_size": 32,
            "seq_len": 24,
            "n_triggers": 8,
            "max_count": 16,
        },
    },
    "tiny": {
        "model": {
            "n_layer": 2,
            "n_head": 2,
            "n_embd": 16,
            "d_ff": 32,
            "dropout": 0.0,
            "rope_heads": 1,
            "mla_latent": 8,
            "mla_rope_dim": 4,
        },
        "train": {
            "epochs": 2,
            "batch_size": 32,
            "lr": 3.0e-3,
            "weight_decay": 0.01,
            "warmup": 0.1,
            "train_fraction": 0.7,
            "seeds": [0],
            "data_seed": 0,
            "eval_batch_size": 256,
            "threads": 1,
            "workers": 1,
            "amp": False,
        },
        "distance": {
            "n_samples": 200,
            "vocab_size": 12,
            "seq_len": 12,
            "left": [1, 3],
            "middle": [1, 6],
            "right": [1, 3],
        },
        "count": {
            "n_samples": 200,
            "vocab_size": 12,
            "seq_len": 12,
            "n_triggers": 3,
            "max_count": 6,
        },
    },
}

SECTIONS = ("model", "train", "distance", "count")


def resolve(posenc: PosencConfig | Mapping[str, Any], preset: str | None = None) -> dict[str, Any]:
    """The preset named by ``preset`` (or ``posenc.preset``) with posenc's overrides on top.

    posenc: the typed ``posenc:`` section (a mapping is checked into one). Returns a new dict
    with the four SECTIONS. Raises HomogError for an unknown preset or an override key the
    preset does not have (a typo would otherwise be ignored silently).
    """
    posenc = as_posenc(posenc)
    name = preset or posenc.preset
    if name not in PRESETS:
        raise HomogError(f"unknown posenc preset {name!r}; choose from {', '.join(PRESETS)}")
    config = copy.deepcopy(PRESETS[name])
    for sec, overrides in posenc.overrides().items():
        unknown = sorted(set(overrides) - set(config[sec]))
        if unknown:
            raise HomogError(
                f"params posenc.{sec} has unknown keys {unknown}; known: {sorted(config[sec])}"
            )
        config[sec].update(copy.deepcopy(overrides))
    config["preset"] = name
    return config


def as_posenc(posenc: PosencConfig | Mapping[str, Any]) -> PosencConfig:
    """The typed ``posenc:`` section (a raw mapping is checked like params.yaml's)."""
    from homog.config import PosencConfig, section

    return posenc if isinstance(posenc, PosencConfig) else section(PosencConfig, posenc, "posenc")
