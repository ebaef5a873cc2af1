"""Where to compute the float64 eigenvalues of the Gram matrices: GPU solvers against the CPU.

homog's spectral metrics need, per text, layer and token set, the eigenvalues of an (n x n)
float64 Gram matrix (``homog.metrics``). On a GPU those are the part of the extraction that
does not scale with the forward pass: cuSOLVER's symmetric eigensolver is latency-bound on one
matrix at a time. This script times, on the same random positive semi-definite matrices with
a spread of eigenvalues like a layer with massive activations (a few directions 10^4-10^5
times the rest):

  cusolver   ``torch.linalg.eigvalsh`` on the GPU, float64 (torch's default library);
  magma      the same with ``torch.backends.cuda.preferred_linalg_library("magma")``;
  cpu        the matrices copied to the CPU and ``homog.metrics.eigensolver.eigvalsh`` there
             (LAPACK, the batch split over torch's threads), the copy included;
  cuda-f32   float32 on the GPU, for its time and its error only (homog does not use it);
  hybrid     cusolver and cpu at once on two parts of the batch, split in the ratio of their
             measured speeds (the GPU part runs in a thread: torch releases the GIL).

Each is the best of ``--repeats``; the largest relative error of the eigenvalues against the
CPU's float64 ones (relative to each matrix's largest eigenvalue) is printed too.

Usage: python bench/spectrum_backends.py --sizes 128 512 2048 --batch 99 [--repeats 3]
(batch 99 = 33 layers x 3 token sets of one text of an 8B model). Needs CUDA for all but cpu.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from homog.metrics.eigensolver import eigvalsh  # noqa: E402


def psd_batch(batch: int, n: int, device: str, seed: int = 0) -> torch.Tensor:
    """(batch, n, n) float64 Gram matrices X X^T of X (n x 2n) with a few massive columns."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, n, 2 * n, generator=gen, dtype=torch.float64)
    x[..., :3] *= torch.tensor([3e4, 1e3, 1e2], dtype=torch.float64)  # massive features
    return (x @ x.mT).to(device)


def timed(fn: Callable[[], torch.Tensor], repeats: int, cuda: bool) -> tuple[float, torch.Tensor]:
    best, out = float("inf"), None
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def hybrid(gram: torch.Tensor, seconds: dict[str, float]) -> torch.Tensor:
    """cusolver on the first part of the batch while the CPU does the rest; the CPU's share is
    t_gpu / (t_gpu + t_cpu) of the batch, from the two backends' times measured before."""
    from concurrent.futures import ThreadPoolExecutor

    t_gpu, t_cpu = seconds["cusolver"], seconds["cpu"]
    on_cpu = round(gram.shape[0] * t_gpu / (t_gpu + t_cpu))
    gpu_part, cpu_part = gram[: gram.shape[0] - on_cpu], gram[gram.shape[0] - on_cpu :]
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(torch.linalg.eigvalsh, gpu_part)
        host = eigvalsh(cpu_part.cpu()) if on_cpu else cpu_part.new_empty(0, gram.shape[-1])
        return torch.cat([future.result().cpu(), host.to("cpu")])


def library(name: str, gram: torch.Tensor) -> Callable[[], torch.Tensor]:
    """eigvalsh of gram on the GPU with torch's linear-algebra library set to name."""

    def run() -> torch.Tensor:
        old = torch.backends.cuda.preferred_linalg_library()
        torch.backends.cuda.preferred_linalg_library(name)
        try:
            return torch.linalg.eigvalsh(gram)
        finally:
            torch.backends.cuda.preferred_linalg_library(old)

    return run


def backends_for(
    host: torch.Tensor, cuda: bool, seconds: dict[str, float]
) -> dict[str, Callable[[], torch.Tensor]]:
    """The backends to time on these matrices (``seconds`` fills as they are timed)."""
    if not cuda:
        return {"cpu": lambda: eigvalsh(host)}
    dev = host.cuda()
    return {
        "cusolver": library("cusolver", dev),
        "magma": library("magma", dev),
        "cpu": lambda: eigvalsh(dev.cpu()),
        "cuda-f32": library("cusolver", dev.float()),
        "hybrid": lambda: hybrid(dev, seconds),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 2048])
    ap.add_argument("--batch", type=int, default=99)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
        + (f", {torch.cuda.get_device_name()}" if cuda else ", no CUDA (cpu only)")
    )
    print("| n | batch | backend | s | ms per matrix | max rel. error |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        host = psd_batch(args.batch, n, "cpu")
        ref = torch.linalg.eigvalsh(host)
        scale = ref[..., -1:].abs()
        seconds: dict[str, float] = {}
        backends = backends_for(host, cuda, seconds)
        for name, fn in backends.items():
            try:
                fn()  # warm-up (library load, workspace)
                s, eig = timed(fn, args.repeats, cuda)
            except RuntimeError as exc:  # e.g. a torch build without MAGMA
                print(f"| {n} | {args.batch} | {name} | failed: {str(exc).splitlines()[0]} | | |")
                continue
            seconds[name] = s
            err = ((eig.double().cpu() - ref).abs() / scale).max().item()
            per = 1000 * s / args.batch
            print(f"| {n} | {args.batch} | {name} | {s:.3f} | {per:.2f} | {err:.1e} |")


if __name__ == "__main__":
    main()
