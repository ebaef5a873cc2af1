"""Issue 32, items 2 and 3: `load` touches only homog's own databases, survives Ctrl-C at any
point, and is idempotent and deterministic (docs/guarantees.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hostile_helpers import IS_ROOT, ROOT, clean_error
from test_store import table_rows, write_project, write_run

from homog.cli import main
from homog.errors import HomogError
from homog.schema.summary import materialize_layer_summary
from homog.schema.tables import TABLES, create_schema
from homog.store import load


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def project(tmp_path: Path, runs=(("m1", "none", "r1"),)) -> Path:
    params = write_project(tmp_path, list(runs))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def invoke_load(params: Path, *args: str):
    return CliRunner().invoke(main, ["load", "--params", str(params), *args])


# --- item 2: only homog's own databases are replaced ----------------------------------------


def test_foreign_duckdb_file_is_refused_unless_force(tmp_path, monkeypatch):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE precious AS SELECT 42 AS answer")
    con.close()
    before = digest(other)
    clean_error(
        invoke_load(params, "--db", str(other)),
        str(other),
        "homog did not build",
        "precious",
        "--force",
    )
    assert digest(other) == before
    res = invoke_load(params, "--db", str(other), "--force")
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(other), read_only=True)
    tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    marks = con.execute("SELECT * FROM homog_meta").fetchall()
    con.close()
    assert "precious" not in tables and "runs" in tables and marks == [("schema_version", "1")]
    # now homog's own: a plain load replaces it
    assert invoke_load(params, "--db", str(other)).exit_code == 0


@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + b"\x00" * 200, b"x" * 4096])
def test_a_file_that_is_not_duckdb_is_never_replaced(tmp_path, monkeypatch, content):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "notes.duckdb"
    target.write_bytes(content)
    for extra in ((), ("--force",)):
        clean_error(
            invoke_load(params, "--db", str(target), *extra),
            str(target),
            "not a DuckDB database",
            "never replaces",
        )
        assert target.read_bytes() == content


@pytest.mark.parametrize("mode", [0o444, 0o544])
def test_a_write_protected_database_is_refused_and_left_as_it_was(tmp_path, monkeypatch, mode):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "data" / "homog.duckdb"
    assert invoke_load(params, "--db", str(db)).exit_code == 0
    db.chmod(mode)
    before = digest(db)
    write_run(tmp_path, "m1", "zero_pos", "r2")
    for extra in ((), ("--force",)):  # --force is about whose file it is, not its protection
        res = invoke_load(params, "--db", str(db), *extra)
        clean_error(res, str(db), "write-protected", f"chmod u+w {db}", "another --db")
        assert digest(db) == before and stat.S_IMODE(db.stat().st_mode) == mode
    db.chmod(0o644)
    assert invoke_load(params, "--db", str(db)).exit_code == 0
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r2"]


@pytest.mark.parametrize("kind", ["chr", "fifo"])
def test_device_or_fifo_db_is_refused(tmp_path, monkeypatch, kind):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    node = tmp_path / "node.duckdb"
    if kind == "fifo":
        os.mkfifo(node)
    elif not IS_ROOT:
        pytest.skip("mknod of a character device needs root (the FIFO case covers the logic)")
    else:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    clean_error(invoke_load(params, "--db", str(node)), str(node), "not a regular file")
    mode = node.lstat().st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


def test_symlinked_db_rebuilds_its_target_and_keeps_the_link(tmp_path, monkeypatch):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    disk = tmp_path / "other_disk"
    disk.mkdir()
    real = disk / "store.duckdb"
    link = tmp_path / "data" / "homog.duckdb"
    link.symlink_to(real)
    for run_id in ("r1", "r2"):  # create, then update through the link
        write_run(tmp_path, "m1", "zero_pos" if run_id == "r2" else "none", run_id)
        assert invoke_load(params, "--db", str(link)).exit_code == 0
        assert link.is_symlink() and os.readlink(link) == str(real)
    assert [r[0] for r in table_rows(real, "runs")] == ["r1", "r2"]
    assert not [p for p in link.parent.iterdir() if p.name.startswith(".homog")]


def test_path_with_an_apostrophe_loads_twice(tmp_path, monkeypatch):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "it's data" / "o'brien.duckdb"
    assert invoke_load(params, "--db", str(db)).exit_code == 0
    write_run(tmp_path, "m1", "zero_pos", "r2")
    res = invoke_load(params, "--db", str(db))
    assert res.exit_code == 0, res.output
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r2"]


def test_lock_quoting_and_damage_get_three_messages(tmp_path):
    from homog.store.guard import damaged

    db = tmp_path / "x.duckdb"
    lock = duckdb.IOException('Could not set lock on file "x": Conflicting lock (PID 77)')
    quoting = duckdb.ParserException('Parser Error: syntax error at or near "s"')
    damage = duckdb.IOException("Corrupt database file: checksum mismatch")
    msgs = [str(damaged(db, e)) for e in (lock, quoting, damage)]
    assert "locked by another process (pid 77)" in msgs[0] and "move it aside" not in msgs[0]
    assert "quoting bug" in msgs[1] and "not damage" in msgs[1] and "move it aside" not in msgs[1]
    assert "may be damaged" in msgs[2] and "move it aside" in msgs[2]
    assert len(set(msgs)) == 3


# --- Ctrl-C at any point of a load ---------------------------------------------------------

INTERRUPT = textwrap.dedent(
    """
    import os, signal, sys, threading
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import homog.config, homog.store.loader as loader
    try:
        import homog.store.target as target  # where atomic_database lives now
    except ImportError:
        target = loader
    where = sys.argv[2]
    ctrl_c = lambda: os.kill(os.getpid(), signal.SIGINT)
    if where == "params":
        real_read = homog.config.read_yaml
        def read_yaml(*a, **k):
            ctrl_c()
            return real_read(*a, **k)
        homog.config.read_yaml = read_yaml
    elif where == "sources":
        real_collect = loader.collect_sources
        def collect(*a, **k):
            out = real_collect(*a, **k)
            ctrl_c()
            return out
        loader.collect_sources = collect
    elif where == "copy":  # while DuckDB writes rows: RuntimeError('Query interrupted')
        real_build = loader._build
        def build(con, sources, previous, **kw):
            counts = real_build(con, sources, previous, **kw)
            con.execute("CREATE TABLE big AS SELECT range AS x FROM range(20000000)")
            threading.Timer(0.3, ctrl_c).start()
            for i in range(100):
                con.execute(f"CREATE OR REPLACE TABLE big2 AS SELECT x, x * {i} AS y FROM big "
                            "ORDER BY y DESC")
            return counts
        loader._build = build
    elif where == "sync":
        real_fsync = target.os.fsync
        def fsync(fd):
            ctrl_c()
            return real_fsync(fd)
        target.os.fsync = fsync
    from homog.cli import main
    main(["load", "--params", sys.argv[1]], prog_name="homog")
    """
)


@pytest.mark.parametrize("where", ["params", "sources", "copy", "sync"])
def test_ctrl_c_anywhere_in_load_exits_130_with_the_message(tmp_path, monkeypatch, where):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert invoke_load(params).exit_code == 0
    write_run(tmp_path, "m1", "zero_pos", "r2")
    db = tmp_path / "data" / "homog.duckdb"
    before = digest(db) if db.exists() else None
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPT, "params.yaml", where],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 130, proc.stderr
    assert "load interrupted: the database is unchanged" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (digest(db) if db.exists() else None) == before
    assert [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith(".homog")] == []


# --- item 3: idempotent and deterministic ---------------------------------------------------


def write_contrasts(root: Path, run_ids: list[str]) -> None:
    d = root / "data" / "stats"
    d.mkdir(parents=True, exist_ok=True)
    rows = [
        (rid, v, "original", layer, "erank", 0.1 * layer, -1.0, 1.0, 0.5, 0.5, None, None, 6)
        for rid in run_ids
        for v in ("front", "end", "control")
        for layer in range(5)
    ]
    cols = TABLES["contrasts"].columns
    frame = pd.DataFrame(rows, columns=[c for c, _ in cols[:13]])
    for c, kind in cols[13:]:  # the length adjustment's and equivalence test's columns
        frame[c] = False if kind == "BOOLEAN" else float("nan")
    frame.to_parquet(d / "contrasts.parquet")


def test_loads_are_idempotent_when_a_model_left_models(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1"), ("m2", "none", "r2")])
    write_contrasts(tmp_path, ["r1", "r2"])
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    assert len(table_rows(db, "contrasts")) == 2 * 15
    only_m1 = {**params, "models": {"m1": params["models"]["m1"]}}
    notices: list[str] = []
    counts = [
        load(only_m1, root=tmp_path, notify=notices.append, prune=True)["contrasts"]
        for _ in range(3)
    ]
    assert counts == [15, 15, 15]
    assert {r[0] for r in table_rows(db, "contrasts")} == {"r1"}
    assert [r[0] for r in table_rows(db, "runs")] == ["r1"]
    assert not [r for r in table_rows(db, "layer_metrics") if r[0] == "r2"]
    assert any("m2 (1 run)" in n and "models:" in n for n in notices), notices
    assert any("contrasts rows" in n and "homog stats" in n for n in notices), notices


def test_an_old_contrasts_file_is_not_duplicated(tmp_path):
    """contrasts.parquet still covering r1 after a re-extract made r9 (stats not rerun)."""
    params = write_project(tmp_path, [("m1", "none", "r1")])
    write_contrasts(tmp_path, ["r1"])
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    write_run(tmp_path, "m1", "none", "r9", shift=5.0)
    counts = [load(params, root=tmp_path)["contrasts"] for _ in range(3)]
    assert counts == [15, 15, 15]
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r9"]


def test_two_loads_give_bit_identical_tables(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1"), ("m2", "none", "r2")], n_texts=40)
    write_contrasts(tmp_path, ["r1", "r2"])
    db = tmp_path / "data" / "homog.duckdb"
    dumps = []
    for _ in range(2):
        load(params, root=tmp_path)
        con = duckdb.connect(str(db), read_only=True)
        dumps.append(
            {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in [*TABLES, "layer_summary"]}
        )
        con.close()
    assert dumps[0] == dumps[1]  # same rows, same order, same bits (== on floats is exact)


def test_layer_summary_aggregation_is_deterministic_and_right():
    """Groups that span several row groups were summed in thread order (1.4e-14 apart)."""
    rng = np.random.default_rng(0)
    n, groups = 300_000, 4
    frame = pd.DataFrame(
        {
            "run_id": "r1",
            "variant": np.repeat([f"v{g}" for g in range(groups)], n),
            "sample_id": np.tile(np.arange(n).astype(str), groups),
            "layer": 0,
            "metric": "erank",
            "value": rng.standard_cauchy(n * groups) * 1e3,
        }
    )
    results = set()
    for _ in range(3):
        con = duckdb.connect()
        create_schema(con)
        con.execute("INSERT INTO runs (run_id, model, n_layers) VALUES ('r1', 'm', 1)")
        con.register("frame", frame)
        con.execute(
            "INSERT INTO layer_metrics "
            "SELECT run_id, variant, sample_id, layer, metric, value FROM frame"
        )
        materialize_layer_summary(con)
        rows = con.execute("SELECT variant, n, mean, std FROM layer_summary ORDER BY variant")
        results.add(tuple(rows.fetchall()))
        con.close()
    assert len(results) == 1
    for variant, count, mean, std in next(iter(results)):
        values = frame.loc[frame["variant"] == variant, "value"].to_numpy()
        assert count == n
        assert mean == pytest.approx(values.mean(), rel=1e-9)
        assert std == pytest.approx(values.std(ddof=1), rel=1e-9)


def test_report_checks_the_database_schema_before_any_work(tmp_path, demo_db_factory, monkeypatch):
    import homog.report.build as build

    def refuse(*a, **k):
        raise AssertionError("the report read its inputs before checking the schema")

    monkeypatch.setattr(build, "read_inputs", refuse)
    for table, column in (("runs", "model"), ("layer_metrics", "value")):
        db = tmp_path / f"{table}.duckdb"
        shutil.copy(demo_db_factory(2, 4), db)
        con = duckdb.connect(str(db))
        con.execute(f"ALTER TABLE {table} RENAME COLUMN {column} TO other_{column}")
        con.close()
        params = tmp_path / "params.yaml"
        params.write_text("seed: 0\n")
        res = CliRunner().invoke(
            main,
            ["report", "--params", str(params), "--db", str(db), "-o", str(tmp_path / "r.html")],
        )
        clean_error(res, str(db), f"table {table} lacks column(s) {column}", "homog load")
        assert not (tmp_path / "r.html").exists()


def test_homog_error_for_unmarked_file_via_library(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    duckdb.connect(str(db)).close()  # an empty DuckDB file: no mark
    with pytest.raises(HomogError, match="homog did not build"):
        load(params, root=tmp_path)
    assert load(params, root=tmp_path, force=True)["runs"] == 1


# --- damaged stage outputs are named ---------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "damaged_file", "needle"),
    [
        (["stats"], "extract/m1/none/layer_metrics.parquet", "rerun `homog extract`"),
        (["mauve", "--model", "m1"], "extract/m1/none/vectors.npz", "homog extract --model m1"),
        (["stats"], "mauve/m1.parquet", "rerun `homog mauve --model m1`"),
    ],
)
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_stage_output_is_named(
    tmp_path, monkeypatch, command, damaged_file, needle, damage
):
    params = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data" / damaged_file
    if damaged_file.endswith(".npz"):
        np.savez(path, tokens__original=np.ones((2, 3, 4), dtype=np.float32))
    blob = path.read_bytes()
    path.write_bytes(os.urandom(2048) if damage == "garbage" else blob[: len(blob) // 2])
    res = CliRunner().invoke(main, [*command, "--params", str(params)])
    clean_error(res, f"cannot read data/{damaged_file}", "damaged", needle)
