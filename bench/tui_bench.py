"""Terminal UI latency on a large database: first paint, metric and variant redraws.

Builds (or reuses, with --db) a demo database of 10 runs x 200 texts (about 2.2 million
layer_metrics rows) with ``homog.store.demo.make_demo_db`` in a child process (so the build's
memory and DuckDB threads do not share this process) and drives the app headless with the
Pilot at 80x24.

What is timed is the frame: ``App._display`` is wrapped so that every screen update is also
turned into the bytes a terminal would receive (``render_segments`` on a truecolor "shadow"
console of the same size; the headless driver itself renders nothing), and a measure ends at
the last frame written after the action, once the app has been quiet for a while. Waiting
(polling, settling) after that frame is not counted.

- first paint: a fresh Python process per sample (``--paints``), from spawning it to the first
  frame that shows a run's row in the Runs table; so it includes the interpreter start, every
  import, Textual's start-up, opening the database, the catalog query and the paint.
  ``in_process`` is the same from the first line of the child (no interpreter start-up),
  ``from_command`` from entering the command's body, ``from_app`` from creating the app, its
  modules imported (what the earlier harness, and the issue's 336 ms, counted).
  The first paint goes two ways, alternating: ``first_paint`` as ``homog tui --db DB`` goes
  (``homog.cli`` imported, the command looked up, ``tui.command.make_app``: the catalog is
  read by a child process while Textual starts, see ``tui/preview.py``), and
  ``direct_first_paint`` by creating ``HomogApp`` directly, which opens the database in a
  thread (what earlier runs of this script timed). The project's bytecode is compiled
  first (``compile_project``);
- metric switch: ``m`` on the Compare screen (``--compare-runs`` runs x 4 variants) until the
  new curves are written to the terminal; the first pass through the metrics queries the
  database, the second is served from the cache;
- variant toggle: deselecting / reselecting a variant until the redraw is written.

Each measure is reported as the median and max of wall time and of this process's CPU time
(all threads, DuckDB's included): on a busy shared machine wall time mostly measures waiting
for a core.

Targets (issue 15): first paint < 300 ms; metric switch and variant toggle < 100 ms median and
< 200 ms max.

``--summary view`` builds the store the old way: ``layer_summary`` a view aggregating
``layer_metrics`` at every read, as in databases built before ``homog load`` materialised it.

Usage: python bench/tui_bench.py [--db PATH] [--runs 10] [--texts 200] [--compare-runs 2]
       [--paints 5] [--size 80x24] [--summary table|view]
"""

from __future__ import annotations

# Only what the app imports anyway: the first-paint child imports this module before timing
# the app's imports, so argparse, statistics, subprocess and tempfile are imported in the
# functions that use them.
import asyncio
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUIET_S = 0.15  # the app counts as settled after this long without a new frame
TIMEOUT_S = 30.0


# -- the frame hook -----------------------------------------------------------------------------


class FrameLog:
    """Wraps ``App._display``: each compositor update is rendered to terminal bytes on a
    shadow console and logged as (wall, cpu, text)."""

    def __init__(self, size: tuple[int, int]) -> None:
        from rich.console import Console

        self.frames: list[tuple[float, float, str]] = []
        self.console = Console(
            file=io.StringIO(),
            width=size[0],
            height=size[1],
            color_system="truecolor",
            force_terminal=True,
            legacy_windows=False,
            markup=False,
            highlight=False,
            emoji=False,
        )

    def install(self) -> None:
        from textual._compositor import CompositorUpdate
        from textual.app import App

        original = App._display
        log = self

        def _display(app, screen, renderable) -> None:  # noqa: ANN001
            original(app, screen, renderable)
            if renderable is None or app._batch_count:
                return
            if isinstance(renderable, CompositorUpdate):
                text = renderable.render_segments(log.console)
            else:
                text = log.console._render_buffer(log.console.render(renderable))
            log.frames.append((time.perf_counter(), time.process_time(), text))

        App._display = _display  # type: ignore[method-assign]

    @property
    def last(self) -> tuple[float, float]:
        wall, cpu, _ = self.frames[-1]
        return wall, cpu


async def settle(pilot, frames: FrameLog, done=lambda: True) -> None:  # noqa: ANN001
    """Wait until ``done()`` and no frame for QUIET_S seconds (and no worker running)."""
    deadline = time.perf_counter() + TIMEOUT_S
    while time.perf_counter() < deadline:
        await pilot.pause(0.01)
        if not done() or any(w.is_running for w in pilot.app.workers):
            continue
        if not frames.frames or time.perf_counter() - frames.frames[-1][0] >= QUIET_S:
            return
    raise TimeoutError("the app did not settle")


# -- first paint (a child process per sample) -------------------------------------------------


