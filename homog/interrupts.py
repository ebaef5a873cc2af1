"""Ctrl-C reaches DuckDB queries that Python cannot interrupt by itself.

A query that runs inside a C++ call Python is waiting on (an Arrow stream read by
``homog export``, a Parquet write scanning it) does not see Python's SIGINT flag: the export
ran on, deaf to Ctrl-C, until the query was done. :func:`watch_sigint` (around every command,
in :class:`homog.cli.LazyGroup`) listens on Python's signal wakeup fd in a thread and, on
SIGINT, calls ``interrupt()`` on every DuckDB connection :func:`register` was given (every
reader connection, and export's writer): the query stops with DuckDB's interrupt, which the
CLI turns into the line ``interrupted`` and status 130. Python's own handler still raises
KeyboardInterrupt in the main thread. Nothing here imports DuckDB.

A Ctrl-C can also be lost: Python runs its SIGINT handler wherever the main thread happens to
be, and a KeyboardInterrupt raised inside a weakref callback or a ``__del__`` (matplotlib's
callback registries, a WeakSet's bookkeeping, during garbage collection) is only printed
("Exception ignored in ... KeyboardInterrupt") while the command runs on. So while
:func:`watch_sigint` is active every SIGINT is also remembered, and :func:`check` raises
KeyboardInterrupt for a remembered one: ``homog.io.atomic_path`` calls it before renaming an
output into place, and :func:`watch_sigint` when the command returns, so an interrupted
command never commits its outputs and never exits 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Iterator
from typing import Any

_CONNECTIONS: weakref.WeakSet[Any] = weakref.WeakSet()
# set by every SIGINT while watch_sigint is active; cleared when it starts and ends
_PENDING = threading.Event()


def check() -> None:
    """Raise KeyboardInterrupt when a Ctrl-C came during this command (its own
    KeyboardInterrupt may have been swallowed where Python cannot raise it)."""
    if _PENDING.is_set():
        raise KeyboardInterrupt


def _on_sigint(signum: int, frame: Any) -> None:
    _PENDING.set()  # before raising: the raise may land in a weakref callback and be lost
    signal.default_int_handler(signum, frame)


def register(con: Any) -> Any:
    """Let Ctrl-C interrupt ``con`` (a DuckDB connection) while a command runs; returns it."""
    with contextlib.suppress(TypeError):
        _CONNECTIONS.add(con)
    return con


def interrupt_all() -> None:
    """``interrupt()`` every registered connection still open (closed ones are skipped)."""
    for con in list(_CONNECTIONS):
        with contextlib.suppress(Exception):
            con.interrupt()


@contextlib.contextmanager
def watch_sigint() -> Iterator[None]:
    """While inside, SIGINT also interrupts the registered DuckDB connections (main thread
    only; elsewhere, or where a wakeup fd cannot be set, it does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _PENDING.clear()
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        yield
        return
    # only Python's own handler is wrapped: a handler someone else set stays as it is
    ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if ours:
        signal.signal(signal.SIGINT, _on_sigint)

    def watch() -> None:
        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGINT in data:
                _PENDING.set()
                interrupt_all()

    thread = threading.Thread(target=watch, name="homog-sigint", daemon=True)
    thread.start()
    try:
        yield
        check()  # the command returned after a Ctrl-C whose KeyboardInterrupt was lost
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(old)
        os.close(w)  # the watcher reads EOF and ends
        thread.join(1.0)
        if not thread.is_alive():
            os.close(r)
        _PENDING.clear()
