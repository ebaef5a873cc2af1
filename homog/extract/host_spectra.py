"""Where a GPU run's spectra are finished: on a host thread beside the forward, or batched.

With ``HOMOG_GPU_EIGENSOLVER=host`` each hidden layer's hook stops at
``homog.metrics.sets.hidden_pending`` (every metric that needs no eigenvalue is done on the
GPU), copies the rest (the float64 Gram matrices and those metrics) into pinned host memory on
a side stream, and hands it to ``HostSpectra``: one host thread that solves the layers in the
order they came (NumPy's LAPACK on all of torch's threads, no_sink sharing all's reduction,
as on a CPU run) and finishes their metrics. The forward pass goes on meanwhile, and
``run_batches`` starts batch i + 1's forward before it waits for batch i's metrics: at most
one batch in flight.

``host-serial`` waits for each layer's metrics in its hook: the same code on the same thread,
so the same values bit for bit, but the GPU waits while the host solves.

``batched`` (``deferred``) keeps everything on the GPU: ``LayerStack`` computes several
layers' metrics in one call and ``DeviceBatch`` solves their Gram matrices in one
``cusolverDnXsyevBatched`` call (docs/gpu.md).

Memory: the host copies not yet solved are at most ``budget_bytes`` (a hook that would go
over it waits for the host; one layer larger than the budget is let through alone).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
from torch import Tensor

from homog.metrics.pending import PendingSpectra
from homog.validate import env_int

BUDGET_BYTES = 8 * 2**30  # host copies waiting to be solved, at most (bounded memory)
DEFER_BYTES = 2 * 2**30  # batched: the layers' matrices solved together, up to this many bytes
STACK_MIB = 1024  # batched: layers whose metrics are computed together (HOMOG_GPU_STACK_MIB)
MODES = ("inline", "deferred", "serial", "pipelined")


def host_mode(device: Any) -> str:
    """The extractor's mode for a model on ``device``, from HOMOG_GPU_EIGENSOLVER: on a GPU,
    ``host`` -> ``pipelined``, ``host-serial`` -> ``serial``, ``batched`` -> ``deferred``
    (``LayerStack`` and ``DeviceBatch``); else ``inline`` (the spectra are solved in the hook
    where the matrices are)."""
    from homog.metrics.eigensolver import gpu_eigensolver

    if torch.device(device).type == "cpu":
        return "inline"
    modes = {"host": "pipelined", "host-serial": "serial", "batched": "deferred"}
    return modes.get(gpu_eigensolver(), "inline")


def _nbytes(pending: PendingSpectra) -> int:
    return sum(g.numel() * g.element_size() for g in pending.grams)


class HostSpectra:
    """One host thread finishing ``PendingSpectra`` in submission order (``submit``).

    ``names``: the metric order of the (..., M) tensor each layer gives. ``pipelined``:
    ``submit`` returns a Future at once; else it waits and returns the tensor.
    """

    def __init__(
        self, names: Sequence[str], pipelined: bool = True, budget_bytes: int = BUDGET_BYTES
    ):
        self.names = list(names)
        self.pipelined = pipelined
        self.budget = budget_bytes
        # the host thread pools its LAPACK calls over as many threads as the caller's torch
        threads = torch.get_num_threads()
        self.pool = ThreadPoolExecutor(
            1,
            thread_name_prefix="homog-host-spectra",
            initializer=torch.set_num_threads,
            initargs=(threads,),
        )
        self._waiting = 0  # bytes of host copies not yet solved
        self._cond = threading.Condition()
        self._streams: dict[torch.device, Any] = {}

    def submit(self, pending: PendingSpectra) -> Future | Tensor:
        """Copy ``pending`` to the host (asynchronously from a GPU) and queue its solve."""
        nbytes = _nbytes(pending)
        with self._cond:
            self._cond.wait_for(lambda: self._waiting == 0 or self._waiting + nbytes <= self.budget)
            self._waiting += nbytes
        try:
            host, event = self._to_host(pending)
            future = self.pool.submit(self._finish, host, event, nbytes)
        except BaseException:
            self._release(nbytes)
            raise
        return future if self.pipelined else future.result()

    def _to_host(self, pending: PendingSpectra) -> tuple[PendingSpectra, Any]:
        """(``pending`` in pinned host memory, the CUDA event after the copies; or
        ``pending`` itself and None when it is on the CPU already)."""
        device = pending.grams[0].device
        if device.type != "cuda":
            return pending, None
        side = self._streams.setdefault(device, torch.cuda.Stream(device))
        side.wait_stream(torch.cuda.current_stream(device))

        def copy(t: Tensor) -> Tensor:
            out = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            out.copy_(t, non_blocking=True)
            t.record_stream(side)  # the allocator keeps t until the copy is done
            return out

        with torch.cuda.stream(side):
            host = pending.map(copy)
            event = torch.cuda.Event()
            event.record(side)
        return host, event

    def _finish(self, pending: PendingSpectra, event: Any, nbytes: int) -> Tensor:
        try:
            if event is not None:
                event.synchronize()
            out = pending.finish(pending.solve())
            return torch.stack([out[m] for m in self.names], -1)
        finally:
            self._release(nbytes)

    def _release(self, nbytes: int) -> None:
        with self._cond:
            self._waiting -= nbytes
            self._cond.notify_all()

    def close(self) -> None:
        """Wait for the solves under way, drop those not started, end the thread."""
        self.pool.shutdown(wait=True, cancel_futures=True)


class DeviceBatch:
    """``batched`` on a GPU: the spectra of several layers solved in one call. A hook adds its
    layer's ``PendingSpectra`` (``add``); once ``cap_bytes`` of Gram matrices wait, and at the
    end of the forward (``flush``), they are solved together and each layer's (B, M) metrics
    go into its slot. On an H200 cusolverDnXsyevBatched took 1.2-1.9 ms per 512 x 512 matrix
    in batches of 24 (one layer of 8 texts x 3 token sets), 0.42 ms in batches of 96 and
    0.28 ms in batches of 792 (``bench/batched_eigh.py``)."""

    def __init__(self, names: Sequence[str], cap_bytes: int | None = None):
        self.names = list(names)
        self.cap = DEFER_BYTES if cap_bytes is None else cap_bytes
        self.waiting: list[tuple[list[Any], int, PendingSpectra]] = []

    def add(self, slots: list[Any], index: int | list[int], pending: PendingSpectra) -> None:
        """``slots[index]`` gets ``pending``'s metrics (at the latest at ``flush``); with a
        list of indices, ``pending`` holds those layers along its first dimension
        (``LayerStack``) and each slot gets its own."""
        self.waiting.append((slots, index, pending))
        if sum(_nbytes(p) for *_, p in self.waiting) >= self.cap:
            self.flush()

    def flush(self) -> None:
        """Solve what waits: the one-stack layers of one shape in one call, others alone."""
        waiting, self.waiting = self.waiting, []
        groups: dict[tuple, list[tuple[list[Any], int, PendingSpectra]]] = {}
        for item in waiting:
            p = item[2]
            shape = (tuple(p.grams[0].shape[1:]), p.size) if len(p.grams) == 1 else id(item)
            groups.setdefault(shape, []).append(item)
        for items in groups.values():
            pendings = [p for *_, p in items]
            if len(pendings[0].grams) == 1:
                from homog.metrics.spectra import gram_eigenvalues

                eigs = gram_eigenvalues(torch.cat([p.grams[0] for p in pendings]), pendings[0].size)
                parts = eigs.split([len(p.suffixes) for p in pendings])
                solved = [list(part.unbind(0)) for part in parts]
            else:
                solved = [pendings[0].solve()]
            for (slots, index, p), eig in zip(items, solved, strict=True):
                out = p.finish(eig)
                values = torch.stack([out[m] for m in self.names], -1)
                if isinstance(index, list):
                    for layer, v in zip(index, values.unbind(0), strict=True):
                        slots[layer] = v
                else:
                    slots[index] = values

    def clear(self) -> None:
        self.waiting.clear()


def stack_bytes() -> int:
    """HOMOG_GPU_STACK_MIB in bytes: how much float64 token data ``LayerStack`` gathers
    before it computes the layers' metrics together (0: each layer alone)."""
    return env_int("HOMOG_GPU_STACK_MIB", STACK_MIB) * 2**20


