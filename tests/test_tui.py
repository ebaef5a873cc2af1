"""Pilot tests of the terminal UI: every screen driven by keys, over a small demo database.

The database comes from ``homog.store.demo.make_demo_db`` (deterministic); numbers shown by the
UI are checked against SQL written here, not against the query library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("textual")

from textual.widgets import DataTable, Select, SelectionList, Static  # noqa: E402

from homog.store.demo import make_demo_db  # noqa: E402
from tui.app import HomogApp  # noqa: E402
from tui.components.curve_plot import CurvePlot  # noqa: E402
from tui.components.curve_table import CurveTable  # noqa: E402
from tui.components.heatmap import Heatmap  # noqa: E402
from tui.components.results_table import ResultsTable  # noqa: E402
from tui.components.run_table import RunTable  # noqa: E402
from tui.components.sql_editor import SqlEditor  # noqa: E402
from tui.screens.compare import CompareScreen  # noqa: E402
from tui.screens.problem import DbProblemScreen  # noqa: E402

N_RUNS, N_TEXTS = 3, 12
# Async tests run on asyncio through anyio's pytest plugin (no pytest-asyncio needed).
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def demo_db(demo_db_factory) -> Path:
    return demo_db_factory(N_RUNS, N_TEXTS)


def sql(path: Path, query: str, args: list | None = None) -> list[tuple]:
    from homog.store.guard import reader_config

    con = duckdb.connect(str(path), read_only=True, config=reader_config())
    try:
        return con.execute(query, args or []).fetchall()
    finally:
        con.close()


async def settle(pilot) -> None:
    """Let pending messages start workers, workers finish, and their results be shown."""
    for _ in range(4):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


MODE_KEYS = {"runs": "1", "compare": "2", "attention": "3", "pe": "4", "sql": "5"}


async def goto(pilot, mode: str) -> None:
    """Press the screen's number and wait until it is shown and its queries are done."""
    await pilot.press(MODE_KEYS[mode])
    deadline = time.monotonic() + 10
    while getattr(pilot.app.screen, "MODE", None) != mode and time.monotonic() < deadline:
        await pilot.pause(0.02)
    assert pilot.app.screen.MODE == mode
    await settle(pilot)


def status_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


