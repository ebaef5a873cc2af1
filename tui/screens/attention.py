"""Attention: where attention goes, by layer and relative position, and the sink curve."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Select, Static

from tui.components.curve_plot import CurvePlot
from tui.components.heatmap import Heatmap
from tui.core import Catalog, as_rows, grid
from tui.messages import AttnFirstLoaded, ProfileKey, ProfileLoaded, QueryFailed
from tui.screens.base import HomogScreen
from tui.series import PALETTE, Line

N_BINS_DEFAULT = 20
MEAN_OF_HEADS = -1  # the head Select's value for "heads averaged"


def fetch_profile(con: Any, run_id: str, variant: str, head: int | None) -> ProfileLoaded:
    from homog.store import attention_profile

    rows = as_rows(attention_profile(con, run_id, variant, head=head))
    return ProfileLoaded((run_id, variant, head), rows)


SINK_CURVES = ("attn_first", "sink_rate")  # what the curve pane shows, cycled with "k"
CURVE_TITLES = {
    "attn_first": "attn_first (mass on token 0)",
    "sink_rate": "sink_rate (share of sink heads)",
}


def fetch_attn_first(con: Any, run_id: str, metric: str = "attn_first") -> AttnFirstLoaded:
    """Worker body: the sink curve of one run, ``attn_first`` or ``sink_rate`` per variant
    and layer (rows tagged with the metric, so a late answer to an earlier choice is seen)."""
    from homog.store import attn_first_curves, has_summary, layer_curves

    if metric == "attn_first":
        rows = as_rows(attn_first_curves(con, run_id))
    else:
        rows = (
            as_rows(layer_curves(con, metric, run_ids=[run_id])) if has_summary(con, metric) else []
        )
    return AttnFirstLoaded(run_id, [{**r, "metric": metric} for r in rows])


def bin_range(b: int, n_bins: int) -> str:
    """'0.10–0.15': the relative positions j/n that fall in bin ``b``."""
    return f"{b / n_bins:.2f}–{(b + 1) / n_bins:.2f}"


class AttentionScreen(HomogScreen):
    """The position profile heatmap (layer x relative-position bin, column mass averaged
    over texts) for one run and variant, heads averaged or one head; beside it attn_first
    (the mass on the first token) over layers, one line per variant."""

    MODE = "attention"
    # screen keys: they work while a dropdown (not the map) has the focus
    BINDINGS = [
        Binding("k", "cycle_curve", "attn_first / sink_rate"),
        Binding("s", "scale", "Scale"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._curve: str | None = None  # None: sink_rate where the database has it

    @property
    def curve_metric(self) -> str:
        """What the curve pane shows: the choice made with "k", else sink_rate (the
        Attention-Sink paper's per-layer measure) when the database holds it."""
        if self._curve is not None:
            return self._curve
        catalog = self.catalog
        has_sink = catalog is not None and "sink_rate" in catalog.metrics
        return "sink_rate" if has_sink else "attn_first"

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="attn-top"):
            yield Select([], id="attn-run", prompt="run", compact=True)
            yield Select([], id="attn-variant", prompt="variant", compact=True)
            yield Select([], id="attn-head", prompt="head", compact=True)
        with Horizontal(id="attn-body"):
            with Vertical(id="attn-map-box"):
                yield Static(
                    "mass: layer ↓ × pos →",
                    id="attn-map-title",
                    classes="pane-title",
                )
                yield Heatmap(id="attn-map")
            with Vertical(id="attn-first-box"):
                yield Static("", id="attn-first-legend", classes="pane-title")
                yield CurvePlot(id="attn-first")

    def action_scale(self) -> None:
        """Linear or square-root colour scale of the heatmap (s)."""
        self.query_one(Heatmap).action_toggle_scale()

    def catalog_changed(self, catalog: Catalog) -> None:
        labels = catalog.labels
        run = self.query_one("#attn-run", Select)
        current = run.value
        ids = [r["run_id"] for r in catalog.runs]
        run.set_options([(labels[r], r) for r in ids])
        chosen = [r for r in self.app.selected_runs if r in ids]
        if ids:
            run.value = current if current in ids else (chosen[0] if chosen else ids[0])
        variant = self.query_one("#attn-variant", Select)
        v_current = variant.value
        variant.set_options([(v, v) for v in catalog.variants])
        if catalog.variants:
            variant.value = v_current if v_current in catalog.variants else catalog.variants[0]
        self._set_heads()
        self.reload()

    def _set_heads(self) -> None:
        catalog = self.catalog
        run_id = self.query_one("#attn-run", Select).value
        row = catalog.run(run_id) if catalog and isinstance(run_id, str) else None
        n_heads = int(row.get("n_heads") or 0) if row else 0
        head = self.query_one("#attn-head", Select)
        current = head.value
        options = [("heads averaged", MEAN_OF_HEADS)] + [(f"head {h}", h) for h in range(n_heads)]
        head.set_options(options)
        head.value = current if current in [v for _, v in options] else MEAN_OF_HEADS

    def _choice(self) -> ProfileKey | None:
        run = self.query_one("#attn-run", Select).value
        variant = self.query_one("#attn-variant", Select).value
        head = self.query_one("#attn-head", Select).value
        if not isinstance(run, str) or not isinstance(variant, str):
            return None
        # Select.BLANK is False, which equals head 0: test the type, not membership.
        one_head = isinstance(head, int) and not isinstance(head, bool) and head >= 0
        return run, variant, (int(head) if one_head else None)

    def reload(self, first_curve: bool = True) -> None:
        choice = self._choice()
        if choice is None:
            return
        run, variant, head = choice
        self.query_one("#attn-map").loading = True
        self.query_db(ProfileLoaded, fetch_profile, run, variant, head)
        if first_curve:
            self.query_one("#attn-first").loading = True
            self.query_db(AttnFirstLoaded, fetch_attn_first, run, self.curve_metric)

    def action_cycle_curve(self) -> None:
        """Switch the curve pane between attn_first and sink_rate."""
        i = SINK_CURVES.index(self.curve_metric)
        self._curve = SINK_CURVES[(i + 1) % len(SINK_CURVES)]
        choice = self._choice()
        if choice is not None:
            self.query_one("#attn-first").loading = True
            self.query_db(AttnFirstLoaded, fetch_attn_first, choice[0], self.curve_metric)

    @on(Select.Changed, "#attn-run")
    def _run_changed(self) -> None:
        self._set_heads()
        self.reload()

    @on(Select.Changed, "#attn-variant")
    @on(Select.Changed, "#attn-head")
    def _view_changed(self) -> None:
        self.reload(first_curve=False)

    @on(ProfileLoaded)
    def _profile_loaded(self, message: ProfileLoaded) -> None:
        choice, rows = message.choice, message.rows
        if choice != self._choice():
            return  # an answer to an earlier choice; the current one is on its way
        heatmap = self.query_one(Heatmap)
        heatmap.loading = False
        layers, bins, matrix = grid(rows, "layer", "bin", "mass")
        n_bins = max(len(bins), N_BINS_DEFAULT) if bins else N_BINS_DEFAULT
        col_labels = ["" for _ in bins]
        for i, b in enumerate(bins):
            if b % 5 == 0:
                col_labels[i] = f"{b / n_bins:.2g}"
        head = "all heads" if choice[2] is None else f"head {choice[2]}"
        # one line at 80 columns, so that a 30-layer model's map fits 24 rows (two layers a line)
        self.query_one("#attn-map-title", Static).update(f"mass: layer ↓ × pos →, {head}")
        heatmap.set_data(
            matrix,
            [str(layer) for layer in layers],
            col_labels,
            row_name="layer",
            col_name="pos",
            value_name="mass",
            describe_col=lambda c: bin_range(bins[c], n_bins),
            empty_text="no attention profile for this run and variant "
            "(extract ran without attention?)",
        )

    @on(AttnFirstLoaded)
    def _attn_first_loaded(self, message: AttnFirstLoaded) -> None:
        rows = message.rows
        choice = self._choice()
        if choice is None or choice[0] != message.run_id:
            return
        shown = rows[0].get("metric", "attn_first") if rows else self.curve_metric
        if shown != self.curve_metric:
            return  # an answer for the other curve; the current one is on its way
        plot = self.query_one("#attn-first", CurvePlot)
        plot.loading = False
        lines: dict[str, Line] = {}
        for r in rows:
            if r.get("mean") is None:
                continue
            variant = str(r["variant"])
            if variant not in lines:
                n = len(lines) + 1
                lines[variant] = Line(n, choice[0], variant, variant, PALETTE[n - 1])
            lines[variant].xs.append(float(r["layer"]))
            lines[variant].ys.append(float(r["mean"]))
        legend = Text()
        for ln in lines.values():  # a legend beside the plot, never over the data
            legend.append(f"{ln.number} ━ ", style=f"bold {ln.hex}")
            legend.append(f"{ln.name}  ")
        self.query_one("#attn-first-legend", Static).update(legend)
        plot.show(
            {v: (ln.xs, ln.ys) for v, ln in lines.items()},
            colors={v: ln.color for v, ln in lines.items()},
            labels=list(lines.values()),
            integer_x=True,
            title=CURVE_TITLES[self.curve_metric],
            xlabel="layer",
            empty_text=f"no {self.curve_metric} metric for this run"
            + (
                " (extracted without peer_metrics?) · k: attn_first"
                if shown != "attn_first"
                else ""
            ),
        )

    @on(QueryFailed)
    def _query_failed(self, message: QueryFailed) -> None:
        if message.result is ProfileLoaded:
            self.query_one(Heatmap).loading = False
            title = "Attention profile failed"
        elif message.result is AttnFirstLoaded:
            self.query_one("#attn-first").loading = False
            title = "attn_first failed"
        else:
            return
        message.prevent_default()
        self.notify(message.error, title=title, severity="error")
