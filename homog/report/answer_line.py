"""One line of the report's answer, as data, and its one rendering.

Every line of the answer (the claims' questions in homog.report.answer, the moved sentence's
in homog.report.sentences_view, the cost's in homog.report.cost and homog.report.cost_doses,
the attention concentration's in homog.report.concentration) is an :class:`AnswerLine`. The
report's first section (HTML and Markdown, through homog.report.document), the sections that
repeat a line, and the README's answer block all show :attr:`AnswerLine.markdown`; code that
needs to know what a line is reads its fields, never its text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from homog.claims import EXPLORATORY, PRIMARY


@dataclass(frozen=True)
class Largest:
    """The largest |effect| / SESOI among a line's rows, and the row it comes from."""

    ratio: float
    model: str
    comparison: str
    metric: str
    scope: str


@dataclass(frozen=True)
class AnswerLine:
    """One question of the answer and what the database says about it.

    question: the name shown in bold ("Position effect"). family: the family whose
    correction the line's verdicts belong to (primary, exploratory or control; the dose
    series' and the cost slopes' primary endpoints are primary). scope: what was compared, in
    the parentheses after the name. finding: the answer, after the colon. endpoints: how many
    rows the line reads (None where the line does not count them); verdicts: (verdict, rows)
    of those rows, in the order first met; largest: the largest |effect| in SESOI units
    (None where the line names none or no row has a margin).
    """

    question: str
    family: str
    scope: str
    finding: str
    endpoints: int | None = None
    verdicts: tuple[tuple[str, int], ...] = ()
    largest: Largest | None = None

    @property
    def markdown(self) -> str:
        """The line as the page and the README show it: Markdown, whose ** and ` marks the
        HTML page renders (homog.report.document)."""
        return f"**{self.question}** ({self.scope}): {self.finding}"


def verdict_counts(verdicts: Iterable[object]) -> tuple[tuple[str, int], ...]:
    """(verdict, rows) for each verdict word, in the order first met."""
    return tuple(Counter(str(v) for v in verdicts).items())


def endpoint_line(
    question: str, scope: str, finding: str, verdicts: Iterable[object]
) -> AnswerLine:
    """A line of primary endpoints from a table of their own (the dose series, the cost
    slopes): one verdict per model and endpoint."""
    verdicts = list(verdicts)
    return AnswerLine(
        question=question,
        family=PRIMARY,
        scope=scope,
        finding=finding,
        endpoints=len(verdicts),
        verdicts=verdict_counts(verdicts),
    )


def family_of(families: Iterable[object]) -> str:
    """The family of a line that reads rows of both: primary when any row is."""
    return PRIMARY if PRIMARY in set(map(str, families)) else EXPLORATORY
