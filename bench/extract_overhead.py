"""What the streamed extraction costs on top of the bare forward pass, and what it saves.

In one process, on the same token ids, it times
  (a)  the bare forward pass: ``model(**batch)`` with SDPA attention, no hidden states
       (also (a'), the decoder alone without the LM head, which is what (b) runs);
  (b)  the full extraction: ``homog.extract.Extractor.run_batch`` (all metrics at every
       layer: the token sets no_sink and standardized, the peers' metrics, massive
       activations, sink_rate; attention statistics per head with eager attention, pooled
       and sampled vectors), results moved to the CPU;
  (bt) "today's" extraction before issue 13: the same with ``extract.token_sets: []`` and
       ``extract.peer_metrics: false`` (the 7 metrics of homog.metrics only);
  (c)  the naive way: ``model(**batch, output_hidden_states=True)``, then per text and
       layer a ``numpy.linalg.svd`` on the CPU (hidden-state metrics only, no attention).
and prints b/a, b/bt (the cost of the token sets and peers' metrics; target <= 1.15) and c/b
(per-text times; (c) may run on a subset, --naive-texts).

Examples:
  python bench/extract_overhead.py                                  # smollm2-135m, CPU
  python bench/extract_overhead.py --model random:llama-8b --dtype bfloat16 \
      --device cuda --n-texts 256 --tokens 512
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable

import numpy as np
import torch

from homog.config import Params, load_config
from homog.errors import HomogError
from homog.extract import EncodedText, Extractor, make_batches, plan_samples
from homog.models import load_model, resolve_source


def synthetic_texts(vocab_size: int, n_texts: int, tokens: int, seed: int) -> list[EncodedText]:
    """n_texts texts of exactly `tokens` random token ids (no special tokens)."""
    rng = np.random.default_rng(seed)
    low = 1000 if vocab_size > 2000 else 0  # skip the special/control ids at the start
    return [
        EncodedText(
            i,
            "bench",
            f"t{i:05d}",
            rng.integers(low, vocab_size, tokens),
            np.zeros(tokens, dtype=bool),
            False,
        )
        for i in range(n_texts)
    ]


def batch_tensors(texts: list[EncodedText], device: torch.device) -> dict[str, torch.Tensor]:
    ids = torch.tensor(np.stack([t.input_ids for t in texts]), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def naive_metrics(hidden_states: tuple[torch.Tensor, ...], n_texts: int) -> list[dict]:
    """Per text and layer, numpy SVD on the CPU: what a researcher would write first."""
    out = []
    for b in range(n_texts):
        for h in hidden_states:
            x = h[b].float().cpu().numpy().astype(np.float64)
            s = np.linalg.svd(x, compute_uv=False)
            p = s / s.sum()
            unit = x / np.linalg.norm(x, axis=1, keepdims=True)
            r = np.linalg.norm(unit.mean(0))
            n = len(x)
            out.append(
                {
                    "erank": np.exp(-(p * np.log(p)).sum()),
                    "mev": s[0] ** 2 / (s**2).sum(),
                    "schatten_1": s.sum() / np.sqrt((s**2).sum()),
                    "schatten_4": (s**4).sum() ** 0.25 / np.sqrt((s**2).sum()),
                    "resultant_length": r,
                    "mean_cosine": (n * r**2 - 1) / (n - 1),
                    "norm_mean": np.linalg.norm(x, axis=1).mean(),
                }
            )
    return out


def timed(fn: Callable[[], None], device: torch.device) -> tuple[float, float, float]:
    """(wall seconds, process CPU seconds, peak GPU GiB or 0) of one call.

    CPU seconds make the CPU ratios robust to other processes sharing the cores.
    """
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    peak = 0.0
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**30
    return time.perf_counter() - t0, time.process_time() - c0, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="params.yaml key or source")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n-texts", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: extract.batch_tokens")
    ap.add_argument(
        "--naive-texts",
        type=int,
        default=None,
        help="texts for (c) (default: all); its time is scaled per text",
    )
    ap.add_argument("--repeats", type=int, default=2, help="best of N for (a) and (b)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()

    try:
        params = load_config(args.params)
    except HomogError:  # the benchmark also runs outside the project root
        params = Params()
    source = resolve_source(args.model, params.model_sources())
    cfg = dataclasses.replace(params.extract, device=args.device, dtype=args.dtype)
    if args.batch_tokens:
        cfg = dataclasses.replace(cfg, batch_tokens=args.batch_tokens)
    t0 = time.perf_counter()
    lm = load_model(source, dtype=args.dtype, device=args.device, attention=True)
    load_s = time.perf_counter() - t0
    dev = lm.input_device
    texts = synthetic_texts(lm.info["vocab_size"], args.n_texts, args.tokens, 0)
    batches = make_batches(texts, cfg.batch_tokens)
    plan = plan_samples(texts, cfg.sample_tokens, cfg.pooled_texts, 0, True)
    inputs = [batch_tensors(b, dev) for b in batches]

    def bare(module: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            with torch.inference_mode():
                for x in inputs:
                    module(**x, use_cache=False)

        return run

    today = {"token_sets": (), "peer_metrics": False}

    def extraction(attention: bool, **overrides: object) -> Callable[[], None]:
        def run() -> None:
            # hooks are installed only for (b): (a) and (c) run the untouched model
            lm.model.set_attn_implementation("eager" if attention else "sdpa")
            ecfg = dataclasses.replace(cfg, attention=attention, **overrides)
            extractor = Extractor(lm, ecfg)
            try:
                for b in batches:
                    extractor.run_batch(b, "none", plan)
            finally:
                extractor.close()

        return run

    n_naive = min(args.naive_texts or len(texts), len(texts))
    naive_inputs = [batch_tensors(b, dev) for b in make_batches(texts[:n_naive], cfg.batch_tokens)]

    def naive() -> None:
        with torch.inference_mode():
            for x in naive_inputs:
                out = lm.model(**x, output_hidden_states=True, use_cache=False)
                naive_metrics(out.hidden_states, x["input_ids"].shape[0])

    def with_attn(impl: str, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            lm.model.set_attn_implementation(impl)
            fn()

        return run

    results: dict[str, list[tuple[float, float, float]]] = {
        "a": [],
        "a_decoder": [],
        "b": [],
        "b_today": [],
        "b_no_attention": [],
        "c": [],
    }
    with_attn("sdpa", bare(lm.model))()  # warm-up
    for _ in range(args.repeats):
        results["a"].append(timed(with_attn("sdpa", bare(lm.model)), dev))
        results["a_decoder"].append(timed(with_attn("sdpa", bare(lm.decoder)), dev))
        # (b) and (bt) alternate, so a change in machine load hits both alike
        results["b_today"].append(timed(extraction(True, **today), dev))
        results["b"].append(timed(extraction(True), dev))
        results["b_no_attention"].append(timed(extraction(False), dev))
    results["c"].append(timed(with_attn("sdpa", naive), dev))

    best = {k: min(v, key=lambda x: x[0]) for k, v in results.items()}
    n_tok = args.n_texts * args.tokens
    per_text = {k: best[k][0] / (n_naive if k == "c" else args.n_texts) for k in best}
    cpu = {
        k: min(x[1] for x in v) / (n_naive if k == "c" else args.n_texts)
        for k, v in results.items()
    }
    figures = {
        "model": args.model,
        "source": source,
        "dtype": args.dtype,
        "device": str(dev),
        "n_texts": args.n_texts,
        "tokens": args.tokens,
        "batch_tokens": cfg.batch_tokens,
        "threads": torch.get_num_threads(),
        "load_s": round(load_s, 1),
        "a_s": best["a"][0],
        "a_decoder_s": best["a_decoder"][0],
        "b_s": best["b"][0],
        "b_no_attention_s": best["b_no_attention"][0],
        "b_today_s": best["b_today"][0],
        "b_over_b_today": per_text["b"] / per_text["b_today"],
        "cpu_time_b_over_b_today": cpu["b"] / cpu["b_today"],
        "c_s": best["c"][0],
        "c_texts": n_naive,
        "b_over_a": per_text["b"] / per_text["a"],
        "b_over_a_decoder": per_text["b"] / per_text["a_decoder"],
        "b_no_attention_over_a": per_text["b_no_attention"] / per_text["a"],
        "c_over_b": per_text["c"] / per_text["b"],
        "cpu_time_b_over_a": cpu["b"] / cpu["a"],
        "cpu_time_b_no_attention_over_a": cpu["b_no_attention"] / cpu["a"],
        "cpu_time_c_over_b": cpu["c"] / cpu["b"],
        "tokens_per_s_a": n_tok / best["a"][0],
        "tokens_per_s_b": n_tok / best["b"][0],
    }
    if dev.type == "cuda":
        figures.update({f"peak_gib_{k}": best[k][2] for k in best})
    print(
        f"model {args.model} ({source}) {args.dtype} on {dev}, {args.n_texts} texts x "
        f"{args.tokens} tokens, batch_tokens {cfg.batch_tokens}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"(a)  bare forward model(**batch), SDPA     {best['a'][0]:8.2f} s  "
        f"{figures['tokens_per_s_a']:9.0f} tok/s"
    )
    print(f"(a') decoder only (no LM head), SDPA       {best['a_decoder'][0]:8.2f} s")
    print(
        f"(b)  full extraction (eager, all stats)    {best['b'][0]:8.2f} s  "
        f"{figures['tokens_per_s_b']:9.0f} tok/s"
    )
    print(f"(bt) today's extraction (before issue 13)  {best['b_today'][0]:8.2f} s")
    print(f"(b0) extraction without attention (SDPA)   {best['b_no_attention'][0]:8.2f} s")
    print(f"(c)  naive hidden states + numpy SVD       {best['c'][0]:8.2f} s  ({n_naive} texts)")
    print(
        f"b/a  = {figures['b_over_a']:.3f}   (b/a' = {figures['b_over_a_decoder']:.3f}, "
        f"b0/a = {figures['b_no_attention_over_a']:.3f})"
    )
    print(
        f"b/bt = {figures['b_over_b_today']:.3f}   (token sets + peers' metrics vs today's; "
        f"by process CPU time {figures['cpu_time_b_over_b_today']:.3f}; target <= 1.15)"
    )
    print(f"c/b  = {figures['c_over_b']:.2f}")
    if dev.type == "cpu":
        print(
            f"by process CPU time: b/a = {figures['cpu_time_b_over_a']:.3f}, "
            f"b0/a = {figures['cpu_time_b_no_attention_over_a']:.3f}, "
            f"c/b = {figures['cpu_time_c_over_b']:.2f}"
        )
    if dev.type == "cuda":
        print("peak GPU GiB: " + ", ".join(f"{k} {best[k][2]:.1f}" for k in best))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)


if __name__ == "__main__":
    main()
