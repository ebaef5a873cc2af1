"""bench/compare_dbs.py: two databases match table by table, rows in any order, floats
within the tolerance; a changed value, row or column is found; when a run was made is not
compared."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest
from conftest import ROOT

SCRIPT = ROOT / "bench" / "compare_dbs.py"


def make_db(path, value=0.5, label="a", created="2026-01-01", extra_row=False):
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE contrasts (metric VARCHAR, layer INTEGER, mean_diff DOUBLE)")
        rows = [("erank", 1, value), ("mev", 2, float("nan")), (label, 3, 1.0)]
        if extra_row:
            rows.append(("erank", 4, 0.0))
        con.executemany("INSERT INTO contrasts VALUES (?, ?, ?)", rows[::-1])
        con.execute("CREATE TABLE runs (run_id VARCHAR, created_at VARCHAR)")
        con.execute("INSERT INTO runs VALUES ('r1', ?)", [created])
    return str(path)


def compare(a, b, *args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), a, b, *args], capture_output=True, text=True, timeout=120
    )


def test_the_same_tables_in_another_order_and_another_time_match(tmp_path):
    a = make_db(tmp_path / "a.duckdb")
    b = make_db(tmp_path / "b.duckdb", value=0.5 + 1e-15, created="2027-05-05")
    res = compare(a, b)
    assert res.returncode == 0, res.stdout
    assert "2 of 2 tables match" in res.stdout


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"value": 0.5001}, "largest float difference"),
        ({"label": "b"}, "metric: 1 rows differ"),
        ({"extra_row": True}, "3 rows against 4"),
        ({"value": float("inf")}, "an infinity against another value"),
    ],
)
def test_a_changed_value_row_or_word_is_found(tmp_path, change, said):
    a = make_db(tmp_path / "a.duckdb")
    b = make_db(tmp_path / "b.duckdb", **change)
    res = compare(a, b)
    assert res.returncode == 1 and said in res.stdout, res.stdout
    near = change.get("value") == 0.5001
    assert compare(a, b, "--tol", "1e-3").returncode == (0 if near else 1)
