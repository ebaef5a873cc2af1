"""What every main screen shares: the nav bar, the footer, queries in workers, and
reacting when the app (re)reads the database's catalog."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker

from tui.components.nav_bar import NavBar
from tui.core import Catalog
from tui.messages import QueryDone, QueryFailed
from tui.workers import run_query


class HomogScreen(Screen):
    """A main screen. Subclasses set ``MODE``, write :meth:`compose_body` and
    :meth:`catalog_changed`, start queries with :meth:`query_db` and receive results in
    ``show_<key>(value)`` (failures in ``failed_<key>(error)``, else a notification)."""

    MODE: ClassVar[str] = ""

    def compose(self) -> ComposeResult:
        yield NavBar(self.MODE)
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.watch(self.app, "catalog", self._catalog_watch)

    def _catalog_watch(self, catalog: Catalog | None) -> None:
        if catalog is not None:
            self.catalog_changed(catalog)

    @property
    def catalog(self) -> Catalog | None:
        return self.app.catalog  # type: ignore[attr-defined]

    def catalog_changed(self, catalog: Catalog) -> None:
        """The app read (or re-read) the database: rebuild choices and reload views."""

    def query_db(self, key: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Worker | None:
        return run_query(self, key, fn, *args, **kw)

    last_elapsed_s = 0.0  # of the query whose show_/failed_ handler is running
    last_cancelled = False

    def on_query_done(self, message: QueryDone) -> None:
        message.stop()
        self.last_elapsed_s = message.elapsed_s
        handler = getattr(self, f"show_{message.key}", None)
        if handler is not None:
            handler(message.value)

    def on_query_failed(self, message: QueryFailed) -> None:
        message.stop()
        self.last_cancelled = message.cancelled
        handler = getattr(self, f"failed_{message.key}", None)
        if handler is not None:
            handler(message.error)
        else:
            self.notify(message.error, title="Query failed", severity="error", timeout=8)
