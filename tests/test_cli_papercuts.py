"""The command line as a daily tool (issue 31): run-id prefixes, `-o -` and JSON export, table
width from COLUMNS, a closed pipe, option aliases, examples in every help, `report --db`
without params.yaml, `homog claims` and `homog diff`."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

from homog.cli import COMMANDS, main
from homog.store import connect

ROOT = Path(__file__).resolve().parents[1]
# demo run ids renamed to hash-like ids: two share the prefix cf24, one is cf240802...
RENAMED = {
    "demo000000": "5e1a9b3c00000000",
    "demo000001": "cf240802aaaa1111",
    "demo000002": "cf24ffff00002222",
}


@pytest.fixture(scope="module")
def db(demo_db_factory, tmp_path_factory) -> str:
    """A 3-run demo database (8 texts) whose run ids look like real ones."""
    path = tmp_path_factory.mktemp("papercuts") / "homog.duckdb"
    shutil.copy(demo_db_factory(3, 8), path)
    con = duckdb.connect(str(path))
    cols = con.execute(
        "SELECT c.table_name, c.column_name FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE t.table_type = 'BASE TABLE' AND c.column_name IN ('run_id', 'baseline_run_id')"
    ).fetchall()
    for table, column in cols:
        for old, new in RENAMED.items():
            con.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", [new, old])
    con.close()
    return str(path)


def invoke(*args, env=None, input=None):
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)


def homog(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "from homog.cli import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        **kw,
    )


# -- run ids ---------------------------------------------------------------------------------


def test_compare_prints_prefixes_that_round_trip(db):
    res = invoke("compare", "--metric", "erank", "--layers", "1", "--db", db)
    assert res.exit_code == 0
    # cf240802 and cf24ffff share 4 characters: 8 are printed, enough to tell them apart
    assert "cf240802" in res.output and "cf240802aaaa" not in res.output
    res = invoke(
        "compare", "--metric", "erank", "--runs", "cf240802", "--db", db, "--format", "json"
    )
    assert res.exit_code == 0
    assert {r["run_id"] for r in json.loads(res.output)} == {"cf240802aaaa1111"}


def test_ambiguous_and_unknown_prefixes_list_candidates(db):
    res = invoke("compare", "--metric", "erank", "--runs", "cf24", "--db", db)
    assert res.exit_code == 1
    assert "matches 2 runs" in res.output
    assert "cf240802aaaa1111" in res.output and "cf24ffff00002222" in res.output
    res = invoke("diff", "zz", "cf24f", "--db", db)
    assert res.exit_code == 1 and "unknown run 'zz'" in res.output
    assert "5e1a9b3c00000000" in res.output


def test_plot_attention_takes_a_prefix(db, tmp_path):
    out = tmp_path / "a.png"
    res = invoke("plot", "--kind", "attention", "--runs", "5e1a", "--db", db, "-o", str(out))
    assert res.exit_code == 0 and out.stat().st_size > 0


# -- export ----------------------------------------------------------------------------------


def test_export_to_stdout_csv_and_json(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("export", "runs", "-o", "-", "--format", "json", "--db", db)
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    assert sorted(r["run_id"] for r in rows) == sorted(RENAMED.values())
    res = invoke(
        "export", "SELECT run_id, n_layers FROM runs ORDER BY run_id", "-o", "-", "--db", db
    )
    assert res.stdout.splitlines() == [
        "run_id,n_layers",
        "5e1a9b3c00000000,30",
        "cf240802aaaa1111,18",
        "cf24ffff00002222,32",
    ]
    assert not Path("-").exists()  # no file named '-'
    res = invoke("export", "runs", "-o", "-", "--format", "parquet", "--db", db)
    assert res.exit_code == 1 and "csv or json" in res.output


def test_export_json_file_matches_sql(db, tmp_path):
    out = tmp_path / "summary.json"
    q = "SELECT run_id, layer, mean FROM layer_summary WHERE metric = 'erank' ORDER BY ALL"
    res = invoke("export", q, "-o", str(out), "--db", db)
    assert res.exit_code == 0
    got = json.loads(out.read_text())
    con = connect(db)
    want = con.execute(q).fetchall()
    con.close()
    assert [(r["run_id"], r["layer"], r["mean"]) for r in got] == want
    res = invoke("export", q, "-o", str(out), "--db", db)
    assert res.exit_code == 1 and "--force" in res.output


# -- output ----------------------------------------------------------------------------------


def test_table_width_follows_columns(db):
    res = invoke("runs", "--db", db, env={"COLUMNS": "70"})
    assert res.exit_code == 0
    assert max(len(line) for line in res.output.splitlines()) <= 70
    wide = invoke("runs", "--db", db, env={"COLUMNS": "180"})
    assert max(len(line) for line in wide.output.splitlines()) > 100


def test_broken_pipe_exits_zero_quietly(db):
    # the reader is gone before homog writes: every write fails with EPIPE
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["runs"], ["sql", "SELECT * FROM range(200000)", "--format", "csv"]):
        proc = subprocess.Popen(
            [sys.executable, "-c", "from homog.cli import main; main()", *args, "--db", db],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
        assert err == ""
    shell = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f'"{sys.executable}" -c "from homog.cli import main; main()" sql '
            f'"SELECT * FROM range(300000)" --format csv --db {db} | head -1',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.returncode == 0 and shell.stdout == "range\n" and shell.stderr == ""


# -- names and help --------------------------------------------------------------------------


def test_model_is_one_name_with_models_a_hidden_alias(db):
    for command in ("compare", "plot"):
        text = invoke(command, "--help").output
        assert "--model " in text and "--models" not in text
    for spelling in ("--model", "--models"):
        res = invoke(
            "compare",
            "--metric",
            "erank",
            spelling,
            "gemma3-270m",
            "--layers",
            "0",
            "--format",
            "json",
            "--db",
            db,
        )
        assert {r["model"] for r in json.loads(res.output)} == {"gemma3-270m"}


def test_tui_takes_db_option_and_path_argument(monkeypatch, tmp_path):
    import tui.command

    opened = []

    class Fake:
        def run(self):
            pass

    monkeypatch.setattr(tui.command, "make_app", lambda path, **kw: opened.append(path) or Fake())
    assert invoke("tui", "--db", "a.duckdb").exit_code == 0
    assert invoke("tui", "b.duckdb").exit_code == 0
    res = CliRunner().invoke(main, ["tui", "b.duckdb", "--db", "a.duckdb"])
    assert res.exit_code == 2 and "two databases" in res.output
    assert opened == [Path("a.duckdb"), Path("b.duckdb")]


def _all_commands():
    import click

    ctx = click.Context(main)

    def walk(cmd, name):
        yield name, cmd
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, sub), f"{name} {sub}")

    for name in COMMANDS:
        yield from walk(main.get_command(ctx, name), name)


def test_every_command_has_examples():
    missing = [name for name, cmd in _all_commands() if "Example" not in (cmd.help or "")]
    assert missing == []
    names = [name for name, _ in _all_commands()]
    assert {"posenc train", "posenc ablate", "posenc decompose", "claims", "diff"} <= set(names)


# -- report ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_report_with_db_needs_no_params_yaml(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no params.yaml here
    res = CliRunner().invoke(main, ["report", "--db", db, "-o", "r.md", "--format", "md"])
    assert res.exit_code == 0, res.output
    assert Path("r.md").exists() and "no params.yaml" in res.stderr


def test_report_without_db_or_params_still_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["report", "-o", "r.md"])
    assert res.exit_code != 0 and "params.yaml" in res.output


# -- claims and diff -------------------------------------------------------------------------


def test_claims_json_csv_and_filters(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("claims", "--db", db, "--format", "json")
    assert res.exit_code == 0
    rows = json.loads(res.output)
    assert rows and {"model", "claim", "verdict", "effect", "p_holm"} <= set(rows[0])
    # the same rows the report's builder computes
    from homog.report.build import read_inputs
    from homog.report.claims import claims_table
    from homog.store import connect

    data = read_inputs(connect(db))
    frame = claims_table(data["contrasts"], data["runs"], data["erank"])
    assert len(rows) == len(frame)
    assert [r["effect"] for r in rows] == pytest.approx(frame["effect"].tolist(), nan_ok=True)
    model = rows[0]["model"]
    one = json.loads(invoke("claims", "--db", db, "--format", "json", "--model", model).output)
    assert one and {r["model"] for r in one} == {model}
    claim = rows[0]["claim"]
    got = json.loads(invoke("claims", "--db", db, "--format", "json", "--claim", claim[0]).output)
    assert got and all(r["claim"].startswith(claim[0]) for r in got)
    verdict = rows[0]["verdict"]
    got = json.loads(invoke("claims", "--db", db, "--format", "json", "--verdict", verdict).output)
    assert got and {r["verdict"] for r in got} == {verdict}
    csv_out = invoke("claims", "--db", db, "--format", "csv").output.splitlines()
    assert csv_out[0].startswith("model,claim,") and len(csv_out) == len(rows) + 1
    res = invoke("claims", "--db", db, "--verdict", "bogus")
    assert res.exit_code == 1 and "valid:" in res.output


def _values(db: str, run_id: str, metric: str) -> dict[tuple[int, str], float]:
    con = connect(db)
    rows = con.execute(
        "SELECT layer, sample_id, value FROM layer_metrics WHERE run_id = ? AND metric = ? "
        "AND variant = 'original'",
        [run_id, metric],
    ).fetchall()
    con.close()
    return {(layer, s): v for layer, s, v in rows}


def test_diff_is_the_paired_difference_over_shared_texts(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # stats defaults: no params.yaml
    a, b = "5e1a9b3c00000000", "cf240802aaaa1111"
    # same depth needed: the demo's models differ, so diff a run with itself is refused...
    res = invoke("diff", "5e1a", "5e1a9b3c", "--db", db)
    assert res.exit_code == 1 and "same run" in res.output
    res = invoke("diff", "5e1a", "cf2408", "--db", db)
    assert res.exit_code == 1 and "layers" in res.output
    del a, b


def test_diff_matches_an_independent_computation(demo_db_factory, tmp_path, monkeypatch):
    """6 runs: demo000000 (smollm2, none) and demo000003 (smollm2, zero_pos) share texts."""
    monkeypatch.chdir(tmp_path)
    db = str(demo_db_factory(6, 8))
    a, b = "demo000003", "demo000000"
    res = invoke("diff", a, b, "--metric", "erank", "--by-layer", "--db", db, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    va, vb = _values(db, a, "erank"), _values(db, b, "erank")
    layers = sorted({layer for layer, _ in va})
    texts = sorted({s for _, s in va} & {s for _, s in vb})
    d = np.array([[va[layer, s] - vb[layer, s] for s in texts] for layer in layers])
    by_layer = {r["layer"]: r for r in rows if r["layer"] is not None}
    assert sorted(by_layer) == layers
    signs = np.array(list(itertools.product([1, -1], repeat=len(texts))))  # exact: 2^8
    for i, layer in enumerate(layers):
        r = by_layer[layer]
        assert r["n"] == len(texts)
        assert r["mean_diff"] == pytest.approx(d[i].mean())
        null = np.abs(signs @ d[i]) / len(texts)
        p = np.mean(null >= abs(d[i].mean()) * (1 - 1e-9))
        assert r["p_value"] == pytest.approx(p)
        assert r["ci_low"] <= r["mean_diff"] <= r["ci_high"]
    bands = {r["band"]: r for r in rows if r["band"] is not None}
    # layer 0 and the final layer are rows of their own; the bands split the layers between
    inner = d[1:-1] if layers[0] == 0 else d[:-1]
    q = max(1, round(len(inner) / 4))
    assert bands["late"]["mean_diff"] == pytest.approx(inner[-q:].mean(axis=0).mean())
    assert bands["final"]["mean_diff"] == pytest.approx(d[-1].mean())
    assert set(bands) == {"layer0", "early", "middle", "late", "final"}
    table = invoke("diff", "demo000003", "demo000000", "--db", db, "--metric", "erank").output
    assert "8 shared texts" in table and "late" in table


def test_report_reads_the_synth_report_beside_params(tmp_path, monkeypatch, write_params):
    """Run elsewhere with --params: the synth report of that project, not of the cwd (it was
    silently dropped), and a note when it is missing."""
    import homog.report.build

    seen = {}

    def fake_build(db, out, *, fmt, params, synth_report, **_):
        seen.update(db=db, synth=synth_report, params=params)
        return Path(out)

    monkeypatch.setattr(homog.report.build, "build_report", fake_build)
    params = write_params()  # tmp_path/params.yaml
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = CliRunner().invoke(main, ["report", "--params", str(params), "-o", "r.md"])
    assert res.exit_code == 0, res.output
    assert seen["synth"] == tmp_path / "data" / "synth" / "report.json"
    assert "no synth report at" in res.stderr and seen["params"] is not None


def test_report_db_without_params_yaml_reaches_the_builder(tmp_path, monkeypatch):
    """The fast twin of the slow end-to-end test: no params.yaml, --db given: the builder
    runs with default settings and no synth report, and the note names what is missing."""
    import homog.report.build

    seen = {}
    monkeypatch.setattr(
        homog.report.build,
        "build_report",
        lambda db, out, *, fmt, params, synth_report, **_: (
            seen.update(db=db, params=params, synth=synth_report) or Path(out)
        ),
    )
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["report", "--db", "x.duckdb", "-o", "r.md"])
    assert res.exit_code == 0, res.output
    assert seen == {"db": Path("x.duckdb"), "params": None, "synth": None}
    assert "no params.yaml" in res.stderr
