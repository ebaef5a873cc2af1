"""Cost curves: extraction time and peak memory against text length and number of texts.

For each configuration, each point runs in a fresh process (its peak RSS is its own): load the
model, one warm-up call on a short text, then one timed call (best of ``--repeats``) over
the texts in homog's batches (``extract.batch_tokens`` padded tokens):

  bare       the decoder's forward pass with SDPA attention (no LM head, no hooks);
  eager      homog's full extraction (params.yaml's ``extract:``: every metric, token set and
             attention statistic) with eager attention, which materialises every layer's
             (heads x n x n) weights;
  blockwise  the same with ``extract.attention_impl: blockwise`` (attention statistics from q
             and k in blocks of query rows; the forward pass keeps SDPA); printed as "not
             available in this version" where homog has no such option.

Two sweeps: ``--lengths`` tokens per text with ``--length-texts`` texts each (default 1), and
``--counts`` texts of ``--count-tokens`` tokens. Texts are real IMDB reviews (consecutive
reviews concatenated to the length; no padding). Writes ``cost_curves.csv`` and
``cost_curves.png`` under ``--out`` and prints a Markdown table (wall and process CPU time,
peak RSS, and RSS above the loaded model, with the ratios to bare).

Examples:
  python bench/cost_curves.py                               # smollm2-135m, torch's threads
  python bench/cost_curves.py --threads 1,2 --lengths 128,512 --counts 1,4
  python bench/cost_curves.py --model random:tiny-llama --lengths 32,64 --counts 1,2
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import (  # noqa: E402
    IMDB_SAMPLE,
    PeakMemory,
    encoded_texts,
    machine_line,
    markdown_table,
    measure,
    model_setup,
    read_reviews,
    run_fresh,
    set_threads,
    token_windows,
)

CONFIGS = ("bare", "eager", "blockwise")
CSV_COLUMNS = (
    "config",
    "sweep",
    "threads",
    "n_texts",
    "tokens",
    "wall_s",
    "cpu_s",
    "peak_rss_mib",
    "loaded_rss_mib",
    "work_rss_mib",
    "cuda_peak_mib",
    "attn_implementation",
    "status",
)


def blockwise_missing() -> str | None:
    """None when this homog's ExtractConfig takes ``attention_impl='blockwise'``, else why not."""
    from homog.config import ExtractConfig
    from homog.errors import HomogError

    if "attention_impl" not in ExtractConfig.__dataclass_fields__:
        return "not available in this version (ExtractConfig has no attention_impl)"
    try:
        ExtractConfig(attention_impl="blockwise")  # type: ignore[call-arg]
    except (HomogError, TypeError, ValueError) as exc:
        return f"not available in this version ({exc})"
    return None


# ---------------------------------------------------------------------------------------------
# one point, in a child process


