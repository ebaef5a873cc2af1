"""Helpers shared by the issue-32 tests (test_hostile_*.py): the CLI as a subprocess, the
clean-error check, a small texts file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
# `homog` in a fresh interpreter importing this tree
HOMOG = [sys.executable, "-c", "from homog.cli import main; main(prog_name='homog')"]
VARIANTS = ("original", "front", "end", "control")


def clean_error(res, *needles: str) -> None:
    """A CliRunner result that exited 1 with an `Error:` message and no traceback,
    mentioning every needle."""
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Error:" in res.output and "Traceback" not in res.output, res.output
    for n in needles:
        assert n in res.output, (n, res.output)


def write_texts(path: Path, n: int = 4) -> Path:
    """A synth texts.parquet of ``n`` short texts per variant (the input of extract)."""
    import pandas as pd

    rows = [
        ("demo", v, f"s{t}", f"text number {t} about a {v} film that was good", "pos", "kp", 1.0)
        for v in VARIANTS
        for t in range(n)
    ]
    cols = ["dataset", "variant", "sample_id", "text", "label", "keyphrase", "bertscore_f1"]
    pd.DataFrame(rows, columns=cols).to_parquet(path)
    return path
