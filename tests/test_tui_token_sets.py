"""Pilot tests of the issue-13 views: the Compare screen switches the token set of a metric
(erank -> erank__no_sink -> erank__standardized) and the Attention screen shows sink_rate."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("textual")

from test_tui import goto, settle, sql, status_text  # noqa: E402
from textual.widgets import Select  # noqa: E402

from tui.app import HomogApp  # noqa: E402
from tui.components.curve_plot import CurvePlot  # noqa: E402
from tui.curves import split_token_set, with_token_set  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def sets_db(demo_db_factory, tmp_path_factory) -> Path:
    """The demo database plus erank__no_sink, erank__standardized and sink_rate rows (and
    layer_summary rebuilt from them, as ``homog load`` does)."""
    from homog.store import materialize_layer_summary

    path = tmp_path_factory.mktemp("sets") / "homog.duckdb"
    shutil.copy(demo_db_factory(3, 12), path)
    con = duckdb.connect(str(path))
    try:
        for name, scale in (("erank__no_sink", 1.5), ("erank__standardized", 0.5)):
            con.execute(
                "INSERT INTO layer_metrics SELECT run_id, variant, sample_id, layer, ?, "
                "value * ? FROM layer_metrics WHERE metric = 'erank'",
                [name, scale],
            )
        con.execute(
            "INSERT INTO layer_metrics SELECT run_id, variant, sample_id, layer, 'sink_rate', "
            "least(1, 2 * value) FROM layer_metrics WHERE metric = 'attn_first'"
        )
        materialize_layer_summary(con)
    finally:
        con.close()
    return path


def test_token_set_names():
    assert split_token_set("erank__no_sink") == ("erank", "no_sink")
    assert split_token_set("mean_cosine") == ("mean_cosine", "all")
    assert with_token_set("erank__standardized", "all") == "erank"
    assert with_token_set("mev", "no_sink") == "mev__no_sink"


async def test_compare_switches_token_set(sets_db: Path) -> None:
    app = HomogApp(sets_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "compare")
        screen = app.screen
        metric = screen.query_one("#metric", Select)
        assert metric.value == "erank"
        for want in ("erank__no_sink", "erank__standardized", "erank"):
            await pilot.press("t")
            await settle(pilot)
            assert metric.value == want
            assert f"tokens: {split_token_set(want)[1]}" in status_text(screen, "#compare-status")
        # a metric with no other set: stays, and says so
        metric.value = "mev"
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        assert metric.value == "mev"


async def test_attention_shows_sink_rate(sets_db: Path) -> None:
    app = HomogApp(sets_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await settle(pilot)
        await goto(pilot, "attention")
        screen = app.screen
        plot = screen.query_one("#attn-first", CurvePlot)
        assert screen.curve_metric == "sink_rate" and not plot.loading
        run_id = screen.query_one("#attn-run", Select).value
        n_layers = sql(sets_db, "SELECT n_layers FROM runs WHERE run_id = ?", [run_id])[0][0]
        assert plot.series and all(len(xs) == n_layers for xs, _ in plot.series.values())
        assert plot.title.startswith("sink_rate")
        await pilot.press("k")
        await settle(pilot)
        assert screen.curve_metric == "attn_first" and not plot.loading
        assert plot.title.startswith("attn_first")
