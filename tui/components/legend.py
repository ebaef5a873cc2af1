"""The legend of Compare: one entry per line, its number in the line's colour and its full
name (model · intervention · variant · run id), wrapped when narrow; it scrolls, and follows
the table's cursor (the line under it is highlighted)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import OptionList

from tui.series import Line


class Legend(OptionList, can_focus=False):
    """``show(lines)``; ``entries`` keeps the text of each entry (tests read it)."""

    DEFAULT_CSS = """
    Legend { height: auto; border: none; padding: 0; scrollbar-size-vertical: 1; }
    Legend:focus { border: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, markup=False)
        self.entries: list[str] = []
        self._numbers: list[int] = []

    def show(self, lines: Sequence[Line]) -> None:
        entries = [f"{ln.number} {ln.name}" for ln in lines]
        if entries == self.entries:
            return
        self.entries = entries
        self._numbers = [ln.number for ln in lines]
        prompts = []
        for ln in lines:
            text = Text(overflow="fold")
            text.append(f"{ln.number:>2} ━ ", style=f"bold {ln.hex}")
            text.append(ln.name)
            prompts.append(text)
        self.clear_options()
        self.add_options(prompts)

    def point_at(self, number: int) -> None:
        """Highlight (and scroll to) the entry of line ``number``."""
        if number in self._numbers:
            self.highlighted = self._numbers.index(number)
