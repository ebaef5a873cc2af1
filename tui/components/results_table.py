"""Query results in pages of a DataTable (only one page of rows is ever in the widget)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

PAGE_ROWS = 500


def cell(value: Any) -> Text | str:
    """A result value for the table: numbers right-aligned, NULL dimmed, long text cut."""
    if value is None:
        return Text("NULL", style="dim")
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return Text(str(value), justify="right")
    if isinstance(value, float):
        return Text(f"{value:.6g}", justify="right")
    text = str(value)
    return text if len(text) <= 80 else text[:79] + "…"


class ResultsTable(Vertical):
    """A DataTable plus one status line; ``n`` / ``p`` page through the rows."""

    BINDINGS = [
        Binding("n", "page(1)", "Next page"),
        Binding("p", "page(-1)", "Prev page"),
    ]

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.columns: list[str] = []
        self.rows: Sequence[Sequence[Any]] = []
        self.truncated = False
        self.page = 0

    def compose(self) -> ComposeResult:
        yield DataTable(id="results-grid", zebra_stripes=True)
        yield Static("", id="results-status")

    @property
    def n_pages(self) -> int:
        return max(1, -(-len(self.rows) // PAGE_ROWS))

    def show(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        truncated: bool = False,
        elapsed_s: float | None = None,
    ) -> None:
        """Show a result set from its first page."""
        self.columns, self.rows, self.truncated = list(columns), rows, truncated
        self.elapsed_s = elapsed_s
        self.page = 0
        grid = self.query_one(DataTable)
        grid.clear(columns=True)
        for name in self.columns:
            grid.add_column(name)
        self._fill()

    def _fill(self) -> None:
        grid = self.query_one(DataTable)
        grid.clear()
        start = self.page * PAGE_ROWS
        for row in self.rows[start : start + PAGE_ROWS]:
            grid.add_row(*(cell(v) for v in row))
        n = len(self.rows)
        more = "+" if self.truncated else ""
        shown = f"rows {start + 1}–{min(n, start + PAGE_ROWS)} of {n:,}{more}" if n else "0 rows"
        pages = f" · page {self.page + 1}/{self.n_pages} (n/p)" if self.n_pages > 1 else ""
        took = f" · {self.elapsed_s:.3f} s" if self.elapsed_s is not None else ""
        cut = " · output cut at this many rows; add a LIMIT or aggregate" if self.truncated else ""
        self.query_one("#results-status", Static).update(f"{shown}{pages}{took}{cut}")

    def action_page(self, step: int) -> None:
        page = min(max(0, self.page + step), self.n_pages - 1)
        if page != self.page:
            self.page = page
            self._fill()
