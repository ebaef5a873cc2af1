"""Runs: every run in the database; filter by typing, mark runs to compare."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Input, Static

from tui.components.run_table import RunTable
from tui.core import Catalog, filter_rows
from tui.screens.base import HomogScreen

FILTER_KEYS = ("model", "model_source", "intervention", "dtype", "run_id", "created_at")


class RunsScreen(HomogScreen):
    """The table of runs. ``/`` filters (every word must match), space marks a run,
    enter compares the marked runs."""

    MODE = "runs"
    AUTO_FOCUS = "#run-table"  # keys (q, 1-5, space) work at once, not typed into the filter
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "leave_filter", "Back to table", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="runs-top"):
            yield Input(
                placeholder="/ to filter: model, source, intervention, date…",
                id="run-filter",
                compact=True,
            )
            yield Static("", id="runs-count")
        yield RunTable(id="run-table")

    def on_mount(self) -> None:
        super().on_mount()
        self.watch(self.app, "selected_runs", self._selection_watch, init=False)
        table = self.query_one(RunTable)
        table.loading = self.catalog is None

    def catalog_changed(self, catalog: Catalog) -> None:
        table = self.query_one(RunTable)
        table.loading = False
        table.set_run_ids(r["run_id"] for r in catalog.runs)
        self._refilter()
        # A loading table cannot take focus, so the screen's auto-focus may have missed it:
        # give it the focus once the runs are in, unless the user is typing a filter.
        if not isinstance(self.focused, Input):
            table.focus()

    def _refilter(self) -> None:
        catalog = self.catalog
        if catalog is None:
            return
        text = self.query_one("#run-filter", Input).value
        shown = filter_rows(catalog.runs, text, FILTER_KEYS)
        self.query_one(RunTable).show(shown, self.app.selected_runs)
        self._count(len(shown))

    def _count(self, n_shown: int | None = None) -> None:
        catalog = self.catalog
        total = len(catalog.runs) if catalog else 0
        shown = total if n_shown is None else n_shown
        n_sel = len(self.app.selected_runs)
        part = f"{shown} of {total} runs" if shown != total else f"{total} runs"
        self.query_one("#runs-count", Static).update(f"{part} · {n_sel} selected")

    def _selection_watch(self, selected: tuple[str, ...]) -> None:
        table = self.query_one(RunTable)
        if list(selected) != table.selected:
            self._refilter()
        else:
            self._count(table.row_count)

    @on(Input.Changed, "#run-filter")
    def _filter_changed(self) -> None:
        self._refilter()

    @on(Input.Submitted, "#run-filter")
    def _filter_done(self) -> None:
        self.query_one(RunTable).focus()

    def action_filter(self) -> None:
        self.query_one("#run-filter", Input).focus()

    def action_leave_filter(self) -> None:
        self.query_one(RunTable).focus()

    @on(RunTable.SelectionChanged)
    def _selected(self, event: RunTable.SelectionChanged) -> None:
        self.app.selected_runs = event.selected

    @on(RunTable.CompareRequested)
    def _compare(self) -> None:
        self.app.action_goto("compare")
