"""Compare: a metric over layers, one numbered line per (run, variant), a legend that names
every line in full, and the numbers beside it.

Views (v): all lines; one variant at a time; one model at a time (n / N step through the
variants or models); differences to the original, one line per contrast (variant - original
of the same run, with the stats stage's CI and Holm p).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.timer import Timer
from textual.widgets import Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection
from textual.worker import Worker

from homog.cli.options import short_ids
from homog.metrics.registry import TOKEN_SETS
from tui import series as S
from tui.components.curve_plot import CurvePlot
from tui.components.curve_table import CurveTable
from tui.components.legend import Legend
from tui.components.ticks import TickBox, TickList
from tui.core import ALPHA, Catalog, Row
from tui.curves import fetch_curves, split_token_set, with_token_set
from tui.messages import CurveKey, CurvesLoaded, QueryFailed
from tui.screens.base import HomogScreen

DEFAULT_METRIC = "erank"
SPINNER_DELAY_S = 0.15  # a query shows the loading spinner only when it takes longer


class CompareScreen(HomogScreen):
    """Pick a metric, runs and variants; see the curves and a table of mean, CI and the
    Holm-corrected p-value against the original variant (``*`` when below 0.05, ``‡`` at the
    permutation floor, with a footnote).

    Results are cached per (metric, runs) with every variant, so a variant toggle, a view
    change and going back to a metric redraw without a query.
    """

    MODE = "compare"
    BINDINGS = [
        Binding("m", "cycle_metric(1)", "Metric"),
        Binding("M", "cycle_metric(-1)", "Prev metric", show=False),
        Binding("t", "cycle_token_set", "Token set"),
        Binding("v", "cycle_view", "View"),
        Binding("n", "step_group(1)", "Next group"),
        Binding("N", "step_group(-1)", "Prev group", show=False),
        Binding("d", "toggle_depth", "Rel. depth"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._cache: dict[CurveKey, list[Row]] = {}
        self._contrasts: dict[CurveKey, list[Row]] = {}
        self.view = "all"  # one of series.VIEWS
        self._group: dict[str, str] = {}  # view -> the variant or model shown
        self._pending: dict[CurveKey, Worker] = {}  # queries in flight, one per key
        self._generation = 0  # bumped when the database is (re)read: older results are stale
        self._drawn: tuple | None = None  # what the widgets show now
        self._spinner: Timer | None = None
        self._syncing = False
        self.draws = 0  # how many times curves were drawn (the benchmark waits on it)
        self.last_draw_s = 0.0

    def compose_body(self) -> ComposeResult:
        with Container(id="compare-body"):
            with Vertical(id="compare-side"):
                yield Label("Metric (m, t)", classes="side-title")
                yield Select([], id="metric", prompt="metric", compact=True)
                yield Label("Runs", classes="side-title")
                yield TickList(id="pick-runs", compact=True)
                yield Label("Variants", classes="side-title")
                yield TickList(id="pick-variants", compact=True)
                yield TickBox("rel. depth (d)", id="rel-depth", compact=True)
            with Container(id="compare-main"):
                yield CurvePlot(id="curve-plot")
                with Container(id="compare-bottom"):
                    yield Legend(id="legend")
                    yield CurveTable(id="curve-table")
                yield Static("", id="compare-note", classes="status")
        yield Static("", id="compare-status", classes="status")

    def on_mount(self) -> None:
        super().on_mount()
        tables = self.query(CurveTable)
        if tables:  # none only when the app closes as this screen mounts (quit right after 2)
            self.watch(tables.first(), "cursor_row", self._cursor_moved, init=False)

    def _cursor_moved(self, row: int) -> None:
        table = self.query_one(CurveTable)
        if 0 <= row < table.row_count:
            self.query_one(Legend).point_at(table.number(table.row_data(row)))

    # -- choices ---------------------------------------------------------------------------
    def catalog_changed(self, catalog: Catalog) -> None:
        self._cache.clear()
        self._contrasts.clear()
        self._pending.clear()
        self._generation += 1
        self._drawn = None
        self._syncing = True
        try:
            metric = self.query_one("#metric", Select)
            current = metric.value
            metric.set_options([(m, m) for m in catalog.metrics])
            if catalog.metrics:
                metric.value = (
                    current
                    if current in catalog.metrics
                    else DEFAULT_METRIC
                    if DEFAULT_METRIC in catalog.metrics
                    else catalog.metrics[0]
                )
            labels = catalog.labels
            chosen = self._initial_runs(catalog)
            runs = self.query_one("#pick-runs", SelectionList)
            runs.clear_options()
            runs.add_options(
                [
                    Selection(labels[r["run_id"]], r["run_id"], r["run_id"] in chosen)
                    for r in catalog.runs
                ]
            )
            variants = self.query_one("#pick-variants", SelectionList)
            keep = set(variants.selected) & set(catalog.variants)
            variants.clear_options()
            variants.add_options([Selection(v, v, not keep or v in keep) for v in catalog.variants])
            self._auto_depth()
        finally:
            self._syncing = False
        self.refresh_curves()

    def _initial_runs(self, catalog: Catalog) -> list[str]:
        ids = [r["run_id"] for r in catalog.runs]
        chosen = [r for r in self.app.selected_runs if r in ids]
        return chosen or ids[:1]

    def on_screen_resume(self) -> None:
        """Coming back from the Runs screen: follow its selection."""
        catalog = self.catalog
        if catalog is None or not self.app.selected_runs:
            return
        runs = self.query_one("#pick-runs", SelectionList)
        wanted = self._initial_runs(catalog)
        if sorted(runs.selected) != sorted(wanted):
            self._syncing = True
            try:
                runs.deselect_all()
                for rid in wanted:
                    runs.select(rid)
                self._auto_depth()
            finally:
                self._syncing = False
            self.refresh_curves()

    def _auto_depth(self) -> None:
        """Different depths among the chosen runs: put relative depth on x."""
        catalog = self.catalog
        if catalog is None:
            return
        chosen = set(self.query_one("#pick-runs", SelectionList).selected)
        depths = {r.get("n_layers") for r in catalog.runs if r["run_id"] in chosen}
        if len(depths) > 1:
            self.query_one("#rel-depth", TickBox).value = True

    def key(self) -> CurveKey | None:
        """(metric, chosen run ids): what the cache and the query are keyed by."""
        metric = self.query_one("#metric", Select).value
        if not isinstance(metric, str):
            return None
        return (metric, tuple(self.query_one("#pick-runs", SelectionList).selected))

    def chosen_variants(self) -> tuple[str, ...]:
        return tuple(self.query_one("#pick-variants", SelectionList).selected)

    # -- events ----------------------------------------------------------------------------
    @on(Select.Changed, "#metric")
    @on(SelectionList.SelectedChanged, "#pick-variants")
    def _choice_changed(self) -> None:
        # A variant toggle finds (metric, runs) cached with every variant: a redraw, no query.
        if not self._syncing:
            self.refresh_curves()

    @on(SelectionList.SelectedChanged, "#pick-runs")
    def _runs_changed(self) -> None:
        if self._syncing:
            return
        self.app.selected_runs = tuple(self.query_one("#pick-runs", SelectionList).selected)
        self._auto_depth()
        self.refresh_curves()

    @on(TickBox.Changed, "#rel-depth")
    def _depth_changed(self) -> None:
        if not self._syncing:
            self.draw()

    def action_cycle_metric(self, step: int) -> None:
        """The next metric in the current token set (erank -> mev, erank__no_sink ->
        mev__no_sink): t, not m, changes the token set."""
        catalog = self.catalog
        select = self.query_one("#metric", Select)
        if catalog is None or not catalog.metrics:
            return
        current = select.value if isinstance(select.value, str) else catalog.metrics[0]
        token_set = split_token_set(current)[1]
        same = [m for m in catalog.metrics if split_token_set(m)[1] == token_set]
        i = same.index(current) if current in same else -step
        self._set_metric(same[(i + step) % len(same)])

    def action_cycle_view(self) -> None:
        """all lines -> one variant -> one model -> differences to the original -> all."""
        self.view = S.VIEWS[(S.VIEWS.index(self.view) + 1) % len(S.VIEWS)]
        self.draw()

    def action_step_group(self, step: int) -> None:
        """The next variant (or model) in the one-variant (one-model) view."""
        names = self._groups()
        if not names:
            self.notify("n steps through variants or models: press v for such a view first")
            return
        current = self._group.get(self.view)
        i = names.index(current) if current in names else -step
        self._group[self.view] = names[(i + step) % len(names)]
        self.draw()

    def _groups(self) -> list[str]:
        key, catalog = self.key(), self.catalog
        if key is None or catalog is None or self.view not in ("variant", "model"):
            return []
        chosen = set(self.chosen_variants())
        rows = [r for r in self._cache.get(key, []) if r["variant"] in chosen]
        return S.groups(self.view, rows, {r["run_id"]: r for r in catalog.runs})

    def _set_metric(self, metric: str) -> None:
        """Choose ``metric`` and draw it now when it is cached (the Select's Changed message,
        handled later, then finds it drawn); otherwise start its query."""
        self.query_one("#metric", Select).value = metric
        self.refresh_curves()

    def action_cycle_token_set(self) -> None:
        """all -> no_sink -> standardized -> all for the current metric (e.g. erank ->
        erank__no_sink), skipping sets the database does not hold for it."""
        catalog = self.catalog
        select = self.query_one("#metric", Select)
        if catalog is None or not isinstance(select.value, str):
            return
        metric = select.value
        _, current = split_token_set(metric)
        i = TOKEN_SETS.index(current)
        for step in range(1, len(TOKEN_SETS)):
            candidate = with_token_set(metric, TOKEN_SETS[(i + step) % len(TOKEN_SETS)])
            if candidate in catalog.metrics:
                self._set_metric(candidate)
                return
        self.notify(
            f"no other token set of {split_token_set(metric)[0]} in this database "
            "(extracted before homog had token sets, or with extract.token_sets: [])",
            severity="warning",
        )

    def action_toggle_depth(self) -> None:
        box = self.query_one("#rel-depth", TickBox)
        box.value = not box.value

    # -- data ------------------------------------------------------------------------------
    def refresh_curves(self) -> None:
        """Draw from the cache at once, or ask a worker for the curves of the current choice
        (unless the same query is already running). The spinner shows only when the query
        takes longer than SPINNER_DELAY_S."""
        key = self.key()
        if key is None:
            return
        if not key[1] or key in self._cache:
            self.draw()
            return
        worker = self._pending.get(key)
        if worker is None or worker.is_finished:
            worker = self.query_db(
                CurvesLoaded, fetch_curves, key, self._generation, exclusive=False
            )
            if worker is None:
                return
            self._pending[key] = worker
        if self._spinner is None:
            self._spinner = self.set_timer(SPINNER_DELAY_S, self._show_spinner)

    def _show_spinner(self) -> None:
        self._spinner = None
        key = self.key()
        if key is not None and key in self._pending and key not in self._cache:
            self.query_one("#compare-main").loading = True

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None
        self.query_one("#compare-main").loading = False

    @on(CurvesLoaded)
    def _curves_loaded(self, message: CurvesLoaded) -> None:
        if message.generation != self._generation:
            return  # a result from before the database was re-read
        self._pending.pop(message.key, None)
        self._cache[message.key] = message.rows
        self._contrasts[message.key] = message.contrasts
        if message.key == self.key():
            self.draw()

    @on(QueryFailed)
    def _curves_failed(self, message: QueryFailed) -> None:
        if message.result is not CurvesLoaded:
            return
        message.prevent_default()
        self._pending = {k: w for k, w in self._pending.items() if not w.is_finished}
        self._stop_spinner()
        self.query_one("#compare-status", Static).update(
            Text.assemble(("query failed: ", "bold red"), message.error)
        )

    def draw(self) -> None:
        """Plot, name and tabulate the cached rows of the current choice and view (nothing to
        do when the widgets already show it)."""
        self._stop_spinner()
        key = self.key()
        catalog = self.catalog
        if key is None or catalog is None:
            return
        metric, runs = key
        variants = self.chosen_variants()
        relative = self.query_one("#rel-depth", TickBox).value
        groups = self._groups()
        group = self._group.get(self.view)
        if groups and group not in groups:
            group = self._group[self.view] = groups[0]
        state = (key, variants, relative, key in self._cache, self.view, group)
        if state == self._drawn:
            return
        self._drawn = state
        by_id = {r["run_id"]: r for r in catalog.runs}
        contrasts = self._contrasts.get(key, [])
        shown = set(variants)
        rows = S.view_rows(
            self.view, group, self._cache.get(key, []), contrasts, by_id, shown, catalog.variants
        )
        short = short_ids([r["run_id"] for r in catalog.runs])
        lines, numbers = S.build_lines(rows, by_id, short, relative=relative)
        floors = S.p_floors(contrasts)
        plot = self.query_one(CurvePlot)
        empty = (
            "choose at least one run and one variant"
            if not (runs and variants)
            else f"no {metric} rows for this choice"
        )
        plot.show(
            {f"{ln.number}": (ln.xs, ln.ys) for ln in lines},
            title=metric + (" : variant − original" if self.view == "diff" else ""),
            xlabel="relative depth" if relative else "layer",
            empty_text=empty,
            colors={f"{ln.number}": ln.color for ln in lines},
            labels=lines,
            integer_x=not relative,
            zero_line=self.view == "diff",
        )
        view = S.VIEW_NAMES[self.view] + (
            f": {group}" if group and self.view in ("variant", "model") else ""
        )
        self.query_one(Legend).show(lines)
        n_sig = self.query_one(CurveTable).show(rows, numbers, lambda r: S.at_floor(r, floors))
        shown_floors = S.line_floors(lines, floors)
        self.query_one("#compare-note", Static).update(S.floor_note(shown_floors), layout=False)
        self.query_one("#compare-note").display = bool(shown_floors)
        token_set = split_token_set(metric)[1]
        # one line of fixed size: no layout pass (it would repaint every scrollbar)
        self.query_one("#compare-status", Static).update(
            f"{metric} · tokens: {token_set} · {view} (v) · {S.count(len(lines), 'line')}"
            f" · [b yellow]*[/] {n_sig} differ{'s' if n_sig == 1 else ''} from original"
            f" (Holm p < {ALPHA})",
            layout=False,
        )
        self.draws += 1
        self.last_draw_s = time.perf_counter()
