"""Running read-only queries off the UI thread.

One DuckDB connection is not safe to share between threads, so every worker takes its own
``con.cursor()``. Workers run with ``thread=True, exit_on_error=False`` in a group per result kind,
by default ``exclusive``: a newer query of the same kind supersedes the older one, whose
result is dropped instead of posted. The outcome travels back as a typed message
(:mod:`tui.messages`): the result the query function returns, or :class:`QueryFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from textual.dom import DOMNode
from textual.worker import Worker, get_current_worker

from tui.core import error_text
from tui.messages import QueryFailed, QueryResult

R = TypeVar("R", bound=QueryResult)


def run_query(
    node: DOMNode,
    result: type[R],
    fn: Callable[..., R],
    *args: Any,
    on_cursor: Callable[[Any], None] | None = None,
    exclusive: bool = True,
) -> Worker | None:
    """Run ``fn(cursor, *args)`` in a thread worker and post the message it returns to ``node``.

    ``fn`` returns an instance of ``result``; the worker sets its ``elapsed_s``. When ``fn``
    raises, ``QueryFailed(result, error)`` is posted instead. ``on_cursor(cursor)`` is called
    (from the worker thread) once the cursor exists, so a caller can keep it to interrupt a
    long query. ``exclusive=False`` lets queries of the same kind run side by side (each
    result is posted; the caller tells them apart). Returns the worker, or None when there
    is no open database (a QueryFailed is posted then).
    """
    db = node.app.db
    if db is None or not db.ok:
        node.post_message(QueryFailed(result, "no database is open"))
        return None
    con = db.con

    def job() -> None:
        worker = get_current_worker()
        start = time.perf_counter()
        try:
            cursor = con.cursor()
        except Exception as exc:  # noqa: BLE001 - a closed connection after a reload
            node.post_message(QueryFailed(result, error_text(exc)))
            return
        if on_cursor is not None:
            on_cursor(cursor)
        try:
            message = fn(cursor, *args)
        except Exception as exc:  # noqa: BLE001 - every database error goes to the UI
            if not worker.is_cancelled:
                cancelled = "interrupt" in str(exc).lower()
                node.post_message(QueryFailed(result, error_text(exc), cancelled=cancelled))
            return
        finally:
            try:
                cursor.close()
            except Exception:  # noqa: BLE001
                pass
        if not worker.is_cancelled:
            message.elapsed_s = time.perf_counter() - start
            node.post_message(message)

    group = result.__name__
    return node.run_worker(
        job, name=group, group=group, thread=True, exclusive=exclusive, exit_on_error=False
    )
