"""Attention statistics blockwise vs eager vs the bare SDPA forward: CPU time, wall, peak RSS.

Each configuration (mode x tokens per text x threads) runs in its own forked child of one
parent that has imported torch and transformers, so every child loads the model afresh and
its peak RSS is its own: the child resets the kernel's high-water mark (``VmHWM``, via
``/proc/self/clear_refs``) after loading, so the peak is that of the measured run (weights
included), not of the load. Modes, all on the decoder (no LM head):

- ``sdpa``: the bare decoder forward with SDPA (the denominator of every ratio);
- ``blockwise``: the full extraction (``Extractor.run_batch``, every metric of the project's
  params.yaml ``extract:`` section, attention statistics from q and k, SDPA forward);
- ``eager``: the same extraction with ``extract.attention_impl: eager``;
- ``no_attention``: the same extraction with ``extract.attention: false`` (so
  ``blockwise - no_attention`` is what the attention statistics cost);
- ``attn_blockwise`` / ``attn_eager``: the decoder forward plus the attention statistics
  alone (blockwise sinks / eager weights and ``attention_stats``), no hidden-state metrics:
  what the attention part costs in time and memory, cheap enough for 4,096 tokens.

Texts are random token ids, ``max(1, --batch-tokens // tokens)`` texts per configuration in
one batch. CPU time (``time.process_time``, all threads) is the robust figure on a shared
machine; wall times grow with the load. Ratios are to ``sdpa`` at the same tokens and threads.

``--blocks 32 256`` times the blockwise modes once per ``extract.attention_block`` (rows per
block; the others do not depend on it), so block sizes are compared in one run.

Examples:
  python bench/attn_blockwise.py                                  # 512 and 2,048 tokens
  python bench/attn_blockwise.py --tokens 512 --threads 2 --modes sdpa attn_blockwise \
      --blocks 16 32 64 256
  python bench/attn_blockwise.py --tokens 4096 --threads 2 --modes sdpa blockwise eager
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import re
import time
from pathlib import Path

import numpy as np
import torch
import transformers  # noqa: F401  (imported once in the parent; children inherit it)

from homog.config import Params, load_config
from homog.errors import HomogError
from homog.extract import EncodedText, Extractor, plan_samples
from homog.models import load_model, resolve_source

MODES = ("sdpa", "blockwise", "eager", "no_attention", "attn_blockwise", "attn_eager")


def rss_mib(field: str) -> float:
    """VmRSS / VmHWM of this process in MiB (Linux /proc)."""
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1)) / 1024


def attention_only(lm, mode: str, lengths: torch.Tensor, block: int | str) -> list:
    """Hooks (attn_eager) or sinks (attn_blockwise) that compute the attention statistics
    of every layer and drop them; none for the bare forward."""
    from homog.metrics.attention import attention_stats, stats_from_sums
    from homog.metrics.attn_blockwise import SinkHandle, attention_sums, block_rows

    block = block_rows(block, "cpu")
    if mode == "attn_blockwise":

        def sink(q: torch.Tensor, k: torch.Tensor, **kw: object) -> None:
            stats_from_sums(*attention_sums(q, k, lengths, block=block, **kw), lengths)

        return [SinkHandle(a, sink) for a in lm.attn_modules]
    if mode == "attn_eager":

        def hook(_module: object, _inputs: object, out: tuple) -> None:  # None: output kept
            attention_stats(out[1], lengths)

        return [a.register_forward_hook(hook) for a in lm.attn_modules]
    return []


def measure(
    args: argparse.Namespace, mode: str, tokens: int, threads: int, block: int, out: mp.Queue
) -> None:
    """Child: load, warm up on 32 tokens, reset the peak RSS, run once, report."""
    torch.set_num_threads(threads)
    try:
        params = load_config(args.params)
    except HomogError:  # outside the project root
        params = Params()
    cfg = dataclasses.replace(params.extract, device="cpu", dtype="float32")
    if mode in ("eager", "attn_eager"):
        cfg = dataclasses.replace(cfg, attention_impl="eager")
    if mode == "no_attention":
        cfg = dataclasses.replace(cfg, attention=False)
    if block:
        cfg = dataclasses.replace(cfg, attention_block=block)
    source = resolve_source(args.model, params.model_sources())
    attention = cfg.attention and mode != "sdpa"  # the bare forward runs plain SDPA
    lm = load_model(source, device="cpu", attention=attention, attention_impl=cfg.attention_impl)
    rng = np.random.default_rng(0)
    n_texts = max(1, args.batch_tokens // tokens)

    def texts(n: int, length: int) -> list[EncodedText]:
        ids = rng.integers(1000, lm.info["vocab_size"], (n, length))
        return [
            EncodedText(i, "bench", f"t{i}", x, np.zeros(length, dtype=bool), False)
            for i, x in enumerate(ids)
        ]

    def run(batch: list[EncodedText]) -> None:
        if mode in ("sdpa", "attn_blockwise", "attn_eager"):
            ids = torch.tensor(np.stack([t.input_ids for t in batch]))
            lengths = torch.full((len(batch),), ids.shape[1])
            handles = attention_only(lm, mode, lengths, cfg.attention_block)
            try:
                with torch.inference_mode():
                    mask = torch.ones_like(ids)
                    lm.decoder(input_ids=ids, attention_mask=mask, use_cache=False)
            finally:
                for h in handles:
                    h.remove()
            return
        plan = plan_samples(batch, cfg.sample_tokens, cfg.pooled_texts, 0, True)
        ex = Extractor(lm, cfg)
        try:
            ex.run_batch(batch, "none", plan)
        finally:
            ex.close()

    run(texts(1, 32))  # warm-up: first-call allocations and lazy imports
    batch = texts(n_texts, tokens)
    before = rss_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    t0, c0 = time.perf_counter(), time.process_time()
    run(batch)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out.put(
        {
            "mode": mode,
            "tokens": tokens,
            "threads": threads,
            "texts": n_texts,
            "cpu_s": cpu,
            "wall_s": wall,
            "rss_before_mib": before,
            "peak_rss_mib": rss_mib("VmHWM"),
            "attn": lm.info["attn_implementation"],
            "block": cfg.attention_block,
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="params.yaml key or source")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--batch-tokens", type=int, default=2048, help="tokens per batch (texts)")
    ap.add_argument(
        "--blocks", type=int, nargs="+", default=[0], help="extract.attention_block (0: params)"
    )
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args()

    ctx = mp.get_context("fork")
    rows = []
    for tokens in args.tokens:
        for threads in args.threads:
            for mode, block in [
                (m, b) for m in args.modes for b in (args.blocks if "blockwise" in m else [0])
            ]:
                queue = ctx.Queue()
                run_args = (args, mode, tokens, threads, block, queue)
                child = ctx.Process(target=measure, args=run_args)
                child.start()
                row = queue.get()
                child.join()
                rows.append(row)
                print(json.dumps(row), flush=True)
    base = {(r["tokens"], r["threads"]): r for r in rows if r["mode"] == "sdpa"}
    print(
        f"\n{'tokens':>6} {'thr':>3} {'mode':>14} {'block':>5} {'texts':>5} {'cpu s':>7} "
        f"{'wall s':>7} "
        f"{'peak MiB':>8} {'cpu/sdpa':>8} {'wall/sdpa':>9} {'peak/sdpa':>9}"
    )
    for r in rows:
        b = base.get((r["tokens"], r["threads"]))
        ratio = (
            (
                r["cpu_s"] / b["cpu_s"],
                r["wall_s"] / b["wall_s"],
                r["peak_rss_mib"] / b["peak_rss_mib"],
            )
            if b
            else (float("nan"),) * 3
        )
        print(
            f"{r['tokens']:>6} {r['threads']:>3} {r['mode']:>14} {r['block']!s:>5} {r['texts']:>5} "
            f"{r['cpu_s']:>7.2f} {r['wall_s']:>7.2f} {r['peak_rss_mib']:>8.0f} "
            f"{ratio[0]:>8.3f} {ratio[1]:>9.3f} {ratio[2]:>9.3f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