def first_paint_child(db: str, size: tuple[int, int], t0: float, c0: float, entry: str) -> None:
    """Run in a fresh process: print the wall/CPU time at which the first frame showing a
    run row was written (perf_counter is CLOCK_MONOTONIC, comparable with the parent's).

    ``entry="cli"`` goes the way ``homog tui --db DB`` goes: import ``homog.cli``, look the
    command up in the group (the entry-point scan that finds the plugin), then
    ``tui.command.make_app`` (the database opens in a thread while Textual is imported).
    ``entry="app"`` imports ``tui.app`` and creates ``HomogApp`` directly (no early open).
    """
    if entry == "cli":
        import click

        from homog.cli import main

        main.get_command(click.Context(main), "tui")
        from tui.command import make_app

        t_app = time.perf_counter()  # the command found: what follows is the command's body
        app = make_app(Path(db), watch_interval=3600)
    else:
        from tui.app import HomogApp

        t_app = time.perf_counter()  # imports done: what the earlier harness counted from
        app = HomogApp(db, watch_interval=3600)
    # The frame hook goes in once the app exists (it imports Textual, which the command
    # imports itself, after starting the database open): nothing has been drawn yet.
    frames = FrameLog(size)
    frames.install()
    from tui.components.run_table import RunTable

    seen: list[tuple[float, float]] = []

    def shown() -> bool:
        if seen:
            return True
        tables = app.screen.query(RunTable)
        if not (tables and tables.first().row_count):
            return False
        marker = str(tables.first().get_row_at(0)[1])  # the model of the first row
        for wall, cpu, text in frames.frames:
            if marker in text:
                seen.append((wall, cpu))
                return True
        return False

    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot, frames, shown)

    asyncio.run(go())
    wall, cpu = seen[0]
    print(
        json.dumps(
            {"wall": wall, "in_process": wall - t0, "from_app": wall - t_app, "cpu": cpu - c0}
        )
    )


