"""Terminal tables that fit (issue 42): at COLUMNS=80 and 120, `homog runs`, `compare`,
`claims` and `diff` on the demo database print no line wider than the terminal, no cell on
two lines and no header split; snapshots (syrupy, tests/__snapshots__/test_cli_tables.ambr)
keep what they print. After an intended change: ``pytest tests/test_cli_tables.py
--snapshot-update``, then read the .ambr diff.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from homog.cli import main
from homog.cli.tables import Column, decimals, est, fit_columns, pm

WIDTHS = (80, 120)
COMMANDS = {
    "runs": ["runs"],
    "compare": ["compare", "--metric", "erank"],
    "compare_raw": ["compare", "--metric", "erank", "--raw", "--layers", "0-4"],
    "claims": ["claims"],
    "diff": ["diff", "demo000003", "demo000000", "--metric", "erank,mev"],
}


@pytest.fixture(scope="module")
def db(demo_db_factory) -> str:
    return str(demo_db_factory(4, 12))


def invoke(*args: str, width: int | None = None):
    env = {"COLUMNS": str(width)} if width else {}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


# how the notes under a table start (the claims legend too)
NOTES = ("effect", "not shown", "A - B", "erank per", "comparison:", "metric:", "scope:")


def tables(text: str) -> list[tuple[list[str], list[str]]]:
    """(header words, body lines) of every table printed: each is a title line, a header
    line and a rule, then its rows up to the next table's title (or the notes)."""
    lines = text.splitlines()
    rules = [i for i, ln in enumerate(lines) if ln and set(ln.strip()) == {"─"}]
    out = []
    for k, i in enumerate(rules):
        end = rules[k + 1] - 2 if k + 1 < len(rules) else len(lines)
        body = []
        for ln in lines[i + 1 : end]:
            if ln.startswith(NOTES):
                break
            body.append(ln)
        out.append((re.split(r"\s{2,}", lines[i - 1].strip()), body))
    return out


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_table_fits_and_matches_snapshot(db, name, width, snapshot):
    res = invoke(*COMMANDS[name], "--db", db, width=width)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(ln) for ln in lines) <= width
    assert res.output == snapshot
    # one line per row: as many body lines as the JSON has rows (or row groups)
    found = tables(res.output)
    assert found
    body = sum(len(b) for _, b in found)
    rows = json.loads(invoke(*COMMANDS[name], "--db", db, "--format", "json").output)
    if name.startswith("compare"):
        want = len({(r["run_id"], r["layer"]) for r in rows})
    elif name == "diff":
        want = sum(r["band"] is not None for r in rows)
    else:
        want = len(rows)
    assert body == want
    for header, _ in found:  # every header whole (no word cut or folded)
        assert all(h in res.output for h in header)
        assert not any(h.endswith("…") for h in header)


def test_compare_shows_differences_by_default_raw_on_request(db):
    out = invoke("compare", "--metric", "erank", "--layers", "0", "--db", db, width=120).output
    assert "front - orig" in out and "[" in out
    raw = invoke("compare", "--metric", "erank", "--layers", "0", "--raw", "--db", db).output
    assert "front - orig" not in raw and "front" in raw and "±" in raw


def test_narrow_terminal_names_what_is_left_out_and_wide_shows_it(db):
    out = invoke("runs", "--db", db, width=80).output
    assert "not shown:" in out and "source" in out.split("not shown:")[1]
    assert "embedded:smollm2-135m" not in out
    wide = invoke("runs", "--wide", "--db", db, width=80).output
    assert "embedded:smollm2-135m" in wide and "demo000000" in wide
    assert "not shown" not in wide


def test_claims_wide_and_csv_keep_every_column(db):
    csv_head = invoke("claims", "--format", "csv", "--db", db).output.splitlines()[0]
    wide = invoke("claims", "--wide", "--db", db, width=80).output
    header = wide.splitlines()[1].split()
    assert header == csv_head.split(",")


def test_fit_leaves_out_the_highest_drop_first():
    cols = [Column("a"), Column("b", drop=1), Column("c", drop=2), Column("d", drop=1)]
    rows = [["x" * 10] * 4]
    assert fit_columns(cols, rows, 200) == [0, 1, 2, 3]
    assert fit_columns(cols, rows, 36) == [0, 1, 3]  # c first
    assert fit_columns(cols, rows, 24) == [0, 1]  # then the rightmost of equals
    assert fit_columns(cols, rows, 5) == [0]  # never the drop-0 columns


def test_numbers_are_rounded_to_the_ci():
    assert decimals(2.3) == 1 and decimals(0.021) == 3 and decimals(45) == 0
    assert est(-1.5984, -4.75, 1.457) == "-1.6 [-4.8, 1.5]"
    assert est(0.03362, 0.003659, 0.06108) == "0.034 [0.004, 0.061]"
    assert est(-0.04, -1.3, 1.2) == "0.0 [-1.3, 1.2]"  # no "-0.0"
    assert est(8.0) == "8" and est(None) == ""
    assert pm(61.6839, 59.056, 64.3118) == "61.7 ± 2.6"