# -- a database that cannot be opened ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "empty", "corrupt"])
async def test_bad_database_opens_with_explanation(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "homog.duckdb"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "corrupt":
        path.write_bytes(b"this is not a duckdb file" * 100)
    app = HomogApp(path, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DbProblemScreen)
        text = app.screen.message
        assert "dvc repro" in text and "homog load" in text
        await pilot.press("2")  # screens stay closed while there is no database
        assert isinstance(app.screen, DbProblemScreen)
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_locked_database_says_locked(tmp_path: Path, demo_db: Path) -> None:
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db, path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ok', flush=True); "
            "time.sleep(30)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ok"
        app = HomogApp(path, watch_interval=3600)
        async with app.run_test() as pilot:
            await settle(pilot)
            assert isinstance(app.screen, DbProblemScreen)
            # a lock, not damage: retry, never "move it away"/"create it" (issue 16)
            msg = app.screen.message
            assert "locked by another process" in msg and f"pid {holder.pid}" in msg
            assert "retry" in msg and "move it" not in msg and "dvc repro" not in msg
            title = app.screen.query_one("#problem-title").render()
            assert "locked" in str(title)
    finally:
        holder.kill()
        holder.wait()


async def test_database_appearing_later_is_opened(tmp_path: Path, demo_db: Path) -> None:
    path = tmp_path / "homog.duckdb"
    app = HomogApp(path, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DbProblemScreen)
        shutil.copy(demo_db, path)
        app.check_file()
        await settle(pilot)
        assert not isinstance(app.screen, DbProblemScreen)
        assert len(app.catalog.runs) == N_RUNS


# -- runs ---------------------------------------------------------------------------------------


async def test_runs_filter_select_and_compare(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunTable)
        assert table.row_count == N_RUNS
        await pilot.press("slash", *"llama")
        await pilot.pause()
        assert table.row_count == 1
        await pilot.press("escape")
        assert table.has_focus
        await pilot.press("space")
        llama = sql(demo_db, "SELECT run_id FROM runs WHERE model = 'llama-8b'")[0][0]
        assert app.selected_runs == (llama,)
        await pilot.press("slash", *["backspace"] * 5)
        await pilot.pause()
        await pilot.press("enter", "down", "space")
        assert table.row_count == N_RUNS and len(app.selected_runs) == 2
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert sorted(app.screen.query_one("#pick-runs", SelectionList).selected) == sorted(
            app.selected_runs
        )


# -- compare ------------------------------------------------------------------------------------


async def test_compare_metric_variant_and_numbers(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "compare")
        screen = app.screen
        run_id = screen.query_one("#pick-runs", SelectionList).selected[0]
        metric = screen.query_one("#metric", Select)
        assert metric.value == "erank"
        n_layers = sql(demo_db, "SELECT n_layers FROM runs WHERE run_id = ?", [run_id])[0][0]
        table = screen.query_one(CurveTable)
        assert table.row_count == 4 * (n_layers + 1)  # 4 variants x layers 0..L
        assert screen.draws >= 1

        # mean and significance marks against SQL on the raw rows
        want = sql(
            demo_db,
            "SELECT avg(value) FROM layer_metrics WHERE run_id = ? AND "
            "metric = 'erank' AND variant = 'front' AND layer = 3",
            [run_id],
        )[0][0]
        i = next(
            i
            for i in range(table.row_count)
            if (table.row_data(i)["variant"], table.row_data(i)["layer"]) == ("front", 3)
        )
        row = table.get_row_at(i)
        assert float(str(row[2])) == pytest.approx(want, rel=1e-3)
        # the row's number names the line in the legend: model · intervention · variant · id
        run = app.catalog.run(run_id)
        legend = screen.query_one("#legend").entries
        entry = next(e for e in legend if e.split(" ", 1)[0] == row[0])
        model, intervention, variant, rid = entry.split(" ", 1)[1].split(" · ")
        assert (model, intervention, variant) == (run["model"], run["intervention"], "front")
        # the run id prefix is the run's, and no other run's
        assert [r["run_id"] for r in app.catalog.runs if r["run_id"].startswith(rid)] == [run_id]
        n_sig = sql(
            demo_db,
            "SELECT count(*) FROM contrasts WHERE run_id = ? AND metric = "
            "'erank' AND variant_b = 'original' AND band IS NULL AND p_holm < 0.05",
            [run_id],
        )[0][0]
        marks = sum(str(table.get_row_at(i)[5]) == "*" for i in range(table.row_count))
        assert marks == n_sig
        assert f"{n_sig} differ" in status_text(screen, "#compare-status")

        # next metric with "m", then back with "M"
        await pilot.press("m")
        await settle(pilot)
        assert (
            metric.value
            == app.catalog.metrics[
                (app.catalog.metrics.index("erank") + 1) % len(app.catalog.metrics)
            ]
        )
        assert "erank" not in status_text(screen, "#compare-status")
        await pilot.press("M")
        await settle(pilot)
        assert metric.value == "erank"

        # drop two variants: only original and end rows remain
        variants = screen.query_one("#pick-variants", SelectionList)
        variants.deselect("front")
        variants.deselect("control")
        await settle(pilot)
        shown = {table.row_data(i)["variant"] for i in range(table.row_count)}
        assert shown == {"original", "end"}

        # relative depth: two models of different depth turn it on by themselves
        other = next(r["run_id"] for r in app.catalog.runs if r["n_layers"] != n_layers)
        screen.query_one("#pick-runs", SelectionList).select(other)
        await settle(pilot)
        assert screen.query_one("#rel-depth").value is True
        assert set(app.selected_runs) == {run_id, other}
        await pilot.press("d")
        assert screen.query_one("#rel-depth").value is False


async def test_metric_switch_uses_cache(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "compare")
        screen = app.screen
        plot = screen.query_one(CurvePlot)
        await pilot.press("m")
        await settle(pilot)
        builds, draws = plot.builds, screen.draws
        workers = len(app.workers)
        await pilot.press("M")  # back to erank: drawn in the key's action, no worker
        assert app.screen.query_one("#metric", Select).value == "erank"
        assert screen.draws == draws + 1 and len(app.workers) == workers
        assert "erank" in status_text(screen, "#compare-status")
        await pilot.pause()
        assert not app.screen.query_one("#compare-main").loading
        assert screen.draws == draws + 1  # the Select's Changed message found it drawn
        # the plot of erank at this size was rendered before: plotext does not run again
        assert plot.builds == builds


async def test_compare_dedupes_queries_and_delays_spinner(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import tui.screens.compare as compare

    release = threading.Event()
    calls: list = []
    real = compare.fetch_curves

    def slow(con, key, generation=0):
        calls.append(key)
        release.wait(10)
        return real(con, key, generation)

    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "compare")
        screen = app.screen
        monkeypatch.setattr(compare, "fetch_curves", slow)
        # a longer delay than the app's, so a loaded machine's slow event loop cannot pass it
        # before the first check (the check is skipped if it did anyway)
        monkeypatch.setattr(compare, "SPINNER_DELAY_S", 0.6)
        draws = screen.draws
        t0 = time.monotonic()
        await pilot.press("m")
        screen.refresh_curves()  # the same choice again while its query runs: no new query
        screen.refresh_curves()
        main = screen.query_one("#compare-main")
        await pilot.pause(0.05)
        assert len(calls) == 1
        if time.monotonic() - t0 < 0.6:
            assert not main.loading  # no spinner for a short wait
        await pilot.pause(0.7)
        assert main.loading and screen.draws == draws  # a slow query: the spinner shows
        release.set()
        await settle(pilot)
        assert not main.loading and screen.draws == draws + 1 and len(calls) == 1
        assert screen.key() in screen._cache and not screen._pending


# -- attention ----------------------------------------------------------------------------------


async def test_attention_heatmap_and_head(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "attention")
        screen = app.screen
        heatmap = screen.query_one(Heatmap)
        run_id = screen.query_one("#attn-run", Select).value
        n_layers = sql(demo_db, "SELECT n_layers FROM runs WHERE run_id = ?", [run_id])[0][0]
        assert len(heatmap.values) == n_layers and len(heatmap.values[0]) == 20
        avg = sql(
            demo_db,
            "SELECT avg(mass) FROM attention_profile WHERE run_id = ? AND "
            "variant = 'original' AND layer = 2 AND bin = 0",
            [run_id],
        )[0][0]
        assert heatmap.values[1][0] == pytest.approx(avg)
        # one head
        screen.query_one("#attn-head", Select).value = 0
        await settle(pilot)
        one = sql(
            demo_db,
            "SELECT mass FROM attention_profile WHERE run_id = ? AND "
            "variant = 'original' AND layer = 2 AND bin = 0 AND head = 0",
            [run_id],
        )[0][0]
        assert heatmap.values[1][0] == pytest.approx(one)
        # keyboard over the map: the readout follows the cursor
        heatmap.focus()
        await pilot.press("down", "right", "s")
        assert heatmap.cursor == (1, 1) and heatmap.sqrt_scale is False
        assert "layer 2" in heatmap.readout() and "0.05–0.10" in heatmap.readout()
        # attn_first: one line per variant
        plot = screen.query_one("#attn-first", CurvePlot)
        assert not plot.loading


# -- PE lab -------------------------------------------------------------------------------------


async def test_pe_lab_accuracy_and_deposit_head(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "pe")
        screen = app.screen
        acc = screen.query_one("#pe-acc", DataTable)
        n_pe = sql(demo_db, "SELECT count(DISTINCT pe) FROM posenc_results")[0][0]
        assert acc.row_count == n_pe
        screen.query_one("#pe-pe", Select).value = "rope"
        screen.query_one("#pe-task", Select).value = "distance"
        await settle(pilot)
        layer, head = sql(
            demo_db,
            "SELECT layer, head FROM head_ablation WHERE pe = 'rope' "
            "AND task = 'distance' ORDER BY drop DESC LIMIT 1",
        )[0]
        heatmap = screen.query_one(Heatmap)
        assert heatmap.highlight == (layer, head)
        assert f"layer {layer} head {head}" in status_text(screen, "#pe-deposit")


async def test_pe_lab_without_results(tmp_path: Path, demo_db: Path) -> None:
    path = tmp_path / "nope.duckdb"
    shutil.copy(demo_db, path)
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM posenc_results")
    con.execute("DELETE FROM head_ablation")
    con.close()
    app = HomogApp(path, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "pe")
        assert app.screen.query_one("#pe-empty").display
        assert not app.screen.query_one("#pe-body").display


# -- SQL ----------------------------------------------------------------------------------------


async def run_console(pilot, text: str) -> str:
    editor = pilot.app.screen.query_one(SqlEditor)
    editor.text = text
    editor.focus()
    await pilot.press("ctrl+r")
    await settle(pilot)
    return status_text(pilot.app.screen, "#sql-status")


async def test_sql_console_query_error_and_no_writes(tmp_path: Path, demo_db: Path) -> None:
    path = tmp_path / "ro.duckdb"
    shutil.copy(demo_db, path)
    before = (path.stat().st_mtime_ns, path.stat().st_size)
    app = HomogApp(path, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "sql")
        status = await run_console(pilot, "SELECT model, n_layers FROM runs ORDER BY model")
        assert status.startswith("ok")
        results = app.screen.query_one(ResultsTable)
        assert results.columns == ["model", "n_layers"]
        assert [r[0] for r in results.rows] == sorted(
            r[0] for r in sql(path, "SELECT model FROM runs")
        )

        status = await run_console(pilot, "SELECT * FROM no_such_table")
        assert status.startswith("error") and "no_such_table" in status

        for write in (
            "DROP TABLE runs",
            "DELETE FROM runs",
            "CREATE TABLE x AS SELECT 1",
            f"ATTACH '{path}' AS w",
            "COPY runs TO 'out.csv'",
            "SELECT 1; DELETE FROM runs",
        ):
            status = await run_console(pilot, write)
            assert status.startswith("error"), write
    assert (path.stat().st_mtime_ns, path.stat().st_size) == before
    assert sql(path, "SELECT count(*) FROM runs")[0][0] == N_RUNS


async def test_sql_paging(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "sql")
        await run_console(pilot, "SELECT range AS i FROM range(1200)")
        results = app.screen.query_one(ResultsTable)
        grid = app.screen.query_one("#results-grid", DataTable)
        assert len(results.rows) == 1200 and grid.row_count == 500
        grid.focus()
        await pilot.press("n", "n", "n")
        assert results.page == 2 and grid.row_count == 200
        assert str(grid.get_row_at(0)[0]) == "1000"


async def test_sql_long_query_can_be_cancelled(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "sql")
        screen = app.screen
        editor = screen.query_one(SqlEditor)
        editor.text = "SELECT sum(a.range * b.range) FROM range(200000000) a, range(1000) b"
        editor.focus()
        await pilot.press("ctrl+r")
        deadline = time.monotonic() + 10
        while screen._cursor is None and time.monotonic() < deadline:
            await pilot.pause(0.02)
        assert screen.running and screen.query_one(ResultsTable).loading  # the spinner
        start = time.monotonic()
        await pilot.press("escape")
        await settle(pilot)
        assert time.monotonic() - start < 5
        assert not screen.running
        assert "cancel" in status_text(screen, "#sql-status")


# -- the file rebuilt under the app ----------------------------------------------------------


async def test_rebuilt_database_keeps_old_data_until_reload(tmp_path: Path, demo_db: Path) -> None:
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db, path)
    app = HomogApp(path, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert len(app.catalog.runs) == N_RUNS
        make_demo_db(tmp_path / "new.duckdb", N_RUNS + 1, 4)
        os.replace(tmp_path / "new.duckdb", path)  # what `homog load` does
        app.check_file()
        await pilot.pause()
        assert app.db_changed and "rebuilt" in app.db_note
        assert len(app.catalog.runs) == N_RUNS  # still the old data
        await pilot.press("r")
        await settle(pilot)
        assert not app.db_changed
        assert len(app.catalog.runs) == N_RUNS + 1
        assert app.screen.query_one(RunTable).row_count == N_RUNS + 1


async def test_help_and_quit(demo_db: Path) -> None:
    app = HomogApp(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert type(app.screen).__name__ == "RunsScreen"
        await pilot.press("q")
    assert not app.is_running


# -- boundaries ---------------------------------------------------------------------------------


def test_homog_does_not_import_textual() -> None:
    code = (
        "import sys, homog, homog.store, homog.store.demo, homog.cli; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui', "
        "'textual_plotext')); print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_tui_command_help() -> None:
    from click.testing import CliRunner

    from homog.cli import main

    result = CliRunner().invoke(main, ["tui", "--help"])
    assert result.exit_code == 0, result.output
    assert "--db" in result.output and "--demo" in result.output