class LayerStack:
    """``batched`` on a GPU: the hidden-state metrics of several layers computed together.

    Computing a layer's metrics (``homog.metrics.sets.hidden_pending``, the median
    activation) launches some hundreds of small kernels, some of which run one thread block
    per row: one layer's few texts leave most of a GPU idle. A hook copies its layer's
    hidden states into a buffer (``add``). Once ``cap_bytes`` of their float64 copies would
    be held (the memory the metrics use: about three such copies at once), and at the end of
    the forward (``flush``), the buffered layers' metrics are computed in one
    ``compute(hidden (k, B, n, d), layers, extras)`` call (the extractor's: ``hidden_pending``
    on the stack, then ``DeviceBatch``; ``extras``: what ``add`` was given with each layer).
    The values equal each layer's own to rounding. A layer larger than the cap goes alone; at
    most ``max_layers`` (a forward's hidden layers) are buffered.
    """

    def __init__(self, compute: Any, max_layers: int, cap_bytes: int):
        self.compute = compute
        self.max_layers = max_layers
        self.cap = cap_bytes
        self.buffer: Tensor | None = None
        self.held: list[tuple[int, Any]] = []  # (layer, extra) in buffer order

    @property
    def layers(self) -> list[int]:
        """The buffered layers, in buffer order."""
        return [layer for layer, _ in self.held]

    def add(self, layer: int, hidden: Tensor, extra: Any = None) -> None:
        """Keep a copy of ``hidden`` (B, n, d) (and ``extra``); compute the buffered layers
        when the buffer is full."""
        buf = self.buffer
        if buf is not None and (buf.shape[1:] != hidden.shape or buf.device != hidden.device):
            self.flush()  # another shape or device (a model split over GPUs): a new stack
            buf = None
        if buf is None:
            per_layer = hidden.numel() * 8  # its float64 copy
            k = min(self.max_layers, max(1, self.cap // max(per_layer, 1)))
            buf = self.buffer = hidden.new_empty((k, *hidden.shape))
        buf[len(self.held)].copy_(hidden)
        self.held.append((layer, extra))
        if len(self.held) == buf.shape[0]:
            self.flush()

    def flush(self) -> None:
        """Compute the buffered layers' metrics (the buffer is reused by the next ones)."""
        if not self.held:
            return
        held, self.held = self.held, []
        assert self.buffer is not None
        self.compute(self.buffer[: len(held)], [h[0] for h in held], [h[1] for h in held])

    def clear(self) -> None:
        """Drop what is buffered and the buffer (the end of a forward, or its failure)."""
        self.held = []
        self.buffer = None


def resolved(values: Sequence[Any]) -> list[Tensor]:
    """``values`` with each Future replaced by its result (in order)."""
    return [v.result() if isinstance(v, Future) else v for v in values]
