"""bench/extract_overhead.py: the eigensolver variants (b:S, HOMOG_GPU_EIGENSOLVER=S), their
environment switch and the Markdown page, end to end on a random tiny model on the CPU."""

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


def test_eigensolver_variants_run_compare_and_write_the_page(tmp_path):
    out, page = tmp_path / "figures.json", tmp_path / "docs" / "gpu-bench.md"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "extract_overhead.py"),
        "--model",
        "random:tiny-llama",
        "--n-texts",
        "3",
        "--tokens",
        "16",
        "24",
        "--repeats",
        "1",
        "--naive-texts",
        "0",
        "--batch-tokens",
        "40",
        "--skip",
        "bt",
        "b0",
        "--eigensolvers",
        "device",
        "host-serial",
        "host",
        "--json",
        str(out),
        "--markdown",
        str(page),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert [f["tokens"] for f in figures] == [16, 24]
    for fig in figures:
        assert fig["eigensolvers"] == ["device", "host-serial", "host"]
        assert "b_today_s" not in fig and "b_no_attention_s" not in fig and fig["b_s"] > 0
        for s in ("device", "host-serial", "host"):
            assert fig[f"b:{s}_s"] > 0 and f"b:{s}_over_a_decoder" in fig
            assert fig[f"b:{s}_max_rel_diff"] == 0.0  # on the CPU the setting changes nothing
    assert "(b:host) extraction, host LAPACK, pipelined" in done.stdout
    text = page.read_text()
    assert "Measured on **CPU**" in text and "--eigensolvers device host-serial host" in text
    assert "**3 texts x 16 tokens**" in text and "**3 texts x 24 tokens**" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| (b:")]
    assert len(rows) == 6 and all(ln.count("|") == 7 for ln in rows)
