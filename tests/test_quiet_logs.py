"""Quiet, honest logs (issue 42): faiss's few-training-points warning, printed by every MAUVE
layer pair, is said once; the GGUF de-quantizing bar writes no carriage return into a log
(stderr not a terminal)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_faiss_few_points_warning_is_said_once(capfd, monkeypatch):
    import homog.mauve as hm
    from homog.config import MauveConfig

    monkeypatch.setattr(hm, "_said", set())
    rng = np.random.default_rng(0)
    p, q = rng.normal(size=(200, 8)), rng.normal(size=(200, 8))
    scores = [hm.mauve_faiss(p, q, MauveConfig()) for _ in range(3)]
    err = capfd.readouterr().err
    assert err.count(hm.FAISS_FEW_POINTS) == 1, err
    assert scores[0] == scores[1] == scores[2]  # the score is untouched


def test_other_stderr_output_passes_through(capfd, monkeypatch):
    import homog.mauve as hm

    monkeypatch.setattr(hm, "_said", set())
    with hm.faiss_warning_once():
        os.write(2, b"something else\n")
        os.write(2, b"WARNING clustering 9 points to 3 centroids: please provide at least 117\n")
    with hm.faiss_warning_once():
        os.write(2, b"WARNING clustering 9 points to 3 centroids: please provide at least 117\n")
    err = capfd.readouterr().err
    assert "something else" in err and err.count("please provide") == 1


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_gguf_bar_is_off_when_stderr_is_not_a_terminal():
    pytest.importorskip("transformers")
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    from homog.progress import quiet_gguf_bars

    original = gguf_utils.tqdm
    log = io.StringIO()
    with quiet_gguf_bars(log) as quiet:
        assert quiet and not hf_logging.is_progress_bar_enabled()
        # the very name the de-quantizing loop calls, writing to a log file
        for _ in gguf_utils.tqdm(range(50), desc="Converting and de-quantizing", file=log):
            pass
    assert log.getvalue() == ""
    assert gguf_utils.tqdm is original
    with quiet_gguf_bars(Tty()) as quiet:  # a terminal keeps its bars
        assert not quiet and gguf_utils.tqdm is original


@pytest.mark.slow
def test_embedded_model_conversion_writes_no_carriage_return(tmp_path):
    """The real conversion (about a minute on two busy cores) with stderr in a file."""
    err = tmp_path / "err.log"
    env = {**os.environ, "HOMOG_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    with err.open("wb") as fh:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from homog.models_gguf import embedded_dir as e; e('smollm2-135m')",
            ],
            env=env,
            stderr=fh,
            check=True,
            timeout=600,
        )
    text = err.read_bytes()
    assert b"\r" not in text, text[:500]
    assert b"de-quantizing its GGUF" in text
