"""What the streamed extraction costs on top of the bare forward pass, and what it saves.

In one process, on the same token ids, it times
  (a)  the bare forward pass: ``model(**batch)`` with SDPA attention, no hidden states
       (also (a'), the decoder alone without the LM head, which is what (b) runs);
  (b)  the full extraction: ``homog.extract.Extractor.run_batch`` (all metrics at every
       layer: the token sets no_sink and standardized, the peers' metrics, massive
       activations, sink_rate; attention statistics per head with ``--attention-impl``,
       pooled and sampled vectors), results moved to the CPU;
  (bt) "today's" extraction before issue 13: the same with ``extract.token_sets: []`` and
       ``extract.peer_metrics: false`` (the 7 metrics of homog.metrics only);
  (bb) with ``--baseline-rev REV``: (b) with the hidden-state metrics code of git revision
       REV (``homog/metrics/spectra.py`` and ``homog/metrics/sets.py`` as committed there), so a
       change to them is measured before and after in one run; the metrics of (b) and (bb)
       are compared and their largest relative difference printed;
  (bs) (b) with every text cut into sentences of ``--sentence-tokens`` tokens, each followed
       through the layers (issue 40's sentence metrics, ``homog.extract.sentences``; (b)'s
       texts have no sentences); bs/b is their overhead (issue 40's target <= 1.15);
  (b0) the extraction without attention statistics (SDPA);
  (b:S) with ``--eigensolvers S ...``: (b) with ``HOMOG_GPU_EIGENSOLVER=S`` for each S of
       device, batched, host-serial, host (``bench/_overhead_solvers.py``); each one's
       metrics are compared with the first one's. On a CPU device the setting changes
       nothing, so each is (b) again;
  (c)  the naive way: ``model(**batch, output_hidden_states=True)``, then per text and
       layer a ``numpy.linalg.svd`` on the CPU (hidden-state metrics only, no attention).
Each timing is the best of ``--repeats`` (the variants alternate within a repeat, so a change
in machine load hits all alike), by wall time and by process CPU time; on a shared CPU only the
CPU-time ratios mean much. Prints b/bt (the cost of the token sets and peers' metrics; issue
13's target <= 1.15), b/a' (issue 15's target <= 1.15 at 512 tokens), b/a, b0/a and c/b.
``--skip bt b0`` leaves variants out; ``--markdown PATH`` writes the tables as a page.

Examples:
  OMP_NUM_THREADS=1 python bench/extract_overhead.py --n-texts 8 --tokens 128 --repeats 2 \\
      --naive-texts 1 --baseline-rev HEAD
  python bench/extract_overhead.py --tokens 128 512 --texts ../shared/data/imdb/imdb_sample.jsonl
  python bench/extract_overhead.py --model random:llama-8b --dtype bfloat16 \\
      --device cuda --n-texts 256 --tokens 512
  python bench/extract_overhead.py --model random:llama-8b --dtype bfloat16 \\
      --device cuda --n-texts 32 --tokens 512 --naive-texts 0 --skip a bt b b0 \\
      --eigensolvers device batched host-serial host --markdown docs/gpu-bench.md
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import homog.metrics.sets
from homog.config import Params, load_config
from homog.errors import HomogError
from homog.extract import EncodedText, Extractor, make_batches, plan_samples
from homog.extract.batches import run_batches
from homog.models import load_model, resolve_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import read_reviews  # noqa: E402
from _overhead_solvers import ENV as SOLVER_ENV  # noqa: E402
from _overhead_solvers import (  # noqa: E402
    WHAT,
    compare_solvers,
    environment,
    largest_difference,
    restore,
    write_markdown,
)
from _overhead_solvers import key as solver_key  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TODAY = {"token_sets": (), "peer_metrics": False}  # the metrics before issue 13


def synthetic_texts(vocab_size: int, n_texts: int, tokens: int, seed: int) -> list[EncodedText]:
    """n_texts texts of exactly `tokens` random token ids (no special tokens)."""
    rng = np.random.default_rng(seed)
    low = 1000 if vocab_size > 2000 else 0  # skip the special/control ids at the start
    ids = [rng.integers(low, vocab_size, tokens) for _ in range(n_texts)]
    return encoded(ids)


def real_texts(tokenizer: Any, path: Path, n_texts: int, tokens: int) -> list[EncodedText]:
    """n_texts texts of exactly `tokens` token ids of real reviews (the ``text`` field of a
    JSON-lines file): consecutive reviews, tokenized without special tokens, are joined until
    a text is long enough. SystemExit when the file is missing or runs out."""
    out: list[np.ndarray] = []
    current: list[int] = []
    # read_reviews splits on newlines only: str.splitlines would also split inside a review
    # at U+2028 or U+0085, which real reviews contain
    for review in read_reviews(path):
        current += tokenizer(review, add_special_tokens=False)["input_ids"]
        if len(current) >= tokens:
            out.append(np.asarray(current[:tokens], dtype=np.int64))
            current = []
            if len(out) == n_texts:
                return encoded(out)
    raise SystemExit(f"{path} holds only {len(out)} texts of {tokens} tokens, {n_texts} asked")


def encoded(ids: list[np.ndarray]) -> list[EncodedText]:
    return [
        EncodedText(i, "bench", f"t{i:05d}", x, np.zeros(len(x), dtype=bool), False)
        for i, x in enumerate(ids)
    ]


def with_sentences(texts: list[EncodedText], size: int) -> list[EncodedText]:
    """Copies of ``texts`` cut into consecutive sentences of ``size`` tokens (the last one
    shorter), the first the key, the last the control and the second the same-place control,
    as ``homog.extract.sentences.attach_sentences`` would mark them."""
    out = []
    for t in texts:
        bounds = [(a, min(a + size, len(t.input_ids))) for a in range(0, len(t.input_ids), size)]
        n = len(bounds)
        rows = [
            (k, k, a, b, n, int(k == 0), int(k == n - 1), int(k == 1))
            for k, (a, b) in enumerate(bounds)
        ]
        out.append(dataclasses.replace(t, sentences=np.array(rows, dtype=np.int64)))
    return out


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


# the modules behind hidden_metrics, in import order, each as (module name, file) in the
# layout since homog/metrics/ became a package and in the earlier flat one; a revision is
# read in the layout whose files it has, and those it lacks are skipped (the spectra and the
# token sets are required)
METRIC_MODULES = (
    (("homog.metrics.eigensolver_gpu", "homog.eigensolver_gpu"), False),
    (("homog.metrics.eigensolver", "homog.eigensolver"), False),
    (("homog.metrics.spectra", "homog.metrics"), True),
    (("homog.metrics.massive", "homog.metrics_massive"), False),
    (("homog.metrics.pending", "homog.metrics_pending"), False),
    (("homog.metrics.curvature", "homog.metrics_curvature"), False),
    (("homog.metrics.sets", "homog.metrics_sets"), True),
)


def metrics_at_revision(rev: str) -> Callable[..., Any]:
    """``hidden_metrics`` as committed at git revision ``rev`` (each of ``METRIC_MODULES``
    that exists there, loaded as a separate module under the name its layout gives it, so
    its own ``from homog... import`` lines read REV's modules; nothing in the tree changes).
    SystemExit when git shows neither layout's spectra or token-set module."""

    def source(path: str) -> str | None:
        try:
            return subprocess.run(
                ["git", "show", f"{rev}:{path}"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            return None

    layout = 0 if source("homog/metrics/sets.py") is not None else 1
    names = [pair[layout] for pair, _ in METRIC_MODULES]
    # names of the earlier layout that this tree lacks stay registered (REV's functions
    # import them lazily, e.g. the batched eigensolver); the others come back after
    saved = {name: sys.modules.get(name) for name in names if name in sys.modules or not layout}
    loaded: dict[str, types.ModuleType] = {}
    try:
        for name, (_pair, required) in zip(names, METRIC_MODULES, strict=True):
            path = name.replace(".", "/") + ".py"
            text = source(path)
            if text is None:
                if required:
                    raise SystemExit(f"--baseline-rev {rev}: git cannot show {path}")
                continue
            module = types.ModuleType(f"{name}_at_{rev}")
            sys.modules[module.__name__] = module  # dataclasses look their module up there
            exec(compile(text, f"{rev}:{path}", "exec"), module.__dict__)
            loaded[name] = sys.modules[name] = module
    finally:
        restore(sys.modules, saved)
    return loaded[names[-1]].hidden_metrics


class using_metrics:  # noqa: N801 (a context manager, read as a clause)
    """Within the block the extractor computes hidden-state metrics with ``fn``."""

    def __init__(self, fn: Callable[..., Any] | None):
        self.fn = fn
        self.saved: list[tuple[Any, Any]] = []

    def __enter__(self) -> None:
        if self.fn is None:
            return
        import homog.extract.hooks as hooks

        for module in (homog.metrics.sets, hooks):
            if hasattr(module, "hidden_metrics"):
                self.saved.append((module, module.hidden_metrics))
                module.hidden_metrics = self.fn  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        for module, fn in self.saved:
            module.hidden_metrics = fn
        self.saved.clear()


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


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="params.yaml key or source")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n-texts", type=int, default=32)
    ap.add_argument("--tokens", type=int, nargs="+", default=[128], help="one or more lengths")
    ap.add_argument(
        "--texts", type=Path, default=None, help="JSON-lines reviews (default: random ids)"
    )
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: extract.batch_tokens")
    ap.add_argument(
        "--attention-impl",
        choices=("blockwise", "eager"),
        default=None,
        help="attention statistics for (b), (bt), (bb) (default: extract.attention_impl)",
    )
    ap.add_argument(
        "--baseline-rev",
        default=None,
        help="also time (bb): (b) with the metrics code of this git revision (e.g. HEAD)",
    )
    ap.add_argument(
        "--naive-texts",
        type=int,
        default=None,
        help="texts for (c) (default: all; 0 skips it); its time is scaled per text",
    )
    ap.add_argument(
        "--eigensolvers",
        nargs="+",
        default=[],
        choices=list(WHAT),
        help="also time (b:S), (b) with HOMOG_GPU_EIGENSOLVER=S, for each S",
    )
    ap.add_argument("--skip", nargs="+", default=[], choices=["a", "bt", "b", "bs", "b0"])
    ap.add_argument(
        "--sentence-tokens",
        type=int,
        default=24,
        help="(bs): tokens per sentence (IMDB review sentences: about 24)",
    )
    ap.add_argument("--markdown", default=None, help="also write the tables to this page")
    ap.add_argument("--append", action="store_true", help="add to the --markdown page")
    ap.add_argument("--repeats", type=int, default=2, help="best of N")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    try:
        params = load_config(args.params)
    except HomogError:  # the benchmark also runs outside the project root
        params = Params()
    source = resolve_source(args.model, params.model_sources())
    cfg = dataclasses.replace(params.extract, device=args.device, dtype=args.dtype)
    if args.batch_tokens:
        cfg = dataclasses.replace(cfg, batch_tokens=args.batch_tokens)
    has_impl = "attention_impl" in inspect.signature(load_model).parameters
    impl = args.attention_impl or getattr(cfg, "attention_impl", "eager")
    if has_impl:
        cfg = dataclasses.replace(cfg, attention_impl=impl)  # type: ignore[call-arg]
    elif impl != "eager":
        raise SystemExit(f"--attention-impl {impl}: this homog has eager attention statistics only")
    baseline = metrics_at_revision(args.baseline_rev) if args.baseline_rev else None
    t0 = time.perf_counter()
    kw = {"attention_impl": impl} if has_impl else {}
    lm = load_model(source, dtype=args.dtype, device=args.device, attention=True, **kw)
    load_s = time.perf_counter() - t0
    # the implementation the statistics run on (blockwise may fall back to eager)
    attn_impl = lm.info.get("attn_implementation", "eager")
    figures = []
    for tokens in args.tokens:
        figures.append(measure(args, lm, cfg, tokens, attn_impl, baseline, source, load_s))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures if len(figures) > 1 else figures[0], fh, indent=2)
    if args.markdown:
        write_markdown(args.markdown, figures, args.eigensolvers, LABELS, args.append)


def measure(
    args: argparse.Namespace,
    lm: Any,
    cfg: Any,
    tokens: int,
    attn_impl: str,
    baseline: Callable[..., Any] | None,
    source: str,
    load_s: float,
) -> dict[str, Any]:
    """Time every variant at one text length, print the table, return the figures."""
    dev = lm.input_device
    if args.texts:
        texts = real_texts(lm.tokenizer, args.texts, args.n_texts, tokens)
    else:
        texts = synthetic_texts(lm.info["vocab_size"], args.n_texts, tokens, 0)
    batches = make_batches(texts, cfg.batch_tokens)
    plan = plan_samples(texts, cfg.sample_tokens, cfg.pooled_texts, 0, True)
    inputs = [batch_tensors(b, dev) for b in batches]

    def bare(module: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            lm.model.set_attn_implementation("sdpa")
            with torch.inference_mode():
                for x in inputs:
                    module(**x, use_cache=False)

        return run

    kept: dict[str, list[Any]] = {}

    cut = make_batches(with_sentences(texts, args.sentence_tokens), cfg.batch_tokens)

    def extraction(
        name: str,
        attention: bool,
        metrics_fn: Any = None,
        env: dict[str, str] | None = None,
        use: Any = None,
        **over: Any,
    ) -> Any:
        def run() -> None:
            # hooks are installed only for the extraction: (a) and (c) run the untouched model
            lm.model.set_attn_implementation(attn_impl if attention else "sdpa")
            with using_metrics(metrics_fn), environment(env):
                # a baseline's hidden_metrics runs in the hooks (the GPU modes call hidden_pending)
                mode = "inline" if metrics_fn is not None else "auto"
                config = dataclasses.replace(cfg, attention=attention, **over)
                extractor = Extractor(lm, config, host_spectra=mode)
                try:  # batch i + 1's forward before batch i's metrics (the host pipeline)
                    kept[name] = run_batches(extractor, use or batches, "none", plan)
                finally:
                    extractor.close()

        return run

    n_naive = min(len(texts) if args.naive_texts is None else args.naive_texts, len(texts))
    naive_inputs = [batch_tensors(b, dev) for b in make_batches(texts[:n_naive], cfg.batch_tokens)]

    def naive() -> None:
        lm.model.set_attn_implementation("sdpa")
        with torch.inference_mode():
            for x in naive_inputs:
                out = lm.model(**x, output_hidden_states=True, use_cache=False)
                naive_metrics(out.hidden_states, x["input_ids"].shape[0])

    variants: dict[str, Callable[[], None]] = {
        "a": bare(lm.model),
        "a_decoder": bare(lm.decoder),
        "b_today": extraction("b_today", True, **TODAY),
        "b": extraction("b", True),
        "b_sentences": extraction("b_sentences", True, use=cut),
    }
    if baseline is not None:
        variants["b_baseline"] = extraction("b_baseline", True, baseline)
    for solver in args.eigensolvers:
        env = SOLVER_ENV[solver]
        variants[solver_key(solver)] = extraction(solver_key(solver), True, env=env)
    variants["b_no_attention"] = extraction("b_no_attention", False)
    for name in args.skip:
        variants.pop({"bt": "b_today", "b0": "b_no_attention", "bs": "b_sentences"}.get(name, name))
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in variants}
    bare(lm.model)()  # warm-up
    for _ in range(args.repeats):
        for name, fn in variants.items():
            results[name].append(timed(fn, dev))
    if n_naive:
        results["c"] = [timed(naive, dev)]

    def per_text(k: str, i: int) -> float:
        return min(x[i] for x in results[k]) / (n_naive if k == "c" else args.n_texts)

    wall = {k: per_text(k, 0) for k in results}
    cpu = {k: per_text(k, 1) for k in results}
    fig: dict[str, Any] = {
        "model": args.model,
        "source": source,
        "dtype": args.dtype,
        "device": str(dev),
        "attention_impl": attn_impl,
        "texts": str(args.texts) if args.texts else "random ids",
        "n_texts": args.n_texts,
        "tokens": tokens,
        "batch_tokens": cfg.batch_tokens,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "load_s": round(load_s, 1),
        "baseline_rev": args.baseline_rev,
        "eigensolvers": args.eigensolvers,
    }
    for k in results:
        fig[f"{k}_s"] = wall[k] * (n_naive if k == "c" else args.n_texts)
        fig[f"{k}_cpu_s"] = cpu[k] * (n_naive if k == "c" else args.n_texts)
        fig[f"tokens_per_s_{k}"] = tokens / wall[k]
    pairs = [
        ("b", "b_today"),
        ("b_sentences", "b"),
        ("b", "a_decoder"),
        ("b", "a"),
        ("b_no_attention", "a"),
    ]
    if baseline is not None:
        pairs += [("b_baseline", "b_today"), ("b_baseline", "a_decoder"), ("b", "b_baseline")]
    pairs += [(solver_key(solver), "a_decoder") for solver in args.eigensolvers]
    if n_naive:
        pairs.append(("c", "b"))
    pairs = [(n, d) for n, d in pairs if n in results and d in results]
    for num, den in pairs:
        fig[f"{num}_over_{den}"] = wall[num] / wall[den]
        fig[f"cpu_time_{num}_over_{den}"] = cpu[num] / cpu[den]
    # (figure prefix, new variant, reference variant): their metrics' largest difference
    if baseline is not None and "b" in kept:
        new, old = (np.concatenate([r.metrics for r in kept[k]]) for k in ("b", "b_baseline"))
        rel, metric = largest_difference(new, old, list(kept["b"][0].names))
        fig["baseline_max_rel_diff"], fig["baseline_max_rel_diff_metric"] = rel, metric
    compare_solvers(fig, kept, args.eigensolvers)
    if dev.type == "cuda":
        fig.update({f"peak_gib_{k}": min(x[2] for x in v) for k, v in results.items()})
    report(fig, results)
    return fig


LABELS = {
    "a": "(a)  bare forward model(**batch), SDPA",
    "a_decoder": "(a') decoder only (no LM head), SDPA",
    "b_today": "(bt) today's extraction (before issue 13)",
    "b": "(b)  full extraction (all stats)",
    "b_baseline": "(bb) full extraction, baseline metrics code",
    "b_sentences": "(bs) full extraction + sentence metrics",
    "b_no_attention": "(b0) extraction without attention (SDPA)",
    **{solver_key(s): f"({solver_key(s)}) extraction, {what}" for s, what in WHAT.items()},
    "c": "(c)  naive hidden states + numpy SVD",
}
SHORT = {"a": "a", "a_decoder": "a'", "b_today": "bt", "b": "b", "b_baseline": "bb"}
SHORT |= {
    "b_sentences": "bs",
    "b_no_attention": "b0",
    "c": "c",
    **{solver_key(s): solver_key(s) for s in WHAT},
}


def report(fig: dict[str, Any], results: dict[str, Any]) -> None:
    print(
        f"\nmodel {fig['model']} ({fig['source']}) {fig['dtype']} on {fig['device']}, "
        f"{fig['n_texts']} texts x {fig['tokens']} tokens ({fig['texts']}), batch_tokens "
        f"{fig['batch_tokens']}, {fig['threads']} threads, attention statistics "
        f"{fig['attention_impl']}, best of {fig['repeats']}"
        + (f", baseline metrics code at {fig['baseline_rev']}" if fig["baseline_rev"] else "")
    )
    print(f"{'':46s} {'wall s':>9s} {'CPU s':>9s} {'tokens/s':>9s}")
    for k in results:
        print(
            f"{LABELS[k]:46s} {fig[f'{k}_s']:9.2f} {fig[f'{k}_cpu_s']:9.2f} "
            f"{fig[f'tokens_per_s_{k}']:9.0f}"
        )
    print(f"{'ratio (per text)':46s} {'wall':>9s} {'CPU':>9s}")
    for key in fig:
        if key.startswith("cpu_time_"):
            num, den = key.removeprefix("cpu_time_").split("_over_")
            name = f"{SHORT[num]}/{SHORT[den]}"
            note = {
                "b/bt": "  (issue 13 target <= 1.15)",
                "b/a'": "  (issue 15 target <= 1.15 at 512 tokens)",
                "bs/b": "  (issue 40 target <= 1.15)",
            }.get(name, "")
            print(f"{name:46s} {fig[f'{num}_over_{den}']:9.3f} {fig[key]:9.3f}{note}")
    if fig["baseline_rev"]:
        print(
            f"metrics of (b) vs (bb): largest relative difference "
            f"{fig['baseline_max_rel_diff']:.3g} ({fig['baseline_max_rel_diff_metric']})"
        )
    for solver in fig["eigensolvers"]:
        print(
            f"metrics of ({solver_key(solver)}) vs ({solver_key(fig['eigensolvers'][0])}): "
            f"largest relative difference {fig[f'{solver_key(solver)}_max_rel_diff']:.3g} "
            f"({fig[f'{solver_key(solver)}_max_rel_diff_metric']})"
        )
    if "peak_gib_b" in fig:
        print(
            "peak GPU GiB: " + ", ".join(f"{SHORT[k]} {fig[f'peak_gib_{k}']:.1f}" for k in results)
        )


if __name__ == "__main__":
    main()
