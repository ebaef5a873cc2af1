"""Shown instead of the data when the database cannot be opened: what is wrong, how to fix."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static


class DbProblemScreen(ModalScreen[None]):
    """The error of opening the database, with r to retry and q to quit. The app also
    retries by itself when the file appears or changes."""

    BINDINGS = [
        Binding("r", "app.reload", "Retry"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="problem-box"):
            yield Static(title_for(self.message), id="problem-title")
            yield Static(Text(self.message), id="problem-text")
            yield Static("r  retry    q  quit", id="problem-keys")
        yield Footer()

    def update(self, message: str) -> None:
        self.message = message
        self.query_one("#problem-title", Static).update(title_for(message))
        self.query_one("#problem-text", Static).update(Text(message))


def title_for(message: str) -> str:
    """A lock is not a broken file: its own title (the message says retry)."""
    return (
        "The database is locked"
        if "locked by another process" in message
        else ("Cannot open the database")
    )
