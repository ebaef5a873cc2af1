"""BERTScore of the synth stage with and without reuse, side by side, on the same pairs.

Usage: python bench/synth_speed.py TEXTS.parquet [--n 60]

TEXTS.parquet is a synth output (``texts.parquet``: every variant of each kept review). The
variant texts of the first ``n`` reviews are scored against their originals twice, by one
``homog.synth.bertscore.Scorer`` each: ``reuse=False`` (every pair embedded, each window of a
long text anew: the stage before the reuse) and ``reuse=True`` (a variant equal to its
original scores 1 without being embedded; a long text's windows that a rewrite left untouched
are embedded once). Prints process CPU seconds (all threads), wall seconds, the CPU ratio, the load
average, and the largest F1 difference between the two (the reuse must change no score).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import pandas as pd

from homog.config.synth import BertScoreConfig
from homog.synth.bertscore import make_scorer


def pairs(path: str, n: int) -> tuple[list[str], list[str]]:
    """(variant texts, their originals) of the first ``n`` reviews of a texts.parquet."""
    t = pd.read_parquet(path)
    ids = sorted(t["sample_id"].unique())[:n]
    t = t[t["sample_id"].isin(ids)]
    originals = t[t["variant"] == "original"].set_index("sample_id")["text"]
    rows = t[t["variant"] != "original"]
    return rows["text"].tolist(), originals.loc[rows["sample_id"]].tolist()


def timed(scorer, cands: list[str], refs: list[str]) -> tuple[np.ndarray, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    f1 = scorer.f1(cands, refs)
    return f1, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("texts")
    ap.add_argument("--n", type=int, default=60, help="reviews (x3 variant pairs)")
    args = ap.parse_args()
    cands, refs = pairs(args.texts, args.n)
    cfg = BertScoreConfig()
    scorers = {"before": make_scorer(cfg), "reuse": make_scorer(cfg)}
    scorers["before"].reuse = False
    print(
        f"{len(cands)} pairs, {sum(c == r for c, r in zip(cands, refs, strict=True))} "
        f"identical; load average before {os.getloadavg()}"
    )
    out = {}
    for name in ("before", "reuse"):
        out[name] = timed(scorers[name], cands, refs)
        sc = scorers[name]
        print(
            f"{name:7s} cpu {out[name][1]:8.1f} s  wall {out[name][2]:8.1f} s  "
            f"windowed {sc.windowed}  identical {sc.identical}"
        )
    diff = float(np.max(np.abs(out["before"][0] - out["reuse"][0])))
    print(f"cpu ratio before/reuse {out['before'][1] / out['reuse'][1]:.2f}; max |dF1| {diff:.2e}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"process user+sys {usage.ru_utime + usage.ru_stime:.1f} s; load average after "
        f"{os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
