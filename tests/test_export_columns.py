"""Issue 39, items 4 and 20: exports keep every column, renamed the same way in every format,
and an unknown suffix names every valid format."""

from __future__ import annotations

import csv
import io
import json
import shutil

import duckdb
import pytest
from click.testing import CliRunner
from hostile_helpers import clean_error

from homog.cli import main
from homog.store.sql import unique_columns

SQL = "SELECT 1 AS a, 2 AS a, 3 AS a_1, 4 AS A"
WANT = {"a": 1, "a_1": 2, "a_1_1": 3, "A_2": 4}


@pytest.fixture
def db(tmp_path, demo_db_factory):
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), path)
    return path


def read(path, fmt: str) -> dict:
    if fmt == "json":
        (row,) = json.loads(path.read_text())
        return row
    if fmt == "csv":
        (row,) = csv.DictReader(io.StringIO(path.read_text()))
        return {k: int(v) for k, v in row.items()}
    cur = duckdb.connect().execute(f"SELECT * FROM read_parquet('{path}')")
    return dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))


def test_unique_columns_matches_duckdb():
    assert unique_columns(["a", "a", "a_1", "A"]) == list(WANT)
    assert unique_columns(["a_1", "a", "a", "a"]) == ["a_1", "a", "a_2", "a_3"]


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_duplicate_columns_survive_every_format(tmp_path, db, fmt):
    """`SELECT 1 AS a, 2 AS a -o x.json` wrote [{"a": 2}]: one column lost."""
    out = tmp_path / f"x.{fmt}"
    res = CliRunner().invoke(main, ["export", SQL, "-o", str(out), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert read(out, fmt) == WANT


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_duplicate_columns_survive_stdout(db, fmt):
    res = CliRunner().invoke(main, ["export", SQL, "-o", "-", "--format", fmt, "--db", str(db)])
    assert res.exit_code == 0, res.output
    if fmt == "json":
        assert json.loads(res.stdout) == [WANT]
    else:
        assert res.stdout.splitlines()[0] == ",".join(WANT)


def test_unknown_suffix_lists_every_format_json_included(tmp_path, db):
    res = CliRunner().invoke(
        main, ["export", "runs", "-o", str(tmp_path / "x.txt"), "--db", str(db)]
    )
    clean_error(res, "'txt'", "parquet, csv, json", "--format")
    assert not (tmp_path / "x.txt").exists()
