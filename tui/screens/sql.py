"""SQL console: type a query, ctrl+r runs it in a worker, results page through a table."""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from tui.components.results_table import ResultsTable
from tui.components.sql_editor import SqlEditor
from tui.core import run_console_sql
from tui.messages import QueryFailed, SqlDone
from tui.screens.base import HomogScreen

STARTER_SQL = """-- ctrl+r runs the query (or the selected text); esc cancels a running one.
SELECT model, intervention, variant, layer, round(mean, 3) AS erank
FROM layer_summary JOIN runs USING (run_id, model)
WHERE metric = 'erank' AND layer % 6 = 0
ORDER BY model, intervention, variant, layer"""


def fetch_sql(con: Any, sql: str) -> SqlDone:
    """Worker body: the console's query, at most the console's row limit."""
    return SqlDone(*run_console_sql(con, sql))


class SqlScreen(HomogScreen):
    """Read-only SQL over the database. Errors show DuckDB's message; writes are refused
    (the statement allow-list) and impossible anyway: the connection is read-only and cannot
    reach files, settings or the network (``homog.store.guard``)."""

    MODE = "sql"
    AUTO_FOCUS = "#sql-editor"
    BINDINGS = [
        Binding("ctrl+r", "run", "Run", priority=True),
        Binding("escape", "cancel", "Cancel", priority=True),
        Binding("e", "edit", "Edit query"),
    ]

    show_timings = True  # snapshot tests turn timings off (they differ run to run)

    def __init__(self) -> None:
        super().__init__()
        self._cursor: Any = None
        self._cursor_lock = threading.Lock()
        self.running = False

    def compose_body(self) -> ComposeResult:
        yield SqlEditor(STARTER_SQL, id="sql-editor")
        yield Static(
            "ctrl+r run · esc cancel / leave editor · e back to the editor · n/p pages",
            id="sql-status",
            classes="status",
        )
        yield ResultsTable(id="sql-results")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.running or self.focused is self.query_one(SqlEditor)
        if action == "edit":  # in the editor, e is a letter of the query
            return self.focused is not self.query_one(SqlEditor)
        return True

    def action_run(self) -> None:
        self.query_one(SqlEditor).action_submit()

    def action_edit(self) -> None:
        self.query_one(SqlEditor).focus()

    def action_cancel(self) -> None:
        if not self.running:
            self.query_one("#results-grid").focus()  # escape leaves the editor
            return
        with self._cursor_lock:
            cursor = self._cursor
        if cursor is not None:
            try:
                cursor.interrupt()  # DuckDB stops the query; the worker sees an interrupt error
            except Exception:  # noqa: BLE001 - the query may have just finished
                pass
        self._status(Text("cancelling…", style="bold yellow"))

    def _keep_cursor(self, cursor: Any) -> None:
        with self._cursor_lock:
            self._cursor = cursor

    @on(SqlEditor.Submitted)
    def _submitted(self, event: SqlEditor.Submitted) -> None:
        self.running = True
        self.query_one(ResultsTable).loading = True
        self._status("running… (esc cancels)")
        self.query_db(SqlDone, fetch_sql, event.sql, on_cursor=self._keep_cursor)

    def _done(self) -> None:
        self.running = False
        with self._cursor_lock:
            self._cursor = None
        self.query_one(ResultsTable).loading = False

    @on(SqlDone)
    def _sql_done(self, message: SqlDone) -> None:
        self._done()
        rows, truncated = message.rows, message.truncated
        results = self.query_one(ResultsTable)
        elapsed = message.elapsed_s if self.show_timings else None
        results.show(message.columns, rows, truncated=truncated, elapsed_s=elapsed)
        # the results have the keys now (n/p pages, arrows); e goes back to the editor. An
        # error leaves the focus in the editor, where the query is fixed.
        self.query_one("#results-grid").focus()
        took = f" · {elapsed:.3f} s" if elapsed is not None else ""
        self._status(
            Text.assemble(
                ("ok", "green"),
                f" · {len(rows):,}{'+' if truncated else ''} rows{took}",
            )
        )

    @on(QueryFailed)
    def _sql_failed(self, message: QueryFailed) -> None:
        if message.result is not SqlDone:
            return
        message.prevent_default()
        self._done()
        if message.cancelled:
            self._status(Text("cancelled", style="bold yellow"))
        else:
            self._status(Text.assemble(("error: ", "bold red"), message.error))

    def _status(self, text: str | Text) -> None:
        self.query_one("#sql-status", Static).update(text)
