"""homog claims --power: the reviews that would decide each primary endpoint (plug-in)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from homog.report.power import power_line, power_section, power_table, reviews_needed


@pytest.mark.parametrize(
    ("low", "high", "sesoi", "n"),
    [(-0.5, 1.5, 1.0, 20), (0.9, 1.3, 1.0, 50), (-0.2, 0.1, 0.3, 10), (1.2, 3.0, 1.0, 30)],
)
def test_at_the_size_found_the_interval_just_clears_the_nearer_margin(low, high, sesoi, n):
    need = reviews_needed(low, high, sesoi, n)
    centre, half = (low + high) / 2, (high - low) / 2
    for size, clear in ((need * 1.01, True), (need * 0.99, False)):
        h = half * math.sqrt(n / size)  # the half-width at that size, centre kept
        holds = [lo <= m <= hi for m in (sesoi, -sesoi) for lo, hi in [(centre - h, centre + h)]]
        assert (not any(holds)) is clear, (size, holds)


def test_a_decided_row_needs_no_more_and_one_on_a_margin_is_never_decided():
    assert reviews_needed(-0.1, 0.1, 1.0, 40) < 40  # inside: equivalent already
    assert reviews_needed(0.5, 1.5, 1.0, 40) == math.inf
    assert math.isnan(reviews_needed(0.0, 1.0, math.nan, 40))


def primary_row(i: int, centre: float, half: float, verdict: str) -> dict:
    return {
        "model": "m",
        "claim": "1k",
        "comparison": f"c{i}",
        "metric": "erank",
        "scope": "late layers",
        "effect": centre,
        "sesoi": 1.0,
        "eq_ci_low": centre - half,
        "eq_ci_high": centre + half,
        "n": 25,
        "verdict": verdict,
        "family": "primary",
    }


def test_the_table_and_line_of_a_claims_frame():
    cases = [(0.1, 0.2, "equivalent"), (0.8, 0.5, "inconclusive"), (1.0, 0.4, "inconclusive")]
    rows = [primary_row(i, c, h, v) for i, (c, h, v) in enumerate(cases)]
    rows.append({**rows[0], "family": "exploratory", "comparison": "x"})
    table = power_table(pd.DataFrame(rows))
    assert list(table["comparison"]) == ["c0", "c1", "c2"]  # the primary rows only
    assert table["n_needed"].tolist()[:2] == [
        math.ceil(25 * (0.2 / 0.9) ** 2),
        math.ceil(25 * (0.5 / 0.2) ** 2),
    ]
    assert table["n_needed"].iloc[2] == math.inf and table["decided"].tolist() == [1, 0, 0]
    line = power_line(table)
    assert "3 primary endpoints on 25 reviews, 2 undecided" in line
    assert f"about {math.ceil(25 * (0.5 / 0.2) ** 2)} reviews" in line
    assert "1 sit on a margin" in line


def test_the_reports_section_lists_the_undecided_endpoints_with_the_line():
    cases = [(0.1, 0.2, "equivalent"), (0.8, 0.5, "inconclusive"), (1.0, 0.4, "inconclusive")]
    frame = pd.DataFrame([primary_row(i, c, h, v) for i, (c, h, v) in enumerate(cases)])
    sec = power_section(frame)
    assert sec.paragraphs[0].startswith(power_line(power_table(frame)))
    (table,) = sec.tables
    assert [r[0] for r in table.rows] == ["c1", "c2"]  # the equivalent row is decided
    assert table.rows[0][-1] == math.ceil(25 * (0.5 / 0.2) ** 2) and table.rows[1][-1] == math.inf
    empty = power_section(pd.DataFrame())
    assert not empty.tables and "nothing to size" in empty.paragraphs[0]
