"""The small messages workers post back to the UI thread.

Workers never touch widgets: they run a query on their own cursor and post one of these;
the screen's handler updates the widgets on the UI thread.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class QueryDone(Message):
    """A background query finished: ``key`` names what was asked, ``value`` is the result."""

    def __init__(self, key: str, value: Any, elapsed_s: float) -> None:
        super().__init__()
        self.key = key
        self.value = value
        self.elapsed_s = elapsed_s


class QueryFailed(Message):
    """A background query raised: ``error`` is the database's own message."""

    def __init__(self, key: str, error: str, cancelled: bool = False) -> None:
        super().__init__()
        self.key = key
        self.error = error
        self.cancelled = cancelled


class CatalogLoaded(Message):
    """The app (re)read the list of runs, metrics and variants."""
