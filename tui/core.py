"""The UI-free part of the terminal UI: opening the database, watching it, shaping rows.

Nothing here imports ``textual``, so it can be tested without a terminal and reused by the
benchmark. The database itself is read only through :mod:`homog.store` (its query API).

Failures: :func:`open_database` never raises for a bad file; it returns the message the UI
shows (what is wrong and how to make the file).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALPHA = 0.05  # a contrast is marked significant when its Holm-adjusted p is below this
HOW_TO_CREATE = (
    "Create it with the pipeline: `dvc repro` (all stages), or `homog load` when the stage "
    "outputs under data/ already exist. To look around without data: `homog tui --demo`."
)

RETRY_LOCKED = "Wait for it to finish, then press r to retry."

Row = dict[str, Any]


def fingerprint(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """(inode, mtime in ns, size) of ``path``, or None when it does not exist.

    ``homog load`` replaces the file by rename, so a new inode (or mtime) means a rebuilt
    database even while our read-only connection still reads the old one.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@dataclass
class Database:
    """An open (or failed) read-only database: the connection or the reason there is none."""

    path: Path
    con: Any = None  # duckdb.DuckDBPyConnection; workers use con.cursor()
    error: str | None = None
    stamp: tuple[int, int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.con is not None

    def close(self) -> None:
        if self.con is not None:
            try:
                self.con.close()
            except Exception:  # noqa: BLE001 - closing a broken connection must not crash
                pass
            self.con = None


def open_database(path: str | os.PathLike[str]) -> Database:
    """Open ``path`` read-only through :func:`homog.store.connect`.

    Returns a :class:`Database`; on a missing, empty, corrupt or locked file its ``error``
    says what is wrong and how to create the file, and ``con`` is None. Never raises.
    """
    from homog.errors import HomogError
    from homog.store import DatabaseLocked, connect

    path = Path(path)
    stamp = fingerprint(path)
    try:
        con = connect(path)
    except DatabaseLocked as exc:
        # A lock is not damage: say retry, never how to (re)create the file.
        return Database(path, error=f"{exc}\n\n{RETRY_LOCKED}", stamp=stamp)
    except HomogError as exc:
        return Database(path, error=f"{exc}\n\n{HOW_TO_CREATE}", stamp=stamp)
    except Exception as exc:  # noqa: BLE001 - duckdb raises many types; show the message
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "lock" in msg.lower():
            what = f"The database {path} is locked by another process (a running load?)."
            hint = RETRY_LOCKED
        else:
            what = f"The database {path} could not be opened: {msg}"
            hint = HOW_TO_CREATE
        return Database(path, error=f"{what}\n\n{hint}", stamp=stamp)
    return Database(path, con=con, stamp=stamp)


def error_text(exc: BaseException) -> str:
    """The message to show for a failed query: DuckDB's own text, first lines only."""
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    return "\n".join(lines[:8])


def open_with_catalog(path: str | os.PathLike[str]) -> tuple[Database, Catalog | None, str | None]:
    """Open ``path`` (:func:`open_database`) and read its catalog through the connection.

    Returns (database, catalog, error): the catalog is None and ``error`` says why when the
    file opened but could not be read. Never raises for a bad file.
    """
    db = open_database(path)
    if not db.ok:
        return db, None, None
    try:
        return db, load_catalog(db.con), None
    except Exception as exc:  # noqa: BLE001 - any database error goes to the UI
        return db, None, error_text(exc)


def as_rows(result: Any, columns: Sequence[str] | None = None) -> list[Row]:
    """Normalise what a query function returns into a list of dicts.

    Accepts a list of dicts, a pandas DataFrame, a ``(columns, rows)`` pair, or a list of
    tuples together with ``columns``. Raises TypeError for anything else.
    """
    if result is None:
        return []
    if hasattr(result, "to_dict") and hasattr(result, "columns"):  # a DataFrame
        return [dict(r) for r in result.to_dict("records")]
    if (
        isinstance(result, tuple)
        and len(result) == 2
        and isinstance(result[0], Sequence)
        and all(isinstance(c, str) for c in result[0])
    ):
        cols, rows = result
        return [dict(zip(cols, r, strict=False)) for r in rows]
    result = list(result)
    if not result:
        return []
    if isinstance(result[0], Mapping):
        return [dict(r) for r in result]
    if hasattr(result[0], "_asdict"):
        return [r._asdict() for r in result]
    if columns is None:
        raise TypeError("rows without column names")
    return [dict(zip(columns, r, strict=False)) for r in result]


def run_labels(runs: Iterable[Row]) -> dict[str, str]:
    """A short, unique label per run_id: the model, plus the intervention when it is not
    'none', plus a run-id prefix when that is still ambiguous."""
    runs = list(runs)
    base = {}
    for r in runs:
        label = str(r.get("model") or r["run_id"])
        iv = r.get("intervention")
        if iv and iv != "none":
            label = f"{label}/{iv}"
        base[r["run_id"]] = label
    counts: dict[str, int] = {}
    for label in base.values():
        counts[label] = counts.get(label, 0) + 1
    return {
        rid: (f"{label}@{rid[:6]}" if counts[label] > 1 else label) for rid, label in base.items()
    }


def curve_series(
    rows: Iterable[Row], labels: Mapping[str, str], *, relative: bool
) -> dict[str, tuple[list[float], list[float]]]:
    """Group layer-curve rows into one (x, mean) series per '<run label> <variant>'.

    ``relative`` puts rel_depth (layer / n_layers) on x so models of different depth line
    up; otherwise x is the layer index. Rows with a missing mean are skipped (a layer with
    no texts has no point, it is not drawn at zero).
    """
    series: dict[str, tuple[list[float], list[float]]] = {}
    for r in sorted(
        rows, key=lambda r: (labels.get(r["run_id"], r["run_id"]), r["variant"], r["layer"])
    ):
        mean = r.get("mean")
        if mean is None or (isinstance(mean, float) and math.isnan(mean)):
            continue
        name = f"{labels.get(r['run_id'], r['run_id'])} {r['variant']}"
        xs, ys = series.setdefault(name, ([], []))
        xs.append(float(r["rel_depth"]) if relative else float(r["layer"]))
        ys.append(float(mean))
    return series


def fmt(x: Any, digits: int = 4) -> str:
    """A number in at most ``digits`` significant digits; '' for None/NaN."""
    if x is None:
        return ""
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(xf):
        return ""
    return f"{xf:.{digits}g}"


def _short(x: float, digits: int) -> str:
    """x in ``digits`` significant digits: the shorter of %g and a compact exponent (1.2e-4)."""
    g = f"{x:.{digits}g}"
    e = re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{x:.{max(digits - 1, 0)}e}")
    return e if len(e) < len(g) else g


def fmt_fit(x: Any, width: int, digits: int = 4) -> str:
    """fmt(x, digits) in at most ``width`` cells: fewer significant digits (or the exponent
    form, 1.23e-4) where it does not fit, so that a table cell never cuts a number (the
    differences view's small paired differences, -0.0001234, were cut to '-0.0001…')."""
    text = fmt(x, digits)
    if not text or len(text) <= width:
        return text
    xf = float(x)
    for d in range(digits, 0, -1):
        short = _short(xf, d)
        if len(short) <= width:
            return short
    return short


def fmt_interval(low: Any, high: Any, width: int, digits: int = 3) -> str:
    """'low…high' in at most ``width`` cells, both ends to the same significant digits (as
    many as fit, ``digits`` at most); '' when low is absent."""
    if fmt(low) == "":
        return ""
    lo, hi = float(low), float(high)
    text = f"{fmt(lo, digits)}…{fmt(hi, digits)}"
    for d in range(digits, 0, -1):
        if len(text) <= width:
            return text
        text = f"{_short(lo, d)}…{_short(hi, d)}"
    return text


def fmt_p(p: Any) -> str:
    """A p-value for a table cell: '<1e-4' below 1e-4, '' when absent."""
    if p is None:
        return ""
    pf = float(p)
    if math.isnan(pf):
        return ""
    return "<1e-4" if pf < 1e-4 else f"{pf:.4f}"


def significant(p: Any, alpha: float = ALPHA) -> bool:
    """True when a Holm-adjusted p-value exists and is below ``alpha``."""
    if p is None:
        return False
    pf = float(p)
    return not math.isnan(pf) and pf < alpha


def filter_rows(rows: Iterable[Row], text: str, keys: Sequence[str]) -> list[Row]:
    """Rows where every whitespace-separated word of ``text`` occurs (case-insensitive) in
    one of ``keys``' values. An empty filter keeps every row."""
    words = text.lower().split()
    out = []
    for r in rows:
        hay = " ".join(str(r.get(k, "")) for k in keys).lower()
        if all(w in hay for w in words):
            out.append(r)
    return out


def deposit_head(grid: Iterable[Row]) -> Row | None:
    """The head-ablation row with the largest accuracy drop (the 'single-head deposit'),
    or None for an empty grid."""
    best = None
    for r in grid:
        d = r.get("drop")
        if d is None or (isinstance(d, float) and math.isnan(d)):
            continue
        if best is None or d > best["drop"]:
            best = r
    return best


@dataclass
class Catalog:
    """What the database holds, read once per (re)load: the lists every screen offers."""

    runs: list[Row]
    metrics: list[str]
    variants: list[str]
    n_posenc: int = 0
    n_ablation: int = 0

    @property
    def labels(self) -> dict[str, str]:
        return run_labels(self.runs)

    def run(self, run_id: str) -> Row | None:
        return next((r for r in self.runs if r["run_id"] == run_id), None)


def load_catalog(con: Any) -> Catalog:
    """Read runs, metrics, variants and whether the PE-lab tables have rows.

    Metrics and variants are those ``layer_summary`` has rows for (:func:`homog.store.
    summary_names`: a lookup on the table ``homog load`` materialises, a scan of
    ``layer_metrics`` on an older database's view).
    """
    from homog import store

    def count(table: str) -> int:
        try:
            return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        except Exception:  # noqa: BLE001 - an older database without the table
            return 0

    metrics, variants = store.summary_names(con)
    return Catalog(
        runs=as_rows(store.list_runs(con)),
        metrics=metrics,
        variants=variants,
        n_posenc=count("posenc_results"),
        n_ablation=count("head_ablation"),
    )


MAX_RESULT_ROWS = 100_000  # the console keeps at most this many rows of one result


def run_console_sql(
    con: Any, sql: str, max_rows: int = MAX_RESULT_ROWS
) -> tuple[list[str], list[tuple], bool]:
    """Run read-only SQL typed in the console; return (columns, rows, truncated).

    :func:`homog.store.run_sql` with a row limit: at most ``max_rows`` rows are kept, so
    ``SELECT * FROM layer_metrics`` does not pull millions of tuples into the UI; one more is
    fetched to know whether there were more. Raises HomogError for a refused statement or a
    DuckDB error (DuckDB's message; the connection is read-only too, a second guard).
    """
    from homog.store import run_sql

    columns, rows = run_sql(con, sql, max_rows=max_rows + 1)
    return columns, rows[:max_rows], len(rows) > max_rows


def pivot_accuracy(rows: Iterable[Row]) -> tuple[list[str], list[list[Any]]]:
    """posenc_results rows -> (columns, table): one row per encoding, one column per task
    with the test accuracy (mean over seeds; the train split when a task has no test rows),
    then the parameter count. Encodings keep their first-seen order."""
    acc: dict[tuple[str, str, str], list[float]] = {}
    params: dict[str, Any] = {}
    pes: list[str] = []
    tasks: list[str] = []
    for r in rows:
        pe, task = str(r["pe"]), str(r["task"])
        if pe not in pes:
            pes.append(pe)
        if task not in tasks:
            tasks.append(task)
        if r.get("accuracy") is not None:
            acc.setdefault((pe, task, str(r.get("split"))), []).append(float(r["accuracy"]))
        params.setdefault(pe, r.get("n_params"))
    table = []
    for pe in pes:
        cells: list[Any] = [pe]
        for task in tasks:
            vals = acc.get((pe, task, "test")) or acc.get((pe, task, "train"))
            cells.append(sum(vals) / len(vals) if vals else None)
        cells.append(params.get(pe))
        table.append(cells)
    return ["encoding", *tasks, "params"], table


def grid(
    rows: Iterable[Row], row_key: str, col_key: str, value_key: str
) -> tuple[list[int], list[int], list[list[float | None]]]:
    """Long rows -> (row ids, col ids, matrix) with None where a cell has no row."""
    rows = list(rows)
    rids = sorted({int(r[row_key]) for r in rows})
    cids = sorted({int(r[col_key]) for r in rows})
    ri = {v: i for i, v in enumerate(rids)}
    ci = {v: i for i, v in enumerate(cids)}
    m: list[list[float | None]] = [[None] * len(cids) for _ in rids]
    for r in rows:
        v = r.get(value_key)
        m[ri[int(r[row_key])]][ci[int(r[col_key])]] = None if v is None else float(v)
    return rids, cids, m
