"""MAUVE between consecutive layers (the ``mauve`` stage).

For every run of a model, every variant and every layer l < L, MAUVE compares the sampled token
vectors of layer l with the same tokens at layer l + 1 (``vectors.npz``, key
``tokens__<variant>`` [L+1, S, d]). Conventions are mauve-text's: L2-normalise, PCA (fitted on
both sets) to ``pca_variance`` of the variance, k-means with k = max(2, round(n / 10)) capped at
``kmeans_max_clusters``, histograms of the cluster labels, divergence curve over
``n_mixtures`` mixture weights with scaling ``scaling``; MAUVE = area under that curve.

Two paths quantize the points (``mauve.path``; ``auto`` = torch on a CUDA device, else faiss):

- ``faiss``: :func:`mauve.compute_mauve` itself (faiss k-means on the CPU): the reference.
- ``torch``: PCA and k-means (k-means++ init, Lloyd, best of ``kmeans_num_redo``) in torch on
  the run's device, batched over all layer pairs of a variant at once; the label histograms go
  to mauve-text's own ``get_divergence_curve_for_multinomials``. Given the same clustering both
  paths give the same score (tests/test_mauve.py checks it to 1e-9); on real data the k-means
  solutions differ slightly and so do the scores (the test bounds it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from homog.config import MauveConfig, Params, as_params
from homog.interventions import parse
from homog.io import READ_ERRORS, HomogError, atomic_path, unreadable
from homog.layout import Layout, find_runs
from homog.progress import progress

__all__ = ["MauveConfig", "consecutive_layer_mauve", "mauve_stage"]


def mauve_from_histograms(
    p_hist: np.ndarray, q_hist: np.ndarray, *, scaling: float = 5.0, n_mixtures: int = 25
) -> float:
    """MAUVE of two histograms over the same clusters, exactly as mauve-text computes it.

    Uses ``mauve.compute_mauve.get_divergence_curve_for_multinomials`` and the symmetric area
    of ``compute_mauve``. Inputs: non-negative arrays of equal length with positive sums.
    """
    from mauve.compute_mauve import get_divergence_curve_for_multinomials
    from sklearn.metrics import auc

    p = np.asarray(p_hist, dtype=float)
    q = np.asarray(q_hist, dtype=float)
    p, q = p / p.sum(), q / q.sum()
    weights = np.linspace(1e-6, 1 - 1e-6, n_mixtures)
    x, y = get_divergence_curve_for_multinomials(p, q, weights, scaling).T
    i1, i2 = np.argsort(x), np.argsort(y)
    return float(0.5 * (auc(x[i1], y[i1]) + auc(y[i2], x[i2])))


def mauve_from_labels(p_labels: np.ndarray, q_labels: np.ndarray, k: int, **kw: Any) -> float:
    """MAUVE from cluster labels of P and Q points (k clusters); see mauve_from_histograms."""
    p = np.bincount(np.asarray(p_labels), minlength=k)
    q = np.bincount(np.asarray(q_labels), minlength=k)
    return mauve_from_histograms(p, q, **kw)


# faiss warns "WARNING clustering N points to K centroids: please provide at least M training
# points" whenever it has fewer than 39 points per centroid. MAUVE's recipe asks for exactly
# that: about one cluster per ten points (mauve.n_clusters, as mauve-text's default), so the
# warning fires on every layer pair of every run (768 lines in `make demo`) and tells the user
# nothing they could act on: the score is mauve-text's own. faiss writes it from C++ straight
# to file descriptor 2, past Python's warnings filters, so it is caught there and said once.
FAISS_FEW_POINTS = "please provide at least"
_said: set[str] = set()


@contextlib.contextmanager
def faiss_warning_once() -> Iterator[None]:
    """Inside, file descriptor 2 goes to a temporary file; after, its lines are written back
    to stderr, but faiss's few-training-points warning only the first time in this process."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines = tmp.read().decode(errors="replace").splitlines(keepends=True)
            kept = []
            for line in lines:
                if FAISS_FEW_POINTS in line and "centroids" in line:
                    if "faiss" in _said:
                        continue
                    _said.add("faiss")
                    line = (
                        line.rstrip("\n") + " (faiss; MAUVE clusters ~10 points each: said once)\n"
                    )
                kept.append(line)
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def mauve_faiss(p: np.ndarray, q: np.ndarray, cfg: MauveConfig) -> float:
    """Reference path: ``mauve.compute_mauve`` on features (faiss k-means, CPU)."""
    import mauve

    with faiss_warning_once():
        out = mauve.compute_mauve(
            p_features=np.asarray(p, dtype=np.float32),
            q_features=np.asarray(q, dtype=np.float32),
            num_buckets=cfg.n_clusters(min(len(p), len(q))),
            kmeans_explained_var=cfg.pca_variance,
            kmeans_num_redo=cfg.kmeans_num_redo,
            kmeans_max_iter=cfg.kmeans_max_iter,
            divergence_curve_discretization_size=cfg.n_mixtures,
            mauve_scaling_factor=cfg.scaling,
            seed=cfg.seed,
            verbose=False,
        )
    return float(out.mauve)


