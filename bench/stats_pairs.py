"""The contrasts' per-pair work, row-by-row pandas against the array path, on the same data.

Usage: python bench/stats_pairs.py [--texts 20] [--layers 31] [--variants 8] [--metrics 12]

Synthetic layer_metrics (seeded): an original and ``--variants`` other variants of
``--texts`` texts, ``--metrics`` metrics at ``--layers`` layers, each text's token count;
two texts per variant are the original's own (identity texts, left out of their pairs, as
the stats stage leaves them out). Each variant is contrasted with the original, per metric,
twice:

- ``pandas``: the per-pair work as the stats stage did it before its array path (a
  ``pivot_table`` per variant and metric, band tables by ``.loc``, one dict per layer row,
  ``.loc`` assignments, a frame per part with its labels assigned, one concatenation);
- ``arrays``: :func:`homog.stats.contrasts.run_contrasts` (pivot_metrics' one sort,
  homog.stats.pair_columns).

Prints the process CPU seconds of each, their ratio (the speed target is a ratio, not a time)
and the largest difference between the two tables' float columns (the array path must keep
every number). The numerical core (bootstrap, sign-flip test, length adjustment, TOST) is
the same in both: only the bookkeeping around it differs. (The pandas side's extra columns
are ``extra_columns``' frames around today's arrays: the baseline SD per row, a loop of its
own before, is already vectorised there, so the ratio understates the change a little.)
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import pandas as pd

from homog.extract import TOKEN_COUNT
from homog.stats.bands import band_of_layers
from homog.stats.combos import without
from homog.stats.contrast_rows import extra_columns
from homog.stats.contrasts import CONTRAST_COLUMNS, finish_contrasts, run_contrasts
from homog.stats.paired_tests import bootstrap_ci, holm, paired_difference, paired_p
from homog.stats.settings import StatsSettings


def layer_metrics(texts: int, layers: int, variants: int, metrics: int, seed: int = 0):
    """(long frame, identity texts per variant) of seeded synthetic runs."""
    rng = np.random.default_rng(seed)
    names = ["original", *(f"v{i}" for i in range(variants))]
    samples = [f"s{t:03d}" for t in range(texts)]
    base = rng.normal(size=(metrics, layers, texts)) * 10.0 ** rng.integers(-3, 3, (metrics, 1, 1))
    frames, same = [], {}
    for i, v in enumerate(names):
        values = base + (rng.normal(0.1 * i, 0.5, size=base.shape) if i else 0.0)
        same[v] = pd.Index(samples[i % texts : i % texts + 2]) if i else pd.Index([])
        values[..., np.isin(samples, same[v])] = base[..., np.isin(samples, same[v])]
        m, layer, t = np.meshgrid(range(metrics), range(layers), range(texts), indexing="ij")
        frames.append(
            pd.DataFrame(
                {
                    "variant": v,
                    "sample_id": np.asarray(samples)[t.ravel()],
                    "layer": layer.ravel(),
                    "metric": np.char.add("m", m.ravel().astype(str)),
                    "value": values.ravel(),
                }
            )
        )
        count = rng.integers(100, 128, size=texts) + (i % 3)
        frames.append(
            pd.DataFrame(
                {
                    "variant": v,
                    "sample_id": samples,
                    "layer": 0,
                    "metric": TOKEN_COUNT,
                    "value": count.astype(float),
                }
            )
        )
    return pd.concat(frames, ignore_index=True), same


def pandas_contrasts(frame: pd.DataFrame, settings: StatsSettings, same: dict) -> pd.DataFrame:
    """The contrasts of every variant against the original, the per-pair work in pandas."""
    tok = frame[(frame["metric"] == TOKEN_COUNT) & (frame["layer"] == 0)]
    tokens = {v: g.set_index("sample_id")["value"] for v, g in tok.groupby("variant")}
    measured = frame[frame["metric"] != TOKEN_COUNT]
    tables = {
        key: g.pivot_table(
            index="layer", columns="sample_id", values="value", aggfunc="first", dropna=False
        ).sort_index()
        for key, g in measured.groupby(["variant", "metric"], sort=True)
    }
    parts = []
    for metric in sorted({m for _, m in tables}):
        margin = settings.margin(tables[("original", metric)], metric=metric)
        for va in sorted(v for v, m in tables if m == metric and v != "original"):
            a, b, n_same = without(tables[(va, metric)], tables[("original", metric)], same[va])
            meta = {"run_id": "bench", "variant_a": va, "variant_b": "original"}
            meta |= {"metric": metric, "baseline_run_id": None, "n_identical": n_same}
            tok_ab = (tokens[va], tokens["original"])
            parts += _pair_frames(
                a, b, meta, settings, margin, tok_ab, tables[("original", metric)]
            )
    return finish_contrasts(parts)


def _pair_frames(a, b, meta, settings, margin, tokens, baseline) -> list[pd.DataFrame]:
    a, b = a.align(b, join="inner")
    layer0 = pd.Series(paired_difference(a.loc[0].to_numpy(), b.loc[0].to_numpy()), a.columns)
    more = {"tokens_a": tokens[0], "tokens_b": tokens[1], "layer0": layer0, "margin": margin}
    base = baseline.reindex(index=a.index)
    rows = _row_stats(a, b, settings)
    extra = extra_columns(a, b, settings, baseline=base, **more)
    parts = [pd.concat([rows, extra], axis=1).assign(band=None, **meta)]
    bands = band_of_layers(list(a.index))
    ta, tb, tbase = (_band_table(x, bands) for x in (a, b, base))
    rows = _row_stats(ta, tb, settings)
    extra = extra_columns(ta, tb, settings, baseline=tbase, **more)
    rows = pd.concat([rows, extra], axis=1).rename(columns={"layer": "band"})
    rows = rows.assign(layer=None, **meta)
    for col in ("mm_diff", "mm_ci_low", "mm_ci_high", "mm_p_value"):
        rows[col] = [math.nan for _ in rows["band"]]
    return [*parts, rows]


def _band_table(wide: pd.DataFrame, bands: dict) -> pd.DataFrame:
    return pd.DataFrame(
        {band: wide.loc[ls].mean(axis=0, skipna=False) for band, ls in bands.items()}
    ).T


def _row_stats(a: pd.DataFrame, b: pd.DataFrame, settings: StatsSettings) -> pd.DataFrame:
    """One dict per row, then the complete rows' CI and test set by ``.loc``."""
    d = paired_difference(a.to_numpy(dtype=float), b.to_numpy(dtype=float))
    rows = []
    for i, layer in enumerate(a.index):
        di = d[i][np.isfinite(d[i])]
        mean = float(di.mean()) if di.size else math.nan
        rows.append(
            {
                "layer": layer,
                "n": int(di.size),
                "mean_diff": mean,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "p_value": math.nan,
            }
        )
    out = pd.DataFrame(rows)
    complete = np.isfinite(d).all(axis=1) & (d.shape[1] >= 2)
    boot = {"n_boot": settings.n_boot, "ci": settings.ci, "seed": settings.seed}
    low, high = bootstrap_ci(d[complete], **boot)
    out.loc[complete, "ci_low"] = low
    out.loc[complete, "ci_high"] = high
    test = {"test": settings.test, "n_perm": settings.n_perm, "seed": settings.seed}
    out.loc[complete, "p_value"] = paired_p(d[complete], **test)
    out["p_holm"] = holm(out["p_value"].to_numpy())
    return out


