"""Wall and CPU time of every stage of the default pipeline (``dvc repro``, i.e. ``make demo``).

Runs ``dvc repro`` in a checkout (a fresh clone, so every stage runs) with a ``homog`` shim first
on PATH. The shim runs the real ``homog`` command of each stage and appends one JSON line per
stage to a log: the command, wall seconds, CPU seconds (user + system of the stage's process
and everything it waited for, from ``getrusage(RUSAGE_CHILDREN)``) and peak RSS. On a shared,
loaded machine wall time mostly measures waiting for a core; compare CPU time.

The checkout's own code is imported (``PYTHONPATH=<clone>``), with this interpreter's
environment (its ``homog`` entry point and ``dvc``); the script checks which ``homog`` package
a stage will import before it starts.

``--reuse-from DIR --reuse corpus,synth`` first copies those stages' outputs and their
``dvc.lock`` entries from an earlier run's checkout, so ``dvc repro`` skips them (their inputs
are unchanged) and times only the rest: how an "after" run measures the stages a change
touches without paying again for one it does not.

Usage:
    git clone <this repo> /tmp/clone
    python bench/pipeline_stages.py /tmp/clone --out before.json      # runs dvc repro
    python bench/pipeline_stages.py /tmp/after --reuse-from /tmp/clone --reuse corpus,synth \
        --out after.json
    python bench/pipeline_stages.py --table before.json                # print a saved run
    python bench/pipeline_stages.py --compare before.json after.json   # side by side
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SHIM = """#!{python}
import json, os, resource, subprocess, sys, time
start = time.time()
wall = time.perf_counter()
rc = subprocess.call([{real!r}] + sys.argv[1:])
wall = time.perf_counter() - wall
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
record = {{
    "stage": " ".join(sys.argv[1:]), "rc": rc, "start": start, "wall_s": wall,
    "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "cpu_s": ru.ru_utime + ru.ru_stime,
    "max_rss_mb": ru.ru_maxrss / 1024, "loadavg": os.getloadavg()[0],
}}
with open(os.environ["HOMOG_STAGE_LOG"], "a") as fh:
    fh.write(json.dumps(record) + "\\n")
