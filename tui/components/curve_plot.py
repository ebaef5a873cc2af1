"""A line plot of named series (textual-plotext), one line per (run, variant)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence

from rich.console import RenderableType
from textual_plotext import PlotextPlot

CACHE_SIZE = 64  # rendered plots kept per widget


class CurvePlot(PlotextPlot):
    """Plot ``{name: (xs, ys)}``; an empty mapping shows ``empty_text`` as the title.

    ``series`` and ``title`` keep what is shown (tests read them). Plotext runs in
    :meth:`render`, once per (series, title, x label, size, theme): going back to a metric
    (or a variant choice) already drawn at this size reuses the rendered plot.
    """

    series: Mapping[str, tuple[Sequence[float], Sequence[float]]] = {}
    title: str = ""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.xlabel = ""
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
    ) -> None:
        self.series, self.title = dict(series), (title if series else empty_text)
        self.xlabel = xlabel
        key = (
            self.title,
            xlabel,
            tuple((name, tuple(xs), tuple(ys)) for name, (xs, ys) in self.series.items()),
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
        for name, (xs, ys) in self.series.items():
            plt.plot(list(xs), list(ys), label=name, marker="braille")
        plt.xlabel(self.xlabel)
        rendered = self._rendered[key] = super().render()
        self.builds += 1
        if len(self._rendered) > CACHE_SIZE:
            self._rendered.popitem(last=False)
        return rendered
