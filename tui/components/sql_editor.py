"""The SQL editor: a code text area; ctrl+r (or ctrl+j) runs what is in it."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea


class SqlEditor(TextArea):
    """Posts :class:`SqlEditor.Submitted` with the text (or the selection, when there is
    one) on ctrl+r / ctrl+j. Escape leaves the editor (tab indents)."""

    BINDINGS = [
        Binding("ctrl+r,ctrl+j", "submit", "Run", priority=True),
    ]

    class Submitted(Message):
        def __init__(self, sql: str) -> None:
            super().__init__()
            self.sql = sql

    def __init__(self, text: str = "", *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(
            text,
            id=id,
            soft_wrap=False,
            tab_behavior="indent",
            show_line_numbers=True,
            placeholder="SELECT * FROM runs   -- ctrl+r runs it",
        )

    def action_submit(self) -> None:
        sql = self.selected_text.strip() or self.text.strip()
        if sql:
            self.post_message(self.Submitted(sql))
