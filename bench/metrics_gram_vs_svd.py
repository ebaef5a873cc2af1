"""Batched Gram + eigvalsh metrics vs a per-text numpy SVD loop, on the same hidden states.

    python bench/metrics_gram_vs_svd.py [--texts 32] [--layers 31] [--tokens 256] [--dim 576]

Prints both timings, the speed ratio and the largest relative difference over all metrics.
Texts get different lengths (half to full) so the batched path also handles padding.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from homog.metrics import METRIC_NAMES, layer_metrics


def naive(hidden: np.ndarray, lengths: list[int], uv: bool = True) -> dict[str, np.ndarray]:
    """What a researcher would write: loop over texts and layers, SVD each matrix.

    ``uv=True`` is the plain ``np.linalg.svd(x)`` call; ``uv=False`` the stronger baseline
    that asks for singular values only.
    """
    b, layers = hidden.shape[:2]
    out = {k: np.empty((b, layers)) for k in METRIC_NAMES}
    for i in range(b):
        for layer in range(layers):
            x = hidden[i, layer, : lengths[i]].astype(np.float64)
            s = np.linalg.svd(x)[1] if uv else np.linalg.svd(x, compute_uv=False)
            s = s[s > s[0] * 1e-7]
            p = s / s.sum()
            norms = np.linalg.norm(x, axis=1)
            r = np.linalg.norm((x / norms[:, None]).mean(0))
            n = len(x)
            out["erank"][i, layer] = np.exp(-(p * np.log(p)).sum())
            out["mev"][i, layer] = s[0] ** 2 / (s**2).sum()
            out["schatten_1"][i, layer] = s.sum() / np.sqrt((s**2).sum())
            out["schatten_4"][i, layer] = (s**4).sum() ** 0.25 / np.sqrt((s**2).sum())
            out["resultant_length"][i, layer] = r
            out["mean_cosine"][i, layer] = (n * r * r - 1) / (n - 1)
            out["norm_mean"][i, layer] = norms.mean()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=32)
    ap.add_argument("--layers", type=int, default=31)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--dim", type=int, default=576)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(0)
    shape = (args.texts, args.layers, args.tokens, args.dim)
    # LM-like: a shared direction (growing with depth) plus token noise, float32 as a model gives
    depth = torch.linspace(0.1, 3.0, args.layers)[None, :, None, None]
    hidden = torch.randn(shape, generator=gen) + depth * torch.randn(
        1, 1, 1, args.dim, generator=gen
    )
    lengths = torch.randint(
        args.tokens // 2, args.tokens + 1, (args.texts,), generator=gen
    ).tolist()
    mask = torch.zeros(args.texts, args.tokens, dtype=torch.bool)
    for i, k in enumerate(lengths):
        mask[i, :k] = True

    dev = torch.device(args.device)
    h_dev, m_dev = hidden.to(dev), mask[:, None, :].to(dev)
    layer_metrics(h_dev[:1, :1], m_dev[:1])  # warm-up
    t0 = time.perf_counter()
    fast = layer_metrics(h_dev, m_dev)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t_fast = time.perf_counter() - t0

    t0 = time.perf_counter()
    slow = naive(hidden.numpy(), lengths, uv=True)
    t_slow = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive(hidden.numpy(), lengths, uv=False)
    t_slow_s = time.perf_counter() - t0

    worst = max(
        float(np.max(np.abs(fast[k].cpu().numpy() - slow[k]) / np.maximum(np.abs(slow[k]), 1e-12)))
        for k in METRIC_NAMES
    )
    print(
        f"shape (texts, layers, tokens, dim) = {shape}, torch threads = {torch.get_num_threads()}"
    )
    print(f"batched Gram + eigvalsh ({args.device}): {t_fast:8.3f} s")
    print(f"per-text np.linalg.svd(x) loop:  {t_slow:8.3f} s")
    print(f"  same, compute_uv=False:        {t_slow_s:8.3f} s")
    print(f"speed ratio (svd loop / batched):         {t_slow / t_fast:6.1f} x")
    print(f"speed ratio (values-only loop / batched): {t_slow_s / t_fast:6.1f} x")
    print(f"max relative difference:         {worst:.2e}")


if __name__ == "__main__":
    main()
