"""The names of ``stats.primary:`` checked against the registries, when params are read.

A typo there (``erankk``, ``standardised``, ``key_frist - key_control``) matched no claim row,
so the primary family silently shrank: fewer endpoints, another Holm family. Each name must be
a metric of :mod:`homog.metrics.registry`, a token set of it, or, on each side of a contrast,
a variant of :mod:`homog.variants` (a registered one or a place of the position family's
sweep, ``key_p25``). The scopes are checked by :class:`homog.config.primary.PrimaryConfig`
itself. The config cannot do the rest: it sits below the metrics registry.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable

from homog.config.position import PositionConfig
from homog.config.primary import PrimaryConfig
from homog.errors import HomogError
from homog.metrics.registry import ALL_METRICS, TOKEN_SETS
from homog.variants import (
    BY_NAME,
    SEP,
    contrast_terms,
    definition,
    family_names,
    order_key,
    parse_contrast,
    side_terms,
    variant_name,
)


def _hint(name: str, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _known(side: str) -> bool:
    """A registered variant, or a place the position sweep can make (key_p1 .. key_p99 but
    key_p50, the middle being key_mid): key_p250 or key_p0 names no text."""
    if side.startswith("key_p") and side[5:].isdigit():
        return side == variant_name(int(side[5:]) / 100) and 0 < int(side[5:]) < 100
    return definition(side) is not None


def primary_problems(primary: PrimaryConfig) -> list[str]:
    """One line per unknown name of ``primary`` (empty: every name is known)."""
    problems = []
    for key, names, valid in (
        ("metrics", primary.metrics, ALL_METRICS),
        ("token_sets", primary.token_sets, TOKEN_SETS),
    ):
        for name in names:
            if name not in valid:
                problems.append(
                    f"stats.primary.{key}: unknown {key[:-1].replace('_', ' ')} {name!r}"
                    f"{_hint(name, valid)}; valid: {', '.join(valid)}"
                )
    for contrast in primary.contrasts:
        # each side, and each variant of a side that is a difference ("(a - b) - (c - d)")
        sides = parse_contrast(contrast) or (contrast,)
        if len(sides) == 2 and not contrast_terms(*sides):
            # its terms cancel (key_first - key_first): every text's difference is 0, an
            # endpoint that is "equivalent" by construction and enlarges the Holm family
            problems.append(
                f"stats.primary.contrasts: {contrast!r} is zero for every text (its two sides "
                "are the same variants); compare two different variants"
            )
        for side in (v.strip() for s in sides for v in s.split(SEP)):
            if not _known(side):
                problems.append(
                    f"stats.primary.contrasts: {contrast!r} names an unknown variant {side!r}"
                    f"{_hint(side, BY_NAME)}; valid: {', '.join(BY_NAME)} (or a sweep place "
                    "such as key_p25)"
                )
    return problems


def unmade(primary: PrimaryConfig, position: PositionConfig) -> list[str]:
    """The position family's variants that ``stats.primary.contrasts`` need (a derived one
    such as key_ends by its texts) and ``synth.position`` does not make (all of them when it
    is disabled)."""
    made = set(family_names(position.positions)) if position.enabled else set()
    needed = {
        v
        for c in primary.contrasts
        for side in parse_contrast(c) or ()
        for part in side.split(SEP)
        for v in side_terms(part.strip())
    }
    family = ("key_", "ctrl_")
    return sorted((v for v in needed if v.startswith(family) and v not in made), key=order_key)


def check_primary(primary: PrimaryConfig, position: PositionConfig | None = None) -> None:
    """HomogError naming every unknown name of ``stats.primary`` (with a close match); with
    ``position`` (synth.position), a warning on stderr naming the variants the contrasts need
    that synth does not make: those endpoints have no rows, the primary family is smaller."""
    problems = primary_problems(primary)
    if problems:
        raise HomogError(
            "; ".join(problems) + ". A name that matches no claim row would leave the primary "
            "family smaller without a word: fix it in params.yaml"
        )
    missing = unmade(primary, position) if position is not None else []
    if missing:
        made = list(position.positions) if position.enabled else "disabled"  # type: ignore[union-attr]
        print(
            f"warning: stats.primary.contrasts need {', '.join(missing)}, which synth.position "
            f"(positions: {made}) does not make: those primary endpoints get no rows and the "
            "primary family is smaller. Add the positions, or name other contrasts",
            file=sys.stderr,
        )
