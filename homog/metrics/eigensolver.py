"""Eigenvalues of batched symmetric (Gram) matrices: which solver runs where, how a CPU
batch is split over threads, and one reduction for a matrix and one of its minors.

On a GPU the solver is cuSOLVER's batched ``cusolverDnXsyevBatched``
(``homog.metrics.eigensolver_gpu``; ``HOMOG_GPU_EIGENSOLVER=batched``, the default), torch's
``eigvalsh`` (``device``: one ``syevd`` per matrix) or the host's solver on copies (``host``,
``host-serial``; the extractor then solves them beside the next batch's forward,
``homog.extract.host_spectra``). On the CPU it is NumPy's (OpenBLAS's LAPACK ``syevd``), which
ran 1.4x faster than torch's MKL on one thread and 2x faster on two on an AMD EPYC, and even
with MKL on an Intel Xeon (10.6 against 10.4 ms per 512 x 512 matrix): the batch goes to a
thread pool of torch's thread count, each worker's BLAS pinned to one thread
(``HOMOG_CPU_EIGENSOLVER=torch`` picks torch's). ``homog.metrics`` turns the eigenvalues
into spectra (``_eigenvalues``, ``eigenvalues_with_minor``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np
import torch
from torch import Tensor

from homog.metrics.errors import MetricInputError


def _eigvalsh_one_thread(gram: Tensor) -> Tensor:
    # OpenMP thread counts are per calling thread: this pins only the worker, so the
    # workers do not oversubscribe the cores (2 workers x 2 OpenMP threads ran 2.5x slower).
    torch.set_num_threads(1)
    return torch.linalg.eigvalsh(gram)


def _eigvalsh_numpy(gram: Tensor) -> Tensor:
    """NumPy's eigvalsh (LAPACK ``syevd`` of its OpenBLAS; it releases the GIL). A matrix
    LAPACK cannot solve (NaN in it) goes to torch's, which returns NaN as before."""
    try:
        return torch.from_numpy(np.linalg.eigvalsh(gram.numpy()))
    except np.linalg.LinAlgError:
        return torch.linalg.eigvalsh(gram)


@cache
def _blas() -> Any:
    """threadpoolctl's view of the BLAS libraries of NumPy and SciPy's LAPACK (built once:
    ~1 ms).

    The controller only knows the libraries loaded when it is built, and SciPy ships an
    OpenBLAS of its own (``dsytrd``/``dsterf`` of ``_spectra_with_minor_numpy``). Built
    before SciPy's was loaded, it left that one on its default threads inside each pool
    worker: 2 workers x 2 OpenBLAS threads on 2 cores, 2.4x the CPU time of the shared
    all/no_sink reduction (4 x 512 tokens: 0.27 against 0.11 CPU s per layer)."""
    from scipy.linalg import lapack  # noqa: F401  (loads SciPy's OpenBLAS; see above)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _setting(variable: str, choices: tuple[str, ...]) -> str:
    """The value of environment ``variable`` (trimmed, lower case; unset or empty: the first
    of ``choices``). MetricInputError naming the variable when it is none of them."""
    name = os.environ.get(variable, "").strip().lower() or choices[0]
    if name not in choices:
        others = " or ".join(repr(c) for c in choices[1:])
        raise MetricInputError(f"{variable}={name!r}: use {choices[0]!r} (the default) or {others}")
    return name


def cpu_eigensolver() -> str:
    """``numpy`` (default) or ``torch``: the CPU eigensolver, from HOMOG_CPU_EIGENSOLVER."""
    return _setting("HOMOG_CPU_EIGENSOLVER", ("numpy", "torch"))


GPU_EIGENSOLVERS = ("batched", "device", "host", "host-serial")
HOST_SOLVERS = ("host", "host-serial")


def gpu_eigensolver() -> str:
    """Where the eigenvalues of a GPU's Gram matrices are solved, from HOMOG_GPU_EIGENSOLVER:

    - ``batched`` (default): one ``cusolverDnXsyevBatched`` call per batch of matrices
      (``homog.metrics.eigensolver_gpu``); where cuSOLVER lacks it, ``device`` after one warning;
    - ``device``: torch's ``eigvalsh`` (cuSOLVER ``syevd``, one matrix at a time: about
      4.5 ms per 512 x 512 matrix on an H100);
    - ``host``: copied to the CPU and solved there as on a CPU run (NumPy's LAPACK on all of
      torch's threads, no_sink sharing all's reduction); the extractor solves a batch's
      matrices on a host thread while the GPU runs the next batch (``host-serial``: while
      the GPU waits; the same values bit for bit)."""
    return _setting("HOMOG_GPU_EIGENSOLVER", GPU_EIGENSOLVERS)


