"""Column types of a database checked against the store's schema.

``schema_problems`` (homog.schema.tables) names a table that lacks columns; this module names a
column whose type readers cannot compute on: a ``layer_metrics.value`` stored as VARCHAR gave
``claims``, ``diff`` and ``report`` pandas' ``TypeError: dtype 'str' does not support operation
'mean'``. A column of the schema must be of its type's family: a number (any integer, float or
decimal type) where the schema has INTEGER or DOUBLE, text where it has VARCHAR, a timestamp
(or date) where it has TIMESTAMP. Columns outside the schema, and absent tables or columns
(``schema_problems``' business), are not looked at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_INTEGERS = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
}
_NUMBERS = _INTEGERS | {"FLOAT", "DOUBLE", "DECIMAL"}
FAMILIES: dict[str, tuple[str, set[str]]] = {
    "INTEGER": ("a number", _NUMBERS),
    "DOUBLE": ("a number", _NUMBERS),
    "VARCHAR": ("text", {"VARCHAR"}),
    "TIMESTAMP": (
        "a timestamp",
        {
            "TIMESTAMP",
            "TIMESTAMP WITH TIME ZONE",
            "TIMESTAMP_NS",
            "TIMESTAMP_MS",
            "TIMESTAMP_S",
            "DATE",
        },
    ),
}


def _base(data_type: str) -> str:
    """``DECIMAL(18,3)`` -> ``DECIMAL``; other names upper-cased as they are."""
    return data_type.split("(", 1)[0].strip().upper()


def type_problems(con: Any, tables: Mapping[str, Sequence[tuple[str, str]]]) -> list[str]:
    """One line per column of ``tables`` (table name -> the schema's (column, type) pairs)
    whose type in the database behind ``con`` is not of the schema type's family, naming the
    table, the column, the type found and the type expected (empty: none)."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema()"
    ).fetchall()
    found = {(t, c): str(d) for t, c, d in rows}
    problems = []
    for name, columns in tables.items():
        for column, want in columns:
            have = found.get((name, column))
            family = FAMILIES.get(want)
            if have is None or family is None or _base(have) in family[1]:
                continue
            problems.append(f"column {name}.{column} is {have}, expected {want} ({family[0]})")
    return problems


@dataclass(frozen=True)
class Table:
    """One table of the store.

    ``columns``: (name, DuckDB type) in order. ``required``: columns a source file must have
    (the others are filled with NULL when absent). ``scope``: how rows of the previous database
    are replaced: ``'run'`` (rows whose run_id is among the newly loaded runs), ``'pe'`` (rows of
    a positional encoding being reloaded) or a tuple of key columns (rows whose key reappears).
    ``order_by``: storage order, which keeps DuckDB's zone maps useful for the filters the CLI
    and the terminal UI apply (run, metric, variant).
    """

    name: str
    columns: tuple[tuple[str, str], ...]
    scope: str | tuple[str, ...]
    order_by: tuple[str, ...]
    required: tuple[str, ...] = field(default=())

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c}" {t}' for c, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"
