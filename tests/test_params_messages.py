"""Issue 39, items 16 and 17: messages that named the wrong file or the wrong fix.

- a type error in `--params other.yaml` named `params.yaml` (range errors named the file);
- a zero-byte `--db`: the read commands advised `homog load`, which refuses the file; both now
  say to remove it first.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hostile_helpers import clean_error
from test_store import write_project

from homog.cli import main
from homog.errors import HomogError
from homog.store import load


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('extract:\n  center: "false"\n', "extract.center: expected a boolean"),
        ("stats:\n  n_boot: abc\n", "stats.n_boot: expected an integer"),
        ("models:\n  m: {sourc: x}\n", "'models.m:' has unknown key(s) sourc"),
        ("models:\n  m: {}\n", "'models.m:' needs 'source'"),
        ("corpus:\n  nn: 3\n", "'corpus:' has unknown key(s) nn"),
    ],
)
def test_type_errors_name_the_params_file_given(tmp_path, text, needle):
    other = tmp_path / "other.yaml"
    other.write_text(text)
    res = CliRunner().invoke(main, ["stats", "--params", str(other)])
    clean_error(res, f"params file {other} {needle}")
    assert "params.yaml" not in res.output


@pytest.mark.parametrize("command", [["runs"], ["sql", "SELECT 1"], ["export", "runs", "-o", "-"]])
def test_zero_byte_db_says_remove_it_first(tmp_path, command):
    db = tmp_path / "empty.duckdb"
    db.touch()
    res = CliRunner().invoke(main, [*command, "--db", str(db)])
    clean_error(res, str(db), "0-byte", f"rm {db}", "homog load")


def test_load_into_a_zero_byte_db_says_remove_it(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "empty.duckdb"
    db.touch()
    with pytest.raises(HomogError, match=rf"empty file \(0 bytes\).*rm {db}"):
        load(params, db, root=tmp_path)
    assert db.read_bytes() == b""
