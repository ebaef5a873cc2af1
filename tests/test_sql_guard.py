"""Read-only SQL really is read-only: no statement shape changes or creates any file.

Every statement of issue 16 and a fuzz list of statement shapes go through each reader path
(``homog sql``, ``homog export``'s SOURCE, the TUI console's ``run_console_sql``) over a copy of
the demo database in a directory with a params file; a checksum of every file in that tree
(and the listing) must not change. Reads of the machine (``read_csv('/etc/hostname')``,
``glob``) must fail, and the listed read-only PRAGMA/CALL/EXPLAIN forms must still work.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from homog import store as q
from homog.cli import main
from homog.errors import HomogError

# {db}: the database, {dir}: the project directory (both absolute).
HOSTILE = [
    # the issue's statements
    "EXPLAIN ANALYZE COPY (SELECT 'gone') TO '{db}' (FORMAT csv)",
    "EXPLAIN ANALYZE COPY (SELECT 'gone') TO 'data/homog.duckdb' (FORMAT csv)",
    "CALL enable_logging(storage='file', storage_path='{dir}/logs')",
    "SELECT * FROM read_csv('/etc/hostname')",
    "SELECT * FROM glob('/root/*')",
    "SELECT * FROM read_csv('https://example.com/x.csv')",
    "PRAGMA import_database('{dir}')",
    # fuzz: writes in other clothes
    "COPY (SELECT 'gone') TO '{db}' (FORMAT csv)",
    "COPY runs TO '{dir}/runs.csv'",
    "EXPLAIN COPY (SELECT 1) TO '{dir}/a.csv'",
    "/* c */ EXPLAIN /* c */ ANALYZE COPY (SELECT 1) TO '{dir}/a.csv'",
    "EXPLAIN (FORMAT json) COPY (SELECT 1) TO '{dir}/a.csv'",
    "explain analyse copy (select 1) to '{dir}/a.csv'",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE ATTACH '{dir}/o.duckdb'",
    "SELECT 1; COPY runs TO '{dir}/runs.csv'",
    "WITH x AS (SELECT 1) SELECT * FROM x; DELETE FROM runs",
    "CALL pragma_version(); COPY (SELECT 1) TO '{dir}/b.csv'",
    "PRAGMA database_size; CALL enable_logging(storage='file', storage_path='{dir}/l2')",
    "CALL enable_profiling()",
    "PRAGMA enable_profiling='json'",
    "PRAGMA profile_output='{dir}/prof.json'",
    "PRAGMA /* hide */ import_database('{dir}')",
    "CALL main.enable_logging(storage='file', storage_path='{dir}/l3')",
    "SET enable_external_access = true",
    "SET temp_directory = '{dir}/spill'",
    "RESET enable_external_access",
    "EXPORT DATABASE '{dir}/dump'",
    "ATTACH '{dir}/other.duckdb' AS o",
    "DETACH DATABASE homog",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE TABLE t AS SELECT 1",
    "CREATE TEMP TABLE t AS SELECT 1",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'x', SECRET 'y')",
    "DROP TABLE runs",
    "INSERT INTO runs (run_id) VALUES ('x')",
    "UPDATE runs SET model = 'x'",
    "CHECKPOINT",
    "VACUUM",
    "ANALYZE",
    "SELECT * FROM read_parquet('{dir}/*.parquet')",
    "SELECT * FROM '{dir}/params.yaml'",
    "SELECT * FROM read_text('{dir}/params.yaml')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM sniff_csv('/etc/hostname')",
    "SUMMARIZE SELECT * FROM read_csv('{dir}/params.yaml')",
    "SELECT * FROM query('COPY (SELECT 1) TO ''{dir}/q.csv''')",
    "FROM glob('{dir}/*')",
]
# Listed read-only forms that must keep working.
ALLOWED = [
    "PRAGMA table_info('runs')",
    "PRAGMA show_tables",
    "PRAGMA database_size",
    "CALL duckdb_tables()",
    "CALL pragma_table_info('runs')",
    "EXPLAIN SELECT count(*) FROM runs",
    "EXPLAIN ANALYZE SELECT count(*) FROM runs",
    "SHOW TABLES",
    "DESCRIBE runs",
    "SUMMARIZE runs",
    "FROM runs SELECT run_id LIMIT 1",
    "-- a comment\nSELECT 1",
]


def tree_state(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under ``root`` (directories as 'dir')."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            state[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            state[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return state


@pytest.fixture
def project(tmp_path, demo_db_factory, monkeypatch):
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    db = root / "data" / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), db)
    (root / "params.yaml").write_text("db: data/homog.duckdb\nseed: 0\n")
    monkeypatch.chdir(root)
    return root, db


def fill(sql: str, root: Path, db: Path) -> str:
    return sql.format(db=db, dir=root)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_sql_changes_no_file(project, sql):
    root, db = project
    before = tree_state(root)
    text = fill(sql, root, db)
    res = invoke("sql", text, "--db", str(db))
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output and res.output.startswith("Error:")
    res = invoke("export", text, "-o", str(root / "out.csv"), "--db", str(db))
    assert res.exit_code == 1 and res.output.startswith("Error:"), res.output
    from tui.core import run_console_sql

    con = q.connect(db)
    try:
        with pytest.raises(HomogError):
            run_console_sql(con, text)
    finally:
        con.close()
    assert tree_state(root) == before


def test_issue_statements_are_refused_by_statement_check(project):
    """The statement allow-list refuses them before DuckDB runs anything."""
    root, db = project
    con = q.connect(db)
    try:
        for sql in [
            "EXPLAIN ANALYZE COPY (SELECT 'gone') TO '{db}' (FORMAT csv)",
            "CALL enable_logging(storage='file', storage_path='{dir}/logs')",
            "PRAGMA import_database('{dir}')",
            "PRAGMA enable_profiling='json'",
        ]:
            with pytest.raises(HomogError, match="refused"):
                q.check_read_only(con, fill(sql, root, db))
    finally:
        con.close()


def test_reader_connection_has_duckdb_guards(project):
    _, db = project
    con = q.connect(db)
    try:
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN "
                "('enable_external_access', 'lock_configuration', 'autoload_known_extensions', "
                "'autoinstall_known_extensions')"
            ).fetchall()
        )
    finally:
        con.close()
    assert {k: v.lower() for k, v in settings.items()} == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoload_known_extensions": "false",
        "autoinstall_known_extensions": "false",
    }


@pytest.mark.parametrize("sql", ALLOWED)
def test_listed_read_only_forms_work(project, sql):
    root, db = project
    before = tree_state(root)
    res = invoke("sql", "--db", str(db), "--format", "csv", "--", sql)
    assert res.exit_code == 0, res.output
    assert tree_state(root) == before