def timed(fn, *args, **kwargs):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=20)
    ap.add_argument("--layers", type=int, default=31)
    ap.add_argument("--variants", type=int, default=8, help="variants besides the original")
    ap.add_argument("--metrics", type=int, default=12)
    args = ap.parse_args()
    frame, same = layer_metrics(args.texts, args.layers, args.variants, args.metrics)
    settings = StatsSettings()  # the stage's defaults: 2,000 resamples, 10,000 sign vectors
    pairs = [(f"v{i}", "original") for i in range(args.variants)]
    ids = pd.DataFrame(  # the identity texts as the texts table gives them
        {
            v: [0 if s in same[v] else i + 1 for s in sorted(frame["sample_id"].unique())]
            for i, v in enumerate(["original", *(p[0] for p in pairs)])
        },
        index=sorted(frame["sample_id"].unique()),
    )
    ids["original"] = 0
    print(
        f"{len(pairs) * args.metrics} pairs of {args.texts} texts x {args.layers} layers; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    # warm-up: the cached resample and sign matrices are drawn once, outside the timing
    first = frame[frame["metric"].isin(["m0", TOKEN_COUNT])]
    pandas_contrasts(first, settings, same)
    run_contrasts(first, "bench", settings, pairs=pairs, text_ids=ids)
    old, cpu_old, wall_old = timed(pandas_contrasts, frame, settings, same)
    new, cpu_new, wall_new = timed(
        run_contrasts, frame, "bench", settings, pairs=pairs, text_ids=ids
    )
    old = old.sort_values(["metric", "variant_a"], kind="stable").reset_index(drop=True)
    new = new.sort_values(["metric", "variant_a"], kind="stable").reset_index(drop=True)
    floats = [c for c in CONTRAST_COLUMNS if pd.api.types.is_float_dtype(new[c])]
    diff = np.nanmax(np.abs(old[floats].to_numpy(float) - new[floats].to_numpy(float)))
    same_nan = np.array_equal(old[floats].isna().to_numpy(), new[floats].isna().to_numpy())
    print(f"pandas  cpu {cpu_old:7.2f} s  wall {wall_old:7.2f} s  ({len(old)} rows)")
    print(f"arrays  cpu {cpu_new:7.2f} s  wall {wall_new:7.2f} s  ({len(new)} rows)")
    print(f"ratio (pandas / arrays CPU): {cpu_old / cpu_new:.1f}x")
    print(f"largest float difference {diff:.3g}; NaNs in the same places: {same_nan}")


if __name__ == "__main__":
    main()
