"""One rich progress bar style for every long-running stage, and a bar with a throughput rate.

On a terminal the bars are drawn live. When stderr is not a terminal (a log file, a SLURM
job, ``dvc repro 2> log``) a bar would draw nothing, so each task writes plain lines
instead: one when it starts, one at most every ``LOG_EVERY_S`` seconds while it runs, and
one when it finishes (or when its stage leaves it unfinished).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
LOG_EVERY_S = 30.0  # seconds between the plain progress lines of a task (not a terminal)


class LineProgress(Progress):
    """A Progress that draws nothing and writes plain lines to its console (module
    docstring): "parse: 512/3383 (15 %), 12 s elapsed, about 68 s left"."""

    def __init__(self, *columns: Any, console: Console, every_s: float = LOG_EVERY_S) -> None:
        super().__init__(*columns, console=console, disable=True)
        self._out = console
        self.every_s = every_s
        self._said: dict[TaskID, float] = {}  # task -> time of its last line
        self._done: set[TaskID] = set()
        self._failed = False  # did the with-block end in an exception?

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> TaskID:
        task_id = super().add_task(description, *args, **kwargs)
        task = self._tasks[task_id]
        if task.visible:
            total = f" ({task.total:.0f})" if task.total is not None else ""
            self._say(f"{task.description}: started{total}")
            self._said[task_id] = time.monotonic()
        return task_id

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._report(task_id)

    def update(self, task_id: TaskID, **kwargs: Any) -> None:  # type: ignore[override]
        super().update(task_id, **kwargs)
        self._report(task_id)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self._failed = exc_type is not None
        super().__exit__(exc_type, exc_val, exc_tb)

    def stop(self) -> None:
        """A task left unfinished says so; one without a total that ran to the end of its
        block (no exception) is done."""
        for task_id, task in list(self._tasks.items()):
            if task.visible and task_id in self._said and task_id not in self._done:
                if task.total is None and not self._failed:
                    took = task.elapsed or 0.0
                    self._say(f"{task.description}: done {self._count(task)} in {took:.0f} s")
                else:
                    self._say(f"{task.description}: stopped at {self._count(task)}")
                self._done.add(task_id)
        super().stop()

    def _report(self, task_id: TaskID) -> None:
        task = self._tasks[task_id]
        if not task.visible or task_id in self._done or task_id not in self._said:
            return
        rate = task.fields.get("rate")
        rate = f", {rate}" if rate else ""
        if task.finished:
            self._done.add(task_id)
            took = task.elapsed or 0.0
            self._say(f"{task.description}: done {self._count(task)} in {took:.0f} s{rate}")
        elif time.monotonic() - self._said[task_id] >= self.every_s:
            self._said[task_id] = time.monotonic()
            left = task.time_remaining
            eta = f", about {left:.0f} s left" if left is not None else ""
            elapsed = task.elapsed or 0.0
            self._say(
                f"{task.description}: {self._count(task)}, {elapsed:.0f} s elapsed{eta}{rate}"
            )

    @staticmethod
    def _count(task: Any) -> str:
        if task.total is None:
            return f"{task.completed:.0f}"
        share = 100 * task.completed / task.total if task.total else 100.0
        return f"{task.completed:.0f}/{task.total:.0f} ({share:.0f} %)"

    def _say(self, line: str) -> None:
        self._out.print(line, markup=False, highlight=False, soft_wrap=True)


def quiet_library_bars(stream: Any = None) -> None:
    """Switch off the bars of huggingface_hub and transformers ("Loading weights", downloads)
    when ``stream`` (stderr) is not a terminal: there each of their updates is a
    carriage-return line in the log, while homog's own bars write plain lines
    (``LineProgress``). transformers reads the setting when it is imported, so this runs
    first (the ``homog`` command group calls it); a user's own HF_HUB_DISABLE_PROGRESS_BARS
    wins."""
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@contextlib.contextmanager
def quiet_gguf_bars(stream: Any = None) -> Iterator[bool]:
    """Off a terminal (``stream``, default stderr, is not a TTY), no progress bars while an
    embedded model loads; yields whether they are off.

    transformers de-quantizes a GGUF under ``tqdm.auto.tqdm`` ("Converting and de-quantizing
    GGUF tensors..."), imported by name in ``transformers.modeling_gguf_pytorch_utils``: it
    obeys neither HF_HUB_DISABLE_PROGRESS_BARS nor ``transformers.utils.logging``'s switch,
    and in a log file each of its updates is a carriage-return line. Its name there is bound
    to a disabled tqdm for the load, and transformers' own bars ("Writing model shards" of
    save_pretrained) are switched off too; both are restored after."""
    stream = sys.stderr if stream is None else stream
    if stream.isatty():
        yield False
        return
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    bar, was_on = getattr(gguf_utils, "tqdm", None), hf_logging.is_progress_bar_enabled()
    if bar is not None:
        gguf_utils.tqdm = functools.partial(bar, disable=True)
    hf_logging.disable_progress_bar()
    try:
        yield True
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if was_on:
            hf_logging.enable_progress_bar()


def progress(*extra_columns: Any, transient: bool = False, out: Console | None = None) -> Progress:
    """A Progress on stderr (or ``out``): description, bar, n/N, elapsed, ETA and any extra
    columns; a ``LineProgress`` when that console is not a terminal."""
    out = out or console
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        *extra_columns,
    )
    if not out.is_terminal:
        return LineProgress(*columns, console=out)
    return Progress(*columns, console=out, transient=transient)


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
            rate = f"{counts['texts'] / dt:.1f} texts/s"
            if counts["tokens"]:  # a caller that counts only texts shows no "0 tok/s"
                rate += f" {counts['tokens'] / dt:.0f} tok/s"
            bar.update(task, advance=texts, rate=rate)

        yield advance