def _pca_batch(x, variance: float):
    """L2-normalised rows -> PCA scores keeping ``variance``, zero-padded to a common width.

    x: [B, N, d] float tensor. Returns [B, N, D] (D = the largest kept dimension in the batch;
    padding with zeros does not change Euclidean distances).
    """
    import torch

    x = torch.nn.functional.normalize(x, dim=-1)
    x = x - x.mean(dim=1, keepdim=True)
    n, d = x.shape[1], x.shape[2]
    # PCA through the smaller Gram matrix and eigh (several times faster than an SVD of x):
    # N <= d: x x^T = U S^2 U^T and the scores are U S; else x^T x = V S^2 V^T, scores x V.
    gram = x @ x.transpose(1, 2) if n <= d else x.transpose(1, 2) @ x
    evals, vecs = torch.linalg.eigh(gram)
    evals, vecs = evals.flip(-1).clamp_min(0), vecs.flip(-1)  # descending
    ratio = torch.cumsum(evals, dim=-1) / evals.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    # mauve-text: idx = argmax(cumsum >= var), keep idx + 1 components.
    keep = (ratio < variance).sum(dim=-1) + 1
    width = int(keep.max())
    if n <= d:
        scores = vecs[..., :width] * evals[:, None, :width].sqrt()
    else:
        scores = x @ vecs[..., :width]
    mask = torch.arange(width, device=x.device)[None, :] < keep[:, None]
    return scores * mask[:, None, :]


def kmeans_torch(x, k: int, *, n_redo: int = 5, max_iter: int = 500, seed: int = 0):
    """Batched k-means (k-means++ init, Lloyd), best inertia of ``n_redo`` restarts.

    x: [B, N, D] tensor. Returns labels [B, N] (int64) on x's device. Deterministic for a seed.
    """
    import torch

    b, n, _ = x.shape
    gen = torch.Generator(device=x.device).manual_seed(seed)
    best_labels = torch.zeros(b, n, dtype=torch.long, device=x.device)
    best_inertia = torch.full((b,), float("inf"), device=x.device, dtype=x.dtype)
    rows = torch.arange(b, device=x.device)
    for _ in range(n_redo):
        first = torch.randint(n, (b,), generator=gen, device=x.device)
        centers = [x[rows, first]]
        d2 = ((x - centers[0][:, None]) ** 2).sum(-1)
        for _ in range(1, k):
            w = d2.clamp_min(0) + 1e-12
            pick = torch.multinomial(w, 1, generator=gen).squeeze(1)
            centers.append(x[rows, pick])
            d2 = torch.minimum(d2, ((x - centers[-1][:, None]) ** 2).sum(-1))
        c = torch.stack(centers, dim=1)  # [B, k, D]
        labels = torch.cdist(x, c).argmin(-1)
        active = torch.arange(b, device=x.device)  # problems still moving
        for _ in range(max_iter):
            xa, la = x[active], labels[active]
            onehot = torch.nn.functional.one_hot(la, k).to(x.dtype)  # [A, N, k]
            counts = onehot.sum(1)  # [A, k]
            sums = onehot.transpose(1, 2) @ xa  # [A, k, D]
            # An emptied cluster keeps its old centre (no NaN).
            c[active] = torch.where(
                counts[..., None] > 0, sums / counts.clamp_min(1)[..., None], c[active]
            )
            new = torch.cdist(xa, c[active]).argmin(-1)
            moved = (new != la).any(-1)
            labels[active] = new
            # Converged problems drop out of the batch, so the cost follows the slowest few.
            active = active[moved]
            if active.numel() == 0:
                break
        inertia = ((x - c.gather(1, labels[..., None].expand_as(x))) ** 2).sum((1, 2))
        better = inertia < best_inertia
        best_inertia = torch.where(better, inertia, best_inertia)
        best_labels = torch.where(better[:, None], labels, best_labels)
    return best_labels


def mauve_torch_batch(p, q, cfg: MauveConfig, device: str = "cpu") -> list[float]:
    """Torch path for B pairs at once: p, q [B, S, d] arrays -> B MAUVE scores."""
    import torch

    p_t = torch.as_tensor(np.asarray(p), dtype=torch.float32, device=device)
    q_t = torch.as_tensor(np.asarray(q), dtype=torch.float32, device=device)
    # mauve-text stacks [q; p] before PCA and k-means; keep its order.
    x = _pca_batch(torch.cat([q_t, p_t], dim=1), cfg.pca_variance)
    k = cfg.n_clusters(min(p_t.shape[1], q_t.shape[1]))
    labels = (
        kmeans_torch(
            x, k, n_redo=cfg.kmeans_num_redo, max_iter=cfg.kmeans_max_iter, seed=cfg.seed + 2
        )
        .cpu()
        .numpy()
    )
    nq = q_t.shape[1]
    return [
        mauve_from_labels(lab[nq:], lab[:nq], k, scaling=cfg.scaling, n_mixtures=cfg.n_mixtures)
        for lab in labels
    ]


