"""The posenc presets as data (``PRESETS``; ``homog.posenc.presets`` describes each) and how
overrides apply to one. Imports nothing of homog's config, so both the ``posenc:`` section's
check (``homog.config.posenc``) and the resolver (``homog.posenc.presets``) read it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from homog.errors import HomogError

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


def apply_overrides(name: str, overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Preset ``name`` (a new dict with the four SECTIONS) with ``overrides`` (section -> keys)
    on top. HomogError for an unknown preset or an override key the preset does not have (a
    typo would otherwise be ignored silently)."""
    if name not in PRESETS:
        raise HomogError(f"unknown posenc preset {name!r}; choose from {', '.join(PRESETS)}")
    config = copy.deepcopy(PRESETS[name])
    for sec, keys in overrides.items():
        unknown = sorted(set(keys) - set(config[sec]))
        if unknown:
            raise HomogError(
                f"params posenc.{sec} has unknown keys {unknown}; known: {sorted(config[sec])}"
            )
        config[sec].update(copy.deepcopy(keys))
    config["preset"] = name
    return config
