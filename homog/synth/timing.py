"""Seconds per phase of the synth stage (wall clock and this process's CPU time).

The stage runs each phase inside ``Phases.phase(name)``; the report carries ``timings``
(wall seconds per phase and ``total``), ``timings_cpu`` (process CPU seconds, every thread of
this process, so up to 2 x wall on two busy cores) and ``load_average`` (1/5/15 minutes at
the end), since wall times on a shared machine mean little without the load.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator


class Phases:
    """Accumulates wall and CPU seconds per named phase (a phase may run more than once)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w0
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c0

    def report(self) -> dict[str, object]:
        """``timings``, ``timings_cpu`` (seconds per phase, rounded, plus ``total``) and
        ``load_average`` (None where the platform has none)."""

        def rounded(d: dict[str, float]) -> dict[str, float]:
            return {**{k: round(v, 2) for k, v in d.items()}, "total": round(sum(d.values()), 2)}

        try:
            load = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            load = None
        return {
            "timings": rounded(self.wall),
            "timings_cpu": rounded(self.cpu),
            "load_average": load,
        }
