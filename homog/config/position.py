"""``synth.position:``: the token-preserving position family (``homog.synth.position``).

Its own module so ``homog.config`` stays small; ``SynthConfig`` (``homog.config.synth``)
imports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PositionConfig:
    """``synth.position:``: where the key sentence is placed (relative positions in [0, 1])."""

    enabled: bool = True
    # 0 -> key_first, 0.5 -> key_mid, 1 -> key_last, others key_p<100p> (0.25 -> key_p25)
    positions: tuple[float, ...] = (0.0, 0.5, 1.0)

    def __post_init__(self) -> None:
        from homog.variants import variant_name

        bad = [p for p in self.positions if not 0 <= p <= 1]
        names = [variant_name(p) for p in self.positions]
        problem = (
            "must not be empty"
            if not self.positions
            else f"must lie in [0, 1], got {bad}"
            if bad
            else f"repeats a position (names {names})"
            if len(set(names)) < len(names)
            else None
        )
        if problem:
            from homog.validate import ParamsValueError

            raise ParamsValueError(f"synth.position.positions {problem}")
