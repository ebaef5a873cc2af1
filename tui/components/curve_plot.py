"""A line plot of numbered lines (textual-plotext): each line in its own colour, its number
written on it (see :mod:`tui.series`); the names are in the legend beside it."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence

from rich.console import RenderableType
from textual_plotext import PlotextPlot

from tui.series import Line, label_points

CACHE_SIZE = 64  # rendered plots kept per widget

Color = tuple[int, int, int]


class CurvePlot(PlotextPlot):
    """Plot ``{name: (xs, ys)}`` with a colour and a label per line; an empty mapping shows
    ``empty_text`` as the title.

    ``series`` and ``title`` keep what is shown (tests read them). Plotext runs in
    :meth:`render`, once per (series, title, x label, size, theme): going back to a metric
    (or a variant choice) already drawn at this size reuses the rendered plot. Plotext's own
    legend is not drawn (it covered the data beyond a few lines): the screen's legend names
    the lines.
    """

    series: Mapping[str, tuple[Sequence[float], Sequence[float]]] = {}
    title: str = ""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.xlabel = ""
        self.line_colors: dict[str, Color] = {}
        self.line_labels: list[Line] = []
        self.integer_x = False
        self.zero_line = False
        self._key: Hashable = ()
        self._rendered: OrderedDict[Hashable, RenderableType] = OrderedDict()
        self.builds = 0  # how many times plotext drew (tests read it)

    def show(
        self,
        series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
        *,
        title: str,
        xlabel: str,
        empty_text: str = "no data for this selection",
        colors: Mapping[str, Color] | None = None,
        labels: Sequence[Line] = (),
        integer_x: bool = False,
        zero_line: bool = False,
    ) -> None:
        """``labels``: lines whose numbers are written on the plot (placed at render, when
        the size is known: :func:`tui.series.label_points`); ``integer_x``: x ticks at
        whole numbers only (layers); ``zero_line``: a horizontal line at y = 0."""
        self.series, self.title = dict(series), (title if series else empty_text)
        self.xlabel = xlabel
        self.line_colors = dict(colors or {})
        self.line_labels = list(labels)
        self.integer_x = integer_x
        self.zero_line = zero_line
        key = (
            self.title,
            xlabel,
            tuple((name, tuple(xs), tuple(ys)) for name, (xs, ys) in self.series.items()),
            tuple(sorted(self.line_colors.items())),
            tuple((ln.number, ln.color) for ln in self.line_labels),
            integer_x,
            zero_line,
        )
        if key != self._key:
            self._key = key
            self.refresh()

    def render(self) -> RenderableType:
        key = (self._key, self.size, self.app.theme, self.theme)
        cached = self._rendered.get(key)
        if cached is not None:
            self._rendered.move_to_end(key)
            return cached
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.title)
        xs_all: list[float] = []
        for name, (xs, ys) in self.series.items():
            color = self.line_colors.get(name)
            if color is None:
                plt.plot(list(xs), list(ys), marker="braille")
            else:
                plt.plot(list(xs), list(ys), marker="braille", color=color)
            xs_all += list(xs)
        if self.zero_line and self.series:
            plt.horizontal_line(0, color="gray")
            ys_all = [y for _, ys in self.series.values() for y in ys if math.isfinite(y)]
            if ys_all:  # plotext's own ticks miss 0, so the zero line read as another value
                ticks = zero_ticks(min(ys_all), max(ys_all), max(2, (self.size.height - 5) // 2))
                plt.yticks(ticks, [tick_label(t, ticks) for t in ticks])
                plt.ylim(ticks[0], ticks[-1])
        # the canvas inside the axes: the y tick labels and frame take about 6 columns, the
        # title, x ticks and x label 4 rows
        spots = label_points(self.line_labels, self.size.width - 6, self.size.height - 5)
        for line, (x, y) in zip(self.line_labels, spots, strict=True):
            if not math.isnan(x):
                plt.text(str(line.number), x, y, color=line.color, alignment="center", style="bold")
        if self.integer_x and xs_all:
            lo, hi = int(min(xs_all)), int(max(xs_all))
            step = max(1, math.ceil((hi - lo) / max(1, (self.size.width - 10) // 6)))
            ticks = list(range(lo, hi + 1, step))
            plt.xticks(ticks, [str(t) for t in ticks])
        plt.xlabel(self.xlabel)
        rendered = self._rendered[key] = super().render()
        self.builds += 1
        if len(self._rendered) > CACHE_SIZE:
            self._rendered.popitem(last=False)
        return rendered


def zero_ticks(lo: float, hi: float, n: int) -> list[float]:
    """About ``n`` round y ticks over [lo, hi] widened to hold 0, 0 among them: multiples
    of a step of 1, 2, 2.5 or 5 x 10^k."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi <= lo:
        return [0.0]
    raw = (hi - lo) / max(1, n)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [k * step for k in range(first, last + 1)]


def tick_label(t: float, ticks: Sequence[float]) -> str:
    """``t`` with as many decimals as the ticks' step needs (0 reads "0")."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    digits = f"{step:.12f}".rstrip("0").split(".")[1]
    return "0" if abs(t) < step * 1e-6 else f"{t:.{len(digits)}f}"
