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
