"""The Textual app: five screens over one read-only connection, and the database watch.

Screens live in ``tui/screens`` (one per file) and read through :mod:`homog.store` in
workers; this module only opens the database, holds what the screens share (the catalog
and the selected runs) and notices when ``homog load`` replaced the file.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import on
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen

from tui.core import Catalog, Database, fingerprint, load_catalog, open_database
from tui.messages import CatalogLoaded, DbOpened, QueryFailed
from tui.screens.problem import DbProblemScreen
from tui.screens.runs import RunsScreen
from tui.workers import error_text

# Screens other than Runs are imported when first shown (plotext, the SQL editor: tens of ms
# that the first paint need not wait for), and in a background thread once the runs are in.
LAZY_SCREENS = {
    "compare": ("tui.screens.compare", "CompareScreen"),
    "attention": ("tui.screens.attention", "AttentionScreen"),
    "pe": ("tui.screens.pelab", "PeLabScreen"),
    "sql": ("tui.screens.sql", "SqlScreen"),
}


PRELOAD_AFTER_S = 0.3


def _lazy_screen(module: str, name: str) -> Callable[[], Screen]:
    def make() -> Screen:
        return getattr(importlib.import_module(module), name)()

    return make


def preload_screens() -> None:
    """Import the lazily loaded screens' modules (off the UI thread, after the first paint)."""
    for module, _ in LAZY_SCREENS.values():
        importlib.import_module(module)


def fetch_catalog(con: Any) -> CatalogLoaded:
    """Worker body: what the database holds (runs, metrics, variants, PE-lab rows)."""
    return CatalogLoaded(load_catalog(con))


class HomogApp(App[None]):
    """``HomogApp(db_path).run()``. ``watch_interval`` (seconds) is how often the file is
    checked for a rebuild; tests pass a large value and call :meth:`check_file`."""

    CSS_PATH = "app.tcss"
    TITLE = "homog"
    MODES = {
        "runs": RunsScreen,
        **{mode: _lazy_screen(*where) for mode, where in LAZY_SCREENS.items()},
    }
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    BINDINGS = [
        *(
            Binding(str(i), f"goto('{mode}')", mode, show=False)
            for i, mode in enumerate(MODES, start=1)
        ),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("r", "reload", "Reload"),
    ]

    catalog: reactive[Catalog | None] = reactive(None, always_update=True)
    selected_runs: reactive[tuple[str, ...]] = reactive(())
    db_note: reactive[str] = reactive("")

    def __init__(self, db_path: str | os.PathLike[str], *, watch_interval: float = 1.0) -> None:
        super().__init__()
        self.db_path = Path(db_path)
        self.db: Database | None = None
        self.db_changed = False  # the file on disk is newer than what we show
        self.watch_interval = watch_interval
        self._preloaded = False
        self._open_generation = 0  # the latest open_db; an older one's result is dropped

    # -- database --------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.switch_mode("runs")
        self.open_db()
        self.set_interval(self.watch_interval, self.check_file)

    def open_db(self) -> None:
        """(Re)open the file in a thread worker (importing DuckDB, opening the file and
        reading the catalog take a good part of the first paint; Textual starts meanwhile).
        The screens keep what they show until new data arrives; :class:`DbOpened` comes back.
        """
        # DuckDB reuses an open database instance for the same path within a process, so
        # the old connection must be closed first or the rebuilt file would not be read.
        if self.db is not None:
            self.db.close()
            self.db = None
        self._open_generation += 1
        generation, path = self._open_generation, self.db_path

        def job() -> None:
            db = open_database(path)
            catalog, error = None, None
            if db.ok:
                try:
                    catalog = fetch_catalog(db.con).catalog
                except Exception as exc:  # noqa: BLE001 - any database error goes to the UI
                    error = error_text(exc)
            self.post_message(DbOpened(generation, db, catalog, error))

        self.run_worker(job, name="open-db", group="open-db", thread=True, exit_on_error=False)

    @on(DbOpened)
    def _db_opened(self, message: DbOpened) -> None:
        new = message.db
        if message.generation != self._open_generation or not self.is_running:
            new.close()  # a newer open_db superseded this one
            return
        self.db = new
        if not new.ok:
            self._show_problem(new.error or "")
            self.db_note = "cannot open " + str(self.db_path)
            return
        self.db_changed = False
        self.db_note = str(self.db_path)
        if isinstance(self.screen, DbProblemScreen):
            self.pop_screen()
        self.refresh_bindings()
        if message.catalog is None:
            self.post_message(QueryFailed(CatalogLoaded, message.error or "no catalog"))
        else:
            self.post_message(CatalogLoaded(message.catalog))

    def on_unmount(self) -> None:
        if self.db is not None:
            self.db.close()

    def _show_problem(self, message: str) -> None:
        if isinstance(self.screen, DbProblemScreen):
            self.screen.update(message)
        else:
            self.push_screen(DbProblemScreen(message))

    @on(CatalogLoaded)
    def _catalog_loaded(self, message: CatalogLoaded) -> None:
        self.catalog = message.catalog
        if not self._preloaded:  # once the runs are painted, not competing with that
            self._preloaded = True
            self.set_timer(
                PRELOAD_AFTER_S,
                threading.Thread(target=preload_screens, name="preload", daemon=True).start,
            )

    @on(QueryFailed)
    def _catalog_failed(self, message: QueryFailed) -> None:
        if message.result is CatalogLoaded:
            self._show_problem(f"The database opened but could not be read: {message.error}")

    def check_file(self) -> None:
        """Notice a rebuilt (renamed-over) or newly created database file."""
        stamp = fingerprint(self.db_path)
        if self.db is None or stamp == self.db.stamp:
            return
        if not self.db.ok:
            if stamp is not None:
                self.open_db()  # the file appeared or changed: try it
            return
        if not self.db_changed:
            self.db_changed = True
            self.db_note = "database rebuilt on disk · r reloads"
            self.refresh_bindings()
            self.notify(
                "The database file changed (homog load?). Showing the old data; press r to reload.",
                title="Database rebuilt",
                timeout=10,
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "reload":
            return self.db_changed or (self.db is not None and not self.db.ok)
        return True

    def action_reload(self) -> None:
        self.open_db()

    # -- navigation ------------------------------------------------------------------------
    def action_goto(self, mode: str) -> None:
        if self.db is None or not self.db.ok:
            return  # the problem screen stays until the database opens
        if self.current_mode != mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
