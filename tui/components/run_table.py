"""The table of runs; space marks runs to compare, enter compares them."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from tui.core import Row

COLUMNS = ("✓", "model", "source", "layers", "dtype", "intervention", "texts", "date", "run")
# below this width source and dtype go, so that date and run stay on screen (80 columns)
COMPACT_BELOW = 110
COMPACT = ("✓", "model", "layers", "intervention", "texts", "date", "run")


def _date(value: object) -> str:
    text = "" if value is None else str(value)
    return text[:16]  # 'YYYY-MM-DD HH:MM': seconds add nothing when comparing runs


class RunTable(DataTable):
    """Runs, one per row (key = run_id), with a check mark for the selected ones."""

    BINDINGS = [
        Binding("space", "toggle", "Select"),
        Binding("enter", "compare", "Compare"),
        Binding("a", "select_all", "All/none"),
    ]

    class SelectionChanged(Message):
        """The set of selected runs changed."""

        def __init__(self, selected: tuple[str, ...]) -> None:
            super().__init__()
            self.selected = selected

    class CompareRequested(Message):
        """Enter was pressed: compare the selected runs (or the one under the cursor)."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.selected: list[str] = []
        self._shown: list[str] = []
        self._runs: list[Row] = []
        self._short: dict[str, str] = {}  # run id -> shortest unique prefix (>= 8)
        self.columns_shown: tuple[str, ...] = ()

    def on_resize(self) -> None:
        wanted = COMPACT if self.size.width < COMPACT_BELOW else COLUMNS
        if wanted != self.columns_shown and self.is_mounted:
            self.show(self._runs, self.selected)

    def set_run_ids(self, run_ids: Iterable[str]) -> None:
        """Every run id of the database: the run column prints each one's shortest unique
        prefix (what `homog` commands take back)."""
        from homog.cli.options import short_ids

        self._short = short_ids(list(run_ids))

    def show(self, runs: Iterable[Row], selected: Iterable[str]) -> None:
        """Replace the rows with ``runs``; keep the cursor on the same run when possible."""
        current = self._shown[self.cursor_row] if 0 <= self.cursor_row < len(self._shown) else None
        self.selected = list(selected)
        self._runs = list(runs)
        columns = COMPACT if 0 < self.size.width < COMPACT_BELOW else COLUMNS
        self.clear(columns=columns != self.columns_shown)
        if columns != self.columns_shown:
            for name in columns:
                self.add_column(name, key=name)
            self.columns_shown = columns
        self._shown = []
        for r in self._runs:
            rid = r["run_id"]
            self._shown.append(rid)
            cells = {
                "✓": self._mark(rid),
                "model": str(r.get("model", "")),
                "source": str(r.get("model_source", "")),
                "layers": Text(str(r.get("n_layers", "")), justify="right"),
                "dtype": str(r.get("dtype", "") or ""),
                "intervention": str(r.get("intervention", "") or ""),
                "texts": Text(
                    "" if r.get("n_texts") is None else str(r["n_texts"]), justify="right"
                ),
                "date": _date(r.get("created_at")),
                "run": self._short.get(rid, rid[:12]),
            }
            self.add_row(*(cells[c] for c in columns), key=rid)
        if current in self._shown:
            self.move_cursor(row=self._shown.index(current))

    def _mark(self, rid: str) -> Text:
        return Text("✓", style="bold green") if rid in self.selected else Text(" ")

    def _set_selected(self, selected: list[str]) -> None:
        self.selected = selected
        for rid in self._shown:
            self.update_cell(rid, "✓", self._mark(rid))
        self.post_message(self.SelectionChanged(tuple(self.selected)))

    def action_toggle(self) -> None:
        if not self._shown:
            return
        rid = self._shown[self.cursor_row]
        sel = [r for r in self.selected if r != rid]
        if rid not in self.selected:
            sel.append(rid)
        self._set_selected(sel)

    def action_select_all(self) -> None:
        shown = set(self._shown)
        if shown and shown.issubset(self.selected):
            self._set_selected([r for r in self.selected if r not in shown])
        else:
            self._set_selected(self.selected + [r for r in self._shown if r not in self.selected])

    def action_compare(self) -> None:
        if not self.selected and self._shown:
            self._set_selected([self._shown[self.cursor_row]])
        self.post_message(self.CompareRequested())
