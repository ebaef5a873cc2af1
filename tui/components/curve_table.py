"""The numbers behind the curve plot: mean, 95 % CI and the Holm p-value vs original."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text
from textual.widgets import DataTable

from tui.core import Row, fmt, fmt_p, significant

# Fixed widths: DataTable then skips measuring every cell on each refill (the measuring was
# most of a metric switch's redraw time on a 2M-row database).
COLUMNS = (("series", 22), ("layer", 5), ("mean", 6), ("p Holm", 6), ("", 1), ("95% CI", 13),
           ("n", 4))  # fmt: skip


class CurveTable(DataTable):
    """One row per (run, variant, layer). Rows whose contrast with the original variant is
    significant after Holm's correction carry a ``*`` and a highlighted p-value."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for label, width in COLUMNS:
            self.add_column(label, width=width)

    def show(self, rows: Iterable[Row], labels: Mapping[str, str]) -> int:
        """Replace the rows; return how many are significant."""
        self.clear()
        n_sig = 0
        ordered = sorted(
            rows, key=lambda r: (labels.get(r["run_id"], r["run_id"]), r["variant"], r["layer"])
        )
        cells = []
        for r in ordered:
            p = r.get("p_holm_vs_original")
            sig = significant(p)
            n_sig += sig
            ci = f"{fmt(r.get('ci_low'))}…{fmt(r.get('ci_high'))}"
            cells.append(
                (
                    f"{labels.get(r['run_id'], r['run_id'])} {r['variant']}",
                    Text(str(r["layer"]), justify="right"),
                    Text(fmt(r.get("mean")), justify="right"),
                    Text(fmt_p(p), style="bold yellow" if sig else "", justify="right"),
                    Text("*", style="bold yellow") if sig else "",
                    ci,
                    Text(str(r.get("n", "")), justify="right"),
                )
            )
        self.add_rows(cells)
        return n_sig
