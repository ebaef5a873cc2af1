"""Batched float64 eigenvalues on a GPU: cuSOLVER's ``cusolverDnXsyevBatched``.

torch's ``eigvalsh`` on CUDA solves a batch of n x n matrices (n > 32) one at a time with
``syevd``: 4.5 ms per 512 x 512 matrix on an H100, whatever the batch. cuSOLVER 11.7.1 (CUDA
12.6 update 2) added ``cusolverDnXsyevBatched``, one call for a whole batch of same-size
symmetric matrices, any n. ``eigvalsh_batched`` calls it for eigenvalues only (no vectors),
in float64, on torch's current stream, through one of two bindings:

- nvmath-python's ``nvmath.bindings.cusolverDn.xsyev_batched`` (``pip install homog[gpu]``);
- without it, ``ctypes`` on the ``libcusolver`` that torch itself loaded (the same library).

Where neither gives the function (cuSOLVER older than 11.7.1, a ROCm or CPU build of torch),
``batched_available`` is False and the caller (``homog.metrics.eigensolver``) falls back to torch's
``eigvalsh`` after ONE warning (``fallback_message``). A matrix cuSOLVER reports as not
converged (``info`` > 0) is solved again by torch's ``eigvalsh``.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from functools import cache
from typing import Any

import torch
from torch import Tensor

from homog.validate import env_choice

# cuSOLVER / CUDA enum values (cusolverEigMode_t, cublasFillMode_t, cudaDataType)
EIG_MODE_NOVECTOR = 0
FILL_MODE_LOWER = 0
CUDA_R_64F = 1
FUNCTION = "cusolverDnXsyevBatched"


class Unavailable(RuntimeError):
    """cusolverDnXsyevBatched cannot be called here (the reason is the message)."""


class _Nvmath:
    """nvmath-python's bindings (``nvmath.bindings.cusolverDn``)."""

    name = "nvmath-python"

    def __init__(self) -> None:
        from nvmath.bindings import cusolverDn  # the optional extra homog[gpu]

        self.dn = cusolverDn

    def create(self) -> tuple[int, int]:
        return self.dn.create(), self.dn.create_params()

    def set_stream(self, handle: int, stream: int) -> None:
        self.dn.set_stream(handle, stream)

    def buffer_size(self, handle: int, params: int, n: int, a: int, w: int, m: int):
        return self.dn.xsyev_batched_buffer_size(
            handle,
            params,
            EIG_MODE_NOVECTOR,
            FILL_MODE_LOWER,
            n,
            CUDA_R_64F,
            a,
            n,
            CUDA_R_64F,
            w,
            CUDA_R_64F,
            m,
        )

    def solve(self, handle, params, n, a, w, dbuf, dbytes, hbuf, hbytes, info, m) -> None:
        self.dn.xsyev_batched(
            handle,
            params,
            EIG_MODE_NOVECTOR,
            FILL_MODE_LOWER,
            n,
            CUDA_R_64F,
            a,
            n,
            CUDA_R_64F,
            w,
            CUDA_R_64F,
            dbuf,
            dbytes,
            hbuf,
            hbytes,
            info,
            m,
        )


def _loaded_cusolver() -> str:
    """The path of the libcusolver this process loaded (torch's), else its soname."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1]
                if "libcusolver.so" in os.path.basename(path):
                    return path
    except OSError:
        pass
    return "libcusolver.so.12"


class _Ctypes:
    """``ctypes`` on torch's own libcusolver (no extra package)."""

    name = "ctypes"

    def __init__(self) -> None:
        # torch loads cuSOLVER lazily: one tiny CUDA eigvalsh maps it into the process
        torch.linalg.eigvalsh(torch.eye(2, dtype=torch.float64, device="cuda"))
        try:
            lib = ctypes.CDLL(_loaded_cusolver())
        except OSError as exc:
            raise Unavailable(f"no libcusolver to load ({exc})") from exc
        p, i32, i64, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
        try:
            self.size_fn = lib.cusolverDnXsyevBatched_bufferSize
            self.solve_fn = lib.cusolverDnXsyevBatched
        except AttributeError as exc:
            version = ctypes.c_int()
            lib.cusolverGetVersion(ctypes.byref(version))
            raise Unavailable(f"its libcusolver (version {version.value}) lacks it") from exc
        args = [p, p, i32, i32, i64, i32, p, i64, i32, p, i32]
        self.size_fn.argtypes = [*args, ctypes.POINTER(size), ctypes.POINTER(size), i64]
        self.solve_fn.argtypes = [*args, p, size, p, size, p, i64]
        self.lib = lib

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed (cusolverStatus_t {status})")

    def create(self) -> tuple[int, int]:
        handle, params = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cusolverDnCreate(ctypes.byref(handle)), "cusolverDnCreate")
        self._check(self.lib.cusolverDnCreateParams(ctypes.byref(params)), "CreateParams")
        return int(handle.value), int(params.value)

    def set_stream(self, handle: int, stream: int) -> None:
        status = self.lib.cusolverDnSetStream(ctypes.c_void_p(handle), ctypes.c_void_p(stream))
        self._check(status, "cusolverDnSetStream")

    def buffer_size(self, handle: int, params: int, n: int, a: int, w: int, m: int):
        dev, host = ctypes.c_size_t(), ctypes.c_size_t()
        status = self.size_fn(
            handle,
            params,
            EIG_MODE_NOVECTOR,
            FILL_MODE_LOWER,
            n,
            CUDA_R_64F,
            a,
            n,
            CUDA_R_64F,
            w,
            CUDA_R_64F,
            ctypes.byref(dev),
            ctypes.byref(host),
            m,
        )
        self._check(status, f"{FUNCTION}_bufferSize")
        return dev.value, host.value

    def solve(self, handle, params, n, a, w, dbuf, dbytes, hbuf, hbytes, info, m) -> None:
        status = self.solve_fn(
            handle,
            params,
            EIG_MODE_NOVECTOR,
            FILL_MODE_LOWER,
            n,
            CUDA_R_64F,
            a,
            n,
            CUDA_R_64F,
            w,
            CUDA_R_64F,
            dbuf,
            dbytes,
            hbuf or None,
            hbytes,
            info,
            m,
        )
        self._check(status, FUNCTION)


