"""``layer_summary``: per (run, variant, layer, metric) the mean and interval over texts,
derived from ``layer_metrics`` and ``runs`` (never loaded from stage outputs; not in
homog.schema.tables' TABLES).

``homog load`` materialises it as a table (:func:`materialize_layer_summary`); databases built
by older homog hold a view of the same columns and types (readers use it either way).
Definitions and SQL only: the functions run on a connection they are given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from homog.schema.column_types import Table

if TYPE_CHECKING:
    import duckdb

V = "VARCHAR"
I = "INTEGER"  # noqa: E741 - a type name, not a loop variable
D = "DOUBLE"

# Normal-approximation 95 % interval over texts. DuckDB has no t quantile; with the >= 20 texts
# of any real run the difference from a t interval is under 5 %. Non-finite values (e.g.
# mean_cosine of a one-token text) are left out of n, mean and std instead of poisoning them.
LAYER_SUMMARY_SELECT = """
SELECT run_id, model, variant, layer, metric, n, mean, std,
       mean - 1.959963984540054 * std / sqrt(n) AS ci_low,
       mean + 1.959963984540054 * std / sqrt(n) AS ci_high
FROM (
    SELECT m.run_id, r.model, m.variant, m.layer, m.metric,
           count(m.value) AS n, avg(m.value ORDER BY m.sample_id) AS mean,
           stddev_samp(m.value ORDER BY m.sample_id) AS std
    FROM layer_metrics AS m
    JOIN runs AS r USING (run_id)
    WHERE isfinite(m.value)
    GROUP BY m.run_id, r.model, m.variant, m.layer, m.metric
)
"""
# How databases built before homog materialised the summary define it (and how
# ``create_schema(con, summary="view")`` still can): the same SELECT, evaluated at every read.
LAYER_SUMMARY_VIEW = f"CREATE OR REPLACE VIEW layer_summary AS {LAYER_SUMMARY_SELECT}"

# ``layer_summary`` as ``homog load`` materialises it: the view's columns and types, one row per
# (run, variant, layer, metric), stored in the order the CLI and the TUI filter by (metric
# first: a metric switch reads one contiguous stretch). Not in TABLES: it is derived from
# layer_metrics and runs by :func:`materialize_layer_summary`, never loaded from stage outputs.
LAYER_SUMMARY = Table(
    "layer_summary",
    (
        ("run_id", V),
        ("model", V),
        ("variant", V),
        ("layer", I),
        ("metric", V),
        ("n", "BIGINT"),
        ("mean", D),
        ("std", D),
        ("ci_low", D),
        ("ci_high", D),
    ),
    scope="run",
    order_by=("metric", "run_id", "variant", "layer"),
)


def summary_kind(con: duckdb.DuckDBPyConnection) -> str | None:
    """'table' when ``layer_summary`` is materialised, 'view' in a database built before
    (or by ``create_schema(con, summary="view")``), None when there is none."""
    row = con.execute(
        "SELECT table_type FROM information_schema.tables "
        "WHERE table_name = 'layer_summary' AND table_schema = current_schema() "
        "AND table_catalog = current_database()"
    ).fetchone()
    if row is None:
        return None
    return "view" if row[0] == "VIEW" else "table"


def materialize_layer_summary(con: duckdb.DuckDBPyConnection) -> int:
    """(Re)build ``layer_summary`` as a table from ``layer_metrics`` and ``runs``; return its
    row count.

    Input: a writable connection whose ``layer_metrics`` and ``runs`` are complete (the load
    calls this last). A ``layer_summary`` view (an older database) is replaced by the table;
    an existing table is emptied and refilled. With a ``sentence_metrics`` table the key
    sentence's ``sent_*`` rows are summarised too (the curves of compare and the TUI).
    """
    if summary_kind(con) == "view":
        con.execute("DROP VIEW layer_summary")
    con.execute(LAYER_SUMMARY.ddl())
    con.execute("DELETE FROM layer_summary")
    order = ", ".join(f'"{c}"' for c in LAYER_SUMMARY.order_by)
    select = LAYER_SUMMARY_SELECT
    if con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = 'sentence_metrics'"
    ).fetchall():
        key = select.replace("layer_metrics AS m", "sentence_metrics AS m")
        select += " UNION ALL " + key.replace("WHERE isfinite", "WHERE m.is_key AND isfinite")
    con.execute(f"INSERT INTO layer_summary {select} ORDER BY {order}")
    return con.execute("SELECT count(*) FROM layer_summary").fetchone()[0]