sys.exit(rc)
"""


def _environment(clone: Path, shim_dir: Path, log: Path) -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = f"{shim_dir}{os.pathsep}{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(clone)
    env["HOMOG_STAGE_LOG"] = str(log)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _cache_object(root: Path, md5: str) -> Path:
    """Where DVC 3 keeps the object of hash ``md5`` in the cache of the checkout ``root``."""
    return root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def copy_cached(source: Path, clone: Path, md5: str) -> None:
    """Copy the cache object ``md5`` (and, for a directory's ``.dir`` listing, the objects of
    its files) from ``source``'s DVC cache to ``clone``'s: without them ``dvc repro`` finds the
    copied outputs "not in cache" and runs their stage again."""
    import json

    src = _cache_object(source, md5)
    if not src.exists():  # an output declared with cache: false (metrics, plots) has none
        return
    dst = _cache_object(clone, md5)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    if md5.endswith(".dir"):
        for entry in json.loads(src.read_text()):
            copy_cached(source, clone, entry["md5"])


def reuse_stages(clone: Path, source: Path, stages: list[str]) -> list[str]:
    """Copy the outputs of ``stages``, their DVC cache objects and their ``dvc.lock`` entries
    from ``source`` (a checkout where ``dvc repro`` ran) into ``clone``; return the copied
    paths. Raises SystemExit when a stage or an output is missing there."""
    import yaml

    lock = yaml.safe_load((source / "dvc.lock").read_text())
    missing = [s for s in stages if s not in lock.get("stages", {})]
    if missing:
        raise SystemExit(f"{source}/dvc.lock has no stage(s) {missing}")
    copied = []
    for name in stages:
        for out in lock["stages"][name].get("outs", []):
            src, dst = source / out["path"], clone / out["path"]
            if not src.exists():
                raise SystemExit(f"{src} (an output of {name}) is missing")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)
            if out.get("md5"):
                copy_cached(source, clone, out["md5"])
            copied.append(out["path"])
    kept = {"schema": lock.get("schema", "2.0"), "stages": {s: lock["stages"][s] for s in stages}}
    (clone / "dvc.lock").write_text(yaml.safe_dump(kept, sort_keys=False))
    return copied


def run_pipeline(clone: Path, force: bool) -> dict:
    """Run ``dvc repro`` in ``clone`` and return the per-stage records and the totals."""
    real = Path(sys.executable).parent / "homog"
    if not real.exists():
        raise SystemExit(f"no homog entry point next to {sys.executable}: install homog there")
    with tempfile.TemporaryDirectory(prefix="homog-stages-") as tmp:
        shim_dir, log = Path(tmp) / "bin", Path(tmp) / "stages.jsonl"
        shim_dir.mkdir()
        shim = shim_dir / "homog"
        shim.write_text(_SHIM.format(python=sys.executable, real=str(real)))
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
        env = _environment(clone, shim_dir, log)
        where = subprocess.run(
            [sys.executable, "-c", "import homog; print(homog.__file__)"],
            env=env,
            cwd=clone,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not where.startswith(str(clone.resolve())):
            raise SystemExit(f"stages would import homog from {where}, not from {clone}")
        print(f"homog imported from {where}", flush=True)
        cmd = ["dvc", "repro"] + (["--force"] if force else [])
        load0, before = os.getloadavg(), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        rc = subprocess.call(cmd, cwd=clone, env=env)
        wall = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        stages = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "clone": str(clone),
        "command": " ".join(cmd),
        "rc": rc,
        "wall_s": wall,
        "cpu_s": cpu,
        "loadavg_start": load0[0],
        "loadavg_end": os.getloadavg()[0],
        "stages": stages,
    }


def format_table(result: dict) -> str:
    # the load average as each stage ended: how much wall time waited for a core
    rows = ["| stage | wall s | CPU s | peak RSS MB | load |", "|---|---:|---:|---:|---:|"]
    for s in result["stages"]:
        flag = "" if s["rc"] == 0 else f" (exit {s['rc']})"
        rows.append(
            f"| homog {s['stage']}{flag} | {s['wall_s']:.1f} | {s['cpu_s']:.1f} "
            f"| {s['max_rss_mb']:.0f} | {s.get('loadavg', float('nan')):.1f} |"
        )
    stage_wall = sum(s["wall_s"] for s in result["stages"])
    stage_cpu = sum(s["cpu_s"] for s in result["stages"])
    rows.append(f"| all homog stages | {stage_wall:.1f} | {stage_cpu:.1f} | | |")
    rows.append(
        f"| `{result['command']}` (incl. dvc) | {result['wall_s']:.1f} | {result['cpu_s']:.1f} "
        "| | |"
    )
    if result.get("reused"):
        rows.append(
            f"\nnot rerun (outputs copied from {result['reused_from']}): "
            f"{', '.join(result['reused'])}"
        )
    rows.append(
        f"\nload average: {result['loadavg_start']:.2f} at start, "
        f"{result['loadavg_end']:.2f} at end; exit status {result['rc']}"
    )
    return "\n".join(rows)


def format_compare(before: dict, after: dict) -> str:
    b = {s["stage"]: s for s in before["stages"]}
    a = {s["stage"]: s for s in after["stages"]}
    names = list(b) + [n for n in a if n not in b]
    rows = [
        "| stage | CPU s before | CPU s after | ratio | wall s before | wall s after |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def cell(d: dict, name: str, key: str) -> str:
        return f"{d[name][key]:.1f}" if name in d else "-"

    for n in names:
        both = n in a and n in b and b[n]["cpu_s"]
        ratio = f"{a[n]['cpu_s'] / b[n]['cpu_s']:.2f}" if both else "-"
        rows.append(
            f"| homog {n} | {cell(b, n, 'cpu_s')} | {cell(a, n, 'cpu_s')} | {ratio} "
            f"| {cell(b, n, 'wall_s')} | {cell(a, n, 'wall_s')} |"
        )
    common = [n for n in a if n in b]
    cpu_b = sum(b[n]["cpu_s"] for n in common)
    cpu_a = sum(a[n]["cpu_s"] for n in common)
    rows.append(
        f"| stages run in both | {cpu_b:.1f} | {cpu_a:.1f} | {cpu_a / cpu_b:.2f} "
        f"| {sum(b[n]['wall_s'] for n in common):.1f} "
        f"| {sum(a[n]['wall_s'] for n in common):.1f} |"
    )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("clone", nargs="?", type=Path, help="checkout to run dvc repro in")
    ap.add_argument("--out", type=Path, help="write the records as JSON here")
    ap.add_argument("--force", action="store_true", help="dvc repro --force (rerun every stage)")
    ap.add_argument("--reuse-from", type=Path, help="checkout of an earlier run to copy from")
    ap.add_argument("--reuse", default="", help="stages to copy, not rerun (e.g. corpus,synth)")
    ap.add_argument("--table", type=Path, help="print the table of a saved run and exit")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print(format_compare(before, after))
        return
    if args.table:
        print(format_table(json.loads(args.table.read_text())))
        return
    if args.clone is None:
        ap.error("give a checkout to run in, or --table / --compare")
    reused = [s for s in args.reuse.split(",") if s]
    if reused and args.reuse_from is None:
        ap.error("--reuse needs --reuse-from")
    if reused:
        reuse_stages(args.clone.resolve(), args.reuse_from.resolve(), reused)
    result = run_pipeline(args.clone.resolve(), args.force)
    result.update(reused=reused, reused_from=str(args.reuse_from) if reused else None)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    print(format_table(result))
    if result["rc"]:
        sys.exit(result["rc"])


if __name__ == "__main__":
    main()
