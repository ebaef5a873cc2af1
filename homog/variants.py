"""The variants: one entry per variant, read by synth, stats, the store, plots, the report's
glossary and claims, the TUI and the docs.

A variant is one version of a review that the pipeline runs the models over. Each entry says
its name, family (``original``; ``paper``: the rewrites of the paper; ``position``: the
token-preserving family that moves one sentence; ``derived``: not a text, a per-text
combination the stats stage forms), its colour in every figure (Okabe-Ito, colour-blind safe,
fixed so figures stay comparable) and the sentence that defines it. The order of ``VARIANTS``
is the order of every table and legend.

The position family is a sweep: ``synth.position.positions`` may name any place in [0, 1];
0, 0.5 and 1 have names here (key_first, key_mid, key_last), any other place p gets
``key_p<round(100 p)>`` (``variant_name``), with a colour from ``EXTRA_COLORS`` and a
definition from ``definition``. ctrl_first / ctrl_mid / ctrl_last move the review's control
sentence to the same slots as key_first / key_mid / key_last (the like-with-like control:
position alone cancels in their difference of differences, ``contrast_name``). Adding a
named variant is one entry below plus the code that builds its text.

The relations between variants live here too: each biased variant's control (``CONTROL_OF``),
the variants claim 4's classifiers separate (``SEPARABLE``), the derived variants
(``DERIVED_OF``), the primary endpoints' contrasts (``KEY_SPECIFIC``) and the contrast plan,
every pair the stats stage contrasts (``CONTRAST_PLAN``).
"""

from __future__ import annotations

import re
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
    Variant(
        "original",
        ORIGINAL,
        "#000000",
        "the review as drawn from the corpus (after the corpus stage's cleaning).",
    ),
    Variant(
        "front",
        PAPER,
        "#D55E00",
        "every sentence that has a key phrase rewritten so that the key phrase sits as "
        "early in the sentence as possible (synth stage).",
    ),
    Variant(
        "end",
        PAPER,
        "#0072B2",
        "the same rewrite toward the end: the key phrase as late in the sentence as possible.",
    ),
    Variant(
        "control",
        PAPER,
        "#009E73",
        "the same kind of rewrite (clause moves) that keeps the key phrase where it was "
        "(its relative position changes by at most synth.control_tolerance): a difference "
        "between front/end and control is position, a difference between control and "
        "original is paraphrase.",
    ),
    Variant(
        "key_first",
        POSITION,
        "#E69F00",
        "the review's key sentence (the one that holds its most salient key phrase) "
        "placed first; the other sentences keep their order and every token is kept.",
        0.0,
    ),
    Variant(
        "key_mid",
        POSITION,
        "#CC79A7",
        "the key sentence placed in the middle of the review; the other sentences keep "
        "their order and every token is kept.",
        0.5,
    ),
    Variant(
        "key_last",
        POSITION,
        "#56B4E9",
        "the key sentence placed last; the other sentences keep their order and every "
        "token is kept.",
        1.0,
    ),
    Variant(
        "key_control",
        POSITION,
        "#999999",
        "a non-key sentence of similar token length moved by the same distance, in the "
        "same direction, as the position family's largest move in that text: the negative "
        "control of the key_* family (same tokens, same kind of move, key sentence not "
        "moved).",
    ),
    Variant(
        "ctrl_first",
        POSITION,
        "#B35806",
        "the same-place control: the review's control sentence (a non-key sentence, never "
        "the first, interior where one exists, the closest to the key sentence in token "
        "length) placed first, exactly as key_first places the key sentence; the other "
        "sentences keep their order and every token is kept.",
    ),
    Variant(
        "ctrl_mid",
        POSITION,
        "#8073AC",
        "the control sentence placed in the middle (the slot key_mid gives the key "
        "sentence); every token kept.",
    ),
    Variant(
        "ctrl_last",
        POSITION,
        "#1B7837",
        "the control sentence placed last (the slot key_last gives the key sentence); "
        "every token kept.",
    ),
    Variant(
        "key_ends",
        DERIVED,
        "#7F7F7F",
        "not a text: the stats stage's per-text mean of key_first and key_last (the key "
        "sentence at either edge), contrasted with key_mid for the U-shape (claim 1u).",
    ),
    Variant(
        "ctrl_ends",
        DERIVED,
        "#BFBFBF",
        "not a text: the per-text mean of ctrl_first and ctrl_last (the control sentence "
        "at either edge), the control side of the key-specific U-shape.",
    ),
)
BY_NAME = {v.name: v for v in VARIANTS}
# the variants that are texts, in order (a finer sweep's key_p25 ... sorts after them by name)
TEXT_VARIANTS = tuple(v.name for v in VARIANTS if v.family != DERIVED)
PAPER_VARIANTS = tuple(v.name for v in VARIANTS if v.family == PAPER)
# three different things are called a control: the paper's rewrite that keeps the key phrase
# in place (PAPER_CONTROL), the position family's moved non-key sentence (KEY_CONTROL), and
# the claims' verdict family of negative-control rows (homog.stats.verdicts.CONTROL_FAMILY)
PAPER_CONTROL = "control"
KEY_CONTROL = "key_control"
NAMED = {v.position: v.name for v in VARIANTS if v.position is not None}
# the same-place control: the control sentence moved to the places key_first / key_mid /
# key_last give the key sentence (synth makes the ones whose place synth.position.positions
# names)
CTRL_NAMED = {0.0: "ctrl_first", 0.5: "ctrl_mid", 1.0: "ctrl_last"}
# the family members that leave the key sentence where it is: not a dose of key position
NOT_KEY_MOVES = (KEY_CONTROL, *CTRL_NAMED.values())
# each biased variant's control: the variant that makes the same kind of change without
# moving the key (the claims read a biased variant's effect beyond its control's)
CONTROL_OF: dict[str, str] = {
    "front": PAPER_CONTROL,
    "end": PAPER_CONTROL,
    "key_first": KEY_CONTROL,
    "key_last": KEY_CONTROL,
}
BIASED = tuple(CONTROL_OF)  # the variants that move the key phrase or sentence to an edge
# the variants that claim 4's classifiers tell from the original (homog.stats.separability)
SEPARABLE = (*BIASED, KEY_CONTROL)
COLORS = {v.name: v.color for v in VARIANTS if v.family != DERIVED}
EXTRA_COLORS = ("#F0E442", "#882255", "#44AA99", "#117733")  # variants beyond the registry's


