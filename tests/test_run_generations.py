"""Runs of earlier params stay in the database; readers use one run per (model, intervention).

A change of params that gives new run ids leaves the old runs beside the new ones (a load
replaces only the rows of the runs it loads). The claims, the report and compare read the
newest run of each model and intervention and name the older ones, never pooling them: a
database with two generations gives the same claims as one with the newest alone.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import save_run

from homog.cli import main
from homog.layout import Layout

N_TEXTS, N_LAYERS = 16, 5
SHIFT = {"original": 0.0, "front": -2.0, "end": 0.5, "control": 0.0}
PARAMS = {
    "models": {"m1": {"source": "random:tiny-llama"}},
    "stats": {"n_boot": 100, "mixed_metrics": []},
    "extract": {"interventions": ["none", "zero_pos"]},
    "posenc": {"encodings": []},
}


def write_generation(
    root: Path, generation: str, created_at: str, seed: int, n_texts: int = N_TEXTS
) -> None:
    """The extract outputs of m1's two runs (``n_texts`` texts) with the run ids of one set
    of params."""
    layout = Layout(root)
    rng = np.random.default_rng(seed)
    for intervention, extra in (("none", 0.0), ("zero_pos", 3.0)):
        shutil.rmtree(layout.run_dir("m1", intervention), ignore_errors=True)
        rows = []
        base = 30 - 2.0 * np.arange(N_LAYERS + 1)
        for variant, shift in SHIFT.items():
            for s in range(n_texts):
                erank = base + shift + extra + rng.normal(0, 0.5, N_LAYERS + 1)
                sample = f"s{s:03d}"
                rows += [(variant, sample, n, "erank", erank[n]) for n in range(N_LAYERS + 1)]
        frame = pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])
        save_run(
            layout,
            "m1",
            intervention,
            frame,
            N_LAYERS,
            generation=generation,
            created_at=created_at,
        )


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> tuple[Path, Path]:
    """(a database holding two generations of m1's runs, one holding the newest alone)."""
    from homog.stats.stage import stats_stage
    from homog.store import load

    root = tmp_path_factory.mktemp("generations")
    two, one = root / "two.duckdb", root / "one.duckdb"
    write_generation(root, "-old", "2026-01-01T00:00:00+00:00", seed=1)
    stats_stage(PARAMS, root)
    load(PARAMS, two, root)
    write_generation(root, "-new", "2026-02-01T00:00:00+00:00", seed=2)
    stats_stage(PARAMS, root)
    load(PARAMS, two, root)
    load(PARAMS, one, root)
    return two, one


def claims_csv(db: Path) -> tuple[str, str]:
    res = CliRunner().invoke(main, ["claims", "--db", str(db), "--format", "csv"])
    assert res.exit_code == 0, res.output
    return res.stdout, res.stderr


def test_the_database_keeps_both_generations(dbs):
    import duckdb

    two, one = dbs
    with duckdb.connect(str(two), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 4
        ids = {r[0] for r in con.execute("SELECT DISTINCT run_id FROM contrasts").fetchall()}
    assert ids == {"m1-none-old", "m1-zero_pos-old", "m1-none-new", "m1-zero_pos-new"}


def test_claims_read_the_newest_run_only(dbs):
    two, one = dbs
    rows_two, err_two = claims_csv(two)
    rows_one, err_one = claims_csv(one)
    assert rows_two == rows_one  # not each row twice, not pooled
    assert "Older runs not used: m1-none-old (m1, none), m1-zero_pos-old" in err_two.replace(
        "\n", " "
    )
    assert "older runs" not in err_one


def test_report_counts_as_with_one_generation(dbs, tmp_path):
    from homog.report.build import build_report

    two, one = dbs
    pages = [build_report(db, tmp_path / f"{db.stem}.md", fmt="md").read_text() for db in dbs]
    counts = [re.findall(r"(\d+) claim rows \(layer-0 controls aside\).*", p) for p in pages]
    assert counts[0] == counts[1] and counts[0]
    answer = [p.split("## The answer")[1].split("## Glossary")[0] for p in pages]
    assert answer[0] == answer[1]
    assert "2 runs of 1 model(s)" in pages[0] and "2 runs of 1 model(s)" in pages[1]
    assert "Older runs not used: m1-none-old (m1, none)" in pages[0]
    assert "m1-none-old" not in pages[1]


def test_runs_marks_the_older_runs_and_compare_shows_the_newest(dbs):
    two, _ = dbs
    res = CliRunner().invoke(main, ["runs", "--db", str(two), "--format", "csv"])
    assert res.exit_code == 0, res.output
    used = {r["run_id"]: r["used"] for r in csv.DictReader(io.StringIO(res.stdout))}
    assert used["m1-none-new"] == "yes" and used["m1-none-old"] == "no (older)"
    compare = ["compare", "--metric", "erank", "--db", str(two), "--format", "csv"]
    res = CliRunner().invoke(main, compare)
    assert res.exit_code == 0, res.output
    assert "-new" in res.stdout and "-old" not in res.stdout
    assert "Older runs not used" in res.stderr
    # a run named by --runs is read, an older one too
    res = CliRunner().invoke(main, [*compare, "--runs", "m1-none-old"])
    assert res.exit_code == 0, res.output
    assert "m1-none-old" in res.stdout and "-new" not in res.stdout


@pytest.fixture
def contrasts_without_optional_columns(demo_db_factory, tmp_path) -> Path:
    """A database whose contrasts table predates band, baseline_run_id and n (columns the
    schema check calls optional): per-layer contrasts between variants only."""
    import duckdb

    db = tmp_path / "old.duckdb"
    shutil.copy(demo_db_factory(3, 8), db)
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE old AS SELECT * EXCLUDE (band, baseline_run_id, n) FROM contrasts "
            "WHERE band IS NULL AND baseline_run_id IS NULL"
        )
        con.execute("DROP TABLE contrasts")
        con.execute("ALTER TABLE old RENAME TO contrasts")
    return db


@pytest.mark.parametrize(
    "command", [["claims"], ["compare", "--metric", "erank"], ["report", "-o", "r.html"]]
)
def test_readers_fill_the_optional_columns_an_older_contrasts_lacks(
    command, contrasts_without_optional_columns, tmp_path
):
    db = contrasts_without_optional_columns
    argv = [str(tmp_path / a) if a == "r.html" else a for a in command]
    res = CliRunner().invoke(main, [*argv, "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    if command[0] == "report":
        assert "Claims of arXiv 2508.17126" in (tmp_path / "r.html").read_text()
    else:
        assert ("verdict" if command[0] == "claims" else "erank per layer") in res.stdout