BINDINGS = {"nvmath": _Nvmath, "ctypes": _Ctypes}


@cache
def _binding() -> Any:
    """The first binding that offers cusolverDnXsyevBatched (``HOMOG_CUSOLVER_BINDING``
    names one to use alone), with a probe on a 2 x 2 matrix; Unavailable naming why not."""
    if not torch.cuda.is_available() or torch.version.cuda is None:
        raise Unavailable("torch has no CUDA device here")

    wanted = env_choice("HOMOG_CUSOLVER_BINDING", ("any", *BINDINGS))
    wanted = "" if wanted == "any" else wanted
    reasons = []
    for name, cls in BINDINGS.items():
        if wanted and name != wanted:
            continue
        try:
            binding = cls()
            _solve(binding, torch.eye(2, dtype=torch.float64, device="cuda")[None])
            return binding
        except Exception as exc:  # a missing package, library or symbol: try the next
            reasons.append(f"{name}: {type(exc).__name__}: {exc}")
    raise Unavailable("; ".join(reasons) or f"unknown binding {wanted!r}")


def batched_available() -> bool:
    """Whether ``eigvalsh_batched`` can run here (the probe runs once per process)."""
    try:
        _binding()
    except Unavailable:
        return False
    return True


def fallback_message() -> str:
    """Why ``batched`` falls back to torch's eigvalsh here, and what to do."""
    try:
        _binding()
        return ""
    except Unavailable as exc:
        reason = str(exc)
    return (
        f"HOMOG_GPU_EIGENSOLVER=batched: {FUNCTION} is not available here ({reason}); the "
        f"spectra are solved by torch's eigvalsh (device) instead. It needs a CUDA build of "
        f"torch with cuSOLVER >= 11.7.1 (CUDA >= 12.6.2; torch has CUDA {torch.version.cuda}); "
        "`pip install homog[gpu]` adds the nvmath-python binding"
    )


@cache
def warn_fallback_once() -> None:
    """Warn once per process that ``batched`` falls back (``fallback_message``)."""
    warnings.warn(fallback_message(), RuntimeWarning, stacklevel=3)


_handles: dict[tuple[str, int], tuple[int, int]] = {}  # (binding, device) -> handle, params


def _solve(binding: Any, flat: Tensor) -> tuple[Tensor, Tensor]:
    """(eigenvalues (m, n) ascending, info (m,)) of the float64 CUDA matrices ``flat``
    (m, n, n), which are overwritten. One cusolverDnXsyevBatched call on torch's stream."""
    m, n = flat.shape[0], flat.shape[-1]
    dev = flat.device
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    key = (binding.name, index)
    if key not in _handles:
        with torch.cuda.device(index):
            _handles[key] = binding.create()
    handle, params = _handles[key]
    binding.set_stream(handle, torch.cuda.current_stream(dev).cuda_stream)
    w = torch.empty(m, n, dtype=torch.float64, device=dev)
    info = torch.zeros(m, dtype=torch.int32, device=dev)
    a_ptr, w_ptr = flat.data_ptr(), w.data_ptr()
    dbytes, hbytes = binding.buffer_size(handle, params, n, a_ptr, w_ptr, m)
    dbuf = torch.empty(max(int(dbytes), 1), dtype=torch.uint8, device=dev)
    hbuf = ctypes.create_string_buffer(max(int(hbytes), 1))
    binding.solve(
        handle,
        params,
        n,
        a_ptr,
        w_ptr,
        dbuf.data_ptr(),
        int(dbytes),
        ctypes.addressof(hbuf),
        int(hbytes),
        info.data_ptr(),
        m,
    )
    if hbytes:  # host workspace in use: the call may still read it after returning
        torch.cuda.current_stream(dev).synchronize()
    return w, info


def eigvalsh_batched(gram: Tensor) -> Tensor:
    """Ascending eigenvalues (..., n) of the symmetric float64 CUDA matrices ``gram``
    (..., n, n) from one cusolverDnXsyevBatched call (``gram`` is left as it was). Needs
    ``batched_available()``; other dtypes and n < 2 go to torch's eigvalsh."""
    n = gram.shape[-1]
    if gram.dtype != torch.float64 or n < 2 or gram.numel() == 0:
        return torch.linalg.eigvalsh(gram)
    flat = gram.reshape(-1, n, n).clone(memory_format=torch.contiguous_format)
    w, info = _solve(_binding(), flat)
    bad = info != 0
    if bool(bad.any()):  # not converged (or NaN in it): torch's solver, as before
        w[bad] = torch.linalg.eigvalsh(gram.reshape(-1, n, n)[bad])
    return w.reshape(gram.shape[:-1])
