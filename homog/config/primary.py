"""``stats.primary:``: the pre-registered primary endpoints (docs/statistics.md).

The primary family is the product of four lists: every (metric, token set, scope, contrast)
combination named here is one primary endpoint per model, Holm-corrected in a family of its
own. Every other claim row is exploratory (a second family), and layer-0 rows are the
negative controls (in no family). Its own module so ``homog.config`` stays small.
"""

from __future__ import annotations

from dataclasses import dataclass

from homog.validate import ParamsValueError
from homog.variants import KEY_FIRST_SPECIFIC, KEY_SPECIFIC, contrast_name, parse_contrast

PRIMARY_SCOPES = ("early", "middle", "late", "final")


@dataclass(frozen=True)
class PrimaryConfig:
    """``stats.primary:``: metrics x token sets x scopes x contrasts of the primary family."""

    # erank and MEV: the paper's two homogenization measures
    metrics: tuple[str, ...] = ("erank", "mev")
    # all tokens, and without the attention sink (the first token and massive-norm tokens)
    token_sets: tuple[str, ...] = ("all", "no_sink")
    # where the paper's claim lives: the late layers and the final-norm output
    scopes: tuple[str, ...] = ("late", "final")
    # the key-specific effects: (key at an edge - key in the middle) - (a non-key sentence
    # at the same edge - it in the middle), for the first place, the last and both (the
    # U-shape); what position does to any sentence cancels, and so does reordering
    contrasts: tuple[str, ...] = KEY_SPECIFIC

    def __post_init__(self) -> None:
        for key in ("metrics", "token_sets", "scopes", "contrasts"):
            if not getattr(self, key):
                raise ParamsValueError(f"stats.primary.{key} must name at least one entry")
        bad = [s for s in self.scopes if s not in PRIMARY_SCOPES]
        if bad:
            raise ParamsValueError(
                f"stats.primary.scopes: {bad} are not depth scopes; use any of "
                f"{', '.join(PRIMARY_SCOPES)} (layer 0 is the control, never primary)"
            )
        odd = [c for c in self.contrasts if parse_contrast(c) is None]
        if odd:
            raise ParamsValueError(
                f"stats.primary.contrasts: {odd} must read 'variant_a - variant_b', e.g. "
                f"'key_first - key_control', or a difference of differences, e.g. "
                f"'{KEY_FIRST_SPECIFIC}'"
            )
        # one spelling per contrast (spaces as contrast_name writes them)
        object.__setattr__(
            self, "contrasts", tuple(contrast_name(*parse_contrast(c)) for c in self.contrasts)
        )

    def names(self, metric: str, token_set: str, scope: str, comparison: str) -> bool:
        """Whether the row (base metric, token set, band, 'a - b') is a primary endpoint."""
        return (
            metric in self.metrics
            and token_set in self.token_sets
            and scope in self.scopes
            and comparison in self.contrasts
        )
