"""Issue 39, item 3: `homog load` never drops runs silently.

Dropping the runs of models no longer in params `models:` needs `--prune`; without it the
load stops, lists what would go and leaves the database byte for byte as it was. An empty
`models: {}` is refused by params validation.
"""

from __future__ import annotations

import hashlib

import pytest
import yaml
from click.testing import CliRunner
from hostile_helpers import clean_error
from test_store import table_rows, write_project

from homog.cli import main
from homog.config import parse_params
from homog.errors import HomogError
from homog.store import load


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def project(tmp_path):
    """A database with runs of m1 (r1) and m2 (r2, r3), and params that name m1 only."""
    params = write_project(tmp_path, [("m1", "none", "r1"), ("m2", "none", "r2"),
                                      ("m2", "zero_pos", "r3")])  # fmt: skip
    params["extract"] = {"interventions": ["none", "zero_pos"]}
    load(params, root=tmp_path)
    only_m1 = {**params, "models": {"m1": params["models"]["m1"]}}
    return tmp_path, only_m1


def test_load_without_prune_keeps_every_run_and_names_them(project):
    root, only_m1 = project
    db = root / "data" / "homog.duckdb"
    before = digest(db)
    with pytest.raises(HomogError, match=r"m2: 2 runs \(r2, r3\).*--prune") as err:
        load(only_m1, root=root)
    assert "unchanged" in str(err.value)
    assert digest(db) == before
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r2", "r3"]


def test_load_cli_refuses_then_prunes_with_the_flag(project, monkeypatch):
    root, only_m1 = project
    db = root / "data" / "homog.duckdb"
    (root / "params.yaml").write_text(yaml.safe_dump(only_m1))
    monkeypatch.chdir(root)
    before = digest(db)
    res = CliRunner().invoke(main, ["load"])
    clean_error(res, "m2: 2 runs", "--prune")
    assert digest(db) == before
    res = CliRunner().invoke(main, ["load", "--prune"])
    assert res.exit_code == 0, res.output
    assert "dropped the runs of models no longer in params" in res.stderr
    assert [r[0] for r in table_rows(db, "runs")] == ["r1"]
    assert CliRunner().invoke(main, ["load"]).exit_code == 0  # nothing left to drop


def test_another_projects_params_cannot_empty_a_database(project):
    """Loading another project's params into a database stopped dropping its runs."""
    root, params = project
    db = root / "data" / "homog.duckdb"
    other = {**params, "models": {"elsewhere": {"source": "random:x"}}}
    before = digest(db)
    with pytest.raises(HomogError, match="m1: 1 run .*m2: 2 runs"):
        load(other, root=root)
    assert digest(db) == before


@pytest.mark.parametrize("empty", [{}, None])
def test_empty_models_is_refused_by_validation(empty):
    with pytest.raises(HomogError, match=r"models:.*empty"):
        parse_params({"models": empty})
