"""The claims: one entry per claim tag, read by the stats stage, the report's claims table and
answer, and docs/statistics.md ("The claims"). No pandas.

Each entry gives the tag a claims row carries (``1``, ``5a``; a token set other than ``all``
adds `` (no_sink)``: :func:`row_tag`), the heading it is listed under (``group``: the claim
number), the question it asks, the family of its rows beyond layer 0 (``family``: a layer-0
row is a control and a row that ``stats.primary`` names is primary, whatever its tag), whether
its rows are Holm-corrected apart from the rest of that family (``own_holm``: the classifier
rows of 4 and 4r, whose permutation p cannot fall below 1 / (draws + 1)) and its claimed
sign (+1 up, -1 down, 0 undirected; ``BY_METRIC``: the sign of the metric's collapse
direction, ``homog.metrics.registry``).

The family words (``primary``, ``exploratory``, ``control``) are defined here, where every
layer that sorts claims rows can read them.
"""

from __future__ import annotations

from dataclasses import dataclass

# the families of docs/statistics.md: the pre-registered endpoints (stats.primary), every other
# claim row, and the negative controls (layer 0: in no Holm family)
PRIMARY, EXPLORATORY, CONTROL_FAMILY = "primary", "exploratory", "control"
FAMILIES = (PRIMARY, EXPLORATORY, CONTROL_FAMILY)
BY_METRIC = None  # the claimed sign is the metric's collapse direction


@dataclass(frozen=True)
class ClaimTag:
    tag: str
    question: str
    family: str = EXPLORATORY  # the family of its rows beyond layer 0 (unless primary)
    sign: int | None = BY_METRIC
    own_holm: bool = False  # Holm-corrected apart from the rest of its family

    @property
    def group(self) -> str:
        """The claim number it is listed under: '5a' -> '5'."""
        return self.tag[0]


class Tag:
    """The tags, named once for the code that builds and reads the rows."""

    BIASED_VS_ORIGINAL, U_SHAPE, KEY_SPECIFIC = "1", "1u", "1k"
    PROGRESSION, FIRST_TOKEN = "2", "3"
    SEPARATION, SEPARATION_BEYOND = "4", "4r"
    REORDERING, POSITION_EFFECT, INTERVENTION = "5a", "5b", "5c"


CLAIMS: tuple[ClaimTag, ...] = (
    ClaimTag(Tag.BIASED_VS_ORIGINAL, "do the biased texts homogenize more than the original?"),
    ClaimTag(Tag.U_SHAPE, "does the key sentence homogenize more at the edges than in the middle?"),
    ClaimTag(Tag.KEY_SPECIFIC, "does a place do more to the key sentence than to another one?"),
    ClaimTag(Tag.PROGRESSION, "is homogenization progressive over depth?", sign=-1),
    ClaimTag(
        Tag.FIRST_TOKEN, "do the biased texts put more attention on the first token?", sign=+1
    ),
    ClaimTag(
        Tag.SEPARATION,
        "does a classifier tell the original from a variant?",
        own_holm=True,
        sign=+1,
    ),
    ClaimTag(
        Tag.SEPARATION_BEYOND,
        "does it, beyond what reordering alone gives?",
        own_holm=True,
        sign=+1,
    ),
    ClaimTag(Tag.REORDERING, "does reordering alone change the metrics?", sign=0),
    ClaimTag(Tag.POSITION_EFFECT, "does position change them beyond rewriting or reordering?"),
    ClaimTag(
        Tag.INTERVENTION, "does removing the positional signal reduce homogenization?", sign=+1
    ),
)
BY_TAG = {c.tag: c for c in CLAIMS}
GROUPS = tuple(dict.fromkeys(c.group for c in CLAIMS))  # "1" .. "5", in order
# the claims Holm-corrected apart, each on its own (their classifier p has a floor)
OWN_HOLM = tuple(c.tag for c in CLAIMS if c.own_holm)


def row_tag(tag: str, token_set: str) -> str:
    """The claim column of a row: the tag, with a token set other than ``all`` in parentheses
    ('1', 'no_sink' -> '1 (no_sink)')."""
    return tag if token_set == "all" else f"{tag} ({token_set})"


def group_of(claim: str) -> str:
    """The claim number a row's claim column belongs to: '5a (no_sink)' -> '5'."""
    return claim[:1]
