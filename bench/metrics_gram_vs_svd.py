"""Batched Gram + eigvalsh metrics vs a per-text numpy SVD loop, on the same hidden states.

    python bench/metrics_gram_vs_svd.py [--texts 32] [--layers 31] [--tokens 256] [--dim 576]

Prints both timings, the speed ratio and the largest relative difference over all metrics.
Texts get different lengths (half to full) so the batched path also handles padding.

With ``--breakdown`` it prints instead what each option of ``hidden_metrics`` adds per hidden
layer (today's metrics, + no_sink, + standardized, + the peers' metrics and massive
activations; process CPU time, best of ``--repeats``), and with ``--baseline-rev REV`` the same
for the code committed at REV and the largest relative difference between the two, metric by
metric. ``--model``/``--real`` take the hidden states from a model's ``output_hidden_states``
on real reviews instead of random ones:

    OMP_NUM_THREADS=1 python bench/metrics_gram_vs_svd.py --breakdown --texts 32 --tokens 128 \
        --baseline-rev HEAD [--model smollm2-135m --real ../shared/data/imdb/imdb_sample.jsonl]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch

from homog.metrics.spectra import METRIC_NAMES, layer_metrics


def naive(hidden: np.ndarray, lengths: list[int], uv: bool = True) -> dict[str, np.ndarray]:
    """What a researcher would write: loop over texts and layers, SVD each matrix.

    ``uv=True`` is the plain ``np.linalg.svd(x)`` call; ``uv=False`` the stronger baseline
    that asks for singular values only.
    """
    b, layers = hidden.shape[:2]
    out = {k: np.empty((b, layers)) for k in METRIC_NAMES}
    for i in range(b):
        for layer in range(layers):
            x = hidden[i, layer, : lengths[i]].astype(np.float64)
            s = np.linalg.svd(x)[1] if uv else np.linalg.svd(x, compute_uv=False)
            s = s[s > s[0] * 1e-7]
            p = s / s.sum()
            norms = np.linalg.norm(x, axis=1)
            r = np.linalg.norm((x / norms[:, None]).mean(0))
            n = len(x)
            out["erank"][i, layer] = np.exp(-(p * np.log(p)).sum())
            out["mev"][i, layer] = s[0] ** 2 / (s**2).sum()
            out["schatten_1"][i, layer] = s.sum() / np.sqrt((s**2).sum())
            out["schatten_4"][i, layer] = (s**4).sum() ** 0.25 / np.sqrt((s**2).sum())
            out["resultant_length"][i, layer] = r
            out["mean_cosine"][i, layer] = (n * r * r - 1) / (n - 1)
            out["norm_mean"][i, layer] = norms.mean()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=32)
    ap.add_argument("--layers", type=int, default=31)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--dim", type=int, default=576)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--breakdown", action="store_true", help="the cost of each token set")
    ap.add_argument("--baseline-rev", default=None, help="with --breakdown: compare with REV")
    ap.add_argument("--model", default="smollm2-135m", help="with --real: whose hidden states")
    ap.add_argument("--real", type=Path, default=None, help="with --breakdown: JSON-lines texts")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.breakdown:
        breakdown(args)
        return

    gen = torch.Generator().manual_seed(0)
    shape = (args.texts, args.layers, args.tokens, args.dim)
    # LM-like: a shared direction (growing with depth) plus token noise, float32 as a model gives
    depth = torch.linspace(0.1, 3.0, args.layers)[None, :, None, None]
    hidden = torch.randn(shape, generator=gen) + depth * torch.randn(
        1, 1, 1, args.dim, generator=gen
    )
    lengths = torch.randint(
        args.tokens // 2, args.tokens + 1, (args.texts,), generator=gen
    ).tolist()
    mask = torch.zeros(args.texts, args.tokens, dtype=torch.bool)
    for i, k in enumerate(lengths):
        mask[i, :k] = True

    dev = torch.device(args.device)
    h_dev, m_dev = hidden.to(dev), mask[:, None, :].to(dev)
    layer_metrics(h_dev[:1, :1], m_dev[:1])  # warm-up
    t0 = time.perf_counter()
    fast = layer_metrics(h_dev, m_dev)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t_fast = time.perf_counter() - t0

    t0 = time.perf_counter()
    slow = naive(hidden.numpy(), lengths, uv=True)
    t_slow = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive(hidden.numpy(), lengths, uv=False)
    t_slow_s = time.perf_counter() - t0

    worst = max(
        float(np.max(np.abs(fast[k].cpu().numpy() - slow[k]) / np.maximum(np.abs(slow[k]), 1e-12)))
        for k in METRIC_NAMES
    )
    print(
        f"shape (texts, layers, tokens, dim) = {shape}, torch threads = {torch.get_num_threads()}"
    )
    print(f"batched Gram + eigvalsh ({args.device}): {t_fast:8.3f} s")
    print(f"per-text np.linalg.svd(x) loop:  {t_slow:8.3f} s")
    print(f"  same, compute_uv=False:        {t_slow_s:8.3f} s")
    print(f"speed ratio (svd loop / batched):         {t_slow / t_fast:6.1f} x")
    print(f"speed ratio (values-only loop / batched): {t_slow_s / t_fast:6.1f} x")
    print(f"max relative difference:         {worst:.2e}")


def real_hidden(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    """(texts, layers, tokens, d) float32 hidden states of ``args.model`` on real reviews
    (``output_hidden_states``, all layers) and an all-True mask (texts, 1, tokens)."""
    from extract_overhead import real_texts

    from homog.config import Params, load_config
    from homog.errors import HomogError
    from homog.models import load_model, resolve_source

    try:
        params = load_config("params.yaml")
    except HomogError:
        params = Params()
    lm = load_model(resolve_source(args.model, params.model_sources()), attention=False)
    texts = real_texts(lm.tokenizer, args.real, args.texts, args.tokens)
    ids = torch.tensor(np.stack([t.input_ids for t in texts]))
    with torch.inference_mode():
        out = lm.model(input_ids=ids, output_hidden_states=True, use_cache=False)
    hidden = torch.stack(out.hidden_states, 1).float()
    return hidden, torch.ones(args.texts, 1, args.tokens, dtype=torch.bool)


def breakdown(args: argparse.Namespace) -> None:
    """Per hidden layer: what each option of hidden_metrics costs (and, with a baseline
    revision, costs there), and how far the two codes' values are apart."""
    from homog.metrics.sets import hidden_metric_names, hidden_metrics

    if args.real:
        hidden, mask = real_hidden(args)
        source = f"{args.model} output_hidden_states on {args.real.name}"
    else:
        gen = torch.Generator().manual_seed(0)
        hidden = torch.randn(args.texts, args.layers, args.tokens, args.dim, generator=gen)
        hidden[:, :, 0, 7] += 3000  # a massive activation on the first token
        mask = torch.ones(args.texts, 1, args.tokens, dtype=torch.bool)
        source = "random (a massive first token)"
    codes = {"this tree": hidden_metrics}
    if args.baseline_rev:
        from extract_overhead import metrics_at_revision

        codes[args.baseline_rev] = metrics_at_revision(args.baseline_rev)
    options = {
        "today's metrics": {},
        "+ no_sink": {"token_sets": ("no_sink",)},
        "+ standardized": {"token_sets": ("no_sink", "standardized")},
        "+ peers' metrics, massive activations": {
            "token_sets": ("no_sink", "standardized"),
            "peers": True,
        },
    }
    layers = hidden.shape[1]
    print(
        f"hidden_metrics per hidden layer, {args.texts} texts x {hidden.shape[2]} tokens x "
        f"{hidden.shape[3]} dims, {source}, {torch.get_num_threads()} thread(s), process CPU "
        f"seconds (best of {args.repeats}; each layer of {layers} timed on its own)"
    )
    print(f"{'':40s}" + "".join(f"{c:>14s}" for c in codes))
    values: dict[str, dict] = {}
    for label, kw in options.items():
        row = []
        for fn in codes.values():
            best = math.inf
            for _ in range(args.repeats):
                c0 = time.process_time()
                for layer in range(layers):
                    fn(hidden[:, layer], mask[:, 0], **kw)
                best = min(best, (time.process_time() - c0) / layers)
            row.append(best)
        print(f"{label:40s}" + "".join(f"{t:14.4f}" for t in row))
    if args.baseline_rev:
        kw = options["+ peers' metrics, massive activations"]
        for code, fn in codes.items():
            values[code] = fn(hidden, mask, **kw)[0]
        new, old = values["this tree"], values[args.baseline_rev]
        print(f"largest relative difference, this tree vs {args.baseline_rev}, per metric:")
        for name in hidden_metric_names(kw["token_sets"], True):
            a, b = new[name].numpy(), old[name].numpy()
            same_nan = bool((np.isnan(a) == np.isnan(b)).all())
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
            rel = np.where(np.isnan(b) | (a == b), 0.0, rel)
            flag = "" if same_nan else "  (NaN in different places)"
            print(f"  {name:32s} {float(rel.max()):.3g}{flag}")


if __name__ == "__main__":
    main()
