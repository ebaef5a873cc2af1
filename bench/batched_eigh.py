"""cusolverDnXsyevBatched against torch's eigvalsh on one GPU: ms per matrix, float64.

For each (n, batch) it draws a batch of Gram matrices X X^T (X: n x (n + 64), standard
normal, float64, on the GPU), solves it once with each solver after a warm-up on 2 matrices,
and prints the wall time per matrix and the largest difference from torch's eigenvalues
relative to the largest eigenvalue. It also says which binding (nvmath-python or ctypes)
``homog.metrics.eigensolver_gpu`` found, and why not where none. docs/gpu.md has the figures.

  python bench/batched_eigh.py                      # n 512 x 24, 512 x 96, 2048 x 6
  python bench/batched_eigh.py --sizes 512x96 1024x24
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from homog.metrics import eigensolver_gpu as eg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["512x24", "512x96", "2048x6"], help="NxBATCH")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
    for binding in eg.BINDINGS:
        os.environ["HOMOG_CUSOLVER_BINDING"] = binding
        eg._binding.cache_clear()
        print("binding", binding, eg.batched_available(), eg.fallback_message())
    os.environ.pop("HOMOG_CUSOLVER_BINDING")
    eg._binding.cache_clear()
    if not eg.batched_available():
        raise SystemExit(eg.fallback_message())
    for size in args.sizes:
        n, m = (int(v) for v in size.split("x"))
        x = torch.randn(m, n, n + 64, dtype=torch.float64, device="cuda")
        g = x @ x.mT
        ref = None
        for name, fn in (("torch", torch.linalg.eigvalsh), ("batched", eg.eigvalsh_batched)):
            fn(g[:2])
            torch.cuda.synchronize()
            t = time.perf_counter()
            w = fn(g)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
            ref = w if ref is None else ref
            err = ((w - ref).abs().amax(-1) / ref.abs().amax(-1)).max().item()
            print(f"n={n} batch={m} {name}: {dt * 1e3 / m:.3f} ms per matrix, rel err {err:.2e}")


if __name__ == "__main__":
    main()
