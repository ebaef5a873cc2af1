"""Issue 39, items 8, 12, 13, 18, 21: the query commands' SQL (one statement per call, refused
statements named by their own keyword, PIVOT reads), SIGINT's one convention, column types
checked with the schema, and a SQLite file named as such."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hostile_helpers import clean_error

from homog.cli import main


def homog_sql(db, *args: str):
    return CliRunner().invoke(main, ["sql", *args, "--db", str(db)])


# --- item 8: several statements are refused, not the last one's rows shown silently -------


def test_sql_refuses_several_statements_with_their_count(demo_db_factory):
    db = demo_db_factory(1, 4)
    res = homog_sql(db, "SELECT 1 AS a; SELECT 2 AS b")
    clean_error(res, "2 statements", "one statement per call")
    assert "b\n" not in res.output.split("Error:")[0]
    res = homog_sql(db, "SELECT 1 AS a; SELECT 2 AS b; SELECT 3 AS c", "--format", "csv")
    clean_error(res, "3 statements")
    res = homog_sql(db, "SELECT 7 AS a;", "--format", "csv")  # a trailing ; is one statement
    assert res.exit_code == 0 and res.output == "a\n7\n", res.output


def test_sql_writes_in_a_second_statement_still_read_as_refused(demo_db_factory):
    res = homog_sql(demo_db_factory(1, 4), "SELECT 1; DROP TABLE runs")
    clean_error(res, "refused: DROP statements are not allowed")


# --- item 21: refused statements named by their own keyword; PIVOT/UNPIVOT run -------------


@pytest.mark.parametrize(
    ("sql", "word"),
    [
        ("INSTALL json", "INSTALL"),
        ("  /* c */ -- x\n install json", "INSTALL"),
        ("FORCE INSTALL json", "FORCE INSTALL"),
        ("LOAD json", "LOAD"),
        ("USE memory", "USE"),
        ("RESET threads", "RESET"),
        ("SET threads = 1", "SET"),
        ("ANALYZE", "ANALYZE"),
        ("CHECKPOINT", "CHECKPOINT"),
        ("WITH q AS (SELECT 1) INSERT INTO runs (run_id) SELECT 'x'", "INSERT"),
    ],
)
def test_refused_statement_named_by_its_keyword(demo_db_factory, sql, word):
    res = homog_sql(demo_db_factory(1, 4), sql)
    clean_error(res, f"refused: {word} statements are not allowed")


@pytest.mark.parametrize(
    "sql",
    [
        "PIVOT (SELECT variant, layer, value FROM layer_metrics WHERE metric = 'erank') "
        "ON variant USING avg(value) ORDER BY layer",
        "PIVOT layer_metrics ON variant IN ('original', 'front') USING count(*)",
        "SELECT count(*) AS n FROM (PIVOT layer_metrics ON variant USING count(*))",
        "UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v",
        "EXPLAIN PIVOT layer_metrics ON variant USING count(*)",
        "( /* c */ (PIVOT layer_metrics ON variant USING count(*)))",
    ],
)
def test_pivot_and_unpivot_read(demo_db_factory, sql):
    res = homog_sql(demo_db_factory(1, 4), sql, "--format", "csv")
    assert res.exit_code == 0, res.output
    assert len(res.output.splitlines()) >= 2


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TEMP TABLE z AS PIVOT layer_metrics ON variant USING count(*)",
        "INSERT INTO runs PIVOT layer_metrics ON variant USING count(*)",
        "WITH p AS (PIVOT layer_metrics ON variant USING count(*)) SELECT * FROM p",
        "EXPLAIN CREATE TEMP TABLE z AS PIVOT layer_metrics ON variant USING count(*)",
    ],
)
def test_pivot_inside_a_write_or_cte_is_refused(demo_db_factory, sql):
    clean_error(homog_sql(demo_db_factory(1, 4), sql), "refused:")


# --- item 12: Ctrl-C is the line 'interrupted' and status 130, for every command -------------

LONG = "SELECT count(*) FROM range(100000000) a, range(100000) b WHERE (a.range * b.range) % 7 = 3"


def _interrupts():
    import duckdb
    import pyarrow as pa

    return [
        KeyboardInterrupt(),
        duckdb.InterruptException("INTERRUPT Error: Interrupted!"),
        RuntimeError("Query interrupted"),
        pa.lib.ArrowInvalid("C++ exception: INTERRUPT Error: Interrupted!"),
    ]


@pytest.mark.parametrize("exc", _interrupts(), ids=lambda e: type(e).__name__)
@pytest.mark.parametrize(
    ("command", "where"),
    [
        (["claims"], "homog.cli.claims.connect_db"),
        (["diff", "a", "b"], "homog.cli.diff.connect_db"),
        (["sql", "SELECT 1"], "homog.cli.sql.connect_db"),
        (["export", "runs", "-o", "-"], "homog.cli.sql.connect_db"),
        (["runs"], "homog.cli.query.connect_db"),
    ],
)
def test_interrupt_is_one_line_and_status_130(demo_db_factory, monkeypatch, command, where, exc):
    def stop(*_a, **_k):
        raise exc

    monkeypatch.setattr(where, stop)
    res = CliRunner().invoke(main, [*command, "--db", str(demo_db_factory(1, 4))])
    assert res.exit_code == 130, (res.output, res.exception)
    assert res.output == "interrupted\n", res.output


def test_sql_error_wrapping_an_interrupt_is_an_interrupt(demo_db_factory, monkeypatch):
    import duckdb

    from homog.errors import HomogError
    from homog.store.sql import sql_error

    def stop(*_a, **_k):
        exc = duckdb.InterruptException("INTERRUPT Error: Interrupted!")
        raise sql_error(exc) from exc

    monkeypatch.setattr("homog.cli.sql.connect_db", stop)
    res = homog_sql(demo_db_factory(1, 4), "SELECT 1")
    assert res.exit_code == 130 and res.output == "interrupted\n", res.output
    assert isinstance(sql_error(ValueError("x")), HomogError)


@pytest.mark.parametrize(
    "args",
    [
        ["sql", LONG],
        ["export", LONG, "-o", "{tmp}/x.csv"],
        ["export", LONG, "-o", "{tmp}/x.json"],
        ["export", LONG, "-o", "-", "--format", "json"],
    ],
    ids=["sql", "export-csv", "export-json", "export-stdout"],
)
def test_sigint_during_a_long_query(demo_db_factory, tmp_path, args):
    """A real SIGINT: the query stops (export's Arrow stream too, which Python could not
    interrupt by itself), one line, status 130, no output file."""
    import signal
    import subprocess
    import time

    from hostile_helpers import ENV, HOMOG

    argv = [a.format(tmp=tmp_path) for a in args]
    proc = subprocess.Popen(
        [*HOMOG, *argv, "--db", str(demo_db_factory(1, 4))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        # a user's terminal delivers Ctrl-C; a launcher that runs the suite in the
        # background (a non-interactive shell's `&`) leaves SIGINT ignored, which the child
        # would inherit, and Python then installs no handler: give it the default disposition
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("Ctrl-C did not stop the query")
    assert proc.returncode == 130, err
    assert err == "interrupted\n", err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --- item 18: an SQLite file given as --db is named as one -----------------------------------


def _sqlite_file(path):
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (t TEXT)")
    con.execute("INSERT INTO notes VALUES ('mine')")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["sql", "SELECT 1"],
        ["claims"],
        ["export", "runs", "-o", "-"],
        ["compare", "--metric", "erank"],
    ],
    ids=lambda c: c[0],
)
def test_sqlite_db_is_named_sqlite(tmp_path, command):
    db = _sqlite_file(tmp_path / "homog.duckdb")
    res = CliRunner().invoke(main, [*command, "--db", str(db)])
    clean_error(res, "SQLite", str(db), "not a homog DuckDB database")
    assert "external extensions" not in res.output


def test_load_names_an_sqlite_db_and_keeps_it(tmp_path):
    from homog.errors import HomogError
    from homog.store.target import previous_database

    db = _sqlite_file(tmp_path / "homog.duckdb")
    before = db.read_bytes()
    for force in (False, True):
        with pytest.raises(HomogError, match="is an SQLite database .* never replaces it"):
            previous_database(db, force=force)
    assert db.read_bytes() == before


# --- item 13: a column of the wrong type is named before any computation ---------------------


@pytest.fixture
def varchar_value_db(demo_db_factory, tmp_path):
    import shutil

    import duckdb

    db = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), db)
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE layer_metrics ALTER value TYPE VARCHAR")
    con.close()
    return db


@pytest.mark.parametrize(
    "command",
    [["claims"], ["diff", "RUNS"], ["report", "-o", "{tmp}/r.html"]],
    ids=lambda c: c[0],
)
def test_wrong_column_type_is_named(varchar_value_db, tmp_path, command):
    import duckdb

    if command[0] == "diff":
        con = duckdb.connect(str(varchar_value_db), read_only=True)
        ids = [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
        con.close()
        command = ["diff", *ids[:2]]
    args = [a.format(tmp=tmp_path) for a in command]
    res = CliRunner().invoke(main, [*args, "--db", str(varchar_value_db)])
    clean_error(res, "layer_metrics.value", "VARCHAR", "expected DOUBLE", "homog load")
    assert "TypeError" not in res.output


def test_type_problems_accept_other_numbers_and_homogs_own_db(demo_db_factory, tmp_path):
    import shutil

    import duckdb

    from homog.schema.tables import schema_problems

    con = duckdb.connect(str(demo_db_factory(2, 4)), read_only=True)
    assert schema_problems(con) == []
    con.close()
    db = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), db)
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE layer_metrics ALTER value TYPE FLOAT")
    con.execute("ALTER TABLE layer_metrics ALTER layer TYPE BIGINT")
    assert schema_problems(con, ["layer_metrics"]) == []
    con.execute("ALTER TABLE runs ALTER n_layers TYPE VARCHAR")
    assert schema_problems(con, ["runs", "layer_metrics"]) == [
        "column runs.n_layers is VARCHAR, expected INTEGER (a number)"
    ]
    con.close()


# --- item 23: when texts do not fit, the corpus error names extract.max_tokens ---------------


@pytest.mark.parametrize("n", [2, 100])
def test_corpus_error_suggests_extract_max_tokens(n):
    import pandas as pd

    from homog.corpus.stage import prepare_corpus
    from homog.errors import HomogError

    raw = pd.DataFrame(
        {
            "text": [f"a fine film number {i}. It was good." for i in range(6)],
            "label": [i % 2 for i in range(6)],
        }
    )
    fits = [
        lambda texts: [False] * len(texts),
        lambda texts: [i % 2 == 0 for i in range(len(texts))],
    ]
    with pytest.raises(HomogError, match=r"raise extract.max_tokens \(6 texts do not fit"):
        prepare_corpus(raw, dataset="d", n=n, seed=0, min_words=1, fits=fits[0])
    if n == 100:  # some fit, too few: both knobs named
        with pytest.raises(HomogError, match=r"Lower corpus.n, or raise extract.max_tokens"):
            prepare_corpus(raw, dataset="d", n=n, seed=0, min_words=1, fits=fits[1])
    # nothing dropped for the budget: only the word filters are suggested
    with pytest.raises(HomogError) as err:
        prepare_corpus(raw, dataset="d", n=100, seed=0, min_words=1)
    assert "max_tokens (" not in str(err.value) and "corpus.min_words/max_words" in str(err.value)
