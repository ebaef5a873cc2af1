"""The probe's fits, scikit-learn's pipeline per layer against the batched solver, same inputs.

Usage: python bench/probe_fit.py [--rows 13 250] [--features 576] [--layers 31] [--sets 5]
[--c 0.1]

Synthetic pooled vectors (seeded): per value of ``--rows``, ``--sets`` training sets (a fold
each: m rows, 40 test rows) of ``--layers`` layers x ``--features`` features, shaped like a
model's (a few directions carry most of the variance, a few features are large, the label
along one direction, more strongly with depth). Each set is fitted at every layer twice:

- ``sklearn``: ``StandardScaler`` + ``LogisticRegression(C, lbfgs)`` per layer, as the probe
  did before (its default tol 1e-4, ``probe.max_iter`` 2000), then the decision values;
- ``batched``: :func:`homog.probe.fit.fit_layers`, every layer of the set one batch
  (``fit_logistic_dual`` with fewer rows than features, ``fit_logistic`` otherwise).

Prints the process CPU seconds of each, their ratio, and the largest difference of the test
rows' logits from the batched fits to each of: the default sklearn fit, and the same pipeline
converged tightly (tol 1e-10; not timed): the batched fits reach the optimum, to which lbfgs
stops as near as its tol lets it. The demo trains on 12 or 13 reviews per fold (16 per
variant), the study on about 250.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from homog.probe.fit import fit_layers


def pooled(m: int, t: int, layers: int, k: int, seed: int) -> tuple[np.ndarray, ...]:
    """(x_train [m, L, k], y [m], x_test [t, L, k]) like pooled vectors: 20 directions of
    decaying scale, noise, 5 features 30 x larger, the label along one more direction."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(m + t) % 2)
    basis = rng.normal(size=(layers, 20, k)) * (0.7 ** np.arange(20))[None, :, None]
    x = np.einsum("nld,ldk->nlk", rng.normal(size=(m + t, layers, 20)), basis)
    x += rng.normal(scale=0.3, size=x.shape)
    x[:, :, :5] *= 30.0
    direction = rng.normal(size=(layers, k)) / np.sqrt(k)
    strength = np.linspace(0.2, 2.0, layers)[None, :, None]
    x += strength * (y[:, None, None] - 0.5) * direction[None]
    return x[:m].astype(np.float16), y[:m], x[m:].astype(np.float16)


def sklearn_fits(sets, c: float, tol: float, max_iter: int) -> list[np.ndarray]:
    """[t, L] logits of each set, one sklearn pipeline per layer."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for x_train, y, x_test in sets:
            logits = []
            for layer in range(x_train.shape[1]):
                model = make_pipeline(
                    StandardScaler(),
                    LogisticRegression(C=c, l1_ratio=0, tol=tol, max_iter=max_iter, random_state=0),
                )
                xtr = np.asarray(x_train[:, layer], dtype=np.float64)
                xte = np.asarray(x_test[:, layer], dtype=np.float64)
                logits.append(model.fit(xtr, y).decision_function(xte))
            out.append(np.stack(logits, axis=1))
    return out


def batched_fits(sets, c: float) -> list[np.ndarray]:
    return [fit_layers(x, y, np.arange(len(y)).astype(str), xt, cs=[c]) for x, y, xt in sets]


def timed(fn, *args):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, time.process_time() - c0, time.perf_counter() - w0


def largest(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[13, 250], help="training rows")
    ap.add_argument("--features", type=int, default=576, help="576: smollm2-135m's width")
    ap.add_argument("--layers", type=int, default=31, help="31: smollm2-135m's 30 + embeddings")
    ap.add_argument("--sets", type=int, default=5, help="training sets (folds) per size")
    ap.add_argument("--c", type=float, default=0.1, help="probe.c")
    args = ap.parse_args()
    print(
        f"{args.sets} sets x {args.layers} layers x {args.features} features, C {args.c}; "
        f"one BLAS thread (as probe_texts); load average {os.getloadavg()[0]:.1f}"
    )
    with threadpool_limits(1):
        batched_fits([pooled(8, 4, 2, 16, 0)], args.c)  # warm-up: imports, first calls
        for m in args.rows:
            sets = [pooled(m, 40, args.layers, args.features, seed) for seed in range(args.sets)]
            old, cpu_old, wall_old = timed(sklearn_fits, sets, args.c, 1e-4, 2000)
            new, cpu_new, wall_new = timed(batched_fits, sets, args.c)
            tight = sklearn_fits(sets, args.c, 1e-10, 100_000)
            fits = args.sets * args.layers
            print(f"{m} training rows ({fits} fits):")
            print(f"  sklearn  cpu {cpu_old:6.2f} s  wall {wall_old:6.2f} s")
            print(f"  batched  cpu {cpu_new:6.2f} s  wall {wall_new:6.2f} s")
            print(f"  ratio (sklearn / batched CPU): {cpu_old / cpu_new:.1f}x")
            print(
                f"  largest logit difference: {largest(new, tight):.2g} to sklearn at tol 1e-10, "
                f"{largest(new, old):.2g} to sklearn at its default tol 1e-4 "
                f"(tol 1e-4 to 1e-10: {largest(old, tight):.2g})"
            )


if __name__ == "__main__":
    main()
