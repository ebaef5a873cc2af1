"""The variants: one entry per variant, read by synth, stats, the store, plots, the report's
glossary, the TUI and the docs (issue 43's registry).

A variant is one version of a review that the pipeline runs the models over. Each entry says
its name, family (``original``; ``paper``: the rewrites of the paper; ``position``: the
token-preserving family that moves one sentence; ``derived``: not a text, a per-text
combination the stats stage forms), its colour in every figure (Okabe-Ito, colour-blind safe,
fixed so figures stay comparable) and the sentence that defines it. The order of ``VARIANTS``
is the order of every table and legend.

The position family is a sweep: ``synth.position.positions`` may name any place in [0, 1];
0, 0.5 and 1 have names here (key_first, key_mid, key_last), any other place p gets
``key_p<round(100 p)>`` (``variant_name``), with a colour from ``EXTRA_COLORS`` and a
definition from ``definition``. Adding a named variant is one entry below plus the code that
builds its text.
"""

from __future__ import annotations

from dataclasses import dataclass

ORIGINAL, PAPER, POSITION, DERIVED = "original", "paper", "position", "derived"


@dataclass(frozen=True)
class Variant:
    name: str
    family: str
    color: str
    definition: str
    position: float | None = None  # the key sentence's relative place (the position family)


VARIANTS: tuple[Variant, ...] = (
    Variant("original", ORIGINAL, "#000000",
            "the review as drawn from the corpus (after the corpus stage's cleaning)."),
    Variant("front", PAPER, "#D55E00",
            "every sentence that has a key phrase rewritten so that the key phrase sits as "
            "early in the sentence as possible (synth stage)."),
    Variant("end", PAPER, "#0072B2",
            "the same rewrite toward the end: the key phrase as late in the sentence as "
            "possible."),
    Variant("control", PAPER, "#009E73",
            "the same kind of rewrite (clause moves) that keeps the key phrase where it was "
            "(its relative position changes by at most synth.control_tolerance): a difference "
            "between front/end and control is position, a difference between control and "
            "original is paraphrase."),
    Variant("key_first", POSITION, "#E69F00",
            "the review's key sentence (the one that holds its most salient key phrase) "
            "placed first; the other sentences keep their order and every token is kept.",
            0.0),
    Variant("key_mid", POSITION, "#CC79A7",
            "the key sentence placed in the middle of the review; the other sentences keep "
            "their order and every token is kept.", 0.5),
    Variant("key_last", POSITION, "#56B4E9",
            "the key sentence placed last; the other sentences keep their order and every "
            "token is kept.", 1.0),
    Variant("key_control", POSITION, "#999999",
            "a non-key sentence of similar token length moved by the same distance, in the "
            "same direction, as the position family's largest move in that text: the negative "
            "control of the key_* family (same tokens, same kind of move, key sentence not "
            "moved)."),
    Variant("key_ends", DERIVED, "#7F7F7F",
            "not a text: the stats stage's per-text mean of key_first and key_last (the key "
            "sentence at either edge), contrasted with key_mid for the U-shape (claim 1u)."),
)  # fmt: skip
BY_NAME = {v.name: v for v in VARIANTS}
# the variants that are texts, in order (a finer sweep's key_p25 ... sorts after them by name)
TEXT_VARIANTS = tuple(v.name for v in VARIANTS if v.family != DERIVED)
PAPER_VARIANTS = tuple(v.name for v in VARIANTS if v.family == PAPER)
CONTROL = "key_control"  # the position family's negative control
NAMED = {v.position: v.name for v in VARIANTS if v.position is not None}
COLORS = {v.name: v.color for v in VARIANTS if v.family != DERIVED}
EXTRA_COLORS = ("#F0E442", "#882255", "#44AA99", "#117733")  # variants beyond the registry's


def variant_name(p: float) -> str:
    """key_first / key_mid / key_last for 0 / 0.5 / 1, else key_p<round(100 p)> (key_p25)."""
    return NAMED.get(float(p), f"key_p{round(100 * p)}")


def family_names(positions: tuple[float, ...] | list[float]) -> list[str]:
    """The position family's variant names in order: one per position, then key_control."""
    return [variant_name(p) for p in positions] + [CONTROL]


def colors_for(names: list[str] | tuple[str, ...] | set[str]) -> dict[str, str]:
    """Each name's colour: the registry's, else the next of EXTRA_COLORS (in ``order_key``
    order, so the same names get the same colours in every figure)."""
    extra = iter(EXTRA_COLORS * (1 + len(names) // len(EXTRA_COLORS)))
    return {n: COLORS[n] if n in COLORS else next(extra) for n in sorted(names, key=order_key)}


def definition(name: str) -> str | None:
    """The sentence that defines ``name``: the registry's, or a sweep place's (key_p25)."""
    if name in BY_NAME:
        return BY_NAME[name].definition
    if name.startswith("key_p") and name[5:].isdigit():
        return (f"the key sentence placed at {int(name[5:])} % of the review (the position "
                "family's sweep); the other sentences keep their order and every token is "
                "kept.")  # fmt: skip
    return None


def order_key(name: str) -> tuple[int, str]:
    """Sort key: the registry's order, then other names (a sweep's key_p25 ...) by name."""
    return (TEXT_VARIANTS.index(name), "") if name in TEXT_VARIANTS else (len(VARIANTS), name)
