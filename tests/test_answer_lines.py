"""The answer as data (homog.report.answer_line): each line is an AnswerLine whose fields
carry what its text shows, the page and the README render it in one place, and the control
line closes the answer by its family, not by its text."""

from __future__ import annotations

import pandas as pd
import pytest

from homog.report.answer import (
    README_END,
    README_START,
    answer_lines,
    answer_section,
    replace_block,
    with_extra,
)
from homog.report.answer_line import AnswerLine
from homog.report.document import to_html, to_markdown
from homog.variants import KEY_FIRST_SPECIFIC, KEY_LAST_SPECIFIC


def row(comparison, effect, sesoi, verdict, *, model="m", family="primary", band="late"):
    return {
        "model": model,
        "claim": "1k",
        "comparison": comparison,
        "metric": "erank",
        "scope": band,
        "band": band,
        "family": family,
        "effect": effect,
        "ci_low": effect - 0.5,
        "ci_high": effect + 0.5,
        "sesoi": sesoi,
        "verdict": verdict,
        "baseline_mean": 30.0,
    }


def claims() -> pd.DataFrame:
    return pd.DataFrame(
        [
            row(KEY_FIRST_SPECIFIC, 2.0, 0.5, "supported"),
            row(KEY_LAST_SPECIFIC, -0.1, 0.5, "negligible", model="n"),
            row("key_first - key_control", 0.3, 1.0, "inconclusive"),
            row(KEY_FIRST_SPECIFIC, 0.0, 0.5, "equivalent", family="control", band="layer0"),
        ]
    )


def test_each_line_carries_what_its_text_shows():
    frame = claims()
    lines = answer_lines(frame)
    assert [x.question for x in lines] == [
        "Key-specific edge effect",
        "Position effect",
        "Order-invariance check",
    ]
    edge, position, control = lines
    assert (edge.family, edge.endpoints) == ("primary", 2)
    assert dict(edge.verdicts) == {"supported": 1, "negligible": 1}
    # the largest |effect| / SESOI, computed here from the rows: 2.0 / 0.5 on model m
    assert edge.largest is not None and edge.largest.ratio == pytest.approx(4.0)
    assert (edge.largest.model, edge.largest.comparison) == ("m", KEY_FIRST_SPECIFIC)
    text = edge.markdown
    assert text == f"**{edge.question}** ({edge.scope}): {edge.finding}"
    assert edge.scope.startswith(f"{edge.family}, {edge.endpoints} endpoints; ")
    assert f"largest |effect| 4 SESOI (m, {KEY_FIRST_SPECIFIC}, erank, late)" in text
    assert all(f"{n} {verdict}" in text for verdict, n in edge.verdicts)
    assert position.endpoints == 1 and position.largest.ratio == pytest.approx(0.3)
    assert "largest |effect| 0.3 SESOI" in position.markdown
    assert (control.family, control.endpoints) == ("control", 1)
    assert f"{control.endpoints} rows" in control.markdown


def test_the_page_and_the_readme_show_the_same_rendering(tmp_path):
    frame = claims()
    lines = answer_lines(frame)
    sec = answer_section(frame, tmp_path)
    assert sec.paragraphs == [x.markdown for x in lines]
    page = to_markdown("t", "i", [sec], "f")
    assert all(f"\n{x.markdown}\n" in page for x in lines)
    html = to_html("t", "i", [sec])
    assert all(f"<p><strong>{x.question}</strong> (" in html for x in lines)
    readme = replace_block(f"a\n{README_START}\nold\n{README_END}\nb", lines, "From a db:")
    block = readme.split(README_START)[1].split(README_END)[0].strip().splitlines()
    assert block == ["From a db:", *(f"- {x.markdown}" for x in lines)]


def test_extra_lines_go_before_the_control_lines_by_family():
    claim = AnswerLine("Position effect", "primary", "primary, 1 endpoints; x", "y.")
    control = AnswerLine("Negative control", "control", "layer 0", "0.")
    # a line whose text reads like the order-invariance check but is not a control
    extra = AnswerLine("Order-invariance look-alike", "primary", "s", "f.")
    assert with_extra([claim, control], [None, extra]) == [claim, extra, control]
    assert with_extra([claim], [extra]) == [claim, extra]
    assert with_extra([], [None, extra]) == [extra]
    assert with_extra([claim, control], [None]) == [claim, control]
