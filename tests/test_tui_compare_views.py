"""Pilot tests of issue 31's keys: Compare with many runs (numbered lines told apart, a full
legend, views, [x]/[ ] ticks, one key per job, the floor of p), and the Attention, SQL, PE lab
and Runs fixes. Numbers are checked against SQL written here."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("textual")

from test_tui import goto, settle, sql, status_text  # noqa: E402
from test_tui_token_sets import sets_db  # noqa: E402, F401
from textual.widgets import Select, SelectionList, Static  # noqa: E402

from tui.app import HomogApp  # noqa: E402
from tui.components.curve_plot import CurvePlot  # noqa: E402
from tui.components.curve_table import CurveTable  # noqa: E402
from tui.components.heatmap import Heatmap  # noqa: E402
from tui.components.run_table import RunTable  # noqa: E402
from tui.components.sql_editor import SqlEditor  # noqa: E402
from tui.series import label_points  # noqa: E402

pytestmark = pytest.mark.anyio
N_PERM = 10000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def ten_runs(demo_db_factory) -> Path:
    return demo_db_factory(10, 12)


@pytest.fixture(scope="module")
def floor_db(demo_db_factory, tmp_path_factory) -> Path:
    """3 runs; run demo000000's front-vs-original erank contrasts: 5 layers at the sign-flip
    floor 1/(n_perm + 1), Holm-adjusted over its layers, as the stats stage writes them."""
    path = tmp_path_factory.mktemp("floor") / "homog.duckdb"
    shutil.copy(demo_db_factory(3, 12), path)
    con = duckdb.connect(str(path))
    try:
        where = (
            "run_id = 'demo000000' AND metric = 'erank' AND variant_a = 'front' AND "
            "variant_b = 'original' AND band IS NULL AND baseline_run_id IS NULL"
        )
        n_layers = con.execute(f"SELECT count(*) FROM contrasts WHERE {where}").fetchone()[0]
        floor = 1 / (N_PERM + 1)
        con.execute(
            f"UPDATE contrasts SET p_value = ?, p_holm = ? WHERE {where} AND layer < 5",
            [floor, n_layers * floor],
        )
        con.execute(f"UPDATE contrasts SET p_value = 0.5, p_holm = 1 WHERE {where} AND layer >= 5")
    finally:
        con.close()
    return path


async def open_compare(pilot, select_all: bool = True) -> None:
    await settle(pilot)
    if select_all:
        await pilot.press("a")
    await pilot.press("enter")
    await settle(pilot)
    assert pilot.app.screen.MODE == "compare"


async def open_differences(pilot):
    """Compare with every run, in the view "differences to the original" (v three times)."""
    await open_compare(pilot)
    for _ in range(3):
        await pilot.press("v")
        await settle(pilot)
    screen = pilot.app.screen
    assert "differences to the original" in status_text(screen, "#compare-status")
    return screen


def plot_text(plot: CurvePlot) -> str:
    from rich.console import Console

    console = Console(width=plot.size.width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(plot.render())
    return console.export_text()


async def test_ten_runs_every_line_told_apart_at_120x36(ten_runs: Path) -> None:
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_compare(pilot)
        screen = app.screen
        runs = sql(ten_runs, "SELECT run_id, model, intervention FROM runs")
        variants = [r[0] for r in sql(ten_runs, "SELECT DISTINCT variant FROM layer_metrics")]
        legend = screen.query_one("#legend").entries
        n = len(runs) * len(variants)
        assert len(legend) == n == 40
        # every entry names model · intervention · variant · a run id prefix of its own
        names = [e.split(" ", 1)[1] for e in legend]
        assert len(set(names)) == n
        want = set()
        for rid, model, iv in runs:
            for v in variants:
                want.add((model, iv, v, rid))
        got = set()
        for name in names:
            model, iv, v, prefix = name.split(" · ")
            (rid,) = [r for r, _, _ in runs if r.startswith(prefix)]
            got.add((model, iv, v, rid))
        assert got == want
        # each line's number is written on the plot, and no two numbers share or touch a cell
        plot = screen.query_one(CurvePlot)
        lines = plot.line_labels
        assert [ln.number for ln in lines] == list(range(1, n + 1))
        w, h = plot.size.width - 6, plot.size.height - 5
        spots = label_points(lines, w, h)
        xs = [x for ln in lines for x in ln.xs]
        ys = [y for ln in lines for y in ln.ys]
        cells = []
        for ln, (x, y) in zip(lines, spots, strict=True):
            assert (x, y) in set(zip(ln.xs, ln.ys, strict=True))  # on its own line
            col = round((x - min(xs)) / (max(xs) - min(xs)) * (w - 1))
            row = round((max(ys) - y) / (max(ys) - min(ys)) * (h - 1))
            width = len(str(ln.number))
            cells.append({(col + k, row) for k in range(-(width // 2), width - width // 2)})
        for i, a in enumerate(cells):
            near = {(c + d, r) for c, r in a for d in (-1, 0, 1)}
            assert not any(near & b for b in cells[i + 1 :]), f"label {i + 1} touches another"
        text = plot_text(plot)
        for number in ("40", "39", "27", "10"):
            assert number in text
        # the CI column is on screen at 120 columns
        table = screen.query_one(CurveTable)
        assert table.region.right <= 120
        assert "95% CI" in table.render_line(0).text and "p Holm" in table.render_line(0).text


async def test_ticks_views_and_one_key_per_job(ten_runs: Path) -> None:
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("space", "enter")  # one run
        await settle(pilot)
        screen = app.screen
        picks = screen.query_one("#pick-runs", SelectionList)
        first = picks.render_line(0).text
        second = picks.render_line(1).text
        assert first.startswith("[x] ") and second.startswith("[ ] ")  # no colour needed
        assert screen.query_one("#rel-depth").render().plain.startswith("[ ]")
        await pilot.press("d")
        assert screen.query_one("#rel-depth").render().plain.startswith("[x]")
        await pilot.press("d")
        # nothing selected here would plot nothing; the list shows what is plotted
        assert sorted(picks.selected) == sorted(app.selected_runs)
        run_id = picks.selected[0]
        table = screen.query_one(CurveTable)
        assert {table.row_data(i)["run_id"] for i in range(table.row_count)} == {run_id}

        for rid in [r["run_id"] for r in app.catalog.runs]:
            picks.select(rid)
        await settle(pilot)
        legend = screen.query_one("#legend")
        assert len(legend.entries) == 40
        await pilot.press("v")  # one variant: one line per run
        await settle(pilot)
        assert len(legend.entries) == 10 and all(" · original · " in e for e in legend.entries)
        assert "one variant: original" in status_text(screen, "#compare-status")
        await pilot.press("n")
        await settle(pilot)
        assert len(legend.entries) == 10 and all(" · front · " in e for e in legend.entries)
        await pilot.press("v")  # one model: its runs x variants
        await settle(pilot)
        models = {e.split(" ", 1)[1].split(" · ")[0] for e in legend.entries}
        assert len(models) == 1
        (model,) = models
        n_runs = sum(r["model"] == model for r in app.catalog.runs)
        assert len(legend.entries) == 4 * n_runs
        await pilot.press("v")  # differences to the original: one line per contrast
        await settle(pilot)
        assert len(legend.entries) == 10 * 3
        assert all("−original" in e for e in legend.entries)
        i = next(
            i
            for i in range(table.row_count)
            if table.row_data(i)["run_id"] == run_id
            and table.row_data(i)["layer"] == 4
            and table.row_data(i)["variant"] == "end−original"
        )
        q = (
            "SELECT mean_diff, ci_low, p_holm FROM contrasts WHERE run_id = ? AND metric = "
            "'erank' AND variant_a = 'end' AND variant_b = 'original' AND layer = 4 "
            "AND band IS NULL AND baseline_run_id IS NULL"
        )
        want = sql(ten_runs, q, [run_id])[0]
        row = table.row_data(i)
        assert (row["mean"], row["ci_low"], row["p_holm_vs_original"]) == pytest.approx(want)
        await pilot.press("v")
        await settle(pilot)
        assert len(legend.entries) == 40
        # the legend follows the table's cursor
        table.focus()
        await pilot.press("pagedown", "pagedown")
        await pilot.pause()
        number = table.number(table.row_data(table.cursor_row))
        assert legend.entries[legend.highlighted].split(" ", 1)[0] == str(number)


async def test_m_changes_the_metric_t_the_token_set(sets_db: Path) -> None:  # noqa: F811
    app = HomogApp(sets_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "compare")
        metric = app.screen.query_one("#metric", Select)
        assert metric.value == "erank"
        await pilot.press("m")
        await settle(pilot)
        assert metric.value == "mean_cosine"  # not erank__no_sink: that is t's job
        await pilot.press("M", "t")
        await settle(pilot)
        assert metric.value == "erank__no_sink"
        await pilot.press("m")  # within the no_sink set: the only metric there
        await settle(pilot)
        assert metric.value == "erank__no_sink"


async def test_p_at_the_permutation_floor_has_a_footnote(floor_db: Path) -> None:
    app = HomogApp(floor_db, watch_interval=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("space", "enter")
        await settle(pilot)
        screen = app.screen
        picks = screen.query_one("#pick-runs", SelectionList)
        picks.deselect_all()
        picks.select("demo000000")
        await settle(pilot)
        note = screen.query_one("#compare-note", Static)
        assert note.display
        n_layers = sql(
            floor_db,
            "SELECT count(*) FROM contrasts WHERE run_id = 'demo000000' "
            "AND metric = 'erank' AND variant_a = 'front' AND band IS NULL "
            "AND variant_b = 'original' AND baseline_run_id IS NULL",
        )[0][0]
        text = str(note.render())
        assert f"1/{N_PERM + 1}" in text and f"× {n_layers} layers" in text
        assert f"{n_layers / (N_PERM + 1):.2g}" in text
        table = screen.query_one(CurveTable)
        marked = {
            (table.row_data(i)["variant"], table.row_data(i)["layer"])
            for i in range(table.row_count)
            if "‡" in table.get_row_at(i)[5]
        }
        assert marked == {("front", layer) for layer in range(5)}
        # a run without floors: no footnote
        picks.deselect("demo000000")
        picks.select("demo000001")
        await settle(pilot)
        assert not note.display


async def test_attention_keys_with_a_dropdown_focused_and_every_layer_at_80x24(
    ten_runs: Path,
) -> None:
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await goto(pilot, "attention")
        screen = app.screen
        run = screen.query_one("#attn-run", Select)
        run.value = next(r["run_id"] for r in app.catalog.runs if r["n_layers"] == 18)
        await settle(pilot)
        run.focus()
        await pilot.pause()
        assert app.focused is run
        heatmap = screen.query_one(Heatmap)
        before = heatmap.sqrt_scale
        await pilot.press("s")
        assert heatmap.sqrt_scale is not before and not run.expanded
        # whole-number layer ticks on the sink curve, its legend beside it (not over it)
        plot = screen.query_one("#attn-first", CurvePlot)
        assert plot.integer_x and plot.series
        legend = str(screen.query_one("#attn-first-legend", Static).render())
        assert all(f"━ {v}" in legend for v in plot.series)
        curve = screen.curve_metric
        await pilot.press("k")
        assert screen.curve_metric != curve
        # every layer of the profile is on screen (two per line)
        layers = [
            r[0]
            for r in sql(
                ten_runs,
                "SELECT DISTINCT layer FROM attention_profile WHERE run_id = ? ORDER BY 1",
                [run.value],
            )
        ]
        shown = " ".join(str(heatmap.render().plain).splitlines())
        assert f"{layers[-2]}/{layers[-1]}" in shown or f" {layers[-1]} " in shown


async def test_sql_run_leaves_the_editor_and_e_returns(ten_runs: Path) -> None:
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "sql")
        editor = app.screen.query_one(SqlEditor)
        text = editor.text
        assert app.focused is editor
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.focused is app.screen.query_one("#results-grid")
        await pilot.press("e")
        assert app.focused is editor and editor.text == text  # no "e" typed into the query


async def test_pe_lab_one_unit(ten_runs: Path) -> None:
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await goto(pilot, "pe")
        screen = app.screen
        heatmap = screen.query_one(Heatmap)
        header = str(screen.query_one("#pe-deposit", Static).render())
        pe, task = screen.query_one("#pe-pe").value, screen.query_one("#pe-task").value
        drop = sql(
            ten_runs, "SELECT max(drop) FROM head_ablation WHERE pe = ? AND task = ?", [pe, task]
        )[0][0]
        assert f"drop {100 * drop:.1f} pts" in header and "−" not in header
        assert heatmap.readout().endswith(f"drop {100 * drop:.1f} pts  ◆")


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_runs_show_date_and_run_id(ten_runs: Path, size) -> None:
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunTable)
        assert {"model", "intervention", "date", "run"} <= set(table.columns_shown)
        assert table.region.right <= size[0]
        width = sum(c.get_render_width(table) for c in table.columns.values())
        assert width <= table.size.width  # no column cut or scrolled off
        row = table.get_row_at(0)
        assert row[-1] == table._shown[0][: len(row[-1])] and len(row[-1]) >= 8


async def test_differences_view_cuts_no_number_at_120x36(ten_runs: Path) -> None:
    """variant - original is small: -0.002241 and a CI of -0.00456…0.0255 were wider than
    their columns and were cut with '…' at 120 columns (attn_last: 275 of 810 means). Every
    cell now fits its column, and the table is whole on screen."""
    from tui.components.curve_table import COLUMNS

    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_differences(pilot)
        table = screen.query_one(CurveTable)
        assert table.region.right <= 120 and table.region.width >= sum(w + 1 for _, w, _ in COLUMNS)
        for _ in range(3):  # erank, mean_cosine, mev: the last two are small differences
            assert table.row_count > 0
            for i in range(table.row_count):
                cells = table.get_row_at(i)
                fits = [len(c) <= w for c, (_, w, _) in zip(cells, COLUMNS, strict=True)]
                assert all(fits), cells
            await pilot.press("m")
            await settle(pilot)


async def test_differences_view_zero_line_reads_zero_at_80x24(ten_runs: Path) -> None:
    """The differences view draws a line at y = 0; plotext's own ticks missed 0, so the tick
    on that line read -0.5 (or -0.043). The ticks are now round steps with 0 among them, and
    the zero line's row carries the label 0."""
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_differences(pilot)
        plot = screen.query_one(CurvePlot)
        assert plot.zero_line and plot.series
        rows = plot_text(plot).splitlines()
        # the zero line is the row whose frame opens with ├ (a horizontal line meets the axis)
        zero_rows = [r for r in rows if "├" in r]
        assert len(zero_rows) == 1, rows
        assert zero_rows[0].split("├")[0].strip() == "0"


