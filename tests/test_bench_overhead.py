"""bench/extract_overhead.py: the (bh) variant (HOMOG_GPU_EIGENSOLVER=host) and its
environment switch, end to end on a random tiny model on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import extract_overhead  # noqa: E402


def test_environment_sets_and_restores(monkeypatch):
    monkeypatch.setenv("HOMOG_TEST_SET", "before")
    monkeypatch.delenv("HOMOG_TEST_UNSET", raising=False)
    with extract_overhead.environment({"HOMOG_TEST_SET": "x", "HOMOG_TEST_UNSET": "y"}):
        assert os.environ["HOMOG_TEST_SET"] == "x" and os.environ["HOMOG_TEST_UNSET"] == "y"
    assert os.environ["HOMOG_TEST_SET"] == "before" and "HOMOG_TEST_UNSET" not in os.environ
    with extract_overhead.environment(None):
        assert os.environ["HOMOG_TEST_SET"] == "before"


def test_host_eigensolver_variant_runs_and_compares(tmp_path):
    out = tmp_path / "figures.json"
    cmd = [sys.executable, str(ROOT / "bench" / "extract_overhead.py"), "--model",
           "random:tiny-llama", "--n-texts", "2", "--tokens", "16", "--repeats", "1",
           "--naive-texts", "0", "--host-eigensolver", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    fig = json.loads(out.read_text())
    assert fig["host_eigensolver"] is True
    assert fig["b_host_s"] > 0 and "b_over_b_host" in fig and "b_host_over_a_decoder" in fig
    assert fig["host_max_rel_diff"] == 0.0  # on the CPU the setting changes nothing
    assert "(bh) full extraction, spectra on the host" in done.stdout