def variant_name(p: float) -> str:
    """key_first / key_mid / key_last for 0 / 0.5 / 1, else key_p<round(100 p)> (key_p25)."""
    return NAMED.get(float(p), f"key_p{round(100 * p)}")


def ctrl_names(positions: tuple[float, ...] | list[float]) -> list[str]:
    """The same-place control's variants of ``positions`` (those at 0, 0.5 and 1), in order."""
    return [CTRL_NAMED[float(p)] for p in positions if float(p) in CTRL_NAMED]


def family_names(positions: tuple[float, ...] | list[float]) -> list[str]:
    """The position family's variant names in order: one per position, key_control, then the
    same-place control's (:func:`ctrl_names`)."""
    return [variant_name(p) for p in positions] + [KEY_CONTROL] + ctrl_names(positions)


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
        return (
            f"the key sentence placed at {int(name[5:])} % of the review (the position "
            "family's sweep); the other sentences keep their order and every token is "
            "kept."
        )
    return None


def order_key(name: str) -> tuple[int, str]:
    """Sort key: the registry's order, then other names (a sweep's key_p25 ...) by name."""
    return (TEXT_VARIANTS.index(name), "") if name in TEXT_VARIANTS else (len(VARIANTS), name)


# ---------------------------------------------------------------------------------------------
# Contrasts: one side minus another, per text. A side is a variant, a derived variant (a
# per-text mean of variants, ``DERIVED_OF``) or a difference of two of those written
# "x - y"; a contrast whose side is a difference is written with that side in parentheses,
# "(key_first - key_mid) - (ctrl_first - ctrl_mid)" (a difference of differences). The
# contrasts table keeps the sides in variant_a and variant_b ("key_first - key_mid").

KEY_ENDS, CTRL_ENDS = "key_ends", "ctrl_ends"
DERIVED_OF: dict[str, dict[str, float]] = {
    KEY_ENDS: {"key_first": 0.5, "key_last": 0.5},
    CTRL_ENDS: {"ctrl_first": 0.5, "ctrl_last": 0.5},
}
SEP = " - "
_NAME = r"([A-Za-z0-9_]+)"
_SIDE = rf"(?:{_NAME}|\(\s*{_NAME}\s+-\s+{_NAME}\s*\))"
_CONTRAST = re.compile(rf"{_SIDE}\s+-\s+{_SIDE}")


