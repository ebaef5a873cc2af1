"""What the Ray engine costs on top of the local engine, on the same inputs, side by side.

In one process, on the same texts and extract config, it runs
  (L)  the local engine, ``homog.extract.run_extract`` (one process, all torch threads);
  (R1) the Ray engine with ONE actor holding the whole machine (all CPUs, or the GPU): the
       same parallelism as (L), so R1/L is Ray's own overhead (actor start, model load in
       the actor, serialisation of texts and results, scheduling, the driver's writes);
  (Rn) the Ray engine as ``extract.engine: ray`` runs by default: one actor per GPU, or
       one per CPU on a machine without GPUs (skipped when it would equal R1);
checks that every run's layer_metrics agree with (L), and prints wall times, throughput,
the ratios R/L and the actors' steady-state throughput (time inside the actors only: the
figure to size a GPU-hours budget with). Starting the local Ray cluster is timed apart
(it is paid once per session, not per run).

Examples:
  python bench/ray_overhead.py                                   # smollm2-135m on the CPU
  python bench/ray_overhead.py --n-texts 100 --max-tokens 256 --cpus 1
  python bench/ray_overhead.py --model random:llama-8b --dtype bfloat16 --device cuda \\
      --n-texts 512 --max-tokens 512 --shard-texts 64
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from homog.config import RayConfig, load_config
from homog.extract import run_extract
from homog.extract.ray_engine import import_ray, run_extract_ray
from homog.models import resolve_source

ROOT = Path(__file__).resolve().parents[1]


def bench_texts(n: int) -> pd.DataFrame:
    """n texts from the demo corpus (reviews repeated with a numbered prefix past 100)."""
    reviews = [json.loads(x) for x in (ROOT / "data/demo/reviews.jsonl").read_text().splitlines()]
    rows = []
    for i in range(n):
        r = reviews[i % len(reviews)]
        text = r["text"] if i < len(reviews) else f"Review {i}. {r['text']}"
        rows.append({"variant": "original", "sample_id": f"t{i:05d}", "text": text})
    return pd.DataFrame(rows)


def max_diff(a: Path, b: Path) -> float:
    """Largest |difference| of layer_metrics values (rows must match exactly)."""
    x = pd.read_parquet(a / "layer_metrics.parquet")
    y = pd.read_parquet(b / "layer_metrics.parquet")
    keys = ["variant", "sample_id", "layer", "metric"]
    if not x[keys].equals(y[keys]):
        raise SystemExit(f"layer_metrics rows differ between {a} and {b}")
    return float(np.nanmax(np.abs(x["value"].to_numpy() - y["value"].to_numpy())))


def timed_run(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    records = fn(*args, **kwargs)
    return time.perf_counter() - t0, records[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="params.yaml key or source")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--n-texts", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--shard-texts", type=int, default=8)
    ap.add_argument(
        "--cpus",
        type=int,
        default=None,
        help="CPUs to use (default: all): torch threads of (L), the Ray cluster's "
        "CPUs, the CPUs of the one actor of (R1)",
    )
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()

    params = load_config(args.params)
    source = resolve_source(args.model, params.model_sources())
    config = dataclasses.replace(
        params.extract,
        device=args.device,
        dtype=args.dtype,
        max_tokens=args.max_tokens,
        shard_texts=args.shard_texts,
    )
    texts = bench_texts(args.n_texts)
    ray = import_ray()
    ncpu = args.cpus or len(os.sched_getaffinity(0))
    torch.set_num_threads(ncpu)  # (L) runs in this process
    work = Path(tempfile.mkdtemp(prefix="ray_overhead."))

    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=ncpu, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t0
    gpus = int(ray.cluster_resources().get("GPU", 0))
    whole = RayConfig(actors=1, num_cpus_per_actor=ncpu, num_gpus_per_actor=1)
    runs: list[tuple[str, Any, dict[str, Any]]] = [
        ("L  local", run_extract, {}),
        ("R1 ray, 1 actor", run_extract_ray, {"ray_config": whole}),
    ]
    default_actors = gpus if args.device != "cpu" and gpus else ncpu
    if default_actors > 1:
        runs.append(
            (f"Rn ray, {default_actors} actors", run_extract_ray, {"ray_config": RayConfig()})
        )

    rows = []
    for name, fn, extra in runs:
        out = work / name.split()[0]
        wall, rec = timed_run(
            fn,
            args.model,
            source,
            texts,
            config,
            ["none"],
            out,
            show_progress=False,
            log=lambda m: None,
            **extra,
        )
        engine = rec.get("engine", {})
        compute = engine.get("actor_compute_s") or rec["timings"]["extract_s"]
        rows.append(
            {
                "run": name,
                "actors": engine.get("actors", 1),
                "wall_s": wall,
                "load_s": rec["timings"]["load_s"],
                "extract_s": rec["timings"]["extract_s"],
                "compute_s": compute,
                "texts_per_s": args.n_texts / wall,
                "texts_per_s_per_actor": args.n_texts / compute,
                "max_abs_diff": 0.0
                if fn is run_extract
                else max_diff(out / "none", work / "L" / "none"),
                "device": rec["device"],
            }
        )
    ray.shutdown()

    local = rows[0]
    for r in rows:
        r["wall_ratio_vs_local"] = r["wall_s"] / local["wall_s"]
        r["compute_ratio_vs_local"] = r["compute_s"] / r["actors"] / local["compute_s"]
    print(
        f"model {args.model} ({source}) {args.dtype} on {rows[0]['device']}, "
        f"{args.n_texts} texts x <= {args.max_tokens} tokens, shards of {args.shard_texts}, "
        f"{ncpu} CPUs, {gpus} GPUs; local Ray cluster start {init_s:.1f} s (once)"
    )
    print(
        f"{'run':22} {'actors':>6} {'wall s':>8} {'load s':>7} {'texts/s':>8} "
        f"{'texts/s/actor':>14} {'wall R/L':>9} {'max|diff|':>10}"
    )
    for r in rows:
        print(
            f"{r['run']:22} {r['actors']:>6} {r['wall_s']:8.1f} {r['load_s']:7.1f} "
            f"{r['texts_per_s']:8.2f} {r['texts_per_s_per_actor']:14.2f} "
            f"{r['wall_ratio_vs_local']:9.2f} {r['max_abs_diff']:10.2e}"
        )
    r1 = rows[1]
    print(
        f"R1/L wall ratio {r1['wall_ratio_vs_local']:.2f}: Ray's fixed overhead "
        f"{r1['wall_s'] - local['wall_s']:+.1f} s per run; steady state inside the actor "
        f"{r1['compute_ratio_vs_local']:.2f}x the local extraction time per text"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "init_s": init_s,
                    "n_texts": args.n_texts,
                    "max_tokens": args.max_tokens,
                    "model": args.model,
                    "source": source,
                    "dtype": args.dtype,
                    "cpus": ncpu,
                    "gpus": gpus,
                    "runs": rows,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
