"""homog against the tools its users would otherwise pick: the same work, side by side.

The work: for N texts of T tokens (real IMDB reviews, the same token ids for every tool), per
text and layer ``erank``, ``mev`` and ``resultant_length`` of the hidden states (docs/design.md;
layer 0 the embedding output, layer L the final-norm output) and, per attention layer and
head, the first token's column mass ``attn_first`` = (1/n) sum_i A_i0. Done by

  homog      ``homog.extract.Extractor`` over the batches (``compute_shard``: what every
             engine runs) with params.yaml's ``extract:`` (every metric, token set and
             attention statistic; ``attention_impl`` as configured, blockwise by default);
  homog-min  the same with ``token_sets: []`` and ``peer_metrics: false`` (the 7 metrics of
             homog.metrics and the attention statistics: the closest to the peers' work);
  hf-fast    the expert peer: the same forward as hf, then what a competent user writes
             (``_peer_tools.expert_maths``): every layer's hidden states stacked, Gram
             matrices and ``torch.linalg.eigvalsh`` in float64, batched on the device, the
             formulas vectorised, one host copy at the end;
  hf         the decoder with ``output_hidden_states=True, output_attentions=True`` (eager),
             then per text and layer ``torch.linalg.svdvals`` in float64 and the formulas
             (a host sync per value);
  nnsight    ``nnsight.NNsight`` around the same decoder, saving every layer's output and
             attention weights in a trace, then the same maths as hf;
  tlens      TransformerLens ``run_with_cache`` (resid stream and attention patterns) on a
             ``TransformerBridge.boot_transformers(..., hf_model=...)`` around the same HF
             model object (TransformerLens 4 has no HookedTransformer), then the same maths;
             skipped with the reason when it cannot load the model.

Every tool runs in a fresh process (peak RSS is its own): load the model, one warm-up call on
a short text, then ``--repeats`` timed calls (best wall time kept; ``--rounds`` runs every
tool again, in reverse order). The peers get the texts in the batches homog makes
(``extract.batch_tokens`` padded tokens). homog, hf and nnsight run the decoder without the LM
head; TransformerLens's bridge runs the whole causal LM (it has no decoder-only entry).
The script prints wall and process CPU time, tokens/s, peak RSS during the work and the RSS
the work adds to the loaded model (CUDA peak on a GPU) with the ratios to homog, checks that
every tool's numbers agree with hf's (|a - b| <= atol + rtol |b|), and reports the targets
of issue 15: homog at least 3x faster than the fastest peer, with lower peak memory. Exit
status 1 when numbers disagree, 2 when a tool failed. Writes peers.json and peers.md (the
table) under ``--out``.

The peers are not homog dependencies: ``make bench-peers`` builds ``.venv-bench`` with the
``bench`` extra and runs this script there. Examples:
  python bench/peers.py                                   # smollm2-135m, 8 x 512 tokens
  python bench/peers.py --model random:tiny-llama --n-texts 2 --tokens 64 --tools homog,hf
  python bench/peers.py --tools homog-min,homog,hf-fast,hf --n-texts 4 --tokens 256
  python bench/peers.py --device cuda --dtype bfloat16 --n-texts 64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import (  # noqa: E402
    IMDB_SAMPLE,
    PeakMemory,
    machine_line,
    markdown_table,
    measure,
    model_setup,
    read_reviews,
    run_fresh,
    set_threads,
    token_windows,
)
from _peer_tools import (  # noqa: E402
    HOMOG_TOOLS,
    METRICS,
    REFERENCE,
    TOOL_WORK,
    TOOLS,
    SkipTool,
    homog_work,
)


def child(args: argparse.Namespace) -> None:
    """Run one tool: load, warm up, time ``--repeats`` calls; write JSON and the metrics.

    ``loaded_rss_mib`` is the resident set once the model is loaded and warm; the peaks are
    taken from there on (the kernel's high-water mark is reset before each timed call).
    """
    threads = set_threads(args.threads)
    ids = np.load(args.ids)
    t0 = time.perf_counter()
    try:
        if args.child in HOMOG_TOOLS:
            work, info = homog_work(args, args.child)
        else:
            work, info = TOOL_WORK[args.child](args)
    except SkipTool as exc:
        Path(args.result).write_text(json.dumps({"skipped": str(exc)}))
        return
    load_s = time.perf_counter() - t0
    work(ids[:1, : min(64, ids.shape[1])])  # warm-up: first-call set-up is not timed
    PeakMemory(args.device).reset()
    loaded = PeakMemory.rss_mib()
    runs, values = [], {}
    for _ in range(args.repeats):
        values, figures = measure(lambda: work(ids), args.device)
        runs.append(figures)
    best = min(runs, key=lambda r: r["wall_s"])
    metrics_path = Path(args.out) / f"peers_{args.child}.npz"
    np.savez(metrics_path, **values)
    peak = max(r["peak_rss_mib"] for r in runs)
    result = {
        **info,
        "threads": threads,
        "load_s": load_s,
        "wall_s": best["wall_s"],
        "cpu_s": best["cpu_s"],
        "peak_rss_mib": peak,
        "loaded_rss_mib": loaded,
        "work_rss_mib": peak - loaded,
        "cuda_peak_mib": best["cuda_peak_mib"],
        "rss_reset": best["rss_reset"],
        "runs": runs,
        "metrics": str(metrics_path),
    }
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------------------------------------
# the parent: texts, one fresh process per tool, comparison and report


def agreement(
    values: dict[str, dict[str, np.ndarray]], rtol: float, atol: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows (tool, metric, max abs diff, max rel diff, ok) against REFERENCE, and failures."""
    rows, failures = [], []
    ref = values[REFERENCE]
    for tool, vals in values.items():
        if tool == REFERENCE:
            continue
        for m in METRICS:
            a, b = vals[m], ref[m]
            if a.shape != b.shape:
                failures.append(f"{tool} {m}: shape {a.shape} vs {REFERENCE} {b.shape}")
                continue
            diff = np.abs(a - b)
            rel = diff / np.maximum(np.abs(b), 1e-300)
            ok = bool(np.all(diff <= atol + rtol * np.abs(b)))
            rows.append(
                {
                    "tool": tool,
                    "metric": m,
                    "max_abs_diff": float(diff.max()),
                    "max_rel_diff": float(rel.max()),
                    "ok": "yes" if ok else "NO",
                }
            )
            if not ok:
                worst = np.unravel_index(np.argmax(diff - rtol * np.abs(b)), diff.shape)
                failures.append(
                    f"{tool} {m}: max |diff| {diff.max():.3g} (at {tuple(map(int, worst))}: "
                    f"{a[worst]:.9g} vs {b[worst]:.9g}) beyond atol {atol:g} + rtol {rtol:g}"
                )
    return rows, failures


def parent(args: argparse.Namespace) -> int:
    from homog.models import load_tokenizer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source, _ = model_setup(args.model, args.params)
    tokenizer, _ = load_tokenizer(source)
    ids = token_windows(tokenizer, read_reviews(Path(args.texts)), args.n_texts, args.tokens)
    ids_path = out / "peers_ids.npy"
    np.save(ids_path, ids)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown or REFERENCE not in tools:
        raise SystemExit(f"--tools: unknown {unknown}; use {', '.join(TOOLS)} (with {REFERENCE})")
    print(
        f"{args.model} ({source}) {args.dtype} on {args.device}: {args.n_texts} texts x "
        f"{args.tokens} tokens from {args.texts}\nmachine: {machine_line(args.device)}",
        flush=True,
    )
    passthrough = [
        *("--model", args.model, "--params", args.params, "--dtype", args.dtype),
        *("--device", args.device, "--tokens", str(args.tokens), "--repeats", str(args.repeats)),
        *("--ids", str(ids_path), "--out", str(out)),
        *(["--threads", str(args.threads)] if args.threads else []),
        *(["--batch-tokens", str(args.batch_tokens)] if args.batch_tokens else []),
    ]
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
    for r in range(args.rounds):
        # later rounds run the tools in reverse order, so a drift in machine load hits all
        order = tools if r % 2 == 0 else tools[::-1]
        for i, tool in enumerate(order, 1):
            print(f"[round {r + 1}/{args.rounds}, {i}/{len(tools)}] {tool} ...", flush=True)
            runs[tool].append(
                run_fresh(Path(__file__), ["--child", tool, *passthrough], args.timeout)
            )
    return report(args, {t: best_round(v) for t, v in runs.items()}, ids.size, out)


def best_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One tool's rounds merged: the fastest round's figures, the highest peaks of all."""
    ok = [r for r in rounds if "wall_s" in r]
    if not ok:
        return rounds[-1]
    best = dict(min(ok, key=lambda r: r["wall_s"]))
    for key in ("peak_rss_mib", "work_rss_mib", "cuda_peak_mib"):
        values = [r[key] for r in ok if r.get(key) is not None]
        best[key] = max(values) if values else None
    best["rounds"] = len(ok)
    return best


def report(
    args: argparse.Namespace, results: dict[str, dict[str, Any]], n_tok: int, out: Path
) -> int:
    """Print the tables and targets, write peers.json / peers.md; the exit status."""
    done = {t: r for t, r in results.items() if "wall_s" in r}
    for tool, r in results.items():
        if "skipped" in r:
            print(f"{tool}: skipped: {r['skipped']}")
        elif "error" in r:
            print(f"{tool}: FAILED: {r['error']}")
    base = done.get("homog") or done.get("homog-min")
    rows = []
    for tool, r in done.items():
        row = {
            "tool": tool,
            "wall s": r["wall_s"],
            "CPU s": r["cpu_s"],
            "tokens/s": n_tok / r["wall_s"],
            "peak RSS MiB": r["peak_rss_mib"],
            "+MiB": r["work_rss_mib"],
        }
        if r.get("cuda_peak_mib") is not None:
            row["CUDA peak MiB"] = r["cuda_peak_mib"]
        if base:
            row["wall / homog"] = r["wall_s"] / base["wall_s"]
            row["CPU / homog"] = r["cpu_s"] / base["cpu_s"]
            row["RSS / homog"] = r["peak_rss_mib"] / base["peak_rss_mib"]
        rows.append(row)
    cols = ["tool", "wall s", "CPU s", "tokens/s", "peak RSS MiB", "+MiB"]
    cols += ["CUDA peak MiB"] if args.device.startswith("cuda") else []
    cols += ["wall / homog", "CPU / homog", "RSS / homog"]
    table = markdown_table(rows, cols)
    print(f"\n{table}")
    if not all(r.get("rss_reset", True) for r in done.values()):
        print("note: the RSS peak could not be reset: it is each process's whole peak")
    values = {t: dict(np.load(r["metrics"])) for t, r in done.items()}
    failures = [f"{REFERENCE} did not run: nothing to compare"] if REFERENCE not in values else []
    agree_rows: list[dict[str, Any]] = []
    if not failures:
        agree_rows, failures = agreement(values, args.rtol, args.atol)
        print(f"\nagreement with {REFERENCE} (atol {args.atol:g}, rtol {args.rtol:g}):")
        print(markdown_table(agree_rows, ["tool", "metric", "max_abs_diff", "max_rel_diff", "ok"]))
    targets = targets_lines(done)
    print("\n" + "\n".join(targets))
    summary = {
        "args": vars(args),
        "machine": machine_line(args.device),
        "results": results,
        "agreement": agree_rows,
        "failures": failures,
        "targets": targets,
    }
    (out / "peers.json").write_text(json.dumps(summary, indent=2))
    (out / "peers.md").write_text(table + "\n\n" + "\n".join(targets) + "\n")
    print(f"\nwritten: {out / 'peers.json'}, {out / 'peers.md'}")
    if failures:
        print("\nDISAGREEMENT:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0 if not any("error" in r for r in results.values()) else 2


def targets_lines(done: dict[str, dict[str, Any]]) -> list[str]:
    """Issue 15's targets for each homog row: >= 3x faster than the fastest peer (by wall
    time, and by process CPU time, which other load on the machine inflates less) and a lower
    peak memory than the leanest peer (peak RSS; also the RSS the work adds to the loaded
    model, which leaves out what each tool's imports cost). On a GPU the memory verdict is the
    CUDA peak (where the model and its activations live); the host RSS is still printed."""
    peers = {t: r for t, r in done.items() if t not in HOMOG_TOOLS}
    if not peers:
        return ["targets: no peer ran"]

    def best(key: str) -> str:
        return min(peers, key=lambda t: peers[t][key])

    lines = []
    for tool in (t for t in HOMOG_TOOLS if t in done):
        r = done[tool]
        speed = {k: peers[best(k)][k] / r[k] for k in ("wall_s", "cpu_s")}
        keys = ["peak_rss_mib", "work_rss_mib"]
        if r.get("cuda_peak_mib") is not None:
            keys.append("cuda_peak_mib")
        mem = {k: (best(k), peers[best(k)][k], r[k]) for k in keys}
        met = "met" if min(speed.values()) >= 3 else "NOT met"
        lines.append(
            f"{tool}: {speed['wall_s']:.2f}x faster than the fastest peer by wall time "
            f"({best('wall_s')}), {speed['cpu_s']:.2f}x by CPU time ({best('cpu_s')}); "
            f"target >= 3x: {met}"
        )
        labels = {"peak_rss_mib": "peak RSS", "work_rss_mib": "RSS added by the work"}
        labels["cuda_peak_mib"] = "CUDA peak"
        parts = [
            f"{labels[k]} {mine:.0f} MiB vs {peer} {theirs:.0f} MiB"
            for k, (peer, theirs, mine) in mem.items()
        ]
        judged = ["cuda_peak_mib"] if "cuda_peak_mib" in mem else list(mem)
        lower = all(mem[k][2] < mem[k][1] for k in judged)
        parts[-1] += " (the verdict)" if judged == ["cuda_peak_mib"] else ""
        lines.append(
            f"{tool}: {'; '.join(parts)}; lower peak memory: {'met' if lower else 'NOT met'}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="params.yaml key or source")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--texts", default=str(IMDB_SAMPLE), help="JSON-lines file with a 'text'")
    ap.add_argument("--n-texts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=512, help="tokens per text")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"subset of {','.join(TOOLS)}")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: extract.batch_tokens")
    ap.add_argument("--repeats", type=int, default=2, help="timed calls per tool (best kept)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every tool (best kept)")
    ap.add_argument("--rtol", type=float, default=1e-4, help="agreement: relative tolerance")
    ap.add_argument("--atol", type=float, default=1e-6, help="agreement: absolute tolerance")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per tool")
    ap.add_argument("--out", default="bench/out", help="output directory")
    ap.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
    else:
        sys.exit(parent(args))


if __name__ == "__main__":
    main()
