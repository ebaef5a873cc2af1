"""PE lab: accuracy per positional encoding and task, and the per-head ablation grid."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.widgets import DataTable, Select, Static

from tui.components.heatmap import Heatmap
from tui.core import Catalog, as_rows, deposit_head, grid, pivot_accuracy
from tui.messages import AblationLoaded, PosencLoaded, QueryFailed
from tui.screens.base import HomogScreen

NO_DATA = (
    "No positional-encoding results in this database.\n\n"
    "Train the small models (which ablates their heads too), then load them:\n"
    "  homog posenc train --pe rope\n"
    "  homog load\n"
    "(or `dvc repro` for every encoding in params.yaml)."
)


def fetch_results(con: Any) -> PosencLoaded:
    from homog.store import posenc_results

    return PosencLoaded(as_rows(posenc_results(con)))


def fetch_ablation(con: Any, pe: str, task: str) -> AblationLoaded:
    from homog.store import head_ablation

    return AblationLoaded(pe, task, as_rows(head_ablation(con, pe, task)))


def pts(drop: float | None) -> str:
    """An accuracy drop (a fraction) in points of accuracy %, the one unit of the screen."""
    return "—" if drop is None else f"{100 * drop:.1f} pts"


class PeLabScreen(HomogScreen):
    """Accuracy table (encodings x tasks) and the layer x head ablation grid of one
    encoding and task; the head whose removal costs most (the deposit head) is marked ◆."""

    MODE = "pe"
    # a screen key: it works while a dropdown (not the grid) has the focus
    BINDINGS = [Binding("s", "scale", "Scale")]

    def action_scale(self) -> None:
        """Linear or square-root colour scale of the ablation grid (s)."""
        self.query_one(Heatmap).action_toggle_scale()

    def compose_body(self) -> ComposeResult:
        yield Static(NO_DATA, id="pe-empty")
        with Container(id="pe-body"):
            with Vertical(id="pe-left"):
                yield Static("Accuracy (test split, mean over seeds)", classes="pane-title")
                yield DataTable(id="pe-acc", cursor_type="row", zebra_stripes=True)
            with Vertical(id="pe-right"):
                with Horizontal(id="pe-top"):
                    yield Select([], id="pe-pe", prompt="encoding", compact=True)
                    yield Select([], id="pe-task", prompt="task", compact=True)
                yield Static("", id="pe-deposit", classes="pane-title")
                yield Heatmap(id="pe-grid", sqrt_scale=False)

    def catalog_changed(self, catalog: Catalog) -> None:
        has = catalog.n_posenc > 0
        self.query_one("#pe-empty").display = not has
        self.query_one("#pe-body").display = has
        if has:
            self.query_one("#pe-acc").loading = True
            self.query_db(PosencLoaded, fetch_results)

    @on(PosencLoaded)
    def _results_loaded(self, message: PosencLoaded) -> None:
        table = self.query_one("#pe-acc", DataTable)
        table.loading = False
        columns, body = pivot_accuracy(message.rows)
        table.clear(columns=True)
        table.add_columns(*columns)
        for cells in body:
            table.add_row(
                cells[0],
                *(
                    Text("" if v is None else f"{100 * v:.1f}%", justify="right")
                    for v in cells[1:-1]
                ),
                Text("" if cells[-1] is None else f"{int(cells[-1]):,}", justify="right"),
            )
        pes = [c[0] for c in body]
        tasks = columns[1:-1]
        pe, task = self.query_one("#pe-pe", Select), self.query_one("#pe-task", Select)
        pe_cur, task_cur = pe.value, task.value
        pe.set_options([(p, p) for p in pes])
        task.set_options([(t, t) for t in tasks])
        if pes:
            pe.value = pe_cur if pe_cur in pes else ("rope" if "rope" in pes else pes[0])
        if tasks:
            task.value = task_cur if task_cur in tasks else tasks[0]
        self.reload_grid()

    @on(Select.Changed, "#pe-pe")
    @on(Select.Changed, "#pe-task")
    def _choice_changed(self) -> None:
        self.reload_grid()

    @on(DataTable.RowSelected, "#pe-acc")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter (or a click) on a row of the accuracy table shows that encoding's grid.
        row = event.data_table.get_row_at(event.cursor_row)
        pe = self.query_one("#pe-pe", Select)
        if row and row[0] != pe.value:
            pe.value = row[0]

    def reload_grid(self) -> None:
        pe = self.query_one("#pe-pe", Select).value
        task = self.query_one("#pe-task", Select).value
        if not isinstance(pe, str) or not isinstance(task, str):
            return
        if self.catalog is None or self.catalog.n_ablation == 0:
            self.query_one(Heatmap).set_data(
                [],
                [],
                [],
                empty_text=(
                    "no head ablation rows: run `homog posenc ablate --pe NAME` then `homog load`"
                ),
            )
            return
        self.query_one(Heatmap).loading = True
        self.query_db(AblationLoaded, fetch_ablation, pe, task)

    @on(AblationLoaded)
    def _ablation_loaded(self, message: AblationLoaded) -> None:
        pe, task, rows = message.pe, message.task, message.rows
        if (pe, task) != (
            self.query_one("#pe-pe", Select).value,
            self.query_one("#pe-task", Select).value,
        ):
            return  # an answer to an earlier choice
        heatmap = self.query_one(Heatmap)
        heatmap.loading = False
        layers, heads, matrix = grid(rows, "layer", "head", "drop")
        best = deposit_head(rows)
        highlight = None
        if best is not None:
            highlight = (layers.index(int(best["layer"])), heads.index(int(best["head"])))
            self.query_one("#pe-deposit", Static).update(
                f"accuracy drop (points of accuracy %) when one head is zeroed · ◆ deposit: "
                f"layer {best['layer']} head {best['head']}, drop {pts(best['drop'])}"
            )
        heatmap.set_data(
            matrix,
            [str(x) for x in layers],
            [str(h) for h in heads],
            row_name="layer",
            col_name="head",
            value_name="drop",
            format_value=pts,
            highlight=highlight,
            empty_text=f"no ablation rows for {pe} / {task}",
        )

    @on(QueryFailed)
    def _ablation_failed(self, message: QueryFailed) -> None:
        if message.result is not AblationLoaded:
            return
        message.prevent_default()
        heatmap = self.query_one(Heatmap)
        heatmap.loading = False
        heatmap.set_data([], [], [], empty_text=message.error)
