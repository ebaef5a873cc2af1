"""Progress where no bar can be drawn: plain lines when stderr is not a terminal."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from homog.progress import LineProgress, progress, rate_progress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=terminal, width=60), buf


def test_not_a_terminal_gets_plain_lines():
    out, buf = _console(False)
    with progress(out=out, transient=True) as bar:
        assert isinstance(bar, LineProgress)
        task = bar.add_task("parse", total=4)
        hidden = bar.add_task("hidden", total=2, visible=False)
        for _ in range(4):
            bar.advance(task)
        bar.advance(hidden, 2)
    lines = buf.getvalue().splitlines()
    # throttled: nothing between start and done within LOG_EVERY_S; hidden tasks say nothing
    assert lines[0] == "parse: started (4)"
    assert lines[1].startswith("parse: done 4/4 (100 %) in ") and len(lines) == 2


def test_lines_while_running_and_when_left_unfinished():
    out, buf = _console(False)
    with progress(out=out) as bar:
        bar.every_s = 0.0  # a line on every step
        task = bar.add_task("retry", total=None)  # the total is learnt later
        bar.update(task, total=10)
        bar.advance(task, 3)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "retry: started"
    assert lines[1].startswith("retry: 0/10 (0 %), ")
    assert lines[2].startswith("retry: 3/10 (30 %), ") and "elapsed" in lines[2]
    assert lines[-1] == "retry: stopped at 3/10 (30 %)"


def test_a_terminal_gets_the_live_bar():
    out, _buf = _console(True)
    bar = progress(out=out)
    assert isinstance(bar, Progress) and not isinstance(bar, LineProgress)


def _rate_lines(monkeypatch, label: str, tokens: list[int]) -> list[str]:
    """The lines a logged (non-terminal) rate_progress writes for one text per token count."""
    import homog.progress as hp

    out, buf = _console(False)
    monkeypatch.setattr(hp, "console", out)
    with rate_progress(label, total=len(tokens)) as advance:
        for n in tokens:
            advance(1, n)
    return buf.getvalue().splitlines()


def test_rate_progress_reports_its_rate_in_the_last_line(monkeypatch):
    last = _rate_lines(monkeypatch, "extract", [100, 50])[-1]
    assert last.startswith("extract: done 2/2 (100 %) in ") and "texts/s" in last
    assert "tok/s" in last


def test_a_task_without_total_is_done_when_its_block_ends():
    import pytest

    out, buf = _console(False)
    with progress(out=out) as bar:
        task = bar.add_task("revert rewrites", total=None)
        bar.advance(task, 45)
    assert buf.getvalue().splitlines()[-1].startswith("revert rewrites: done 45 in ")
    out, buf = _console(False)
    with pytest.raises(RuntimeError), progress(out=out) as bar:
        task = bar.add_task("revert rewrites", total=None)
        bar.advance(task, 5)
        raise RuntimeError("stage failed")
    assert buf.getvalue().splitlines()[-1] == "revert rewrites: stopped at 5"


def test_library_bars_are_off_when_stderr_is_not_a_terminal():
    """In a log, transformers' "Loading weights" bar is off (it would write one carriage-
    return line per update); on a terminal, or when the user set the variable, it is as set."""
    import os
    import subprocess
    import sys

    code = (
        "import io, sys\n"
        "from homog.progress import quiet_library_bars\n"
        "class Tty(io.StringIO):\n"
        "    def isatty(self): return True\n"
        "quiet_library_bars(Tty() if sys.argv[1] == 'tty' else io.StringIO())\n"
        "from transformers.utils import logging\n"
        "print(logging.is_progress_bar_enabled())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}

    def enabled(stream: str, **extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, stream],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    assert enabled("log") == "False"
    assert enabled("tty") == "True"
    assert enabled("log", HF_HUB_DISABLE_PROGRESS_BARS="0") == "True"


def test_rate_progress_counting_texts_only_shows_no_token_rate(monkeypatch):
    lines = _rate_lines(monkeypatch, "probe", [0, 0])
    assert any("texts/s" in line for line in lines) and not any("tok/s" in ln for ln in lines)