def consecutive_layer_mauve(
    tokens: np.ndarray, cfg: MauveConfig, device: str = "cpu"
) -> np.ndarray:
    """MAUVE(layer l, layer l+1) for l = 0..L-1 of one variant's tokens [L+1, S, d].

    Points are capped at ``cfg.max_points`` (the same seeded subset at every layer).
    """
    tokens = np.asarray(tokens, dtype=np.float32)
    if tokens.ndim != 3 or tokens.shape[0] < 2 or tokens.shape[1] < 4:
        raise HomogError(
            f"token vectors of shape {tokens.shape} are too small for MAUVE "
            "(need [L+1 >= 2, S >= 4, d]); raise extract.sample_tokens"
        )
    if tokens.shape[1] > cfg.max_points:
        idx = np.sort(
            np.random.default_rng(cfg.seed).choice(tokens.shape[1], cfg.max_points, replace=False)
        )
        tokens = tokens[:, idx]
    if cfg.path == "faiss":
        from threadpoolctl import threadpool_limits

        # One BLAS/OpenMP thread: the PCA's SVD (scipy's OpenBLAS) and faiss work on a few
        # hundred points, where a second thread gains nothing, and on a busy machine waiting
        # threads spin: 19.7 CPU s on two threads against 0.21 s on one for the same six layer
        # pairs (identical scores), README "Default pipeline: time per stage".
        with threadpool_limits(limits=1):
            return np.array(
                [mauve_faiss(tokens[i], tokens[i + 1], cfg) for i in range(tokens.shape[0] - 1)]
            )
    return np.array(mauve_torch_batch(tokens[:-1], tokens[1:], cfg, device))


def _device(params: Params) -> str:
    """mauve.device, else extract.device; 'auto' is CUDA when there is one."""
    want = params.mauve.device if params.mauve.device != "auto" else params.extract.device
    if want == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(want)


def mauve_stage(
    params: Params | Mapping[str, Any],
    model: str,
    root: str | Path = ".",
    out: str | Path | None = None,
) -> pd.DataFrame:
    """The ``mauve`` stage for one model key: writes ``data/mauve/<model>.parquet``.

    Reads every ``data/extract/<model>/<intervention>/`` (run.json + vectors.npz) of the
    interventions without a dose (``homog.interventions``). Rows: run_id,
    variant, layer, mauve, path. Raises HomogError for an unknown model key or missing inputs.
    """
    params = as_params(params)
    if model not in params.models:
        raise HomogError(f"unknown model {model!r}; valid: {', '.join(params.models)}")
    layout = Layout(Path(root))
    cfg = params.mauve
    device = _device(params)
    if cfg.path == "auto":
        # torch's batched k-means pays off on a GPU; on a CPU faiss is faster (README).
        cfg = replace(cfg, path="torch" if device.startswith("cuda") else "faiss")
    # the graded interventions' runs are read for their dose-response, not for MAUVE (each
    # would add a k-means per layer for one variant; docs/interventions.md)
    plain = [iv for iv in params.extract.interventions if parse(iv).kind.dose is None]
    runs = find_runs([model], root, interventions=plain)
    if not runs:
        raise HomogError(
            f"no runs under {layout.extract_dir(model)}/: run `homog extract --model {model}` first"
        )
    jobs = []
    for run, run_dir in runs:
        run_id = run["run_id"]
        vec_path = run_dir / "vectors.npz"
        if not vec_path.exists():
            raise HomogError(f"{vec_path} is missing; rerun `homog extract --model {model}`")
        try:
            with np.load(vec_path) as npz:
                for key in sorted(k for k in npz.files if k.startswith("tokens__")):
                    jobs.append((run_id, key.removeprefix("tokens__"), npz[key]))
        except READ_ERRORS as exc:
            raise unreadable(vec_path, exc, f"rerun `homog extract --model {model}`") from exc
    rows = []
    with progress() as bar:
        task = bar.add_task(f"mauve {model} ({cfg.path})", total=len(jobs))
        for run_id, variant, tokens in jobs:
            scores = consecutive_layer_mauve(tokens, cfg, device)
            rows += [
                {
                    "run_id": run_id,
                    "variant": variant,
                    "layer": layer,
                    "mauve": float(s),
                    "path": cfg.path,
                }
                for layer, s in enumerate(scores)
            ]
            bar.advance(task)
    frame = pd.DataFrame(rows, columns=["run_id", "variant", "layer", "mauve", "path"])
    target = Path(out) if out is not None else layout.mauve(model)
    with atomic_path(target) as tmp:
        frame.to_parquet(tmp, index=False)
    return frame
