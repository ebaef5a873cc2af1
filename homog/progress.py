"""One rich progress bar style for every long-running stage."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


def progress(*extra_columns, transient: bool = False) -> Progress:
    """A Progress on stderr: description, bar, n/N, elapsed, ETA and any extra columns."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        *extra_columns,
        console=console,
        transient=transient,
    )
