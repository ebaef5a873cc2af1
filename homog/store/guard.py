"""Guards of every reader connection: DuckDB's own sandbox, a statement allow-list, lock errors.

Readers (the query API, ``homog sql``/``export``/``compare``/``plot``, the terminal UI) open the
database through :func:`open_reader`: read-only, with external access disabled (no file or
network access from SQL: no ``COPY ... TO``, ``read_csv``, ``glob``, ``ATTACH``, ``INSTALL``),
the configuration locked (no ``SET``, no ``enable_logging`` or profiling output files) and no
extension autoload/autoinstall. On top of that, :func:`check_read_only` lets through only
SELECT-like statements (PIVOT/UNPIVOT included), EXPLAIN of a SELECT, and PRAGMA/CALL of a
listed set of read-only functions. DuckDB's lock error (another process holds a write
connection) is told apart from a damaged file: :class:`DatabaseLocked` says "retry", never
"delete".
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import duckdb

from homog.errors import HomogError
from homog.interrupts import register

# DuckDB's own guards for reader connections (docs: duckdb.org/docs/operations_manual/securing).
READER_CONFIG: dict[str, object] = {
    "enable_external_access": False,
    "lock_configuration": True,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
}

# PRAGMA name / CALL name(...) allowed: functions that only list or describe.
READ_ONLY_FUNCTIONS = frozenset(
    {
        "collations",
        "database_list",
        "database_size",
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_databases",
        "duckdb_dependencies",
        "duckdb_functions",
        "duckdb_indexes",
        "duckdb_keywords",
        "duckdb_schemas",
        "duckdb_sequences",
        "duckdb_settings",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        "functions",
        "platform",
        "pragma_collations",
        "pragma_database_size",
        "pragma_platform",
        "pragma_show",
        "pragma_storage_info",
        "pragma_table_info",
        "pragma_version",
        "show",
        "show_databases",
        "show_tables",
        "show_tables_expanded",
        "storage_info",
        "table_info",
        "version",
    }
)
# Statement types that only read (DuckDB's parser): SHOW, DESCRIBE, SUMMARIZE, VALUES and
# FROM-first queries are SELECTs too.
SELECT_TYPES = ("SELECT",)
_GAP = r"(?:\s|/\*.*?\*/|--[^\n]*(?:\n|$))*"
_EXPLAIN = re.compile(
    rf"^{_GAP}EXPLAIN\b{_GAP}(?:ANALY[SZ]E\b{_GAP})?(?:\([^()]*\){_GAP})?", re.I | re.S
)
_FUNCTION = re.compile(
    rf"^{_GAP}(PRAGMA|CALL)\s+([A-Za-z_][A-Za-z0-9_]*){_GAP}(\(|;|$)", re.I | re.S
)
_PID = re.compile(r"\(PID (\d+)\)")
_KEYWORD = re.compile(rf"^(?:{_GAP}\()*{_GAP}(FORCE{_GAP})?([A-Za-z_]+)", re.I | re.S)
# A statement DuckDB parses as MULTI (PIVOT without an IN list: a temporary enum, then a
# SELECT) only reads when it leads with one of these; a CREATE/INSERT/WITH-led one may write.
_MULTI_READS = frozenset({"PIVOT", "PIVOT_WIDER", "UNPIVOT", "PIVOT_LONGER", "SELECT", "FROM"})
REFUSED = "homog sql is read-only (SELECT, PIVOT, SHOW, DESCRIBE, EXPLAIN SELECT, listing PRAGMAs)"


class DatabaseLocked(HomogError):
    """Another process holds a write connection to the database (a load in progress)."""


def reader_config() -> dict[str, object]:
    """READER_CONFIG plus a temp directory outside the project (spills never land beside
    the database)."""
    tmp = (
        Path(tempfile.gettempdir()) / f"homog-duckdb-{os.getuid() if hasattr(os, 'getuid') else 0}"
    )
    return {**READER_CONFIG, "temp_directory": str(tmp)}


def lock_error(path: str | os.PathLike[str], exc: BaseException) -> DatabaseLocked | None:
    """A DatabaseLocked for DuckDB's lock error on ``path`` (None for any other error)."""
    msg = str(exc)
    if "Could not set lock" not in msg and "Conflicting lock" not in msg:
        return None
    pid = _PID.search(msg)
    who = f" (pid {pid.group(1)})" if pid else ""
    return DatabaseLocked(
        f"the database {path} is locked by another process{who}, e.g. a running `homog load`; "
        "retry when it finishes (the file is not damaged: do not move or delete it)"
    )


def quote_literal(text: str | os.PathLike[str]) -> str:
    """``text`` as a SQL string literal (a path with an apostrophe stays one literal)."""
    return "'" + str(text).replace("'", "''") + "'"


def is_duckdb_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a DuckDB database file (its magic bytes ``DUCK`` at 8)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[8:12] == b"DUCK"


SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_error(path: str | os.PathLike[str], *, load: bool = False) -> HomogError | None:
    """A HomogError naming ``path`` as an SQLite file (its header ``SQLite format 3``), or None.

    DuckDB opens such a file through its sqlite extension, which the reader guards keep off:
    its own message ("Loading external extensions is disabled") misled."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError:
        return None
    if head != SQLITE_MAGIC:
        return None
    if load:
        return HomogError(
            f"--db {path} is an SQLite database (header 'SQLite format 3'), not a DuckDB "
            "database (homog's store); homog never replaces it: choose another --db (e.g. "
            "data/homog.duckdb)"
        )
    return HomogError(
        f"the database {path} is an SQLite file (header 'SQLite format 3'), not a homog DuckDB "
        "database; pass --db with the file `homog load` built (data/homog.duckdb by default)"
    )


def damaged(path: str | os.PathLike[str] | None, exc: BaseException) -> HomogError:
    """The HomogError for a database DuckDB cannot read: a lock gets DatabaseLocked, a
    statement DuckDB cannot parse (a quoting problem, homog's bug) its own message, anything
    else "may be damaged"."""
    locked = lock_error(path or "", exc)
    if locked is not None:
        return locked
    if isinstance(exc, duckdb.ParserException):
        return HomogError(
            f"DuckDB could not parse homog's statement for {path or 'the database'} "
            f"({str(exc).strip().splitlines()[0]}): a quoting bug in homog, not damage; the "
            "file is fine (do not move it). Please report it; meanwhile a path without quotes "
            "or backslashes avoids it"
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = f"the database {path}" if path else "the database"
    return HomogError(
        f"cannot read {where}: {first}. The file may be damaged: move it aside "
        "(keep it: it holds the runs of earlier params) and rebuild with `homog load`"
    )


def open_reader(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """``path`` opened read-only with the reader guards; HomogError (DatabaseLocked for a
    lock) when DuckDB cannot open it (an SQLite file is named as one)."""
    sqlite = sqlite_error(path)
    if sqlite is not None:
        raise sqlite
    try:
        con = duckdb.connect(str(path), read_only=True, config=reader_config())
    except duckdb.Error as exc:
        locked = lock_error(path, exc)
        if locked is not None:
            raise locked from exc
        raise HomogError(
            f"{path} is not a readable DuckDB database ({str(exc).splitlines()[0]}); move it "
            "aside (do not delete it if it held earlier runs) and create it with `dvc repro` "
            "or `homog load`"
        ) from exc

    return register(con)  # Ctrl-C interrupts its queries (homog.interrupts)


def _refuse(what: str) -> HomogError:
    return HomogError(f"refused: {what}; {REFUSED}. Use `homog export` to write files.")


def leading_keyword(text: str) -> str:
    """The statement's own first keyword, upper-case (``FORCE INSTALL`` two words; comments
    and opening parentheses skipped): DuckDB's statement type names INSTALL "LOAD" and USE
    "SET"."""
    m = _KEYWORD.match(text)
    if m is None:
        return ""
    return ("FORCE " if m.group(1) else "") + m.group(2).upper()


def _check_statement(con: duckdb.DuckDBPyConnection, st: duckdb.Statement) -> None:
    kind = st.type.name
    text = st.query
    if kind in SELECT_TYPES:
        return
    word = leading_keyword(text)
    if kind == "MULTI" and word == "EXPLAIN":  # EXPLAIN of a PIVOT: checked as EXPLAIN
        kind = "EXPLAIN"
    if kind == "MULTI":  # PIVOT without IN (...): read-only when it leads the statement
        if word in _MULTI_READS:
            return
        raise _refuse(
            f"{word or 'this'} statement with a PIVOT is not allowed (only a statement led "
            "by PIVOT, UNPIVOT, SELECT or FROM reads; in a CTE give the PIVOT an IN list: "
            "PIVOT t ON k IN ('a', 'b') USING ...)"
        )
    if kind == "EXPLAIN":
        m = _EXPLAIN.match(text)
        inner = text[m.end() :] if m else ""
        try:
            parts = con.extract_statements(inner) if inner.strip() else []
        except duckdb.Error:
            parts = []
        reads = len(parts) == 1 and (
            parts[0].type.name in SELECT_TYPES
            or (parts[0].type.name == "MULTI" and leading_keyword(inner) in _MULTI_READS)
        )
        if not reads:
            raise _refuse("EXPLAIN is allowed only of a SELECT")
        return
    if kind in ("PRAGMA", "CALL") and word in ("PRAGMA", "CALL"):
        m = _FUNCTION.match(text)
        name = m.group(2).lower() if m else None
        if name is None or name not in READ_ONLY_FUNCTIONS:
            shown = ", ".join(sorted(READ_ONLY_FUNCTIONS))
            raise _refuse(
                f"{kind} {name or '(unrecognised)'} is not a listed read-only function "
                f"(allowed: {shown})"
            )
        return
    shown = word if word and word != "WITH" else kind  # WITH ... INSERT: INSERT
    raise _refuse(f"{shown} statements are not allowed")


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise HomogError unless every statement in ``sql`` only reads.

    Uses DuckDB's own parser (statement types), so comments, CTEs and odd spacing cannot hide a
    write. Allowed: SELECT (incl. SHOW, DESCRIBE, SUMMARIZE, VALUES, FROM-first, PIVOT and
    UNPIVOT led statements), EXPLAIN [ANALYZE] of a SELECT, and PRAGMA/CALL of
    READ_ONLY_FUNCTIONS. Refused: everything else (INSERT, COPY, ATTACH, SET, PRAGMA x = y,
    CALL enable_logging(...), EXPLAIN ANALYZE COPY ...). This is the second guard: the
    connection itself (``open_reader``) cannot reach files or settings.
    A syntax error raises HomogError with DuckDB's message.
    """
    bad = next((i for i, ch in enumerate(sql) if "\udc80" <= ch <= "\udcff"), None)
    if bad is not None:  # stdin read with surrogateescape: a byte that is not UTF-8
        raise HomogError(
            f"the SQL is not UTF-8 text (byte 0x{ord(sql[bad]) - 0xDC00:02x} at character {bad}); "
            "save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8 FILE`) and retry"
        )
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise HomogError(str(exc)) from exc
    if not statements:
        raise HomogError("no SQL statement given")
    for st in statements:
        _check_statement(con, st)
