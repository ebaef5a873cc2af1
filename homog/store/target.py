"""Which file a load may replace, and the atomic build that replaces it.

``previous_database`` decides whether an existing ``--db`` file is homog's own (a
``homog_meta`` table with the schema version: its rows are kept), another DuckDB database
(refused unless ``--force``) or not a database at all (always refused). ``atomic_database``
builds the new file beside the old one and renames it into place.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path

import duckdb

from homog.errors import HomogError
from homog.io import remove_stale
from homog.store.guard import damaged, is_duckdb_file, sqlite_error


def _remove_db_files(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)


def remove_stale_builds(path: str | os.PathLike[str]) -> list[Path]:
    """Remove ``.<name>.<pid>.tmp`` (and ``.wal``) builds of ``path`` left by killed loads.

    Only files of processes that no longer run are removed (a live pid may be a load that
    is building right now). Returns the removed paths.
    """
    path = Path(path)
    return remove_stale(path.parent, rf"^\.{re.escape(path.name)}\.(\d+)\.tmp(\.wal)?$")


@contextlib.contextmanager
def atomic_database(path: str | os.PathLike[str]) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection to a new, empty DuckDB file beside ``path``; rename it onto ``path``.

    On leaving the block normally the new database is checkpointed, closed, synced to disk and
    renamed onto ``path`` (atomic on one filesystem), so readers see the old file or the new
    one, never a half-written one. On an exception (or a kill) ``path`` is left as it was and
    the temporary file and its WAL are removed (a kill leaves them, named
    ``.<name>.<pid>.tmp``; they are not read by anyone). The caller serialises concurrent
    builds of the same ``path`` (``load_database`` holds a lock file).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _remove_db_files(tmp)
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute("SET enable_progress_bar = false")
            yield con
            con.execute("CHECKPOINT")
        finally:
            con.close()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        _remove_db_files(tmp)


def refuse_read_only(path: Path) -> None:
    """HomogError when the existing ``path`` is write-protected (no owner write bit, or not
    writable by this user): the rename that replaces it would drop that protection, and a
    load could not keep the mode of a file it was told not to change. The mode bits are read
    directly, so root (for whom every file is writable) is refused too."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if mode & stat.S_IWUSR and os.access(path, os.W_OK):
        return
    fix = f"chmod u+w {shlex.quote(str(path))}"
    raise HomogError(
        f"--db {path} is write-protected (mode {stat.S_IMODE(mode):o}); homog does not replace "
        f"a read-only database. To update it, make it writable ({fix}); to keep it as it is, "
        "choose another --db"
    )


def previous_database(path: Path, *, force: bool = False) -> Path | None:
    """The existing database at ``path`` whose rows a load keeps, or None.

    Only homog's own databases (a ``homog_meta`` table with the schema version) are replaced.
    A DuckDB file without that mark is refused (HomogError) unless ``force`` (then it is
    replaced, its tables not kept); a file that is not a DuckDB database is always refused.
    """
    if not path.exists():
        return None
    if path.is_file() and path.stat().st_size == 0:
        raise HomogError(
            f"--db {path} is an empty file (0 bytes), not a DuckDB database; homog never replaces "
            f"a file it did not write: remove it (rm {path}) and run `homog load` again"
        )
    if not is_duckdb_file(path):
        sqlite = sqlite_error(path, load=True)
        if sqlite is not None:
            raise sqlite
        raise HomogError(
            f"--db {path} exists and is not a DuckDB database; homog never replaces it. Choose "
            "another --db (or move that file away yourself)"
        )
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise damaged(path, exc) from exc
    try:
        tables = sorted(r[0] for r in con.execute("SHOW TABLES").fetchall())
        marked = (
            "homog_meta" in tables
            and con.execute(
                "SELECT count(*) FROM homog_meta WHERE key = 'schema_version'"
            ).fetchone()[0]
        )
    except duckdb.Error as exc:
        raise damaged(path, exc) from exc
    finally:
        con.close()
    if marked:
        return path
    if not force:
        shown = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "") or "none"
        raise HomogError(
            f"--db {path} is a DuckDB database that homog did not build (no homog_meta table; "
            f"its tables: {shown}); a load would replace it. Choose another --db, or pass "
            "--force to replace it (its tables are not kept)"
        )
    return None


def interrupted(exc: BaseException) -> bool:
    """DuckDB's Ctrl-C: an InterruptException or, while a statement writes, a RuntimeError."""
    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower()
    )
