"""``synth.position:``: the token-preserving position family (``homog.synth.position``).

Its own module so ``homog.config`` stays small; ``SynthConfig`` (``homog.config.synth``)
imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from homog.validate import ParamsValueError
from homog.variants import variant_name


@dataclass(frozen=True)
class PositionConfig:
    """``synth.position:``: where the key sentence is placed (relative positions in [0, 1])."""

    enabled: bool = True
    # 0 -> key_first, 0.5 -> key_mid, 1 -> key_last, others key_p<100p> (0.25 -> key_p25)
    positions: tuple[float, ...] = (0.0, 0.5, 1.0)

    def __post_init__(self) -> None:
        bad = [p for p in self.positions if not 0 <= p <= 1]
        names = [variant_name(p) for p in self.positions]
        # 0.004 -> key_p0, 0.996 -> key_p100: a name that reads as the edge or the middle
        # without being key_first / key_mid / key_last
        edges = ("key_p0", "key_p50", "key_p100")
        blurred = [p for p, n in zip(self.positions, names, strict=True) if n in edges]
        problem = (
            "must not be empty"
            if not self.positions
            else f"must lie in [0, 1], got {bad}"
            if bad
            else f"has {blurred}, which round to 0, 50 or 100 % (use 0, 0.5 or 1, or a place "
            "at least 0.01 away)"
            if blurred
            else f"repeats a position (names {names})"
            if len(set(names)) < len(names)
            else None
        )
        if problem:
            raise ParamsValueError(f"synth.position.positions {problem}")