def _on_host(gram: Tensor) -> bool:
    """True when ``gram`` lives on a GPU and its spectrum is to be solved on the host."""
    if gram.device.type == "cpu" or gram.requires_grad:
        return False
    return gpu_eigensolver() in HOST_SOLVERS


def _device_eigvalsh(gram: Tensor) -> Tensor:
    """A GPU's ``gram`` solved on the device: batched cuSOLVER (float64, where available;
    else one warning and torch's) or torch's eigvalsh (``device``)."""
    if (
        gram.dtype == torch.float64
        and gpu_eigensolver() == "batched"
        and gram.device.type == "cuda"
    ):
        from homog.metrics import eigensolver_gpu

        if eigensolver_gpu.batched_available():
            return eigensolver_gpu.eigvalsh_batched(gram)
        eigensolver_gpu.warn_fallback_once()
    return torch.linalg.eigvalsh(gram)


def _numpy_solver(gram: Tensor) -> bool:
    """True when the CPU solver for ``gram`` is NumPy's/LAPACK's (not torch's, no graph)."""
    return gram.device.type == "cpu" and cpu_eigensolver() == "numpy" and not gram.requires_grad


POOL_MIN_N = 128  # a matrix this large is worth a thread of its own (512: ~16 ms of LAPACK)


def _pooled(part: Any, flat: Tensor, *extra: Tensor) -> Tensor:
    """``part`` over the leading dimension of ``flat`` (and ``extra``) split over a thread
    pool of torch's thread count, at most one chunk per matrix; small matrices (n <
    ``POOL_MIN_N``) fewer than 2 per worker: one call here. (Each matrix is solved alone,
    so the split does not change a value. A GPU run's host thread gets one layer of a batch
    at a time: 8 matrices of 512 x 512 at 512 tokens, which ran on one core of 16 when
    pooling needed 2 per worker.)"""
    workers = min(torch.get_num_threads(), flat.shape[0])
    few = flat.shape[-1] < POOL_MIN_N and flat.shape[0] < 2 * workers
    if workers < 2 or few:
        return part(flat, *extra)
    chunks = [t.chunk(workers) for t in (flat, *extra)]
    with ThreadPoolExecutor(workers) as pool:
        return torch.cat(list(pool.map(part, *chunks)))


def eigvalsh(gram: Tensor) -> Tensor:
    """Ascending eigenvalues of the symmetric matrices ``gram`` (..., n, n); on the CPU the
    batch is split over torch's threads.

    LAPACK's symmetric eigensolver is sequential per matrix, so on a CPU the chunks run in a
    thread pool (LAPACK releases the GIL), each on one BLAS thread: about 2x on 2 cores. On a
    GPU one batched call is already parallel (or the host solves it: ``gpu_eigensolver``).
    """
    if gram.device.type != "cpu":
        if gram.requires_grad:
            return torch.linalg.eigvalsh(gram)
        return eigvalsh(gram.cpu()).to(gram.device) if _on_host(gram) else _device_eigvalsh(gram)
    flat = gram.reshape(-1, *gram.shape[-2:])
    if not _numpy_solver(gram):
        # torch's solver: one call on all threads, or one OpenMP thread per pool worker
        # (OpenMP thread counts are per calling thread, so the caller's is not changed)
        workers = min(torch.get_num_threads(), flat.shape[0])
        if workers < 2 or (flat.shape[-1] < POOL_MIN_N and flat.shape[0] < 2 * workers):
            return torch.linalg.eigvalsh(gram)
        return _pooled(_eigvalsh_one_thread, flat).reshape(gram.shape[:-1])
    with _blas().limit(limits=1, user_api="blas"):
        return _pooled(_eigvalsh_numpy, flat).reshape(gram.shape[:-1])


