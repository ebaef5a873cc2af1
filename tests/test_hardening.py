"""Issue 16: nothing lost, nothing written, nothing misread (export, locks, load, messages).

Each test names the failure it guards against; the SQL sandbox itself is tests/test_sql_guard.py
and the stale-run pairing tests/test_stats.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from test_store import write_project

from homog.cli import main
from homog.errors import HomogError


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def clean_error(res, *needles: str) -> None:
    """Exit 1 with a one-paragraph `Error:` and no traceback, mentioning every needle."""
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.output.startswith("Error:") and "Traceback" not in res.output, res.output
    for n in needles:
        assert n in res.output, (n, res.output)


@pytest.fixture
def db(tmp_path, demo_db_factory):
    path = tmp_path / "data" / "homog.duckdb"
    path.parent.mkdir()
    shutil.copy(demo_db_factory(2, 4), path)
    return path


# --- item 2: export never overwrites silently, never the database --------------------------


def test_export_refuses_existing_file_unless_force(tmp_path, db):
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    res = invoke("export", "runs", "-o", str(params), "--format", "csv", "--db", str(db))
    clean_error(res, "exists", "--force")
    assert params.read_text() == "seed: 0\n"
    res = invoke("export", "runs", "-o", str(params), "--format", "csv", "--force", "--db", str(db))
    assert res.exit_code == 0, res.output
    assert pd.read_csv(params)["run_id"].nunique() == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("how", ["same", "relative", "symlink", "wal"])
def test_export_always_refuses_the_database(tmp_path, db, monkeypatch, how):
    before = digest(db)
    monkeypatch.chdir(tmp_path)
    target = {
        "same": str(db),
        "relative": "data/../data/homog.duckdb",
        "symlink": "link.parquet",
        "wal": str(db) + ".wal",
    }[how]
    if how == "symlink":
        os.symlink(db, tmp_path / "link.parquet")
    res = invoke("export", "runs", "-o", target, "--format", "parquet", "--force", "--db", str(db))
    clean_error(res, "is the database")
    assert digest(db) == before


def test_export_writes_parquet_and_csv_through_arrow(tmp_path, db):
    for name in ("s.parquet", "s.csv"):
        res = invoke(
            "export", "SELECT * FROM layer_summary", "-o", str(tmp_path / name), "--db", str(db)
        )
        assert res.exit_code == 0, res.output
    con = duckdb.connect()
    want = con.execute(f"SELECT count(*) FROM read_parquet('{tmp_path / 's.parquet'}')").fetchone()
    got = con.execute(f"SELECT count(*) FROM read_csv('{tmp_path / 's.csv'}')").fetchone()
    assert want == got and want[0] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["export", "plot"])
def test_output_under_a_file_or_unwritable_dir_is_a_clear_error(tmp_path, db, command):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, needle in (
        (afile / "x.png", "is a file"),
        (Path("/proc/homog/x.png"), "cannot write"),
    ):
        args = (
            ["export", "runs", "-o", str(out.with_suffix(".csv"))]
            if command == "export"
            else ["plot", "--metric", "erank", "-o", str(out)]
        )
        clean_error(invoke(*args, "--db", str(db)), needle)


# --- item 3: a lock is not corruption; load checks its target first --------------------------

HOLD = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def locked(db):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    yield db, proc.pid
    proc.kill()
    proc.wait()


def test_locked_database_is_called_locked_not_corrupt(locked, tmp_path):
    db, pid = locked
    for args in (("runs",), ("compare", "--metric", "erank"), ("sql", "SELECT 1")):
        res = invoke(*args, "--db", str(db))
        clean_error(res, "locked by another process", f"pid {pid}", "retry")
        assert "not a readable" not in res.output and "rebuild" not in res.output
    from tui.core import open_database

    opened = open_database(db)
    assert not opened.ok and "locked" in opened.error and f"pid {pid}" in opened.error
    assert "dvc repro" not in opened.error and "rebuild" not in opened.error
    params = write_project(tmp_path, [("m1", "none", "r1")])
    from homog.store import DatabaseLocked, load

    with pytest.raises(DatabaseLocked, match=f"pid {pid}"):
        load(params, db_path=db, root=tmp_path)


def test_load_into_unwritable_place_fails_fast(tmp_path, monkeypatch):
    import yaml

    params = write_project(tmp_path, [("m1", "none", "r1")])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("x")
    for target, needle in (
        ("/proc/x.duckdb", "cannot write the database in /proc"),
        (afile / "x.duckdb", "is a file"),
    ):
        t0 = time.monotonic()
        res = invoke("load", "--params", str(tmp_path / "params.yaml"), "--db", str(target))
        clean_error(res, needle)
        assert time.monotonic() - t0 < 30


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_load_removes_stale_temporary_builds(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    data = tmp_path / "data"
    pid = _dead_pid()
    stale = [data / f".homog.duckdb.{pid}.tmp", data / f".homog.duckdb.{pid}.tmp.wal"]
    live = data / f".homog.duckdb.{os.getppid()}.tmp"  # a running process: maybe a load
    for p in [*stale, live]:
        p.write_bytes(b"junk")
    from homog.store import load

    load(params, root=tmp_path)
    assert not any(p.exists() for p in stale) and live.exists()


INTERRUPT = textwrap.dedent(
    """
    import os, signal, sys
    # Ctrl-C as in a terminal, even when the test runs as a background job (which inherits an
    # ignored SIGINT, so Python would not install its KeyboardInterrupt handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import homog.store.loader as loader
    real = loader._build
    def build(con, sources, previous, **kw):
        counts = real(con, sources, previous, **kw)
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C in the middle of the build
        con.execute("SELECT sum(range) FROM range(10000000000)").fetchall()
        return counts
    loader._build = build
    from homog.cli import main
    main(["load", "--params", sys.argv[1]])
    """
)


def test_ctrl_c_during_load_is_clean(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    import yaml

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPT, "params.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert proc.returncode == 130, proc.stderr
    assert "interrupted" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "data" / "homog.duckdb").exists()
    assert [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith(".homog")] == []


def test_duckdb_interrupt_inside_load_is_a_keyboard_interrupt(tmp_path, monkeypatch):
    import homog.store.loader as loader

    params = write_project(tmp_path, [("m1", "none", "r1")])

    def build(con, sources, previous, **kw):
        raise duckdb.InterruptException("INTERRUPT Error: Query interrupted")

    monkeypatch.setattr(loader, "_build", build)
    with pytest.raises(KeyboardInterrupt):
        loader.load(params, root=tmp_path)
    assert [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith(".homog")] == []


# --- a damaged data block -----------------------------------------------------------------


def _damage(db: Path) -> None:
    """Overwrite the middle of every data block that holds layer_metrics (as DuckDB's
    storage_info places them: three 4 KiB headers, then blocks of the file's block size) with
    garbage, leaving the headers and the catalog alone."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        blocks = sorted(
            {
                b
                for (b,) in con.execute(
                    "SELECT DISTINCT block_id FROM pragma_storage_info('layer_metrics') "
                    "WHERE block_id >= 0"
                ).fetchall()
            }
        )
    finally:
        con.close()
    assert blocks, "layer_metrics holds no persistent block to damage"
    with open(db, "r+b") as fh:
        for b in blocks:
            fh.seek(3 * 4096 + b * size + size // 4)
            fh.write(os.urandom(size // 2))


def test_damaged_block_is_a_clear_error(tmp_path, db):
    _damage(db)
    # Commands that read every block of layer_metrics must fail cleanly. compare and plot read
    # the materialised layer_summary (a few blocks that the damage may miss): DuckDB checks
    # every block it reads, so they either answer from intact blocks or fail just as cleanly.
    for args, must_fail in (
        (("compare", "--metric", "erank"), False),
        (("plot", "--metric", "erank", "-o", str(tmp_path / "x.png")), False),
        (("sql", "SELECT sum(value) FROM layer_metrics"), True),
        (("export", "layer_metrics", "-o", str(tmp_path / "lm.csv")), True),
    ):
        res = invoke(*args, "--db", str(db))
        assert res.exit_code in ((1,) if must_fail else (0, 1)), (args, res.output)
        assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
        assert "Traceback" not in res.output
        if res.exit_code == 1:
            assert "damaged" in res.output or "cannot be read" in res.output, res.output
    params = write_project(tmp_path, [("m1", "none", "r1")])
    from homog.store import load

    with pytest.raises(HomogError, match="damaged|cannot be read"):
        load(params, db_path=db, root=tmp_path)


# --- messages ------------------------------------------------------------------------------


def test_compare_lists_valid_variants_for_a_typo(db):
    res = invoke("compare", "--metric", "erank", "--variants", "front,nosuch", "--db", str(db))
    clean_error(res, "unknown variant nosuch", "valid: original, front, end, control")


def test_plot_head_out_of_range_blames_the_head(tmp_path, db):
    res = invoke("runs", "--db", str(db), "--format", "csv")
    run_id = res.output.splitlines()[1].split(",")[0]
    res = invoke(
        "plot",
        "--kind",
        "attention",
        "--runs",
        run_id,
        "--head",
        "99",
        "-o",
        str(tmp_path / "a.png"),
        "--db",
        str(db),
    )
    clean_error(res, "head 99 is out of range", "heads 0..")


def test_sql_table_output_is_capped_and_csv_streams(db):
    res = invoke("sql", "SELECT * FROM range(2500)", "--db", str(db))
    assert res.exit_code == 0
    assert "1500 more row(s) not shown" in res.output and "--format csv" in res.output
    res = invoke("sql", "SELECT * FROM range(2500)", "--db", str(db), "--max-rows", "10")
    assert "2490 more row(s)" in res.output
    res = invoke("sql", "SELECT * FROM range(2500)", "--db", str(db), "--format", "csv")
    assert res.exit_code == 0 and len(res.output.splitlines()) == 2501
    res = invoke("sql", "SELECT range AS r FROM range(3)", "--db", str(db), "--format", "json")
    import json

    assert json.loads(res.output) == [{"r": 0}, {"r": 1}, {"r": 2}]
    res = invoke("sql", "SELECT 1 WHERE false", "--db", str(db), "--format", "json")
    assert json.loads(res.output) == []


def test_sql_csv_does_not_hold_every_row(db, monkeypatch):
    """csv/json fetch in batches: fetchall is never called on the result cursor."""
    from homog.store import sql

    calls = []
    real = sql.fetch_batches

    def spy(cur, batch=10_000):
        for b in real(cur, batch):
            calls.append(len(b))
            yield b

    monkeypatch.setattr(sql, "fetch_batches", spy)
    import homog.store

    monkeypatch.setattr(homog.store, "fetch_batches", spy)
    res = invoke("sql", "SELECT * FROM range(25000)", "--db", str(db), "--format", "csv")
    assert res.exit_code == 0 and calls == [10_000, 10_000, 5_000]


def test_now_works_or_names_pytz(db):
    res = invoke("sql", "SELECT now() AS t", "--db", str(db), "--format", "csv")
    try:
        import pytz  # noqa: F401
    except ImportError:
        clean_error(res, "pytz")
    else:
        assert res.exit_code == 0, res.output


def test_pragma_import_database_is_refused_cleanly(tmp_path, db):
    res = invoke("sql", f"PRAGMA import_database('{tmp_path}')", "--db", str(db))
    clean_error(res, "refused")


# --- extract input checks (item 4 at the CLI, and a garbage texts file) ---------------------


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if a model is loaded: the checks must come first."""
    import homog.models

    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the inputs were checked")

    monkeypatch.setattr(homog.models, "load_model", refuse)
    monkeypatch.setattr(homog.models, "load_tokenizer", refuse)


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("center", "false", "expected a boolean"),
        ("max_tokens", "abc", "expected an integer"),
        ("interventions", "none", "expected a list"),
    ],
)
def test_extract_bad_param_types_fail_before_the_model(write_params, no_model, key, value, needle):
    params = write_params(extract={key: value})
    res = invoke("extract", "--model", "smollm2-135m", "--params", str(params))
    clean_error(res, needle)


def test_extract_garbage_texts_file_is_named(tmp_path, write_params, no_model):
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet" * 10)
    res = invoke(
        "extract",
        "--model",
        "random:tiny-llama",
        "--params",
        str(write_params()),
        "--texts",
        str(garbage),
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "out"),
    )
    clean_error(res, "garbage.parquet is not a readable Parquet file")
    assert not (tmp_path / "out").exists()
