"""Check lists and boxes that show their state as ``[x]`` / ``[ ]``: readable without colour
(Textual's own draw the same block for both states and tell them apart by colour only)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.strip import Strip
from textual.widgets import Checkbox, OptionList, SelectionList
from textual.widgets.option_list import OptionDoesNotExist

CHECKED, UNCHECKED = "[x]", "[ ]"


class TickList(SelectionList[str]):
    """A SelectionList whose rows start with ``[x]`` or ``[ ]``."""

    def render_line(self, y: int) -> Strip:
        line = OptionList.render_line(self, y)
        _, scroll_y = self.scroll_offset
        index = scroll_y + y
        try:
            selection = self.get_option_at_index(index)
        except OptionDoesNotExist:
            return line
        base = next(iter(line)).style or self.rich_style
        mark = CHECKED if selection.value in self._selected else UNCHECKED
        style = base + Style(bold=selection.value in self._selected, meta={"option": index})
        return Strip([Segment(mark + " ", style), *line])


class TickBox(Checkbox):
    """A Checkbox drawn as ``[x] label`` / ``[ ] label``."""

    @property
    def _button(self) -> Content:
        return Content(CHECKED if self.value else UNCHECKED)
