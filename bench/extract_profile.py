"""Where the full extraction's time goes: one profiled ``run_batches`` under torch.profiler.

It loads the model once, runs the extraction once as a warm-up, then once more under the
profiler with each step of the hooks labelled (``hidden_pending``, the spectra's solve and
finish, the attention statistics, the pooled/sampled vectors with their finiteness checks,
massive activations). It prints the wall time, each label's CPU and device time and call
count, how often the host waited for the device (synchronisations, device-to-host copies),
and the kernels that took most device time. On a CPU the device columns are empty and the
labels' CPU time is the whole story.

    python bench/extract_profile.py --model random:llama-8b --dtype bfloat16 --device cuda \
        --n-texts 32 --tokens 512
    python bench/extract_profile.py --model random:tiny-llama --n-texts 4 --tokens 64

``HOMOG_GPU_EIGENSOLVER`` picks the solver as in a real run.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path
from typing import Any

from torch.profiler import ProfilerActivity, profile, record_function

from homog.config import Params, load_config
from homog.errors import HomogError
from homog.extract import Extractor, make_batches, plan_samples
from homog.extract.batches import run_batches
from homog.extract.host_spectra import host_mode
from homog.models import load_model, resolve_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_overhead import synthetic_texts, timed  # noqa: E402

# (module, attribute, label): the steps of the hooks, wrapped in a record_function each
STEPS = [
    ("homog.metrics.sets", "hidden_pending", "hidden_pending"),
    ("homog.metrics.pending", "PendingSpectra.solve", "spectra.solve"),
    ("homog.metrics.pending", "PendingSpectra.finish", "spectra.finish"),
    ("homog.extract.host_spectra", "DeviceBatch.flush", "batched.flush"),
    ("homog.extract.hooks", "Extractor._stacked_metrics", "stack.compute"),
    ("homog.extract.attn_summary", "summarise_attention", "attention.stats"),
    ("homog.metrics.attn_blockwise", "attention_sums", "attention.sums"),
    ("homog.extract.hooks", "Extractor._check_stored", "check_stored"),
    ("homog.metrics.massive", "massive_activations", "massive"),
    ("homog.metrics.spectra", "pool", "pool"),
    ("homog.extract.batches", "PendingBatch.result", "batch.result"),
]


def label(module: str, attr: str, name: str) -> None:
    """Wrap ``module.attr`` (a function or Class.method) in ``record_function(name)``; the
    modules that imported the function by name see the wrapped one too."""
    import importlib

    mod = importlib.import_module(module)
    owner: Any = mod
    *path, leaf = attr.split(".")
    for p in path:
        owner = getattr(owner, p)
    fn = getattr(owner, leaf)

    @functools.wraps(fn)
    def wrapped(*a: Any, **kw: Any) -> Any:
        with record_function(name):
            return fn(*a, **kw)

    setattr(owner, leaf, wrapped)
    if not path:  # re-bind the name where it was imported from the module
        for other in list(sys.modules.values()):
            if (
                getattr(other, "__name__", "").startswith("homog")
                and getattr(other, leaf, None) is fn
            ):
                setattr(other, leaf, wrapped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="random:tiny-llama")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n-texts", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--rows", type=int, default=25, help="kernels listed")
    args = ap.parse_args()
    try:
        params = load_config(args.params)
    except HomogError:
        params = Params()
    source = resolve_source(args.model, params.model_sources())
    cfg = dataclasses.replace(params.extract, device=args.device, dtype=args.dtype)
    lm = load_model(
        source,
        dtype=args.dtype,
        device=args.device,
        attention=True,
        attention_impl=cfg.attention_impl,
    )
    texts = synthetic_texts(lm.info["vocab_size"], args.n_texts, args.tokens, 0)
    batches = make_batches(texts, cfg.batch_tokens)
    plan = plan_samples(texts, cfg.sample_tokens, cfg.pooled_texts, 0, True)
    for step in STEPS:
        label(*step)
    cuda = lm.input_device.type == "cuda"

    def run() -> None:
        extractor = Extractor(lm, cfg)
        try:
            run_batches(extractor, batches, "none", plan)
        finally:
            extractor.close()

    warm = timed(run, lm.input_device)[0]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        wall = timed(run, lm.input_device)[0]
    print(
        f"{args.model} {args.dtype} on {lm.input_device}, {args.n_texts} texts x {args.tokens}"
        f" tokens, {len(batches)} batches, mode {host_mode(lm.input_device)}: wall {warm:.3f} s "
        f"(warm-up), {wall:.3f} s under the profiler"
    )
    events = prof.key_averages()
    dev_attr = "device_time_total" if hasattr(events[0], "device_time_total") else "cuda_time_total"
    print(f"\n{'step':22s} {'calls':>7s} {'CPU total s':>12s} {'device total s':>15s}")
    names = {s[2] for s in STEPS}
    for e in sorted(events, key=lambda e: -e.cpu_time_total):
        if e.key in names:
            dev = getattr(e, dev_attr, 0) / 1e6
            print(f"{e.key:22s} {e.count:7d} {e.cpu_time_total / 1e6:12.3f} {dev:15.3f}")
    waits = (
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaMemcpyAsync",
        "cudaEventSynchronize",
        "cudaLaunchKernel",
        "cuLaunchKernel",
    )
    print(f"\n{'runtime call':22s} {'calls':>7s} {'CPU total s':>12s}")
    for e in events:
        if e.key in waits:
            print(f"{e.key:22s} {e.count:7d} {e.cpu_time_total / 1e6:12.3f}")
    if cuda:
        kernels = [
            e
            for e in events
            if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA")
        ]
        busy = sum(getattr(e, "self_device_time_total", 0) for e in kernels) / 1e6
        print(f"\ndevice busy (sum of kernel times) {busy:.3f} s of {wall:.3f} s wall")
    sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
