"""SVG snapshots of the main screens (pytest-textual-snapshot) over a fixed demo database.

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
    return demo_db_factory(3, 12)


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


@pytest.mark.parametrize(
    ("name", "keys", "size"),
    [
        ("runs", ("space",), (80, 24)),
        ("compare", ("space", "down", "space", "enter"), (80, 24)),
        ("compare_wide", ("space", "down", "space", "enter"), (160, 45)),
        ("attention", ("3",), (80, 24)),
        ("pe_lab", ("4",), (80, 24)),
        ("sql", ("5", "ctrl+r", "escape"), (80, 24)),
        ("help", ("question_mark",), (80, 24)),
    ],
)
def test_screen_snapshot(
    snap_compare, in_db_dir: Path, name: str, keys, size, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui.screens.sql import SqlScreen

    monkeypatch.setattr(SqlScreen, "show_timings", False)
    app = HomogApp(DB_NAME, watch_interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=settle_then(*keys))


def test_missing_database_snapshot(
    snap_compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = HomogApp("data/homog.duckdb", watch_interval=3600)
    assert snap_compare(app, run_before=settle_then())