def test_zero_ticks_are_round_and_hold_zero() -> None:
    from tui.components.curve_plot import tick_label, zero_ticks

    for lo, hi, n in [(-6.5, 0.7, 6), (0.2, 0.9, 5), (-0.043, 0.01, 4), (-2.5e-4, 3e-4, 5)]:
        ticks = zero_ticks(lo, hi, n)
        assert ticks[0] <= min(lo, 0) and ticks[-1] >= max(hi, 0)
        assert 0.0 in ticks and len(ticks) <= 2 * n + 2
        steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:], strict=False)}
        assert len(steps) == 1
    ticks = zero_ticks(-0.043, 0.01, 4)
    assert [tick_label(t, ticks) for t in ticks] == ["-0.06", "-0.04", "-0.02", "0", "0.02"]
    ticks = zero_ticks(-6.5, 0.7, 3)
    assert [tick_label(t, ticks) for t in ticks] == ["-7.5", "-5.0", "-2.5", "0", "2.5"]


async def test_attention_map_of_30_layers_fits_80x24(ten_runs: Path) -> None:
    """smollm2-135m has 30 layers: at 80x24 the map needed scrolling although docs/tui.md
    says every layer stays on screen (the pane's title took two lines), and the readout under
    the map was cut. All 30 rows show now, two a line, and the readout fits the pane."""
    app = HomogApp(ten_runs, watch_interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await goto(pilot, "attention")
        screen = app.screen
        run = screen.query_one("#attn-run", Select)
        smol = sql(ten_runs, "SELECT run_id FROM runs WHERE n_layers = 30 LIMIT 1")[0][0]
        run.value = smol
        await settle(pilot)
        heatmap = screen.query_one(Heatmap)
        assert len(heatmap.values) == 30
        heatmap.focus()
        await pilot.press(*["down"] * 29)
        await settle(pilot)
        first, visible = heatmap._window()
        assert (first, visible) == (0, 30)  # nothing scrolled away
        lines = str(heatmap.render()).splitlines()
        assert lines[1].strip().startswith("1/2") and lines[15].strip().startswith("29/30")
        width = heatmap.content_region.width
        assert len(lines[-1]) <= width and lines[-1].rstrip().endswith(
            heatmap.format_value(heatmap.values[29][0])
        )
        assert "layer 30" in lines[-1]
