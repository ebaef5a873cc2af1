"""Terminal UI latency on a large database: first paint, metric and variant redraws.

Builds (or reuses, with --db) a demo database of 10 runs x 200 texts (about 2.2 million
layer_metrics rows) with ``homog.store.demo.make_demo_db`` and drives the app headless with the
Pilot at 80x24:

- first paint: from creating the app to the Runs table showing its rows (Textual start-up,
  opening the database, the catalog query and one paint);
- metric switch: ``m`` on the Compare screen (2 runs x 4 variants) until the new curves are
  drawn and painted; first pass queries the database, second pass is served from the cache;
- variant switch: deselecting / reselecting a variant until redrawn.

Targets (issue 15): first paint < 300 ms; metric switch and variant toggle < 100 ms median and
< 200 ms max.

``--summary view`` builds the store the old way: ``layer_summary`` a view aggregating
``layer_metrics`` at every read, as in databases built before ``homog load`` materialised it.
The "before" of the README's table ran this script from a checkout of the earlier commit (its
TUI code) on such a database; see the README's "Terminal UI" section.

Usage: python bench/tui_bench.py [--db PATH] [--runs 10] [--texts 200] [--summary table|view]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path


async def measure(db: Path) -> dict[str, list[float]]:
    from textual.widgets import SelectionList

    from tui.app import HomogApp
    from tui.components.run_table import RunTable

    out: dict[str, list[float]] = {
        "first_paint": [],
        "metric_query": [],
        "metric_cached": [],
        "variant": [],
    }
    t0 = time.perf_counter()
    app = HomogApp(db, watch_interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        while not (app.screen.query(RunTable) and app.screen.query_one(RunTable).row_count):
            await pilot.pause(0.005)
        await pilot.pause()  # the paint
        out["first_paint"].append(time.perf_counter() - t0)

        await pilot.press("space", "down", "space", "enter")
        while getattr(app.screen, "draws", 0) == 0:
            await pilot.pause(0.005)
        screen = app.screen
        await app.workers.wait_for_complete()
        await pilot.pause()

        async def redraw(action) -> float:
            before = screen.draws
            start, cpu = time.perf_counter(), time.process_time()
            await action()
            while screen.draws == before:
                await pilot.pause(0.002)
            await pilot.pause()  # the paint
            # CPU seconds of this process (all threads): on a busy shared machine wall time
            # mostly measures waiting for a core.
            out.setdefault("cpu_" + current[0], []).append(time.process_time() - cpu)
            return time.perf_counter() - start

        current = [""]

        n_metrics = len(app.catalog.metrics)
        for key in ("metric_query", "metric_cached"):
            current[0] = key
            for _ in range(n_metrics):
                out[key].append(await redraw(lambda: pilot.press("m")))
        variants = screen.query_one("#pick-variants", SelectionList)
        current[0] = "variant"
        for v in ("front", "end", "control"):

            async def drop(v=v):
                variants.deselect(v)

            async def add(v=v):
                variants.select(v)

            out["variant"].append(await redraw(drop))
            out["variant"].append(await redraw(add))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="existing database to use")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument(
        "--summary",
        choices=("table", "view"),
        default="table",
        help="layer_summary as homog load builds it (table) or as older databases hold it (view)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tui-bench-") as tmp:
        db = args.db
        if db is None:
            from homog.store.demo import make_demo_db

            db = Path(tmp) / "bench.duckdb"
            start = time.perf_counter()
            counts = make_demo_db(db, args.runs, args.texts, summary=args.summary)
            print(
                f"built {db.name}: {counts['runs']} runs, {counts['layer_metrics']:,} "
                f"layer_metrics rows, layer_summary a {args.summary}, in "
                f"{time.perf_counter() - start:.1f} s"
            )
        results = asyncio.run(measure(db))
    print(f"{'measure':<16}{'n':>4}{'median ms':>12}{'max ms':>10}  target")
    # (median, max) targets in ms; first paint is measured once
    targets = {
        "first_paint": (300, 300),
        "metric_query": (100, 200),
        "metric_cached": (100, 200),
        "variant": (100, 200),
    }
    targets.update({f"cpu_{k}": v for k, v in targets.items()})
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for key, values in results.items():
        ms = [v * 1000 for v in values]
        med, top = statistics.median(ms), max(ms)
        want_med, want_max = targets[key]
        verdict = "ok" if med < want_med and top < want_max else "SLOW"
        print(
            f"{key:<16}{len(ms):>4}{med:>12.1f}{top:>10.1f}  "
            f"median < {want_med}, max < {want_max} ms {verdict}"
        )


if __name__ == "__main__":
    main()
