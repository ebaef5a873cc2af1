"""The answer's primary lines: one per pre-registered question, from the claims frame.

Each question (:data:`PRIMARY_QUESTIONS`: a name, what it compares, its comparisons) is one
:class:`~homog.report.answer_line.AnswerLine` of the primary family: the bottom line in words,
the verdicts per model, the largest |effect| in SESOI units and whether the verdicts hold at
every margin. homog.report.answer puts them first in the answer.
"""

from __future__ import annotations

import pandas as pd

from homog.claims import PRIMARY
from homog.report.answer_line import AnswerLine, Largest, verdict_counts
from homog.report.claims_view import tally
from homog.report.forest import sesoi_ratio
from homog.report.sensitivity import holds_phrase
from homog.stats.verdicts import MATTERS, MIN_PAIRS, NONZERO, TOO_FEW
from homog.variants import KEY_FIRST_SPECIFIC, KEY_LAST_SPECIFIC, U_SHAPE_SPECIFIC

# the primary family's questions: a name and the comparisons it covers
PRIMARY_QUESTIONS = (
    (
        "Key-specific edge effect",
        "the key sentence first or last against the middle, beyond "
        "what the same places give a non-key sentence (position alone cancels)",
        (KEY_FIRST_SPECIFIC, KEY_LAST_SPECIFIC),
    ),
    (
        "Key-specific U-shape",
        "the key sentence at the edges against the middle, beyond a "
        "non-key sentence's U-shape on the same slots",
        (U_SHAPE_SPECIFIC,),
    ),
    (
        "Position effect",
        "the key sentence first or last against a control sentence moved as far",
        ("key_first - key_control", "key_last - key_control"),
    ),
    (
        "U-shape",
        "the key sentence at the edges, (key_first + key_last) / 2, against the middle",
        ("key_ends - key_mid",),
    ),
)


def _largest(rows: pd.DataFrame) -> Largest | None:
    """The row of the largest |effect| / SESOI (None when no row has a margin)."""
    r = sesoi_ratio(rows).abs()
    if not r.notna().any():
        return None
    top = rows.loc[r.idxmax()]
    return Largest(
        float(r.max()),
        str(top["model"]),
        str(top["comparison"]),
        str(top["metric"]),
        str(top["scope"]),
    )


def _largest_words(largest: Largest | None) -> str:
    if largest is None:
        return "no margin to compare with"
    return (
        f"largest |effect| {sig2(largest.ratio)} SESOI ({largest.model}, {largest.comparison}, "
        f"{largest.metric}, {largest.scope})"
    )


def sig2(x: float) -> str:
    """A number as the answer shows it: two significant digits."""
    return f"{float(x):.2g}"


def _bottom_line(verdicts: pd.Series) -> str:
    """The question's answer in words: only supported / reversed rows (their CI beyond the
    margin) are "an effect that matters"; a nonzero row is real but not shown to matter."""
    v = set(map(str, verdicts))
    if not v:
        return "not measured"
    n = len(verdicts)
    if v == {TOO_FEW}:
        return f"no verdict: too few pairs (fewer than {MIN_PAIRS}) in all {n} endpoints"
    if v <= {"equivalent", "negligible"}:
        return "no effect as large as the smallest one of interest"
    parts = []
    k = int(verdicts.isin(MATTERS).sum())
    if k:
        parts.append(f"an effect that matters in {k} of {n} endpoints")
    k = int((verdicts == NONZERO).sum())
    if k:
        parts.append(f"{k} of {n} real but not shown to matter (CI reaches into the margin)")
    k = int((verdicts == TOO_FEW).sum())
    if k:
        parts.append(f"{k} of {n} too few pairs (fewer than {MIN_PAIRS}) for a verdict")
    if not parts:
        return "not settled: some endpoints cannot tell"
    return "; ".join(parts)


def per_model(rows: pd.DataFrame) -> str:
    """ "m: 3 supported, 1 negligible; n: ...": each model's verdicts, tallied."""
    return "; ".join(f"{m}: {tally(g['verdict'])}" for m, g in rows.groupby("model", sort=False))


def primary_lines(claims: pd.DataFrame) -> list[AnswerLine]:
    """One line per primary question (position effect, U-shape)."""
    if "family" not in claims.columns:
        return []
    prim = claims[claims["family"] == PRIMARY]
    out = []
    for name, what, comparisons in PRIMARY_QUESTIONS:
        rows = prim[prim["comparison"].isin(comparisons)]
        if rows.empty:
            continue
        holds = holds_phrase(rows)
        largest = _largest(rows)
        out.append(
            AnswerLine(
                question=name,
                family=PRIMARY,
                scope=f"{PRIMARY}, {len(rows)} endpoints; {what}",
                finding=f"{_bottom_line(rows['verdict'])}. {per_model(rows)}; "
                f"{_largest_words(largest)}" + (f"; {holds}." if holds else "."),
                endpoints=len(rows),
                verdicts=verdict_counts(rows["verdict"]),
                largest=largest,
            )
        )
    return out
