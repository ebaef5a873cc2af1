"""The query commands through Click: formats, read-only SQL, errors and exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from homog.cli import main


@pytest.fixture(scope="module")
def db(demo_db_factory):
    return str(demo_db_factory(3, 8))


def invoke(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_runs_json_and_table(db):
    res = invoke("runs", "--db", db, "--format", "json")
    assert res.exit_code == 0
    runs = json.loads(res.output)
    assert len(runs) == 3 and {
        "model",
        "n_layers",
        "dtype",
        "intervention",
        "n_texts",
        "created_at",
    } <= set(runs[0])
    res = invoke("runs", "--db", db)
    assert res.exit_code == 0 and "smollm2-135m" in res.output


def test_compare(db):
    res = invoke(
        "compare",
        "--metric",
        "erank",
        "--db",
        db,
        "--format",
        "json",
        "--models",
        "gemma3-270m",
        "--variants",
        "original,front",
        "--layers",
        "0-2",
    )
    rows = json.loads(res.output)
    assert res.exit_code == 0 and len(rows) == 2 * 3
    assert {r["variant"] for r in rows} == {"original", "front"}
    res = invoke("compare", "--metric", "erank", "--db", db, "--layers", "3")
    assert res.exit_code == 0 and "front - orig" in res.output and "±" in res.output
    res = invoke("compare", "--metric", "erank", "--db", db, "--format", "csv")
    assert res.output.splitlines()[0].startswith("run_id,model,intervention,variant,layer")


def test_unknown_names_exit_nonzero_with_valid_list(db):
    res = invoke("compare", "--metric", "bogus", "--db", db)
    assert res.exit_code == 1 and "valid: " in res.output and "erank" in res.output
    res = invoke("compare", "--metric", "erank", "--variants", "middle", "--db", db)
    assert res.exit_code == 1 and "original, front, end, control" in res.output
    res = invoke("compare", "--metric", "erank", "--layers", "a-b", "--db", db)
    assert res.exit_code == 1 and "bad layer" in res.output


def test_sql_argument_stdin_and_refusal(db):
    res = invoke("sql", "SELECT count(*) AS n FROM runs", "--db", db, "--format", "json")
    assert res.exit_code == 0 and json.loads(res.output) == [{"n": 3}]
    res = invoke("sql", "-", "--db", db, "--format", "csv", input="SELECT 41 + 1 AS x\n")
    assert res.exit_code == 0 and res.output == "x\n42\n"
    res = invoke("sql", "DROP TABLE runs", "--db", db)
    assert res.exit_code == 1 and "refused" in res.output
    res = invoke("sql", "SELECT * FROM nowhere", "--db", db)
    assert res.exit_code == 1 and "Catalog Error" in res.output
    assert json.loads(
        invoke("sql", "SELECT count(*) AS n FROM runs", "--db", db, "--format", "json").output
    ) == [{"n": 3}]


def test_missing_database_says_how_to_create_it(tmp_path):
    res = invoke("runs", "--db", str(tmp_path / "nope.duckdb"))
    assert res.exit_code == 1 and "dvc repro" in res.output


def test_export_and_plot(db, tmp_path):
    out = tmp_path / "erank.parquet"
    res = invoke(
        "export", "SELECT * FROM layer_summary WHERE metric = 'erank'", "-o", str(out), "--db", db
    )
    assert res.exit_code == 0 and out.stat().st_size > 0
    png = tmp_path / "erank.png"
    res = invoke("plot", "--metric", "erank", "-o", str(png), "--db", db)
    assert res.exit_code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    heat = tmp_path / "attn.png"
    run_id = json.loads(invoke("runs", "--db", db, "--format", "json").output)[0]["run_id"]
    res = invoke(
        "plot",
        "--kind",
        "attention",
        "--runs",
        run_id,
        "--variants",
        "front",
        "-o",
        str(heat),
        "--db",
        db,
    )
    assert res.exit_code == 0 and heat.read_bytes()[:4] == b"\x89PNG"
    res = invoke("plot", "--metric", "erank", "-o", str(tmp_path / "x.gif"), "--db", db)
    assert res.exit_code == 1 and ".png" in res.output
