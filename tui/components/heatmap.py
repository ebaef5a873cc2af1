"""A heatmap drawn with coloured cells: rows x columns of numbers, a cursor, a readout.

Used for the attention position profile (layer x relative-position bin) and the
head-ablation grid (layer x head). Keys move the cursor, a click selects a cell, and the
line under the map reads the value under the cursor. ``s`` switches the colour scale
between linear and square root (attention mass piles up in the first bin, the attention
sink, and a linear scale shows little else).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

# Viridis at five stops: perceptually ordered and readable for colour-blind users.
STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def colour(t: float) -> tuple[int, int, int]:
    """The RGB colour at ``t`` in [0, 1] (clamped) on the viridis ramp."""
    t = min(1.0, max(0.0, t)) * (len(STOPS) - 1)
    i = min(int(t), len(STOPS) - 2)
    f = t - i
    a, b = STOPS[i], STOPS[i + 1]
    return tuple(round(a[k] + (b[k] - a[k]) * f) for k in range(3))  # type: ignore[return-value]


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


class Heatmap(Widget, can_focus=True):
    """Rows x columns of values as coloured cells.

    Call :meth:`set_data`; ``None`` values are drawn blank. ``highlight`` (row, col) marks
    one cell with a diamond (the deposit head in the PE lab).
    """

    BINDINGS = [
        Binding("up", "move(-1, 0)", "Up", show=False),
        Binding("down", "move(1, 0)", "Down", show=False),
        Binding("left", "move(0, -1)", "Left", show=False),
        Binding("right", "move(0, 1)", "Right", show=False),
        Binding("s", "toggle_scale", "Scale"),
    ]

    cursor: reactive[tuple[int, int]] = reactive((0, 0))
    sqrt_scale: reactive[bool] = reactive(True)

    def __init__(self, *, id: str | None = None, sqrt_scale: bool = True) -> None:  # noqa: A002
        super().__init__(id=id)
        self.values: list[list[float | None]] = []
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.row_name = "row"
        self.col_name = "col"
        self.value_name = "value"
        self.describe_col: Callable[[int], str] = str
        self.highlight: tuple[int, int] | None = None
        self.empty_text = "no data"
        self.format_value: Callable[[float | None], str] = _num
        self._cell_w = 2
        self._label_w = 3
        self._top = 0
        self.set_reactive(Heatmap.sqrt_scale, sqrt_scale)

    # -- data ------------------------------------------------------------------------------
    def set_data(
        self,
        values: Sequence[Sequence[float | None]],
        row_labels: Sequence[str],
        col_labels: Sequence[str],
        *,
        row_name: str = "row",
        col_name: str = "col",
        value_name: str = "value",
        describe_col: Callable[[int], str] | None = None,
        highlight: tuple[int, int] | None = None,
        empty_text: str = "no data",
        format_value: Callable[[float | None], str] | None = None,
    ) -> None:
        """Show ``values`` (one list per row). Keeps the cursor when it still fits.
        ``format_value`` writes a value in the readout and the scale (default 4 digits)."""
        self.format_value = format_value or _num
        self.values = [list(r) for r in values]
        self.row_labels = list(row_labels)
        self.col_labels = list(col_labels)
        self.row_name, self.col_name, self.value_name = row_name, col_name, value_name
        self.describe_col = describe_col or (lambda c: self.col_labels[c])
        self.highlight = highlight
        self.empty_text = empty_text
        r, c = self.cursor
        if highlight is not None:
            r, c = highlight
        self.cursor = (min(r, max(0, len(self.values) - 1)), min(c, max(0, self._ncols - 1)))
        self.refresh(layout=True)

    @property
    def _ncols(self) -> int:
        return max((len(r) for r in self.values), default=0)

    def _range(self) -> tuple[float, float]:
        finite = [v for row in self.values for v in row if v is not None and math.isfinite(v)]
        if not finite:
            return (0.0, 1.0)
        return (min(finite), max(finite))

    def _scaled(self, v: float, lo: float, hi: float) -> float:
        if hi <= lo:
            return 0.5
        t = (v - lo) / (hi - lo)
        return math.sqrt(max(0.0, t)) if self.sqrt_scale else t

    # -- layout ----------------------------------------------------------------------------
    # Three lines are not rows of the map: the column header, the legend and the readout.
    # When the rows do not fit, two rows share a line (half blocks: the upper row's colour
    # over the lower one's), and only when that does not fit either the map scrolls itself
    # (keeping the cursor row in view) so the header, legend and readout never scroll away.
    CHROME_LINES = 3

    def _pack(self) -> int:
        """Rows per line: 1, or 2 when the rows do not fit the height one per line."""
        height = self.content_region.height or self.size.height
        return 2 if len(self.values) > max(1, height - self.CHROME_LINES) else 1

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.values) + self.CHROME_LINES if self.values else 1

    def _window(self) -> tuple[int, int]:
        """(first row shown, number of rows shown)."""
        height = self.content_region.height or self.size.height
        n = len(self.values)
        pack = self._pack()
        visible = max(1, min(n, (height - self.CHROME_LINES) * pack))
        first = min(max(0, self._top), max(0, n - visible))
        cur = self.cursor[0]
        if cur < first:
            first = cur
        elif cur >= first + visible:
            first = cur - visible + 1
        first -= first % pack  # a line holds rows (2k, 2k+1)
        self._top = first
        return first, min(visible, n - first)

    def _layout(self, width: int) -> None:
        widest = max((len(s) for s in self.row_labels), default=1)
        # two rows per line: both labels ("10/11")
        self._label_w = (2 * widest + 1 if self._pack() == 2 else widest) + 1
        ncols = max(1, self._ncols)
        self._cell_w = max(1, min(4, (width - self._label_w) // ncols))

    # -- drawing ---------------------------------------------------------------------------
    def render(self) -> Text:
        if not self.values:
            return Text(self.empty_text, style="dim italic")
        self._layout(self.content_region.width or self.size.width)
        cw, lw = self._cell_w, self._label_w
        lo, hi = self._range()
        out = Text(no_wrap=True, overflow="crop")
        # Column header: labels where they fit, left to right.
        header = [" "] * (lw + cw * self._ncols)
        next_free = lw
        for c, label in enumerate(self.col_labels):
            x = lw + c * cw
            if x >= next_free and x + len(label) <= len(header):
                header[x : x + len(label)] = list(label)
                next_free = x + len(label) + 1
        out.append("".join(header).rstrip() + "\n", style="dim")
        cur_r, cur_c = self.cursor
        first, visible = self._window()
        pack = self._pack()
        for r in range(first, first + visible, pack):
            rows = [r] if pack == 1 or r + 1 >= first + visible else [r, r + 1]
            label = self.row_labels[r] if r < len(self.row_labels) else ""
            if len(rows) == 2 and r + 1 < len(self.row_labels):
                label = f"{label}/{self.row_labels[r + 1]}"
            out.append(label.rjust(lw - 1) + " ", style="b" if cur_r in rows else "dim")
            for c in range(self._ncols):
                out.append(*self._cell(rows, c, lo, hi, cw))
            out.append("\n")
        # Legend and readout.
        out.append(" " * lw)
        out.append(f"{self.format_value(lo)} ", style="dim")
        for i in range(8):
            out.append(" ", style=Style(bgcolor=_hex(colour(i / 7))))
        scale = "√" if self.sqrt_scale else "linear"
        out.append(f" {self.format_value(hi)} ({scale}, s)\n", style="dim")
        out.append(self._fit_readout(self.content_region.width or self.size.width))
        return out

    def _fit_readout(self, width: int) -> str:
        """The readout under the map: indented to the cells where it fits, else from the left
        edge, else without the spaces around its separators (never cut)."""
        text = self.readout()
        if self._label_w + len(text) <= width:
            return " " * self._label_w + text
        if len(text) <= width:
            return text
        return text.replace(" · ", "·")

    def _value(self, r: int, c: int) -> float | None:
        row = self.values[r]
        v = row[c] if c < len(row) else None
        return v if v is not None and math.isfinite(v) else None

    def _cell(self, rows: list[int], c: int, lo: float, hi: float, cw: int) -> tuple[str, Style]:
        """The text and style of column ``c`` of one line: one row, or two as half blocks."""
        cur_r, cur_c = self.cursor
        cursor_here = c == cur_c and cur_r in rows and self.has_focus
        values = [self._value(r, c) for r in rows]
        rgbs = [None if v is None else colour(self._scaled(v, lo, hi)) for v in values]
        if (
            len(rows) == 2
            and not cursor_here
            and (rows[0], c) != self.highlight
            and (rows[1], c) != self.highlight
        ):
            top, bottom = rgbs
            if top is None and bottom is None:
                return " " * cw, Style()
            return "▀" * cw, Style(
                color=_hex(top) if top else None, bgcolor=_hex(bottom) if bottom else None
            )
        r = cur_r if cursor_here else rows[0]
        if len(rows) == 2 and (rows[1], c) == self.highlight:
            r = rows[1]
        rgb = rgbs[rows.index(r)]
        if rgb is None:
            return " " * cw, Style()
        luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
        fg = "black" if luma > 140 else "white"
        mark = "◆" if self.highlight == (r, c) else " "
        if cursor_here:
            mark = "▣" if mark == " " else mark
            return mark.center(cw), Style(bgcolor=_hex(rgb), color=fg, bold=True)
        return mark.center(cw), Style(bgcolor=_hex(rgb), color=fg)

    def readout(self) -> str:
        """'<row> · <col> · <value>' for the cell under the cursor."""
        r, c = self.cursor
        if not self.values or r >= len(self.values) or c >= len(self.values[r]):
            return ""
        v = self.values[r][c]
        text = (
            f"{self.row_name} {self.row_labels[r]} · {self.col_name} {self.describe_col(c)}"
            f" · {self.value_name} {self.format_value(v)}"
        )
        if self.highlight == (r, c):
            text += "  ◆"
        return text

    # -- interaction -----------------------------------------------------------------------
    def watch_cursor(self) -> None:
        self.refresh()

    def watch_sqrt_scale(self) -> None:
        self.refresh()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def action_move(self, dr: int, dc: int) -> None:
        if not self.values:
            return
        r, c = self.cursor
        self.cursor = (
            min(max(0, r + dr), len(self.values) - 1),
            min(max(0, c + dc), self._ncols - 1),
        )

    def action_toggle_scale(self) -> None:
        self.sqrt_scale = not self.sqrt_scale

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self.values:
            return
        pack = self._pack()
        r = (offset.y - 1) * pack + self._top
        c = (offset.x - self._label_w) // max(1, self._cell_w)
        _, visible = self._window()
        lines = -(-visible // pack)
        if 1 <= offset.y <= lines and 0 <= r < len(self.values) and 0 <= c < self._ncols:
            self.cursor = (r, c)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.action_move(1, 0)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.action_move(-1, 0)
