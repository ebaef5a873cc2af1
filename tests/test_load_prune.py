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


def write_probe(root, model: str) -> None:
    """The probe stage's two tables of ``model`` (one row each)."""
    import pandas as pd

    from homog.layout import Layout

    layout = Layout(root)
    layout.probe_dir(model).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        [(model, "none", "slope", "erank", 0.1)],
        columns=["model", "intervention", "kind", "metric", "value"],
    ).to_parquet(layout.probe_metrics(model))
    pd.DataFrame(
        [(model, "none", "original", "s0", 1.5)],
        columns=["model", "intervention", "variant", "sample_id", "log_odds"],
    ).to_parquet(layout.lm_sentiment(model))


@pytest.fixture
def project(tmp_path):
    """A database with runs of m1 (r1) and m2 (r2, r3) and both models' probe rows, and params
    that name m1 only."""
    params = write_project(
        tmp_path, [("m1", "none", "r1"), ("m2", "none", "r2"), ("m2", "zero_pos", "r3")]
    )
    params["extract"] = {"interventions": ["none", "zero_pos"]}
    for model in ("m1", "m2"):
        write_probe(tmp_path, model)
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
    # the probe's tables are keyed by model: the pruned model's rows go too
    assert [r[0] for r in table_rows(db, "probe_metrics")] == ["m1"]
    assert [r[0] for r in table_rows(db, "lm_sentiment")] == ["m1"]
    assert "with 2 probe rows" in res.stderr
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


def test_probe_rows_of_a_model_without_runs_need_prune_too(project):
    """A model with only probe rows (no extract runs) is dropped only with --prune."""
    root, only_m1 = project
    load(only_m1, root=root, prune=True)
    write_probe(root, "m3")
    with_m3 = {**only_m1, "models": {**only_m1["models"], "m3": {"source": "random:m3"}}}
    load(with_m3, root=root)
    db = root / "data" / "homog.duckdb"
    before = digest(db)
    with pytest.raises(HomogError, match=r"m3: 1 probe_metrics rows.*--prune"):
        load(only_m1, root=root)
    assert digest(db) == before
    notices: list[str] = []
    load(only_m1, root=root, prune=True, notify=notices.append)
    assert [r[0] for r in table_rows(db, "probe_metrics")] == ["m1"]
    assert any("2 probe rows" in n for n in notices)
