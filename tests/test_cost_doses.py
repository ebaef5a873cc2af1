"""The homogenize doses lead the report's cost section (homog.report.cost_doses): the answer's
cost line comes from the primary endpoint, one dose-response figure per model, the slopes and
per-dose rows as tables; without the table the section and the answer are as before."""

from __future__ import annotations

import pandas as pd
from test_intervention_cost import OPTS, synthetic

from homog.report.answer import full_answer
from homog.report.cost import cost_section
from homog.report.cost_doses import _points, primary_cost_line
from homog.stats.cost_rows import cost_rows, finish


def cost_frame() -> pd.DataFrame:
    rows = cost_rows(synthetic(cost=1.5), "r1", "m1", OPTS)
    rows += cost_rows(synthetic(cost=0.0, seed=1), "r2", "m2", OPTS)
    return finish(rows, OPTS.alpha)


def test_the_answer_line_comes_from_the_primary_endpoint(monkeypatch):
    import homog.report.answer as answer
    from homog.report.answer_line import AnswerLine

    cost = cost_frame()
    line = primary_cost_line(cost)
    primary = cost[(cost["kind"] == "slope") & (cost["arm"] == "homogenize - control")]
    m1 = primary[primary["model"] == "m1"].iloc[0]
    assert f"m1: {m1['value']:.3g} [{m1['ci_low']:.3g}, {m1['ci_high']:.3g}]" in line.markdown
    assert "supported (a cost)" in line.markdown and "m2:" in line.markdown
    claims = AnswerLine("Claims", "primary", "...", "...")
    slopes = AnswerLine("Cost", "primary", "from the slopes", "...")
    monkeypatch.setattr(answer, "answer_lines", lambda claims_frame: [claims])
    probe = pd.DataFrame({"model": ["m1"]})
    monkeypatch.setattr(answer, "cost_line", lambda p: slopes)
    assert full_answer(pd.DataFrame(), probe, None, cost) == [claims, line]
    assert full_answer(pd.DataFrame(), probe, None) == [claims, slopes]
    assert primary_cost_line(None) is None and primary_cost_line(pd.DataFrame()) is None


def test_the_section_leads_with_one_figure_per_model(tmp_path):
    cost = cost_frame()
    sec = cost_section(pd.DataFrame(), tmp_path, cost)
    assert sec.paragraphs[1] == primary_cost_line(cost).markdown
    assert "No probe tables" in sec.paragraphs[-1]
    assert [p.name for p, _ in sec.figures] == ["cost_doses__m1.png", "cost_doses__m2.png"]
    assert all(p.stat().st_size > 5000 for p, _ in sec.figures)
    assert len(sec.tables) == 2 and len(sec.tables[0].rows) == 6  # 3 slope rows x 2 models
    # the figure's points: x 0 at dose 0, the final band's erank change, the margin's level
    pts = _points(cost, "m1", "homogenize")
    assert list(pts["dose"]) == [0.0, 0.2, 0.5, 1.0] and pts["x"].iloc[0] == 0
    want = cost[
        (cost["model"] == "m1")
        & (cost["arm"] == "homogenize")
        & (cost["kind"] == "manipulation")
        & (cost["band"] == "final")
    ]
    assert list(pts["x"].iloc[1:]) == list(want.sort_values("dose")["value"])
    assert abs(pts["x"] + 20 * pts["dose"]).max() < 1  # the planted fall: 20 per unit alpha
    # no table: the section as before
    assert cost_section(pd.DataFrame(), tmp_path).figures == []
