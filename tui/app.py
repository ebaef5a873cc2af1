"""The Textual app: five screens over one read-only connection, and the database watch.

Screens live in ``tui/screens`` (one per file) and read through :mod:`homog.store` in
workers; this module only opens the database, holds what the screens share (the catalog
and the selected runs) and notices when ``homog load`` replaced the file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen

from tui.core import Catalog, Database, fingerprint, open_database, open_with_catalog
from tui.messages import CatalogLoaded, CatalogPreviewed, DbOpened, QueryFailed
from tui.screens.problem import DbProblemScreen
from tui.screens.runs import RunsScreen

if TYPE_CHECKING:
    from tui.preview import CatalogPreview


# Screens other than Runs are imported when first shown (plotext, the SQL editor: tens of ms
# that the first paint need not wait for), and in a background thread once the runs are in.
def _compare() -> type[Screen]:
    from tui.screens.compare import CompareScreen

    return CompareScreen


def _attention() -> type[Screen]:
    from tui.screens.attention import AttentionScreen

    return AttentionScreen


def _pe_lab() -> type[Screen]:
    from tui.screens.pelab import PeLabScreen

    return PeLabScreen


def _sql() -> type[Screen]:
    from tui.screens.sql import SqlScreen

    return SqlScreen


# mode -> the function that imports its screen's class
LAZY_SCREENS: dict[str, Callable[[], type[Screen]]] = {
    "compare": _compare,
    "attention": _attention,
    "pe": _pe_lab,
    "sql": _sql,
}


PRELOAD_AFTER_S = 0.3


def _on_first_show(load: Callable[[], type[Screen]]) -> Callable[[], Screen]:
    """A mode's screen factory: its class is imported when the mode is first shown."""
    return lambda: load()()


def preload_screens() -> None:
    """Import the lazily loaded screens' modules (off the UI thread, after the first paint)."""
    for load in LAZY_SCREENS.values():
        load()


class HomogApp(App[None]):
    """``HomogApp(db_path).run()``. ``watch_interval`` (seconds) is how often the file is
    checked for a rebuild; tests pass a large value and call :meth:`check_file`."""

    CSS_PATH = "app.tcss"
    TITLE = "homog"
    # The app starts in Runs (not in Textual's blank "_default" screen, switched away from
    # on mount: that drew an empty frame and re-parsed every stylesheet twice first).
    DEFAULT_MODE = "runs"
    MODES = {
        "runs": RunsScreen,
        **{mode: _on_first_show(load) for mode, load in LAZY_SCREENS.items()},
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

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        watch_interval: float = 1.0,
        preview: CatalogPreview | None = None,
    ) -> None:
        super().__init__()
        self.db_path = Path(db_path)
        # The first open shows the catalog that this child process read, when it read the
        # same file (``homog tui`` starts it before importing Textual: tui.command.make_app).
        self._preview = preview if preview is not None and preview.path == self.db_path else None
        self._pending_mode: str | None = None  # a screen asked for before the file opened
        self.db: Database | None = None
        self.db_changed = False  # the file on disk is newer than what we show
        self.watch_interval = watch_interval
        self._preloaded = False
        self._open_generation = 0  # the latest open_db; an older one's result is dropped

    # -- database --------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.open_db()
        self.set_interval(self.watch_interval, self.check_file)

    def open_db(self) -> None:
        """(Re)open the file in a thread worker (importing DuckDB, opening the file and
        reading the catalog take a good part of the first paint; Textual starts meanwhile).
        The screens keep what they show until new data arrives; :class:`DbOpened` comes back.

        The first open starts from the preview child's catalog when there is one: shown at
        once when it is already in (else :class:`CatalogPreviewed` brings it), then the file
        is opened after that paint (:meth:`_show_preview`), and read again only if it changed
        in between.
        """
        # DuckDB reuses an open database instance for the same path within a process, so
        # the old connection must be closed first or the rebuilt file would not be read.
        if self.db is not None:
            self.db.close()
            self.db = None
        self._open_generation += 1
        generation, path = self._open_generation, self.db_path
        preview, self._preview = self._preview, None  # only ever the first open
        got = preview.result() if preview is not None and preview.ready() else None
        if got is not None:  # already read: the runs are in the first frame
            self._show_preview(generation, *got)
            return

        def job() -> None:
            got = preview.result() if preview is not None else None
            if got is None:  # no preview, or the child failed: the ordinary open
                self.post_message(DbOpened(generation, *open_with_catalog(path)))
            else:
                self.post_message(CatalogPreviewed(generation, *got))

        self.run_worker(job, name="open-db", group="open-db", thread=True, exit_on_error=False)

    def _show_preview(
        self, generation: int, stamp: tuple[int, int, int] | None, catalog: Catalog
    ) -> None:
        """Show the preview child's catalog, then open the file once that is painted
        (DuckDB's import would slow the paint down)."""
        path = self.db_path
        self.db_note = str(path)
        self.catalog = catalog

        def open_own() -> None:
            db = open_database(path)
            if not db.ok or db.stamp == stamp:  # the file the child read: its catalog holds
                self.post_message(DbOpened(generation, db, catalog if db.ok else None, None))
                return
            db.close()  # the file changed since the child read it: read it again
            self.post_message(DbOpened(generation, *open_with_catalog(path)))

        self.call_after_refresh(
            self.run_worker,
            open_own,
            name="open-db",
            group="open-db",
            thread=True,
            exit_on_error=False,
        )

    @on(CatalogPreviewed)
    def _catalog_previewed(self, message: CatalogPreviewed) -> None:
        if message.generation == self._open_generation and self.is_running:
            self._show_preview(message.generation, message.stamp, message.catalog)

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
        if message.catalog is not self.catalog:  # not the previewed one, already shown
            self.catalog = message.catalog
        if self._pending_mode is not None:
            mode, self._pending_mode = self._pending_mode, None
            self.action_goto(mode)
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
        if self.db is None and self.catalog is not None:
            self._pending_mode = mode  # runs previewed, file not open yet: go there once it is
            return
        if self.db is None or not self.db.ok:
            return  # the problem screen stays until the database opens
        if self.current_mode != mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
