"""One run per (model, intervention) for the readers that summarise, and the columns a table
of an older database lacks.

A load keeps the runs of earlier params (it replaces only the rows of the runs it loads), so
after a change that gives new run ids a model holds two runs of one intervention. Pooling them
would count every text twice: the claims, the report's endpoints and its Holm families would
double. :func:`use_runs` makes a reader connection see one run per (model, intervention), the
newest by ``created_at`` unless one is named, by shadowing every relation with a ``run_id``
column with a temporary view of the selected runs' rows (the file is never written); the
runs left out are returned to be named, never pooled. The same views add the optional columns
(:data:`homog.schema.tables.ADDED_COLUMNS`) that a table of an older database lacks, as typed
NULLs, so readers never meet a missing column the schema check lets through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from homog.errors import HomogError
from homog.schema.tables import ADDED_COLUMNS, TABLES
from homog.store.sql import fetch_dicts, fetch_rows

# the runs the views keep (a temporary table of the reader connection)
SELECTED = "homog_selected_runs"


@dataclass(frozen=True)
class RunSelection:
    """The runs a reader uses (``used``: run ids) and those it leaves out (``older``: rows
    with run_id, model, intervention, created_at, and ``instead``: the run used in their
    place)."""

    used: tuple[str, ...]
    older: tuple[dict[str, Any], ...] = ()


def left_out(older: Iterable[Mapping[str, Any]]) -> str | None:
    """One sentence naming the runs a reader left out (``RunSelection.older`` rows, or the
    report's ``older_runs`` records); None when there are none."""
    names = [f"{r['run_id']} ({r['model']}, {r['intervention']})" for r in older]
    if not names:
        return None
    return (
        f"Older runs not used: {', '.join(names)}; each model's newest run of an intervention "
        "is read, never pooled with its older runs (`homog runs` marks them)."
    )


def select_runs(con: duckdb.DuckDBPyConnection, chosen: Sequence[str] = ()) -> RunSelection:
    """The newest run of each (model, intervention) by ``created_at`` (ties: the larger run
    id), or the run of ``chosen`` (full run ids) for its pair; every run of ``chosen`` is
    used. A run without an intervention counts as ``none``."""
    rows = fetch_dicts(
        con,
        "SELECT run_id, model, coalesce(intervention, 'none') AS intervention, created_at "
        "FROM runs ORDER BY model, intervention, created_at DESC NULLS LAST, run_id DESC",
    )
    named = set(chosen)
    unknown = named - {r["run_id"] for r in rows}
    if unknown:
        raise HomogError(f"no run {', '.join(sorted(unknown))} in the database")
    pinned = {(r["model"], r["intervention"]) for r in rows if r["run_id"] in named}
    used: list[str] = []
    first: dict[tuple[str, str], str] = {}
    older: list[dict[str, Any]] = []
    for r in rows:
        key = (r["model"], r["intervention"])
        if r["run_id"] in named or (key not in pinned and key not in first):
            used.append(r["run_id"])
            first.setdefault(key, r["run_id"])
    for r in rows:
        if r["run_id"] not in used:
            older.append({**r, "instead": first[r["model"], r["intervention"]]})
    return RunSelection(tuple(used), tuple(older))


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    """The columns of each relation (table or view) of the database's own schema."""
    out: dict[str, set[str]] = {}
    for table, column in fetch_rows(
        con,
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema()",
    ):
        out.setdefault(table, set()).add(column)
    return out


def _view_sql(database: str, name: str, have: set[str]) -> str | None:
    """The SELECT of ``name``'s reader view (None: the table is read as it is)."""
    fill = [
        f'CAST(NULL AS {kind}) AS "{column}"'
        for column, kind in (TABLES[name].columns if name in TABLES else ())
        if column in ADDED_COLUMNS.get(name, ()) and column not in have
    ]
    where = []
    if "run_id" in have:
        where.append(f"run_id IN (SELECT run_id FROM temp.{SELECTED})")
    if "baseline_run_id" in have:
        where.append(
            f"(baseline_run_id IS NULL OR baseline_run_id IN (SELECT run_id FROM temp.{SELECTED}))"
        )
    if not fill and not where:
        return None
    source = f'"{database.replace(chr(34), chr(34) * 2)}".main."{name}"'
    return f"SELECT *{''.join(', ' + f for f in fill)} FROM {source}" + (
        f" WHERE {' AND '.join(where)}" if where else ""
    )


def use_runs(con: duckdb.DuckDBPyConnection, chosen: Sequence[str] = ()) -> RunSelection:
    """Make the reader connection ``con`` see only the runs of :func:`select_runs` (and the
    optional columns its tables lack, as NULLs); return the selection. Temporary views only:
    the database file is not written. Call it once, after the schema check."""
    selection = select_runs(con, chosen)
    database = fetch_rows(con, "SELECT current_database()")[0][0]
    con.execute(f"CREATE OR REPLACE TEMP TABLE {SELECTED} (run_id VARCHAR)")
    con.executemany(f"INSERT INTO temp.{SELECTED} VALUES (?)", [[r] for r in selection.used])
    for name, have in _columns(con).items():
        sql = _view_sql(database, name, have)
        if sql is not None:
            con.execute(f'CREATE OR REPLACE TEMP VIEW "{name}" AS {sql}')
    return selection
