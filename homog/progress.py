"""One rich progress bar style for every long-running stage, and a bar with a throughput rate."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

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


@contextlib.contextmanager
def rate_progress(
    label: str, total: int, *, completed: int = 0, show: bool = True
) -> Iterator[Callable[[int, int], None]]:
    """Yield ``advance(texts, tokens)``: a bar over ``total`` texts (``completed`` already
    done, e.g. shards on disk) with the rate of texts and tokens advanced since it started.

    With ``show=False`` nothing is drawn and ``advance`` does nothing.
    """
    if not show:
        yield lambda texts, tokens: None
        return
    bar = progress(TextColumn("{task.fields[rate]}"))
    start = time.perf_counter()
    counts = {"texts": 0, "tokens": 0}
    with bar:
        task = bar.add_task(label, total=total, completed=completed, rate="")

        def advance(texts: int, tokens: int) -> None:
            counts["texts"] += texts
            counts["tokens"] += tokens
            dt = max(time.perf_counter() - start, 1e-9)
            rate = f"{counts['texts'] / dt:.1f} texts/s {counts['tokens'] / dt:.0f} tok/s"
            bar.update(task, advance=texts, rate=rate)

        yield advance
