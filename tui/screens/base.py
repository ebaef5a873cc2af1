"""What every main screen shares: nav bar, footer, queries in workers, catalog updates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker

from tui.components.nav_bar import NavBar
from tui.core import Catalog
from tui.messages import QueryFailed, QueryResult
from tui.workers import run_query

R = TypeVar("R", bound=QueryResult)


class HomogScreen(Screen):
    """A main screen. Subclasses set ``MODE``, write :meth:`compose_body` and
    :meth:`catalog_changed`, start queries with :meth:`query_db` and handle each result
    message with ``@on(CurvesLoaded)`` etc. A failure a subclass does not handle itself (its
    ``@on(QueryFailed)`` handler calls ``message.prevent_default()``) becomes a notification.
    """

    MODE: ClassVar[str] = ""

    def compose(self) -> ComposeResult:
        yield NavBar(self.MODE)
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.watch(self.app, "catalog", self._catalog_watch, init=False)
        # The catalog the app already has is shown after the first refresh: by then every
        # widget has composed its own children (a Select's label, say), which a screen's
        # Mount does not wait for.
        self.call_after_refresh(self._catalog_watch, self.app.catalog)  # type: ignore[attr-defined]

    def _catalog_watch(self, catalog: Catalog | None) -> None:
        if catalog is not None:
            self.catalog_changed(catalog)

    @property
    def catalog(self) -> Catalog | None:
        return self.app.catalog  # type: ignore[attr-defined]

    def catalog_changed(self, catalog: Catalog) -> None:
        """The app read (or re-read) the database: rebuild choices and reload views."""

    def query_db(
        self, result: type[R], fn: Callable[..., R], *args: Any, **kw: Any
    ) -> Worker | None:
        """Run ``fn(cursor, *args)`` in a worker; its ``result`` message comes back here."""
        return run_query(self, result, fn, *args, **kw)

    def on_query_failed(self, message: QueryFailed) -> None:
        self.notify(message.error, title="Query failed", severity="error", timeout=8)
