"""SVG snapshots of every screen (pytest-textual-snapshot) at 80x24 and 120x36, over a fixed
demo database of 10 runs (Compare with all ten selected: 40 lines).

Deterministic: make_demo_db is hash-seeded with fixed dates, the database is opened by a
relative path (no temporary directory in the nav bar), the editor cursor does not blink,
and every shot waits for the workers. Update after an intended change with
``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("pytest_textual_snapshot")

from tui.app import HomogApp  # noqa: E402

DB_NAME = "homog.duckdb"


@pytest.fixture(scope="module")
def built_db(demo_db_factory) -> Path:
    return demo_db_factory(10, 12)


@pytest.fixture
def in_db_dir(tmp_path: Path, built_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(built_db, tmp_path / DB_NAME)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def settle_then(*keys: str):
    """A run_before that waits for every query, presses ``keys``, and waits again."""

    async def run_before(pilot) -> None:
        async def settle() -> None:
            for _ in range(4):
                await pilot.pause()
                await pilot.app.workers.wait_for_complete()
            await pilot.pause()

        await settle()
        for key in keys:
            await pilot.press(key)
            await settle()
        for editor in pilot.app.screen.query("SqlEditor"):
            editor.cursor_blink = False
        await settle()
        # The footer recomputes its key list a frame after a focus change; without this the
        # runs screen was sometimes shot with the previous widget's keys.
        pilot.app.screen.refresh_bindings()
        await pilot.pause(0.1)
        await settle()

    return run_before


SCREENS = {
    "runs": ("space",),
    "compare": ("a", "enter"),  # all ten runs: 40 lines
    "compare_variant": ("a", "enter", "v"),  # one variant: 10 lines
    "compare_diff": ("a", "enter", "v", "v", "v"),  # differences to the original: 30 lines
    "attention": ("3",),
    "pe_lab": ("4",),
    "sql": ("5", "ctrl+r"),
    "help": ("question_mark",),
}
SIZES = {"80x24": (80, 24), "120x36": (120, 36)}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen_snapshot(
    snap_compare, in_db_dir: Path, name: str, size: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui.screens.sql import SqlScreen

    monkeypatch.setattr(SqlScreen, "show_timings", False)
    app = HomogApp(DB_NAME, watch_interval=3600)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=settle_then(*SCREENS[name]))


def test_missing_database_snapshot(
    snap_compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = HomogApp("data/homog.duckdb", watch_interval=3600)
    assert snap_compare(app, run_before=settle_then())
