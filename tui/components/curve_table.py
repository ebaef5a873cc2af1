"""The numbers behind the curve plot: line number, layer, mean, 95 % CI, the Holm p-value vs
original (``*`` below alpha, ``‡`` at the permutation floor) and n.

A Line-API widget (:class:`~textual.scroll_view.ScrollView`): ``render_line`` draws only the
rows on screen, each formatted the first time it is shown. A DataTable built a renderable
per cell for every row on each refill, which was most of a metric switch's redraw on a
10-run database (1,600 rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.core import Row, fmt_fit, fmt_interval, fmt_p, significant

# (label, width, justify); each cell has one space of padding on its left. "#" is the line's
# number in the plot and the legend; the CI comes before p so that it is never the column cut.
COLUMNS = (
    ("#", 3, "right"),
    ("layer", 5, "right"),
    ("mean", 8, "right"),
    ("95% CI", 15, "left"),
    ("p Holm", 6, "right"),
    ("", 2, "left"),
    ("n", 4, "right"),
)
PAD = 1
MEAN_W, CI_W = COLUMNS[2][1], COLUMNS[3][1]  # numbers are shortened to fit, never cut
P_COLUMN, MARK_COLUMN = 4, 5  # highlighted when the contrast is significant
TABLE_WIDTH = sum(width + PAD for _, width, _ in COLUMNS)
SIGNIFICANT = Style(bold=True, color="yellow")

Cells = tuple[str, str, str, str, str, str, str]


def _fit(text: str, width: int, justify: str) -> str:
    """``text`` in exactly ``width`` cells: cut with an ellipsis, or padded."""
    size = cell_len(text)
    if size > width:
        return set_cell_size(text, width - 1) + "…" if width > 1 else text[:width]
    fill = " " * (width - size)
    return fill + text if justify == "right" else text + fill


class CurveTable(ScrollView, can_focus=True):
    """One row per (line, layer) under a fixed header. Rows whose contrast with the original
    variant is significant after Holm's correction carry a ``*`` and a highlighted p-value;
    a p at the permutation test's floor carries a ``‡`` (see the footnote).
    ``up``/``down``/``pageup``/``pagedown``/``home``/``end`` move the row cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First row", show=False),
        Binding("end", "cursor_to(-1)", "Last row", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "curve-table--header",
        "curve-table--cursor",
        "curve-table--even-row",
        "curve-table--odd-row",
    }
    # The look of a DataTable with a row cursor and zebra stripes.
    DEFAULT_CSS = """
    CurveTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .curve-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        &:dark > .curve-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .curve-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .curve-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .curve-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .curve-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    cursor_row: reactive[int] = reactive(0, repaint=False)
    zebra_stripes: reactive[bool] = reactive(True)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self._rows: list[Row] = []
        self._numbers: Mapping[tuple[str, str], int] = {}
        self._sig: list[bool] = []
        self._floor: list[bool] = []
        self._cells: dict[int, Cells] = {}  # formatted on first use
        self._strips: dict[tuple[int, bool, int], Strip] = {}  # (row, cursor, width)

    def on_mount(self) -> None:
        self.virtual_size = Size(TABLE_WIDTH, 1)

    # -- data -------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._rows)

    def show(
        self,
        rows: Iterable[Row],
        numbers: Mapping[tuple[str, str], int],
        at_floor: Callable[[Row], bool] | None = None,
    ) -> int:
        """Replace the rows (``numbers``: (run_id, variant) -> line number); return how many
        are significant. ``at_floor(row)`` marks a p at the permutation floor. The cursor
        stays on the same (line, layer) when the new rows have it."""
        current = self._row_key(self.cursor_row) if self._rows else None
        self._numbers = dict(numbers)
        self._rows = sorted(rows, key=self._sort_key)
        self._sig = [significant(r.get("p_holm_vs_original")) for r in self._rows]
        self._floor = [bool(at_floor and at_floor(r)) for r in self._rows]
        self._cells.clear()
        self._strips.clear()
        self.virtual_size = Size(TABLE_WIDTH, len(self._rows) + 1)
        row = 0
        if current is not None:
            row = next(
                (i for i in range(len(self._rows)) if self._row_key(i) == current),
                min(self.cursor_row, max(0, len(self._rows) - 1)),
            )
        self.set_reactive(CurveTable.cursor_row, row)
        self._scroll_to_cursor()
        self.refresh()
        return sum(self._sig)

    def number(self, r: Row) -> int:
        return self._numbers.get((r["run_id"], r["variant"]), 0)

    def _sort_key(self, r: Row) -> tuple:
        return (self.number(r), r["layer"])

    def _row_key(self, i: int) -> tuple:
        r = self._rows[i]
        return (r["run_id"], r["variant"], r["layer"])

    def row_data(self, row_index: int) -> Row:
        """The row (a layer-curve dict) shown at ``row_index``."""
        return self._rows[row_index]

    def get_row_at(self, row_index: int) -> list[str]:
        """The cells of a row as shown (#, layer, mean, 95% CI, p Holm, mark, n)."""
        if not 0 <= row_index < len(self._rows):
            raise IndexError(f"row {row_index} of {len(self._rows)}")
        return list(self._cells_at(row_index))

    def _cells_at(self, i: int) -> Cells:
        cells = self._cells.get(i)
        if cells is None:
            r = self._rows[i]
            sig = self._sig[i]
            ci = "" if r.get("ci_low") is None else fmt_interval(r["ci_low"], r["ci_high"], CI_W)
            cells = self._cells[i] = (
                str(self.number(r)),
                str(r["layer"]),
                fmt_fit(r.get("mean"), MEAN_W),
                ci,
                fmt_p(r.get("p_holm_vs_original")),
                ("*" if sig else "") + ("‡" if self._floor[i] else ""),
                str(r.get("n", "")),
            )
        return cells

    # -- drawing ----------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def _on_focus(self, event: events.Focus) -> None:
        self._strips.clear()
        super()._on_focus(event)

    def _on_blur(self, event: events.Blur) -> None:
        self._strips.clear()
        super()._on_blur(event)

    def watch_zebra_stripes(self) -> None:
        self._strips.clear()

    def _line_strip(self, i: int, cursor: bool, width: int) -> Strip:
        """Row ``i`` (-1: the header), full width: the table, then filled to ``width``."""
        key = (i, cursor, width)
        strip = self._strips.get(key)
        if strip is not None:
            return strip
        base = self.rich_style
        if i < 0:
            style = base + self.get_component_rich_style("curve-table--header")
            texts: tuple[str, ...] = tuple(label for label, _, _ in COLUMNS)
            sig, header = False, True
        else:
            style = base
            if self.zebra_stripes:
                style += self.get_component_rich_style(
                    "curve-table--odd-row" if i % 2 else "curve-table--even-row"
                )
            if cursor:
                style += self.get_component_rich_style("curve-table--cursor")
            texts = self._cells_at(i)
            sig, header = self._sig[i], False
        sig_style = style + SIGNIFICANT
        if cursor:  # the cursor's colours win, as in a DataTable
            sig_style += Style.from_color(style.color, style.bgcolor)
        segments = []
        for col, ((_, w, justify), text) in enumerate(zip(COLUMNS, texts, strict=True)):
            cell = " " * PAD + _fit(text, w, "left" if header else justify)
            hot = sig and col in (P_COLUMN, MARK_COLUMN)
            # the cell's coordinates as meta, as a DataTable has them (a cell is also one
            # text run in an SVG screenshot, so columns stay aligned in any font)
            meta = Style.from_meta({"row": i, "column": col})
            segments.append(Segment(cell, (sig_style if hot else style) + meta))
        if width > TABLE_WIDTH:
            segments.append(Segment(" " * (width - TABLE_WIDTH), style))
        strip = self._strips[key] = Strip(segments, max(width, TABLE_WIDTH))
        if len(self._strips) > 512:
            self._strips.clear()
            self._strips[key] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            strip = self._line_strip(-1, False, width)
        else:
            i = scroll_y + y - 1
            if i >= len(self._rows):
                return Strip.blank(width, self.rich_style)
            strip = self._line_strip(i, i == self.cursor_row, width)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    # -- cursor -----------------------------------------------------------------------------
    def validate_cursor_row(self, row: int) -> int:
        return max(0, min(row, len(self._rows) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        self.refresh()

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # less the header

    def _scroll_to_cursor(self) -> None:
        row, top, visible = self.cursor_row, round(self.scroll_y), self._visible_rows()
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False, immediate=True)

    def action_cursor(self, step: int) -> None:
        self.cursor_row += step

    def action_page(self, step: int) -> None:
        self.cursor_row += step * self._visible_rows()

    def action_cursor_to(self, row: int) -> None:
        self.cursor_row = row if row >= 0 else len(self._rows) - 1

    def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            self.cursor_row = round(self.scroll_y) + offset.y - 1