def contrast_name(a: str, b: str) -> str:
    """'a - b', a side that is itself a difference in parentheses."""
    return SEP.join(f"({s})" if SEP in s else s for s in (a, b))


# the primary endpoints' contrasts (homog.config.primary): the U-shape, the key sentence at
# either edge against the middle ((key_first + key_last) / 2 - key_mid, per text), and the
# key-specific effects: what a place gives the key sentence beyond what the same place gives
# the same-place control's sentence (ctrl_*), per text, so that position alone cancels
U_SHAPE = contrast_name(KEY_ENDS, "key_mid")
KEY_FIRST_SPECIFIC = contrast_name("key_first - key_mid", "ctrl_first - ctrl_mid")
KEY_LAST_SPECIFIC = contrast_name("key_last - key_mid", "ctrl_last - ctrl_mid")
U_SHAPE_SPECIFIC = contrast_name(U_SHAPE, "ctrl_ends - ctrl_mid")
KEY_SPECIFIC = (KEY_FIRST_SPECIFIC, KEY_LAST_SPECIFIC, U_SHAPE_SPECIFIC)

# The contrast plan: every (a, b) the stats stage contrasts, per run, metric and layer, where
# the run holds both sides (homog.stats.contrasts). Its order is the contrasts table's.
CONTRAST_PLAN: tuple[tuple[str, str], ...] = (
    # the paper's rewrites against the original, and front / end against their control
    ("front", "original"),
    ("end", "original"),
    ("control", "original"),
    ("front", "control"),
    ("end", "control"),
    # the token-preserving position family: the key sentence first / middle / last, and
    # key_control (another sentence moved as far) as the negative control of "moving a
    # sentence"
    ("key_first", "original"),
    ("key_last", "original"),
    ("key_control", "original"),
    ("key_first", "key_last"),
    ("key_first", "key_mid"),
    ("key_mid", "key_last"),
    ("key_first", "key_control"),
    ("key_last", "key_control"),
    # key_mid against the original (homog compare's key_mid p), and the U-shape: key_ends
    # against the middle
    ("key_mid", "original"),
    (KEY_ENDS, "key_mid"),
    # like with like: what a place does to any sentence (the same-place control moved), and
    # the key-specific effect, a difference of differences in which position alone cancels
    # (the primary endpoints)
    ("key_last", "key_mid"),
    ("ctrl_first", "ctrl_mid"),
    ("ctrl_last", "ctrl_mid"),
    (CTRL_ENDS, "ctrl_mid"),
    ("key_first - key_mid", "ctrl_first - ctrl_mid"),
    ("key_last - key_mid", "ctrl_last - ctrl_mid"),
    ("key_ends - key_mid", "ctrl_ends - ctrl_mid"),
)


def parse_contrast(text: str) -> tuple[str, str] | None:
    """(a, b) of a contrast written as :func:`contrast_name` writes it ('a - b',
    '(a1 - a2) - (b1 - b2)', '(a1 - a2) - b'), or None when ``text`` does not read so."""
    m = _CONTRAST.fullmatch(text.strip())
    if m is None:
        return None
    return tuple(SEP.join(m[g + k] for k in (1, 2)) if m[g] is None else m[g] for g in (1, 4))  # type: ignore[return-value]


def side_terms(side: str) -> dict[str, float]:
    """The text variants of one side with their weights: key_ends -> key_first 0.5, key_last
    0.5; 'x - y' -> x's terms minus y's."""
    if SEP in side:
        x, y = side.split(SEP, 1)
        return _add(side_terms(x.strip()), side_terms(y.strip()), -1.0)
    return dict(DERIVED_OF.get(side, {side: 1.0}))


def contrast_terms(a: str, b: str) -> dict[str, float]:
    """Per text variant its weight in a - b (weights that cancel are dropped)."""
    return _add(side_terms(a), side_terms(b), -1.0)


def _add(x: dict[str, float], y: dict[str, float], w: float) -> dict[str, float]:
    out = dict(x)
    for k, v in y.items():
        out[k] = out.get(k, 0.0) + w * v
    return {k: v for k, v in out.items() if v != 0.0}
