"""A line plot of named series (textual-plotext), one line per (run, variant)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual_plotext import PlotextPlot


class CurvePlot(PlotextPlot):
    """Plot ``{name: (xs, ys)}``; an empty mapping shows ``empty_text`` as the title.

    ``series`` and ``title`` keep what is shown (tests read them)."""

    series: Mapping[str, tuple[Sequence[float], Sequence[float]]] = {}
    title: str = ""

    def show(
        self,
        series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
        *,
        title: str,
        xlabel: str,
        empty_text: str = "no data for this selection",
    ) -> None:
        self.series, self.title = dict(series), (title if series else empty_text)
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if not series:
            plt.title(empty_text)
        else:
            plt.title(title)
            for name, (xs, ys) in series.items():
                plt.plot(list(xs), list(ys), label=name, marker="braille")
        plt.xlabel(xlabel)
        self.refresh()
