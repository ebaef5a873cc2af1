"""The ``posenc:`` section of params.yaml (the positional-encoding lab). Its own module, below
``homog.posenc.presets`` (which resolves a section against its preset) and ``homog.config``
(which re-exports ``PosencConfig``): the section's check reads the preset table
(``homog.config.posenc_presets``) without importing the presets' resolver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from homog.config.posenc_presets import PRESETS, apply_overrides
from homog.validate import check as _check
from homog.validate import check_posenc

# the positional encodings the lab trains (homog.posenc.model builds each)
ENCODINGS = ("nope", "sinusoidal", "learned", "t5", "alibi", "rope", "partial_rope", "mla")

POSENC_TASKS: tuple[str, ...] = ("distance", "count")


@dataclass(frozen=True)
class PosencConfig:
    """``posenc:``: the positional-encoding lab.

    ``model``, ``train``, ``distance`` and ``count`` override keys of the preset's sections
    (``homog.posenc.presets.resolve`` checks them against the preset).
    """

    preset: str = "cpu"  # a key of homog.config.posenc_presets.PRESETS
    tasks: tuple[Literal["distance", "count"], ...] = POSENC_TASKS
    encodings: tuple[str, ...] = ENCODINGS
    device: str = "auto"
    decompose_samples: int = 256  # test sequences whose attention logits are decomposed
    decompose_models: tuple[str, ...] = ("smollm2-135m",)
    decompose_texts: int = 16
    decompose_max_tokens: int = 128
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    distance: dict[str, Any] = field(default_factory=dict)
    count: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("decompose_samples", "decompose_texts", "decompose_max_tokens"):
            _check(getattr(self, name) >= 1, f"posenc.{name} must be >= 1")
        _check(
            self.preset in PRESETS,
            f"posenc.preset: unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}",
        )
        bad = [pe for pe in self.encodings if pe not in ENCODINGS]
        _check(not bad, f"posenc.encodings: unknown {bad}; choose from {', '.join(ENCODINGS)}")
        for name in ("tasks", "encodings", "decompose_models"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        # the preset with the overrides: ranges before training
        check_posenc(apply_overrides(self.preset, self.overrides()))

    def overrides(self) -> dict[str, dict[str, Any]]:
        """The preset overrides, by preset section."""
        return {
            "model": self.model,
            "train": self.train,
            "distance": self.distance,
            "count": self.count,
        }
