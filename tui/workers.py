"""Running read-only queries off the UI thread.

One DuckDB connection is not safe to share between threads, so every worker takes its own
``con.cursor()``. Results travel back as :class:`~tui.messages.QueryDone` /
:class:`~tui.messages.QueryFailed` messages; a worker superseded by a newer one in the same
group (``exclusive``) drops its result instead of posting it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.dom import DOMNode
from textual.worker import Worker, get_current_worker

from tui.messages import QueryDone, QueryFailed


def error_text(exc: BaseException) -> str:
    """The message to show for a failed query: DuckDB's own text, first lines only."""
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    return "\n".join(lines[:8])


def run_query(
    node: DOMNode, key: str, fn: Callable[..., Any], *args: Any, on_cursor=None
) -> Worker | None:
    """Run ``fn(cursor, *args)`` in a thread worker and post the outcome to ``node``.

    ``key`` is the worker group: a newer query with the same key supersedes the older one.
    ``on_cursor(cursor)`` is called (from the worker thread) once the cursor exists, so a
    caller can keep it to interrupt a long query. Returns the worker, or None when there is
    no open database (a QueryFailed is posted then).
    """
    db = node.app.db
    if db is None or not db.ok:
        node.post_message(QueryFailed(key, "no database is open"))
        return None
    con = db.con

    def job() -> None:
        worker = get_current_worker()
        start = time.perf_counter()
        try:
            cursor = con.cursor()
        except Exception as exc:  # noqa: BLE001 - a closed connection after a reload
            node.post_message(QueryFailed(key, error_text(exc)))
            return
        if on_cursor is not None:
            on_cursor(cursor)
        try:
            value = fn(cursor, *args)
        except Exception as exc:  # noqa: BLE001 - every database error goes to the UI
            if not worker.is_cancelled:
                cancelled = "interrupt" in str(exc).lower()
                node.post_message(QueryFailed(key, error_text(exc), cancelled=cancelled))
            return
        finally:
            try:
                cursor.close()
            except Exception:  # noqa: BLE001
                pass
        if not worker.is_cancelled:
            node.post_message(QueryDone(key, value, time.perf_counter() - start))

    return node.run_worker(
        job, name=key, group=key, thread=True, exclusive=True, exit_on_error=False
    )