def child(args: argparse.Namespace) -> None:
    import torch

    from homog.extract import Extractor, compute_shard, make_batches, plan_samples
    from homog.models import load_for, load_model

    threads = set_threads(args.threads and int(args.threads))
    source, cfg = model_setup(args.model, args.params)
    cfg = dataclasses.replace(cfg, device=args.device, dtype=args.dtype, max_tokens=args.tokens)
    if args.batch_tokens:
        cfg = dataclasses.replace(cfg, batch_tokens=args.batch_tokens)
    ids = np.load(args.ids)
    if args.child == "bare":
        lm = load_model(source, dtype=args.dtype, device=args.device, attention=False)
    else:
        cfg = dataclasses.replace(cfg, attention=True)
        if "attention_impl" in cfg.__dataclass_fields__:
            cfg = dataclasses.replace(cfg, attention_impl=args.child)  # type: ignore[call-arg]
        lm = load_for(source, cfg)
    impl = getattr(lm.model.config, "_attn_implementation", None) or lm.info.get(
        "attn_implementation"
    )

    def work(rows: np.ndarray) -> None:
        texts = encoded_texts(rows)
        if args.child == "bare":
            with torch.inference_mode():
                for batch in make_batches(texts, cfg.batch_tokens):
                    x = torch.from_numpy(np.stack([t.input_ids for t in batch]))
                    x = x.to(lm.input_device)
                    lm.decoder(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
            return
        plan = plan_samples(texts, cfg.sample_tokens, cfg.pooled_texts, cfg.seed, True)
        extractor = Extractor(lm, cfg)
        try:
            compute_shard(extractor, texts, "none", plan, cfg.batch_tokens)
        finally:
            extractor.close()

    work(ids[:1, : min(32, ids.shape[1])])  # warm-up
    # the resident set once the model is loaded and warm: what the work adds comes on top
    PeakMemory(args.device).reset()
    loaded = PeakMemory.rss_mib()
    runs = [measure(lambda: work(ids), args.device)[1] for _ in range(args.repeats)]
    best = min(runs, key=lambda r: r["wall_s"])
    peak = max(r["peak_rss_mib"] for r in runs)
    result = {
        "threads": threads,
        "wall_s": best["wall_s"],
        "cpu_s": best["cpu_s"],
        "peak_rss_mib": peak,
        "loaded_rss_mib": loaded,
        "work_rss_mib": peak - loaded,
        "cuda_peak_mib": best["cuda_peak_mib"],
        "attn_implementation": impl,
        "status": "ok",
    }
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------------------------------------
# the sweeps, in the parent


def points(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    """(sweep, n_texts, tokens) of both sweeps (a point both share is listed in each)."""
    lengths = [("length", args.length_texts, n) for n in _ints(args.lengths)]
    counts = [("count", n, args.count_tokens) for n in _ints(args.counts)]
    return lengths + counts


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise SystemExit(f"expected a comma-separated list of integers, got {text!r}") from exc
    if not values or min(values) < 1:
        raise SystemExit(f"expected integers >= 1, got {text!r}")
    return values


def parent(args: argparse.Namespace) -> int:
    from homog.models import load_tokenizer
    from homog.progress import progress

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source, _ = model_setup(args.model, args.params)
    tokenizer, _ = load_tokenizer(source)
    reviews = read_reviews(Path(args.texts))
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if bad := sorted(set(configs) - set(CONFIGS)):
        raise SystemExit(f"--configs: unknown {bad}; use some of {', '.join(CONFIGS)}")
    missing = blockwise_missing()
    threads = _ints(args.threads) if args.threads else [0]
    print(
        f"{args.model} ({source}) {args.dtype} on {args.device}\n"
        f"machine: {machine_line(args.device)}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    measured: dict[tuple[int, int, int, str], dict[str, Any]] = {}
    todo = [(t, p, c) for t in threads for p in points(args) for c in configs]
    with progress() as bar:
        task = bar.add_task("cost curves", total=len(todo))
        for t, (sweep, n_texts, tokens), config in todo:
            row = {"config": config, "sweep": sweep, "threads": t, "n_texts": n_texts}
            row["tokens"] = tokens
            if config == "blockwise" and missing:
                rows.append({**row, "status": missing})
                bar.advance(task)
                continue
            key = (t, n_texts, tokens, config)
            if key in measured:  # the point both sweeps share runs once
                rows.append({**measured[key], "sweep": sweep})
                bar.advance(task)
                continue
            bar.update(task, description=f"{config} {n_texts}x{tokens} ({t or 'default'} thr)")
            ids_path = out / f"ids_{n_texts}x{tokens}.npy"
            if not ids_path.exists():
                np.save(ids_path, token_windows(tokenizer, reviews, n_texts, tokens))
            child_args = [
                *("--child", config, "--model", args.model, "--params", args.params),
                *("--dtype", args.dtype, "--device", args.device, "--tokens", str(tokens)),
                *("--ids", str(ids_path), "--repeats", str(args.repeats)),
                *(["--threads", str(t)] if t else []),
                *(["--batch-tokens", str(args.batch_tokens)] if args.batch_tokens else []),
            ]
            res = run_fresh(Path(__file__), child_args, args.timeout)
            rows.append({**row, **res, "status": res.get("status", res.get("error"))})
            measured[key] = rows[-1]
            write_csv(out / "cost_curves.csv", rows)
            bar.advance(task)
    print(f"\nmachine: {machine_line(args.device)}")
    print(table(rows))
    if missing and "blockwise" in configs:
        print(f"\nblockwise: {missing}")
    plot(rows, out / "cost_curves.png", f"{args.model} ({args.dtype}, {args.device})")
    print(f"\nwritten: {out / 'cost_curves.csv'}, {out / 'cost_curves.png'}")
    failed = [r for r in rows if r["status"] not in ("ok", missing)]
    for r in failed:
        print(f"FAILED: {r['config']} {r['n_texts']}x{r['tokens']}: {r['status']}", file=sys.stderr)
    return 1 if failed else 0


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def table(rows: list[dict[str, Any]]) -> str:
    """One Markdown row per (threads, n_texts, tokens): each config's figures and ratios."""
    keyed: dict[tuple[int, int, int], dict[str, Any]] = {}
    for r in rows:
        key = (r["threads"], r["n_texts"], r["tokens"])
        cell = keyed.setdefault(key, {"threads": r["threads"] or "default"})
        cell.update({"texts": r["n_texts"], "tokens": r["tokens"]})
        if r["status"] != "ok":
            continue
        c = r["config"]
        cell[f"{c} s"] = r["wall_s"]
        cell[f"{c} CPU s"] = r["cpu_s"]
        cell[f"{c} MiB"] = r["peak_rss_mib"]
        cell[f"{c} +MiB"] = r["work_rss_mib"]
    out = []
    for cell in keyed.values():
        for c in ("eager", "blockwise"):
            if f"{c} CPU s" in cell and "bare CPU s" in cell:
                cell[f"{c}/bare CPU"] = cell[f"{c} CPU s"] / cell["bare CPU s"]
                cell[f"{c}/bare MiB"] = cell[f"{c} MiB"] / cell["bare MiB"]
        out.append(cell)
    cols = ["threads", "texts", "tokens"]
    for c in CONFIGS:
        if any(f"{c} s" in cell for cell in out):
            cols += [f"{c} s", f"{c} CPU s", f"{c} MiB", f"{c} +MiB"]
    for c in ("eager", "blockwise"):
        if any(f"{c}/bare CPU" in cell for cell in out):
            cols += [f"{c}/bare CPU", f"{c}/bare MiB"]
    return markdown_table(out, cols)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """2 x 2 panels: process CPU time (robust to other load on the machine; wall time is in the
    CSV) and peak RSS against tokens per text and number of texts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    colours = {"bare": "tab:gray", "eager": "tab:red", "blockwise": "tab:blue"}
    styles = ["-", "--", ":", "-."]
    thread_list = sorted({r["threads"] for r in ok})
    for col, (sweep, xkey, xlabel) in enumerate(
        [("length", "tokens", "tokens per text"), ("count", "n_texts", "number of texts")]
    ):
        for row, (ykey, ylabel) in enumerate(
            [("cpu_s", "process CPU time (s)"), ("peak_rss_mib", "peak RSS (MiB)")]
        ):
            ax = axes[row][col]
            for config in CONFIGS:
                for k, t in enumerate(thread_list):
                    pts = sorted(
                        (r[xkey], r[ykey])
                        for r in ok
                        if r["sweep"] == sweep and r["config"] == config and r["threads"] == t
                    )
                    if not pts:
                        continue
                    label = config + (f", {t} thread{'s' if t > 1 else ''}" if t else "")
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, styles[k % 4], marker="o", color=colours[config], label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            n = {r["n_texts"] for r in ok if r["sweep"] == sweep}
            tok = {r["tokens"] for r in ok if r["sweep"] == sweep}
            fixed = f"{min(n)} text(s)" if sweep == "length" and n else f"{min(tok)} tokens each"
            ax.set_title(f"{ylabel.split(' (')[0]} vs {xlabel} ({fixed})" if ok else xlabel)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.suptitle(f"homog extraction cost: {title}")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="params.yaml key or source")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--texts", default=str(IMDB_SAMPLE), help="JSON-lines file with a 'text'")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"some of {','.join(CONFIGS)}")
    ap.add_argument("--lengths", default="128,512,2048,4096", help="tokens per text")
    ap.add_argument("--length-texts", type=int, default=1, help="texts per length")
    ap.add_argument("--counts", default="1,4,16", help="numbers of texts")
    ap.add_argument("--count-tokens", type=int, default=512, help="tokens per text for --counts")
    ap.add_argument("--threads", default=None, help="torch threads, e.g. 1,2 (default: torch's)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: extract.batch_tokens")
    ap.add_argument("--repeats", type=int, default=1, help="timed calls per point (best kept)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per point")
    ap.add_argument("--out", default="bench/out", help="output directory")
    ap.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    return ap


def main() -> None:
    args = build_parser().parse_args()
    if args.child:
        child(args)
    else:
        sys.exit(parent(args))


if __name__ == "__main__":
    main()
