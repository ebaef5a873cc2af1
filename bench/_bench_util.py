"""Helpers shared by ``bench/peers.py`` and ``bench/cost_curves.py``.

- ``token_windows``: real token ids of equal length from the IMDB sample (consecutive reviews
  concatenated until a text has the length asked for; no padding, no special tokens);
- ``PeakMemory`` / ``measure``: wall time, process CPU time and peak memory of one call
  (peak RSS from the kernel's high-water mark, reset before the call; CUDA peak on a GPU);
- ``run_fresh``: run a benchmark child in a fresh Python process, so each configuration's
  peak RSS is its own, and read back the JSON it writes;
- ``model_setup``: the model source and extract config from params.yaml (or the defaults);
- ``machine_line`` / ``markdown_table``: what the reports print.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# shared/ lives beside the repository (docs/design.md: "Data for tests and benchmarks")
IMDB_SAMPLE = REPO.parent / "shared" / "data" / "imdb" / "imdb_sample.jsonl"
MIB = 2**20


def read_reviews(path: Path) -> list[str]:
    """The ``text`` field of every line of a JSON-lines file, in file order.

    Raises SystemExit with a message naming the file when it is missing or a line is not a
    JSON object with a text.
    """
    if not path.exists():
        raise SystemExit(f"texts file {path} not found: pass --texts PATH (a JSON-lines file)")
    out = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(str(json.loads(line)["text"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(
                    f"{path} line {i} is not a JSON object with 'text': {exc}"
                ) from exc
    return out


def token_windows(tokenizer: Any, reviews: Sequence[str], n_texts: int, tokens: int) -> np.ndarray:
    """(n_texts, tokens) int64 token ids: text i is the first ``tokens`` ids of consecutive
    reviews (file order, each review used once) tokenized without special tokens and joined
    with the ids of a blank line, as many as it takes to reach ``tokens``.

    Raises SystemExit when the reviews run out first.
    """
    sep = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    out = np.zeros((n_texts, tokens), dtype=np.int64)
    it = iter(reviews)
    for row in range(n_texts):
        ids: list[int] = []
        while len(ids) < tokens:
            review = next(it, None)
            if review is None:
                raise SystemExit(
                    f"the texts ran out after {row} texts of {tokens} tokens: ask for fewer "
                    "texts (--n-texts) or tokens, or pass a larger file (--texts)"
                )
            ids += (sep if ids else []) + tokenizer(review, add_special_tokens=False)["input_ids"]
        out[row] = ids[:tokens]
    return out


def encoded_texts(ids: np.ndarray) -> list[Any]:
    """homog ``EncodedText``s of the rows of ``ids`` (no special tokens, not truncated)."""
    from homog.extract import EncodedText

    return [
        EncodedText(i, "bench", f"t{i:05d}", row, np.zeros(len(row), dtype=bool), False)
        for i, row in enumerate(ids)
    ]


class PeakMemory:
    """Peak resident memory of this process since ``reset()``, and CUDA peak on a GPU.

    The RSS peak is the kernel's high-water mark (VmHWM, what ``ru_maxrss`` reports), reset by
    writing 5 to /proc/self/clear_refs (Linux >= 4.0). Where that file cannot be written the
    peak is the whole process's and ``resettable`` is False.
    """

    def __init__(self, device: str = "cpu"):
        self.cuda = device.startswith("cuda")
        self.resettable = True

    def reset(self) -> None:
        import torch

        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self.resettable = False
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    @staticmethod
    def rss_mib() -> float:
        """Peak RSS in MiB (VmHWM; ru_maxrss where /proc is absent)."""
        try:
            with open("/proc/self/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def cuda_mib(self) -> float | None:
        import torch

        if not self.cuda:
            return None
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / MIB


def measure(fn: Callable[[], Any], device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    """(fn's result, {wall_s, cpu_s, peak_rss_mib, cuda_peak_mib}) of one call of ``fn``.

    cpu_s is this process's CPU time (all threads): robust to other processes on the cores.
    """
    peak = PeakMemory(device)
    peak.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    if peak.cuda:
        import torch

        torch.cuda.synchronize()
    figures = {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "peak_rss_mib": peak.rss_mib(),
        "cuda_peak_mib": peak.cuda_mib(),
        "rss_reset": peak.resettable,
    }
    return result, figures


def run_fresh(script: Path, args: Sequence[str], timeout: float | None = None) -> dict[str, Any]:
    """Run ``python script *args --result FILE`` in a fresh process; return the JSON it wrote.

    The child's output goes to this process's terminal. A child that fails or writes no
    result gives {"error": "..."} (with the exit status), so one failing tool does not end
    the benchmark.
    """
    with tempfile.TemporaryDirectory(prefix="homog-bench-") as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, str(script), *args, "--result", str(result)]
        try:
            proc = subprocess.run(cmd, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0 or not result.exists():
            return {"error": f"exit status {proc.returncode} (its output is above)"}
        return json.loads(result.read_text())


def model_setup(model: str, params_path: str = "params.yaml") -> tuple[str, Any]:
    """(source, ExtractConfig) for a params.yaml model key or a source string; the config is
    params.yaml's ``extract:`` (the dataclass defaults outside the project root)."""
    from homog.config import Params, load_config
    from homog.errors import HomogError
    from homog.models import resolve_source

    try:
        params = load_config(params_path)
    except HomogError:
        params = Params()
    return resolve_source(model, params.model_sources()), params.extract


def set_threads(threads: int | None) -> int:
    """Pin torch's intra-op threads (None: leave torch's default); return the count in use."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def machine_line(device: str = "cpu") -> str:
    """CPU model, cores, load average (1/5/15 min), torch version and the device."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    gpu = f", {torch.cuda.get_device_name()}" if device.startswith("cuda") else ""
    return (
        f"{cpu}, {os.cpu_count()} cores{gpu}; load average {load}; torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: floats to ``digits`` significant digits, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if not np.isfinite(value):
            return str(value)
        text = f"{value:.{digits}g}"
        # 999.7 rounds up to "1e+03" in g-format: large values are written whole
        return f"{value:.0f}" if "e+" in text else text
    return str(value)


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub Markdown table of ``rows`` (dicts) over ``columns`` (missing cells '-')."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)
