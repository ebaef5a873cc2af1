"""The top bar: the screens (click or press their number) and the database's state."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

SCREENS: tuple[tuple[str, str], ...] = (
    ("runs", "Runs"),
    ("compare", "Compare"),
    ("attention", "Attention"),
    ("pe", "PE lab"),
    ("sql", "SQL"),
)


class NavBar(Horizontal):
    """One line: `1 Runs  2 Compare ...` with the current screen highlighted, and on the
    right the database file with a note when it changed on disk."""

    def __init__(self, active: str) -> None:
        super().__init__()
        self.active = active

    def compose(self) -> ComposeResult:
        parts = []
        for i, (mode, title) in enumerate(SCREENS, start=1):
            style = "reverse b" if mode == self.active else ""
            label = f" {i} {title} "
            parts.append(
                f"[@click=app.goto('{mode}')][{style}]{label}[/][/]"
                if style
                else f"[@click=app.goto('{mode}')]{label}[/]"
            )
        yield Static("".join(parts), id="nav-tabs")
        yield Static("", id="nav-status")

    def on_mount(self) -> None:
        self.watch(self.app, "db_note", self._show_note)

    def _show_note(self, note: str) -> None:
        status = self.query_one("#nav-status", Static)
        status.update(note)
        status.set_class(bool(getattr(self.app, "db_changed", False)), "-changed")
