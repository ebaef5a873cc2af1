"""The Compare screen's numbers table (a Line-API ScrollView): rows, marks, cursor, scrolling.

The first column is the line's number (the plot and the legend carry the same number)."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from textual.app import App, ComposeResult  # noqa: E402

from tui.components.curve_table import COLUMNS, TABLE_WIDTH, CurveTable  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# line numbers of (run, variant), as the Compare screen numbers its lines
LABELS = {("r2", "end"): 1, ("r1", "front"): 2, ("r1", "original"): 3}


def row(run: str, variant: str, layer: int, mean: float, p: float | None) -> dict:
    return {
        "run_id": run,
        "variant": variant,
        "layer": layer,
        "mean": mean,
        "ci_low": mean - 0.5,
        "ci_high": mean + 0.5,
        "n": 12,
        "p_holm_vs_original": p,
    }


ROWS = [
    row("r1", "front", 1, 3.25, 0.001),
    row("r1", "original", 0, 4.0, None),
    row("r2", "end", 0, 2.5, 0.2),
    row("r1", "front", 0, 3.5, 0.00001),
]


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CurveTable(id="t")


def line_text(table: CurveTable, y: int) -> str:
    return table.render_line(y).text


async def test_rows_sorted_formatted_and_marked() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(CurveTable)
        n_sig = table.show(ROWS, LABELS)
        await pilot.pause()
        assert n_sig == 2 and table.row_count == 4
        # sorted by (line number, layer)
        assert [table.get_row_at(i)[0] for i in range(4)] == ["1", "2", "2", "3"]
        assert table.get_row_at(1) == ["2", "0", "3.5", "3…4", "<1e-4", "*", "12"]
        assert table.get_row_at(2)[4:6] == ["0.0010", "*"]
        assert table.get_row_at(0)[4:6] == ["0.2000", ""]  # not significant: no mark
        assert table.get_row_at(3)[4:6] == ["", ""]  # the original variant has no p

        header = line_text(table, 0)
        for label, _, _ in COLUMNS:
            assert label in header
        assert line_text(table, 2).split()[:6] == ["2", "0", "3.5", "3…4", "<1e-4", "*"]
        assert len(line_text(table, 1)) == table.size.width

        # the significant row's p and mark are bold yellow, the plain row's are not
        def styles(y: int, text: str) -> list:
            return [s.style for s in table.render_line(y) if text in s.text]

        hot = styles(2, "<1e-4")
        assert hot and all(s.bold and s.color.name == "yellow" for s in hot)
        cold = styles(1, "0.2000")
        assert cold and not any(s.color is not None and s.color.name == "yellow" for s in cold)


async def test_empty_input() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(CurveTable)
        assert table.show([], LABELS) == 0
        await pilot.pause()
        assert table.row_count == 0
        with pytest.raises(IndexError):
            table.get_row_at(0)
        assert "95% CI" in line_text(table, 0)  # the header stays
        assert line_text(table, 1).strip() == ""
        table.focus()
        await pilot.press("down", "end", "pagedown", "home", "up")
        assert table.cursor_row == 0


async def test_cursor_and_scrolling() -> None:
    rows = [row("r1", "original", layer, float(layer), None) for layer in range(100)]
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(CurveTable)
        table.show(rows, LABELS)
        table.focus()
        await pilot.pause()
        assert table.virtual_size.height == 101 and table.virtual_size.width == TABLE_WIDTH
        visible = table.scrollable_content_region.height - 1  # less the header
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 99
        assert table.scroll_y == table.max_scroll_y > 0
        last = line_text(table, table.scrollable_content_region.height - 1)
        assert last.split()[:3] == ["3", "99", "99"]
        assert "95% CI" in line_text(table, 0)  # the header does not scroll
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert table.cursor_row == visible
        assert table.scroll_y == 1  # the cursor row is the last one on screen
        await pilot.press("up", "up")
        assert table.cursor_row == visible - 2
        # a click on the third data line puts the cursor there
        await pilot.click(CurveTable, offset=(5, 3))
        assert table.cursor_row == round(table.scroll_y) + 2


async def test_cursor_follows_its_row_across_refills() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(CurveTable)
        table.show(ROWS, LABELS)
        table.cursor_row = 3  # line 3 (r1 original), layer 0
        await pilot.pause()
        # a variant toggle: gpt2's rows go, the cursor stays on its row
        table.show([r for r in ROWS if r["run_id"] == "r1"], LABELS)
        assert table.get_row_at(table.cursor_row)[:2] == ["3", "0"]
        # its row gone: the cursor stays in range
        table.show(ROWS[:1], LABELS)
        assert table.cursor_row == 0


async def test_small_differences_are_shortened_never_cut() -> None:
    """The differences view's paired differences (variant - original) are small numbers whose
    %g text (-0.0001234, a CI of -0.0234…-0.00123) was wider than its column and ended in a
    cut '…'; they get fewer digits or the exponent form, each cell within its width."""
    from tui.core import fmt_fit, fmt_interval

    diffs = [
        (-0.0001234, -0.000234, -0.0000123),
        (-0.012345, -0.0234, -0.00123),
        (1234.5678, -123456.7, 98765.4),
        (2.5e-9, -1.5e-9, 7.25e-9),
    ]
    rows = [
        {**row("r1", "front", layer, mean, 0.01), "ci_low": lo, "ci_high": hi}
        for layer, (mean, lo, hi) in enumerate(diffs)
    ]
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CurveTable)
        table.show(rows, LABELS)
        await pilot.pause()
        widths = [w for _, w, _ in COLUMNS]
        for i, (mean, lo, hi) in enumerate(diffs):
            cells = table.get_row_at(i)
            assert all(len(c) <= w for c, w in zip(cells, widths, strict=True)), cells
            # the cells read back as the numbers (to the digits kept)
            assert float(cells[2]) == pytest.approx(mean, rel=0.01)
            got_lo, got_hi = (float(v) for v in cells[3].split("…"))
            assert got_lo == pytest.approx(lo, rel=0.05) and got_hi == pytest.approx(hi, rel=0.05)
            text = line_text(table, i + 1)
            assert cells[2] in text and cells[3] in text
    assert fmt_fit(-0.0001234, 8) == "-1.23e-4" and fmt_fit(3.25, 8) == "3.25"
    assert fmt_interval(-0.0234, -0.00123, 15) == "-0.023…-0.0012"
    assert fmt_interval(2.75, 3.75, 15) == "2.75…3.75" and fmt_interval(None, None, 15) == ""
