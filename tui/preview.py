"""The catalog read in a child process while the terminal UI starts.

Importing DuckDB, opening the file and reading the catalog cost about as much CPU as
importing and starting Textual, and both hold the GIL, so a thread barely overlaps them.
``homog tui`` therefore starts a child process first: it reads the catalog on another core
and pickles it to a pipe, the app paints the runs from it, and opens its own read-only
connection only after that paint. On Linux, in a process with no other thread, the child is
a fork (no interpreter start-up), when this process has not loaded DuckDB; elsewhere it is
``python -m tui.preview PATH``.

Nothing here imports Textual. Any failure of the child (no interpreter, a crash, a bad file)
makes :meth:`CatalogPreview.result` return None, and the app opens the file the ordinary
way, which reports the problem.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tui.core import Catalog, open_with_catalog

WAIT_S = 10.0  # the app stops waiting for the child after this long and opens the file itself


class CatalogPreview:
    """``python -m tui.preview PATH`` started now; :meth:`result` is its (stamp, catalog)."""

    def __init__(self, path: str | os.PathLike[str], *, fork: bool | None = None) -> None:
        """``fork``: None picks (a fork on Linux when this is the only thread and DuckDB is
        not loaded), False spawns ``python -m tui.preview``, True forks."""
        self.path = Path(path)
        self.how = "none"
        self._out: tuple[tuple[int, int, int] | None, Catalog] | None = None
        self._done = threading.Event()
        self._kill: Callable[[], None] = lambda: None
        if fork is None:  # a fork copies one thread: only where no other (DuckDB's native
            # worker threads included) could hold a lock the child would need
            fork = (
                sys.platform == "linux"
                and threading.active_count() == 1
                and "duckdb" not in sys.modules
            )
        try:
            read = self._fork() if fork else self._spawn()
        except OSError:
            self._done.set()
            return
        threading.Thread(target=read, name="homog-catalog-preview", daemon=True).start()

    def _fork(self) -> Callable[[], None]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns, never writes to the terminal
            code = 1
            try:
                os.close(r)
                quiet = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(quiet, fd)
                code = write_catalog(self.path, w)
            finally:
                os._exit(code)
        os.close(w)
        self.how = "fork"
        self._kill = lambda: os.kill(pid, signal.SIGKILL)

        def read() -> None:
            with os.fdopen(r, "rb") as pipe:
                data = pipe.read()
            status = os.waitpid(pid, 0)[1]
            self._take(data if os.waitstatus_to_exitcode(status) == 0 else b"")

        return read

    def _spawn(self) -> Callable[[], None]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui.preview", str(self.path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.how = "spawn"
        self._kill = proc.kill

        def read() -> None:
            assert proc.stdout is not None
            data = proc.stdout.read()
            self._take(data if proc.wait() == 0 else b"")

        return read

    def _take(self, data: bytes) -> None:
        try:
            if data:
                stamp, catalog = pickle.loads(data)  # our own child's output
                if isinstance(catalog, Catalog):
                    self._out = (stamp, catalog)
        except Exception:  # noqa: BLE001 - any failure means: no preview
            self._out = None
        finally:
            self._done.set()

    def ready(self) -> bool:
        """Whether :meth:`result` would return at once."""
        return self._done.is_set()

    def result(self, timeout: float = WAIT_S) -> tuple[tuple[int, int, int] | None, Catalog] | None:
        """(the file's fingerprint when the child read it, the catalog), or None when the
        child failed or took longer than ``timeout`` seconds (it is then killed)."""
        if not self._done.wait(timeout):
            try:
                self._kill()
            except OSError:
                pass
            self._done.wait(1.0)
        return self._out


def write_catalog(path: str | os.PathLike[str], fd: int) -> int:
    """Pickle (fingerprint, catalog) of the database at ``path`` to the file descriptor
    ``fd``; 0 when written, 1 when the file cannot be opened or read (nothing written)."""
    db, catalog, _error = open_with_catalog(path)
    try:
        if catalog is None:
            return 1
        data = memoryview(pickle.dumps((db.stamp, catalog)))
        while data:
            data = data[os.write(fd, data) :]
        return 0
    finally:
        db.close()


def main(argv: list[str]) -> int:
    """Child: pickle (fingerprint, catalog) of the database to stdout; exit 1 when the file
    cannot be opened or read (the parent then opens it itself and shows why)."""
    if len(argv) != 1:
        print("usage: python -m tui.preview DB_PATH", file=sys.stderr)
        return 2
    return write_catalog(argv[0], sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
