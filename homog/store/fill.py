"""Filling the tables of the database a load builds (:func:`homog.store.loader.load`).

Each table gets its new rows from the stage's Parquet files and keeps the rows of the previous
database (attached as ``prev``) that the new ones do not replace; runs of models no longer in
params ``models:`` and rows of runs not in ``runs`` are dropped, each with a notice. The
statements run on the connection of the new database: no file is opened here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from homog.errors import HomogError
from homog.schema.tables import TABLES, Table
from homog.store.guard import quote_literal

RUN_TABLES = [t.name for t in TABLES.values() if t.scope == "run" and t.name != "runs"]
# tables keyed by model, not run (the probe's): a pruned model's rows go with its runs
MODEL_TABLES = [t.name for t in TABLES.values() if t.scope == ("model",)]


def run_row(run: dict[str, Any]) -> dict[str, Any]:
    """One ``runs`` row from a ``run.json`` dict (extra keys go to config/timings JSON)."""
    row = {name: run.get(name) for name in TABLES["runs"].names}
    config = run.get("config_json")
    if config is not None and not isinstance(config, str):
        row["config_json"] = json.dumps(config, sort_keys=True, default=str)
    timings = run.get("timings", run.get("timings_json"))
    if timings is not None and not isinstance(timings, str):
        timings = json.dumps(timings, sort_keys=True, default=str)
    row["timings_json"] = timings
    created = run.get("created_at")
    if isinstance(created, str):
        try:
            parsed = datetime.fromisoformat(created)
        except ValueError as exc:
            raise HomogError(
                f"run {run.get('run_id')}: created_at {created!r} is not an ISO date"
            ) from exc
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
        row["created_at"] = parsed
    return row


def _quote_list(paths: Sequence[Path]) -> str:
    return "[" + ", ".join(quote_literal(p) for p in paths) + "]"


def new_rows_sql(con: duckdb.DuckDBPyConnection, table: Table, files: Sequence[Path]) -> str:
    """A SELECT over the Parquet ``files`` giving ``table``'s columns in order.

    Missing optional columns become typed NULLs; a missing required column raises HomogError
    naming the file and the stage that writes it.
    """
    for path in files:
        try:
            have = {
                r[0]
                for r in con.execute(
                    f"DESCRIBE SELECT * FROM read_parquet({_quote_list([path])})"
                ).fetchall()
            }
        except duckdb.Error as exc:
            raise HomogError(f"cannot read {path}: {exc}; rerun the stage that writes it") from exc
        missing = [c for c in table.required if c not in have]
        if missing:
            raise HomogError(
                f"{path} lacks column(s) {', '.join(missing)} needed for table {table.name}; "
                "rerun the stage that writes it (`dvc repro`)"
            )
    have_all = {
        r[0]
        for r in con.execute(
            f"DESCRIBE SELECT * FROM read_parquet({_quote_list(files)}, union_by_name = true)"
        ).fetchall()
    }
    cols = ", ".join(
        f'CAST("{c}" AS {t}) AS "{c}"' if c in have_all else f'CAST(NULL AS {t}) AS "{c}"'
        for c, t in table.columns
    )
    return f"SELECT {cols} FROM read_parquet({_quote_list(files)}, union_by_name = true)"


def kept_rows_sql(con: duckdb.DuckDBPyConnection, table: Table, has_new: bool) -> str:
    """A SELECT of the rows of ``prev.<table>`` that the load keeps, in ``table``'s columns.

    ``has_new``: the table has new rows (``new_<table>``, or ``new_runs`` for ``runs``), which
    replace the previous rows of their runs, encodings or scope key.
    """
    prev_cols = {
        r[0]
        for r in con.execute(
            "SELECT column_name FROM duckdb_columns() "
            "WHERE database_name = 'prev' AND table_name = ?",
            [table.name],
        ).fetchall()
    }
    cols = ", ".join(
        f'p."{c}"' if c in prev_cols else f'CAST(NULL AS {t}) AS "{c}"' for c, t in table.columns
    )
    if table.scope == "run":
        keep = "run_id NOT IN (SELECT run_id FROM new_runs)"
        if has_new and table.name != "runs":  # e.g. an old contrasts file
            keep += f" AND run_id NOT IN (SELECT run_id FROM new_{table.name})"
    elif table.scope == "pe":
        keep = "pe NOT IN (SELECT pe FROM new_pes)"
    elif has_new:
        same = " AND ".join(f'n."{c}" IS NOT DISTINCT FROM p."{c}"' for c in table.scope)
        keep = f"NOT EXISTS (SELECT 1 FROM new_{table.name} AS n WHERE {same})"
    else:
        keep = "TRUE"
    return f"SELECT {cols} FROM prev.{table.name} AS p WHERE {keep}"


def fill_table(
    con: duckdb.DuckDBPyConnection,
    table: Table,
    files: Sequence[Path] | None,
    prev_tables: set[str],
) -> int:
    """Insert ``table``'s new rows (from ``files``; ``runs`` from ``new_runs``) and its kept
    rows of the previous database (when ``prev_tables`` has it); return its row count."""
    if table.name == "runs":
        new_sql = "SELECT * FROM new_runs"
    elif files:
        new_sql = new_rows_sql(con, table, files)
    else:
        new_sql = None
    if new_sql is not None and table.name != "runs":  # new_runs exists already
        con.execute(f"CREATE TEMP TABLE new_{table.name} AS {new_sql}")
    parts = []
    if new_sql is not None:
        parts.append(f"SELECT * FROM new_{table.name}")
    if table.name in prev_tables:
        parts.append(kept_rows_sql(con, table, has_new=new_sql is not None))
    if not parts:
        return 0
    # every column after the storage order: ties broken the same way in every load
    order = ", ".join(
        f'"{c}"' for c in (*table.order_by, *(c for c in table.names if c not in table.order_by))
    )
    con.execute(
        f"INSERT INTO {table.name} SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY {order}"
    )
    return con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]


def drop_gone_models(con: duckdb.DuckDBPyConnection, keep: list[str], notices: list[str]) -> None:
    """Drop the runs of models not in ``keep`` (params ``models:``) and all their rows: the
    rows of their runs and the rows of the tables keyed by model (the probe's)."""
    gone = con.execute(
        "SELECT model, count(*) FROM runs WHERE model NOT IN (SELECT unnest(?::VARCHAR[])) "
        "GROUP BY model ORDER BY model",
        [keep],
    ).fetchall()
    others = 0
    for table in MODEL_TABLES:
        where = f"FROM {table} WHERE model NOT IN (SELECT unnest(?::VARCHAR[]))"
        others += con.execute(f"SELECT count(*) {where}", [keep]).fetchone()[0]
        con.execute(f"DELETE {where}", [keep])
    if not gone and not others:
        return
    ids = "SELECT run_id FROM runs WHERE model NOT IN (SELECT unnest(?::VARCHAR[]))"
    for table in RUN_TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_id IN ({ids})", [keep])
    con.execute("DELETE FROM runs WHERE model NOT IN (SELECT unnest(?::VARCHAR[]))", [keep])
    names = ", ".join(f"{m} ({n} run{'s' if n > 1 else ''})" for m, n in gone)
    what = f"the runs of models no longer in params `models:` and all their rows: {names}"
    if not gone:
        what = f"the rows of models no longer in params `models:` ({others} probe rows)"
    elif others:
        what += f" (with {others} probe rows)"
    notices.append(
        f"dropped {what}; to keep them, add the models back to `models:` and run `homog load` again"
    )


def refuse_drop(con: duckdb.DuckDBPyConnection, keep: list[str]) -> None:
    """HomogError listing the runs of the previous database whose models are not in ``keep``
    (params ``models:``): dropping them needs ``--prune``."""
    gone = con.execute(
        "SELECT model, list(run_id ORDER BY run_id) FROM prev.runs "
        "WHERE model NOT IN (SELECT unnest(?::VARCHAR[])) GROUP BY model ORDER BY model",
        [keep],
    ).fetchall()
    parts = [
        f"{m}: {len(ids)} run{'s' if len(ids) > 1 else ''} ({', '.join(ids[:5])}"
        + (", ..." if len(ids) > 5 else "")
        + ")"
        for m, ids in gone
    ]
    present = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'prev'"
        ).fetchall()
    }
    for table in (t for t in MODEL_TABLES if t in present):
        rows = con.execute(
            f"SELECT model, count(*) FROM prev.{table} WHERE model NOT IN (SELECT "
            "unnest(?::VARCHAR[])) AND model NOT IN (SELECT model FROM prev.runs) GROUP BY "
            "model ORDER BY model",
            [keep],
        ).fetchall()
        parts += [f"{m}: {n} {table} rows" for m, n in rows]
    if not parts:
        return
    shown = "; ".join(parts)
    raise HomogError(
        f"the database holds runs of models that are not in params `models:` ({shown}); this "
        "load would drop them and all their rows, so it stopped and the database is unchanged. "
        "Pass --prune to drop them, or add the models back to `models:` (or load into "
        "another --db)"
    )


def drop_orphans(con: duckdb.DuckDBPyConnection, notices: list[str]) -> None:
    """Drop rows of run-scoped tables whose run is not in ``runs`` (a contrasts file made
    with other ``models:``), with a notice per table."""
    for table in RUN_TABLES:
        n = con.execute(
            f"SELECT count(*) FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)"
        ).fetchone()[0]
        if n:
            con.execute(f"DELETE FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)")
            notices.append(
                f"dropped {n} {table} rows of runs that are not in the database (their models "
                "are not in params `models:`); rerun `homog stats` (`dvc repro`) to remake them"
            )