@cache
def _sytrd_lwork(n: int) -> int:
    """LAPACK's optimal workspace for ``dsytrd`` of an n x n matrix (the blocked reduction;
    scipy's default workspace of n would run the unblocked one)."""
    from scipy.linalg import lapack

    work, info = lapack.dsytrd_lwork(n, lower=1)
    return max(int(work), n, 1) if info == 0 else max(n, 1)


def _spectra_with_minor_numpy(gram: Tensor, minor: Tensor) -> Tensor:
    """(m, 2, n): the eigenvalues of each float64 matrix ``gram[i]`` (m, n, n), and those of
    its minor without row and column ``minor[i]`` (n - 1 values and a 0; all 0 where
    ``minor[i] < 0``), both ascending, from ONE tridiagonal reduction.

    LAPACK's ``sytrd`` (lower) reduces column 0 first: Q = diag(1, Q'), so the trailing block
    T[1:, 1:] of T = Q^T A Q is Q'^T A[1:, 1:] Q', similar to the minor without row 0.
    Swapping row/column ``minor[i]`` with 0 first makes it the minor asked for; ``sterf``
    (what ``syevd`` calls for eigenvalues only) then solves T and T[1:, 1:] in O(n^2). The
    trailing block is rounded relative to the minor's own scale, not to the removed row's.
    Only one row can go this way: a second reflector mixes row 1 into the rest. A matrix
    with NaN/inf goes to ``_eigvalsh_numpy`` (NaN out, as before).
    """
    from scipy.linalg import lapack

    m, n = gram.shape[0], gram.shape[-1]
    out = np.zeros((m, 2, n))
    mats, rows = gram.numpy(), minor.tolist()
    for i in range(m):
        r = rows[i]
        if n < 2 or not np.isfinite(mats[i]).all():
            out[i, 0] = _eigvalsh_numpy(gram[i]).numpy()
            if r >= 0:
                keep = [j for j in range(n) if j != r]
                out[i, 1, 1:] = _eigvalsh_numpy(gram[i][keep][:, keep]).numpy()
            continue
        a = np.array(mats[i], order="F")  # symmetric: the same matrix in Fortran order
        if r > 0:
            a[[0, r]] = a[[r, 0]]
            a[:, [0, r]] = a[:, [r, 0]]
        _, diag, off, _, info = lapack.dsytrd(a, lower=1, lwork=_sytrd_lwork(n), overwrite_a=1)
        if info == 0:
            out[i, 0], info = lapack.dsterf(diag, off)  # copies: diag/off are read again
        if info == 0 and r >= 0 and n == 2:
            out[i, 1, 1] = diag[1]  # a 1 x 1 minor (f2py refuses an empty off-diagonal)
        elif info == 0 and r >= 0:
            out[i, 1, 1:], info = lapack.dsterf(diag[1:], off[1:])
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK dsytrd/dsterf failed (info {info})")
    return torch.from_numpy(out)


def minor_spectra_supported(gram: Tensor) -> bool:
    """Whether ``eigvalsh_with_minor`` takes both spectra from one reduction here (NumPy's
    solver on the CPU, or on the host for a GPU's matrices with HOMOG_GPU_EIGENSOLVER=host);
    elsewhere the caller solves the minor as a matrix of its own."""
    host = _on_host(gram) and cpu_eigensolver() == "numpy"
    return host or _numpy_solver(gram)


def eigvalsh_with_minor(gram: Tensor, minor: Tensor) -> Tensor:
    """(..., 2, n): the ascending eigenvalues of ``gram`` (..., n, n) and of its minor
    without row and column ``minor`` (...,) (n - 1 values and a 0; all 0 where
    ``minor < 0``), from one tridiagonal reduction per matrix
    (``_spectra_with_minor_numpy``). Needs ``minor_spectra_supported(gram)``; ValueError
    otherwise."""
    if not minor_spectra_supported(gram):
        raise ValueError("eigenvalues_with_minor needs the CPU and NumPy's eigensolver")
    if gram.device.type != "cpu":  # HOMOG_GPU_EIGENSOLVER=host
        return eigvalsh_with_minor(gram.cpu(), minor.cpu()).to(gram.device)
    n = gram.shape[-1]
    flat = gram.reshape(-1, n, n)
    with _blas().limit(limits=1, user_api="blas"):
        both = _pooled(_spectra_with_minor_numpy, flat, minor.reshape(-1).to(torch.int64))
    return both.reshape(*gram.shape[:-2], 2, n)
