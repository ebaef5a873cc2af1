"""The catalog preview that ``homog tui`` starts before Textual: the child process, and the
app's first open built on it (shown at once, the file opened after, re-read if it changed)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import click
import pytest

pytest.importorskip("textual")

import tui.app as tui_app  # noqa: E402
import tui.preview as preview_mod  # noqa: E402
from homog.store.demo import make_demo_db  # noqa: E402
from tui.app import HomogApp  # noqa: E402
from tui.command import make_app  # noqa: E402
from tui.components.run_table import RunTable  # noqa: E402
from tui.core import fingerprint, load_catalog, open_database  # noqa: E402
from tui.preview import CatalogPreview  # noqa: E402

pytestmark = pytest.mark.anyio
MODES = ["fork", "spawn"] if hasattr(os, "fork") else ["spawn"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def demo_db(demo_db_factory) -> Path:
    return demo_db_factory(3, 12)


def catalog_of(path: Path):
    db = open_database(path)
    try:
        return load_catalog(db.con)
    finally:
        db.close()


@pytest.mark.parametrize("how", MODES)
def test_preview_reads_the_same_catalog_as_the_app(demo_db: Path, how: str) -> None:
    preview = CatalogPreview(demo_db, fork=how == "fork")
    got = preview.result(timeout=60)
    assert preview.how == how
    assert got is not None
    stamp, catalog = got
    assert stamp == fingerprint(demo_db)
    assert catalog == catalog_of(demo_db)
    assert len(catalog.runs) == 3 and catalog.metrics and catalog.variants


@pytest.mark.parametrize("how", MODES)
@pytest.mark.parametrize("kind", ["missing", "empty", "corrupt"])
def test_preview_of_a_bad_file_is_none(tmp_path: Path, how: str, kind: str) -> None:
    path = tmp_path / "homog.duckdb"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "corrupt":
        path.write_bytes(b"not a duckdb file" * 200)
    preview = CatalogPreview(path, fork=how == "fork")
    assert preview.result(timeout=60) is None
    assert preview.ready()
    assert not path.exists() or kind != "missing"  # nothing created


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the fork child inherits the patch")
def test_a_hanging_child_is_killed(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preview_mod, "open_with_catalog", lambda path: time.sleep(60))
    preview = CatalogPreview(demo_db, fork=True)
    start = time.monotonic()
    assert preview.result(timeout=0.5) is None
    assert time.monotonic() - start < 10  # killed, not waited for
    assert preview.ready()


async def wait_for(pilot, check, what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


def shown_run_ids(app: HomogApp) -> list[str]:
    return list(app.screen.query_one(RunTable)._shown)


async def test_app_shows_the_previewed_runs_then_opens_the_file(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    preview = CatalogPreview(demo_db, fork=False)
    stamp, catalog = preview.result(timeout=60)
    # Hold the app's own open until the test lets it go: the runs must show without it.
    release = threading.Event()
    real_open = tui_app.open_database

    def held_open(path):
        release.wait(30)
        return real_open(path)

    monkeypatch.setattr(tui_app, "open_database", held_open)
    app = HomogApp(demo_db, watch_interval=3600, preview=preview)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(RunTable).row_count == 3, "runs")
        assert app.db is None and app.catalog is catalog
        await pilot.press("2")  # asked for Compare before the file is open: remembered
        assert app.current_mode == "runs"
        release.set()
        await wait_for(pilot, lambda: app.db is not None, "the app's own connection")
        assert app.db.ok and app.db.stamp == stamp
        assert app.catalog is catalog  # the same file: not read again
        await wait_for(pilot, lambda: app.current_mode == "compare", "the remembered screen")


async def test_a_file_changed_after_the_preview_is_read_again(
    tmp_path: Path, demo_db: Path
) -> None:
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db, path)
    preview = CatalogPreview(path, fork=False)
    assert preview.result(timeout=60) is not None
    other = tmp_path / "rebuilt.duckdb"
    make_demo_db(other, 5, 6)
    os.replace(other, path)  # what `homog load` does: a new file renamed over the old
    app = HomogApp(path, watch_interval=3600, preview=preview)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.db is not None and app.db.ok, "the connection")
        await wait_for(pilot, lambda: len(app.catalog.runs) == 5, "the re-read catalog")
        assert app.catalog == catalog_of(path)
        await wait_for(pilot, lambda: app.screen.query_one(RunTable).row_count == 5, "5 rows")


async def test_a_preview_of_another_file_is_not_used(tmp_path: Path, demo_db: Path) -> None:
    preview = CatalogPreview(demo_db, fork=False)
    other = tmp_path / "other.duckdb"
    make_demo_db(other, 2, 6)
    app = HomogApp(other, watch_interval=3600, preview=preview)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.db is not None and app.db.ok, "the connection")
        await wait_for(pilot, lambda: app.catalog is not None, "the catalog")
        assert len(app.catalog.runs) == 2


async def test_make_app_starts_the_preview(demo_db: Path) -> None:
    app = make_app(demo_db, watch_interval=3600)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.db is not None and app.db.ok, "the connection")
        assert app.catalog == catalog_of(demo_db)
        await wait_for(pilot, lambda: len(shown_run_ids(app)) == 3, "the rows")
        assert sorted(shown_run_ids(app)) == sorted(r["run_id"] for r in app.catalog.runs)


def test_built_in_commands_skip_the_entry_point_scan_and_tui_is_a_plugin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Built-in commands never pay for the entry-point scan; ``tui`` is found through the
    ``homog.commands`` group (pyproject.toml), as any plugin, and unknown names stay unknown."""
    from importlib.metadata import EntryPoint

    import homog.cli as cli

    calls: list[int] = []

    def plugins() -> dict[str, EntryPoint]:
        calls.append(1)
        return {"tui": EntryPoint("tui", "tui.command:tui", "homog.commands")}

    monkeypatch.setattr(cli, "_plugin_commands", plugins)
    ctx = click.Context(cli.main)
    assert cli.main.get_command(ctx, "runs").name == "runs"
    assert calls == []
    assert cli.main.get_command(ctx, "tui").name == "tui" and calls == [1]
    assert "tui" not in cli.COMMANDS
    assert cli.main.get_command(ctx, "nope") is None


def test_the_command_path_forks_before_textual_or_duckdb_is_loaded(demo_db: Path) -> None:
    """``homog tui`` starts the preview with neither Textual nor DuckDB imported: the child
    then forks (on Linux) and the parent's Textual import overlaps the child's work."""
    import subprocess
    import sys

    code = (
        "import sys; from homog.cli import main; import click; "
        "main.get_command(click.Context(main), 'tui'); "
        "loaded = sorted(m for m in ('textual', 'duckdb') if m in sys.modules); "
        "from tui.preview import CatalogPreview; p = CatalogPreview(sys.argv[1]); "
        "ok = p.result(60) is not None; print(loaded, p.how, ok)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(demo_db)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    how = "fork" if sys.platform == "linux" else "spawn"
    assert done.stdout.split() == ["[]", how, "True"]
