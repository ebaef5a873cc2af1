"""``python -m tui [--db PATH]``: the same as ``homog tui``."""

from tui.command import tui

if __name__ == "__main__":
    tui()
