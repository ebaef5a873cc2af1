"""Issue 42's small errors, each as a newcomer meets it: a reversed layer range, a metric
name one character off, `homog runs` outside a project, the --claim help's own examples,
the TUI help's "[x]" and its "1 lines"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from homog.claims import CLAIMS
from homog.cli import main
from homog.errors import HomogError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def db(demo_db_factory) -> str:
    return str(demo_db_factory(3, 8))


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_reversed_layer_range_says_reversed(db):
    res = invoke("compare", "--metric", "erank", "--layers", "5-2", "--db", db)
    assert res.exit_code == 1
    assert "reversed" in res.output and "2-5" in res.output and "within" not in res.output


def test_unknown_metric_suggests_the_close_name(db):
    from homog.store.sql import check_names

    with pytest.raises(HomogError, match=r"did you mean erank__no_sink\?"):
        check_names("metric", ["erank_no_sink"], ["erank", "erank__no_sink", "mev"])
    with pytest.raises(HomogError) as err:  # nothing close: no guess
        check_names("metric", ["zzz"], ["erank", "mev"])
    assert "did you mean" not in str(err.value)
    res = invoke("compare", "--metric", "erankk", "--db", db)
    assert res.exit_code == 1 and "did you mean erank?" in res.output and "valid:" in res.output


def test_runs_outside_a_project_says_the_default_is_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("runs")
    assert res.exit_code == 1
    assert "relative to the current directory" in res.output and str(tmp_path) in res.output
    assert "--db" in res.output and "Traceback" not in res.output


def test_claim_help_examples_are_claim_tags(db):
    from homog.cli.claims import claims

    help_text = next(p.help for p in claims.params if p.name == "claims")
    assert "1a" not in help_text
    made = {c.tag for c in CLAIMS}  # the claims registry: every tag the claims table makes
    for tag in re.findall(r"\b\d[a-z]\b", help_text):
        assert tag in made, tag
    res = invoke("claims", "--claim", "5b", "--db", db, "--format", "json")
    assert res.exit_code in (0, 1) and "Traceback" not in res.output


def test_tui_help_shows_the_tick_boxes():
    content = pytest.importorskip("textual.content")
    from tui.screens.help import HELP

    plain = content.Content.from_markup(HELP).plain
    assert "in the lists: [x] / [ ] a run" in plain


def test_tui_counts_are_plural_only_when_not_one():
    from tui.series import count

    assert count(1, "line") == "1 line" and count(0, "line") == "0 lines"
    assert count(3, "line") == "3 lines"
    assert "S.count(len(lines), 'line')" in (ROOT / "tui/screens/compare.py").read_text()
