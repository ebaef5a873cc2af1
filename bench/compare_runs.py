"""Compare the extract outputs of two project directories value by value (layer_metrics).

Used to check that a change which should not change behaviour (a restructuring) gives the
same numbers: every (run, variant, sample, layer, metric) of ``A/data/extract/*/*/`` must be
in ``B`` with the same value. Prints, per run directory, the row counts, unmatched keys, and
the largest absolute and relative differences; exits 1 when any exceeds ``--tol``.

    python bench/compare_runs.py /path/to/before /path/to/after [--tol 1e-12]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

KEY = ["run_id", "variant", "sample_id", "layer", "metric"]


def compare(a_root: Path, b_root: Path, tol: float) -> bool:
    ok = True
    files = sorted(a_root.glob("data/extract/*/*/layer_metrics.parquet"))
    if not files:
        print(f"no data/extract/*/*/layer_metrics.parquet under {a_root}")
        return False
    for path in files:
        other = b_root / path.relative_to(a_root)
        name = path.parent.relative_to(a_root)
        if not other.exists():
            print(f"{name}: missing in {b_root}")
            ok = False
            continue
        a, b = pd.read_parquet(path), pd.read_parquet(other)
        m = a.merge(b, on=KEY, how="left", suffixes=("_a", "_b"), indicator=True)
        unmatched = int((m["_merge"] != "both").sum())
        va, vb = m["value_a"].to_numpy(float), m["value_b"].to_numpy(float)
        same_nan = bool((np.isnan(va) == np.isnan(vb)).all())
        fin = np.isfinite(va) & np.isfinite(vb)
        diff = np.abs(va[fin] - vb[fin])
        rel = diff / np.maximum(np.abs(va[fin]), 1e-300)
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float(rel.max()) if rel.size else 0.0
        good = unmatched == 0 and same_nan and max_rel <= tol
        ok &= good
        print(
            f"{name}: {len(a)} rows compared ({len(b)} in B), {unmatched} unmatched, "
            f"NaN pattern {'same' if same_nan else 'DIFFERENT'}, max abs {max_abs:.3g}, "
            f"max rel {max_rel:.3g} {'ok' if good else 'DIFFERENT'}"
        )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="project directory (before)")
    parser.add_argument("b", type=Path, help="project directory (after)")
    parser.add_argument("--tol", type=float, default=1e-12, help="max relative difference")
    args = parser.parse_args()
    sys.exit(0 if compare(args.a, args.b, args.tol) else 1)


if __name__ == "__main__":
    main()