def compile_project() -> None:
    """Write the bytecode of ``homog`` and ``tui`` (``__pycache__``, git-ignored) first.

    A user's second start reads it; a first paint that compiled every module would measure
    the compiler. Python writes it on import by itself, unless PYTHONDONTWRITEBYTECODE is set
    (as on some CI images), and then every child would compile the sources again.
    """
    import compileall

    for package in ("homog", "tui"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def first_paint(db: Path, size: tuple[int, int], entry: str) -> dict[str, float]:
    import subprocess

    code = (
        "import time; t0 = time.perf_counter(); c0 = time.process_time(); import sys; "
        f"sys.path.insert(0, {str(ROOT / 'bench')!r}); from tui_bench import first_paint_child; "
        f"first_paint_child({str(db)!r}, {size!r}, t0, c0, {entry!r})"
    )
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode:
        raise SystemExit(f"first-paint child failed:\n{done.stdout}\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "wall": out["wall"] - start,
        "in_process": out["in_process"],
        "from_app": out["from_app"],
        "cpu": out["cpu"],
    }


# -- redraws (in this process) ----------------------------------------------------------------


async def redraws(db: Path, size: tuple[int, int], n_compare: int) -> dict[str, list[float]]:
    frames = FrameLog(size)
    frames.install()
    from textual.widgets import SelectionList

    from tui.app import HomogApp
    from tui.components.run_table import RunTable

    out: dict[str, list[float]] = {}
    app = HomogApp(db, watch_interval=3600)
    async with app.run_test(size=size) as pilot:

        def runs_shown() -> bool:
            tables = app.screen.query(RunTable)
            return bool(tables and tables.first().row_count)

        await settle(pilot, frames, runs_shown)
        n_runs = len(app.catalog.runs)
        if n_compare > n_runs:
            raise SystemExit(f"--compare-runs {n_compare}: the database has {n_runs} runs")
        for _ in range(n_compare):
            await pilot.press("space", "down")
        await pilot.press("enter")
        await settle(pilot, frames, lambda: getattr(app.screen, "draws", 0) > 0)
        screen = app.screen
        assert len(screen.key()[1]) == n_compare, screen.key()

        async def redraw(name: str, action) -> None:  # noqa: ANN001
            before, n_frames = screen.draws, len(frames.frames)
            start, cpu = time.perf_counter(), time.process_time()
            await action()
            await settle(pilot, frames, lambda: screen.draws > before)
            if len(frames.frames) == n_frames:
                raise RuntimeError(f"{name}: redrawn but no frame written")
            wall_end, cpu_end = frames.last
            out.setdefault(name, []).append(wall_end - start)
            out.setdefault("cpu_" + name, []).append(cpu_end - cpu)

        for name in ("metric_query", "metric_cached"):
            for _ in range(len(app.catalog.metrics)):
                await redraw(name, lambda: pilot.press("m"))
        variants = screen.query_one("#pick-variants", SelectionList)
        for v in ("front", "end", "control"):

            async def drop(v=v) -> None:
                variants.deselect(v)

            async def add(v=v) -> None:
                variants.select(v)

            await redraw("variant", drop)
            await redraw("variant", add)
    return out


# -- main ---------------------------------------------------------------------------------------


def build(db: Path, runs: int, texts: int, summary: str) -> None:
    """Build the demo database in a child process."""
    import subprocess

    code = (
        "import json, sys, time; from homog.store.demo import make_demo_db; t = time.perf_counter()"
        f"; c = make_demo_db({str(db)!r}, {runs}, {texts}, summary={summary!r}); "
        "print(json.dumps({'counts': c, 's': time.perf_counter() - t}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode:
        raise SystemExit(f"building the demo database failed:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    counts = out["counts"]
    print(
        f"built {db.name} in a child process: {counts['runs']} runs, "
        f"{counts['layer_metrics']:,} layer_metrics rows, layer_summary a {summary}, "
        f"in {out['s']:.1f} s"
    )


TARGETS = {  # (median, max) in ms
    "first_paint": (300, 300),
    "metric_query": (100, 200),
    "metric_cached": (100, 200),
    "variant": (100, 200),
}


PAINT_ROWS = (  # (row, wall key, CPU key)
    ("first_paint", "first_paint", "cpu_first_paint"),
    ("  in_process", "first_paint_in_process", "cpu_first_paint"),
    ("  from_command", "first_paint_from_app", None),
    ("direct_first_paint", "direct_first_paint", "cpu_direct_first_paint"),
    ("  in_process", "direct_first_paint_in_process", "cpu_direct_first_paint"),
    ("  from_app", "direct_first_paint_from_app", None),
)


def report(results: dict[str, list[float]]) -> None:
    import statistics

    print(
        f"{'measure':<24}{'n':>4}{'wall med':>10}{'max':>8}{'CPU med':>10}{'max':>8}  target (wall)"
    )
    rows = [*PAINT_ROWS, *((key, key, "cpu_" + key) for key in TARGETS if key != "first_paint")]
    for name, key, cpu_key in rows:
        if not results.get(key):
            continue
        wall = [v * 1000 for v in results[key]]
        cpu = [v * 1000 for v in results.get(cpu_key, [])] if cpu_key else []
        line = f"{name:<24}{len(wall):>4}{statistics.median(wall):>10.1f}{max(wall):>8.1f}"
        line += f"{statistics.median(cpu):>10.1f}{max(cpu):>8.1f}" if cpu else f"{'':>18}"
        if name in TARGETS:
            want_med, want_max = TARGETS[name]
            med, top = statistics.median(wall), max(wall)
            if name == "first_paint":
                verdict = "ok" if med < want_med else "SLOW"
                line += f"  median < {want_med} ms {verdict}"
            else:
                verdict = "ok" if med < want_med and top < want_max else "SLOW"
                line += f"  median < {want_med}, max < {want_max} ms {verdict}"
        print(line)


def main() -> None:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="existing database to use")
    parser.add_argument("--runs", type=int, default=10, help="runs in the demo database")
    parser.add_argument("--texts", type=int, default=200, help="texts per run in the demo db")
    parser.add_argument(
        "--compare-runs", type=int, default=2, help="runs selected on the Compare screen"
    )
    parser.add_argument("--paints", type=int, default=5, help="first-paint samples (processes)")
    parser.add_argument("--size", default="80x24", help="terminal size, COLSxROWS")
    parser.add_argument("--no-redraws", action="store_true", help="measure the first paint only")
    parser.add_argument(
        "--summary",
        choices=("table", "view"),
        default="table",
        help="layer_summary as homog load builds it (table) or as older databases hold it (view)",
    )
    args = parser.parse_args()
    if args.db is not None and not args.db.is_file():
        parser.error(f"--db {args.db}: no such database file (leave --db out to build one)")
    cols, rows = (int(v) for v in args.size.lower().split("x"))
    size = (cols, rows)
    with tempfile.TemporaryDirectory(prefix="tui-bench-") as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "bench.duckdb"
            build(db, args.runs, args.texts, args.summary)
        db = db.resolve()
        compile_project()
        load = os.getloadavg()[0]
        results: dict[str, list[float]] = {}
        entries = {"cli": "", "app": "direct_"}  # the direct way: what earlier runs measured
        for _ in range(args.paints):  # the two entries alternate, so both see the same load
            for entry, prefix in entries.items():
                sample = first_paint(db, size, entry)
                name = prefix + "first_paint"
                for key, value in (
                    (name, sample["wall"]),
                    (name + "_in_process", sample["in_process"]),
                    (name + "_from_app", sample["from_app"]),
                    ("cpu_" + name, sample["cpu"]),
                ):
                    results.setdefault(key, []).append(value)
        if not args.no_redraws:
            results.update(asyncio.run(redraws(db, size, args.compare_runs)))
    print(
        f"{size[0]}x{size[1]}, {args.compare_runs} runs compared; load average "
        f"{load:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} cores; ms"
    )
    report(results)


if __name__ == "__main__":
    main()
