"""Compare every table of two homog databases row by row (a refactor's "behaviour unchanged").

For each table of A: B has it with the same columns and the same number of rows; the rows,
sorted by every column that is not a float, match on those columns exactly and on the float
columns within ``--tol`` (absolute, or relative to the larger magnitude; NaN equals NaN).
What a rerun changes by design is left out: when a run was made (``runs.created_at``) and
how long it took (``runs.timings_json``). Prints one line per table and exits 1 on any
difference.

    python bench/compare_dbs.py before/data/homog.duckdb after/data/homog.duckdb [--tol 1e-12]
"""

from __future__ import annotations

import argparse
import sys

import duckdb
import numpy as np
import pandas as pd

IGNORED = {("runs", "created_at"), ("runs", "timings_json")}


def read_tables(path: str) -> dict[str, pd.DataFrame]:
    with duckdb.connect(path, read_only=True) as con:
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
                "ORDER BY 1"
            ).fetchall()
        ]
        return {name: con.execute(f'SELECT * FROM "{name}"').df() for name in names}


def is_float(series: pd.Series) -> bool:
    return pd.api.types.is_float_dtype(series)


def sorted_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows in one order: by every non-float column, then every float one."""
    keys = [c for c in df.columns if not is_float(df[c])] + [
        c for c in df.columns if is_float(df[c])
    ]
    if not keys:
        return df.reset_index(drop=True)
    text = df[keys].astype(str)
    return df.loc[text.sort_values(keys, kind="mergesort").index].reset_index(drop=True)


def table_diff(name: str, a: pd.DataFrame, b: pd.DataFrame, tol: float) -> str | None:
    """None when the tables match, else what differs."""
    keep = [c for c in a.columns if (name, c) not in IGNORED]
    if list(b.columns) != list(a.columns):
        return f"columns differ: {sorted(set(a.columns) ^ set(b.columns))}"
    if len(a) != len(b):
        return f"{len(a)} rows against {len(b)}"
    a, b = sorted_rows(a[keep]), sorted_rows(b[keep])
    worst = 0.0
    for col in keep:
        if is_float(a[col]):
            x, y = a[col].to_numpy(float), b[col].to_numpy(float)
            if not np.array_equal(np.isnan(x), np.isnan(y)):
                return f"{col}: NaN in different rows"
            ok = ~np.isnan(x) & (x != y)  # equal values (infinities too) differ by nothing
            if not (np.isfinite(x[ok]) & np.isfinite(y[ok])).all():
                return f"{col}: an infinity against another value"
            gap = np.abs(x[ok] - y[ok]) / np.maximum(1.0, np.maximum(np.abs(x[ok]), np.abs(y[ok])))
            worst = max(worst, float(gap.max(initial=0.0)))
        elif not a[col].astype(str).equals(b[col].astype(str)):
            rows = int((a[col].astype(str) != b[col].astype(str)).sum())
            return f"{col}: {rows} rows differ"
    return None if worst <= tol else f"largest float difference {worst:.3g} > {tol:g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-12)
    args = ap.parse_args()
    ta, tb = read_tables(args.a), read_tables(args.b)
    bad = 0
    for name in sorted(set(ta) | set(tb)):
        if name not in tb or name not in ta:
            print(f"{name}: only in {'A' if name in ta else 'B'}")
            bad += 1
            continue
        diff = table_diff(name, ta[name], tb[name], args.tol)
        print(f"{name}: {len(ta[name])} rows, {'identical' if diff is None else diff}")
        bad += diff is not None
    print(f"{len(set(ta) | set(tb)) - bad} of {len(set(ta) | set(tb))} tables match")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
