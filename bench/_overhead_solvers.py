"""extract_overhead.py's eigensolver variants and its Markdown page.

``--eigensolvers device batched host-serial host`` adds one full extraction per
``HOMOG_GPU_EIGENSOLVER`` value, (b:device) ... (b:host), each with its metrics compared to
the first one's (largest relative difference). ``write_markdown`` writes the figures of every
length as one page (the card, the software, the command, one table per length), e.g.
``docs/gpu-bench.md``, so the docs carry what the script measured rather than a copy.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import shlex
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import numpy as np

WHAT = {
    "device": "torch eigvalsh (syevd per matrix)",
    "batched": "cusolverDnXsyevBatched, layers stacked",
    "batched-layer": "cusolverDnXsyevBatched, metrics per layer",
    "host-serial": "host LAPACK, the GPU waits",
    "host": "host LAPACK, pipelined",
}
# the environment of each variant: HOMOG_GPU_EIGENSOLVER, and batched-layer without the layer
# stack (HOMOG_GPU_STACK_MIB=0: each layer's metrics computed in its hook, as before)
ENV = {s: {"HOMOG_GPU_EIGENSOLVER": s} for s in WHAT}
ENV["batched-layer"] = {"HOMOG_GPU_EIGENSOLVER": "batched", "HOMOG_GPU_STACK_MIB": "0"}


def key(solver: str) -> str:
    """The variant key of an eigensolver: ``b:host-serial``."""
    return f"b:{solver}"


def restore(target: MutableMapping[str, Any], saved: dict[str, Any]) -> None:
    """Put ``saved``'s values back into ``target``; a None means the key was not there."""
    for name, value in saved.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


@contextlib.contextmanager
def environment(values: dict[str, str] | None):
    """Within the block ``os.environ`` holds ``values`` (the earlier values come back)."""
    saved = {k: os.environ.get(k) for k in values or {}}
    os.environ.update(values or {})
    try:
        yield
    finally:
        restore(os.environ, saved)


def largest_difference(new: np.ndarray, old: np.ndarray, names: list[str]) -> tuple[float, str]:
    """(largest relative difference, its metric) of two (B, L, M) metric arrays; a NaN in one
    only counts as inf."""
    nan_new, nan_old = np.isnan(new), np.isnan(old)
    if (nan_new != nan_old).any():
        where = np.argwhere(nan_new != nan_old)[0]
        return math.inf, names[where[-1]]
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(new - old) / np.maximum(np.abs(old), 1e-300)
    rel = np.where(nan_old | (new == old), 0.0, rel)
    worst = np.unravel_index(np.argmax(rel), rel.shape)
    return float(rel[worst]), names[worst[-1]]


def compare_solvers(fig: dict[str, Any], kept: dict[str, list[Any]], solvers: list[str]) -> None:
    """Each solver's metrics against the first solver's, into ``fig``."""
    if not solvers:
        return
    ref = np.concatenate([r.metrics for r in kept[key(solvers[0])]])
    names = list(kept[key(solvers[0])][0].names)
    for solver in solvers:
        new = np.concatenate([r.metrics for r in kept[key(solver)]])
        rel, metric = largest_difference(new, ref, names)
        fig[f"{key(solver)}_max_rel_diff"], fig[f"{key(solver)}_max_rel_diff_metric"] = rel, metric


def software() -> str:
    """torch, CUDA, cuSOLVER binding and card, in one line."""
    import torch

    from homog.metrics import eigensolver_gpu

    line = f"torch {torch.__version__} (CUDA {torch.version.cuda}), Python "
    line += platform.python_version()
    if torch.cuda.is_available():
        binding = "none" if not eigensolver_gpu.batched_available() else eigensolver_gpu._binding()
        line += f"; batched binding: {getattr(binding, 'name', binding)}"
    return line


def markdown(figures: list[dict[str, Any]], solvers: list[str], labels: dict[str, str]) -> str:
    """The page: where and how it ran, then per length each variant's wall time and its ratio
    to the decoder's forward (a')."""
    import torch

    first = figures[0]
    card = torch.cuda.get_device_name() if first["device"].startswith("cuda") else "CPU"
    command = "python bench/extract_overhead.py " + shlex.join(sys.argv[1:])
    out = [
        "<!-- written by bench/extract_overhead.py --markdown; do not edit by hand -->",
        f"Measured on **{card}** ({first['threads']} host threads), {software()}.",
        "",
        f"Model `{first['model']}` in {first['dtype']}, {first['texts']}, batch_tokens "
        f"{first['batch_tokens']}, attention statistics {first['attention_impl']}, best of "
        f"{first['repeats']}. Command:",
        "",
        f"    {command}",
    ]
    for fig in figures:
        out += ["", f"**{fig['n_texts']} texts x {fig['tokens']} tokens**", ""]
        out += ["| variant | wall s | / forward (a') | tokens/s | largest rel. diff | peak GiB |"]
        out += ["|---|---|---|---|---|---|"]
        for k, label in labels.items():
            if f"{k}_s" not in fig:
                continue
            diff = fig.get(f"{k}_max_rel_diff")
            cells = [
                label,
                f"{fig[f'{k}_s']:.3g}",
                f"{fig[f'{k}_s'] / fig['a_decoder_s']:.3g}",
                f"{fig[f'tokens_per_s_{k}']:,.0f}",
                "-" if diff is None else f"{diff:.2g}",
                f"{fig[f'peak_gib_{k}']:.1f}" if f"peak_gib_{k}" in fig else "-",
            ]
            out.append("| " + " | ".join(cells) + " |")
    if solvers:
        out += ["", f"Largest relative difference: of each solver's metrics from {solvers[0]}'s."]
    return "\n".join(out) + "\n"


def write_markdown(
    path: str, figures: list[dict[str, Any]], solvers: list[str], labels, append: bool = False
) -> None:
    """Write the page (``append``: after what the file holds, e.g. a run at other lengths)."""
    page = Path(path)
    page.parent.mkdir(parents=True, exist_ok=True)
    before = page.read_text() + "\n" if append and page.exists() else ""
    page.write_text(before + markdown(figures, solvers, labels))
