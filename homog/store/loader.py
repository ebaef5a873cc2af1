"""The ``load`` stage: every stage output into the DuckDB file, atomically and idempotently.

The load never touches the live file: it builds a new database beside it (copying the rows of
earlier runs from the previous file), then renames it into place, all under a lock file. A
load interrupted at any point leaves the previous database intact; two loads at once queue on
the lock. Runs are keyed by ``run_id`` (a content hash of the run's config), so loading the
same outputs twice gives the same rows and runs made with other params stay comparable.
Where each stage's outputs lie comes from :mod:`homog.layout`; the design is docs/design.md.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from homog.config import Params, as_params
from homog.errors import HomogError
from homog.io import check_target
from homog.layout import Layout, find_runs, writable_dir
from homog.schema.tables import (
    SCHEMA_VERSION,
    TABLES,
    Table,
    create_schema,
    materialize_layer_summary,
)
from homog.store.guard import damaged, lock_error, quote_literal
from homog.store.target import (
    atomic_database,
    interrupted,
    previous_database,
    remove_stale_builds,
)

# Seconds a load waits for another load holding the lock before giving up.
LOCK_TIMEOUT_S = 600.0


# ---------------------------------------------------------------------------------------------
# Stage outputs -> sources


@dataclass
class Sources:
    """The stage outputs one load reads (paths that exist; empty lists are fine).

    ``runs``: parsed ``run.json`` dicts. ``files``: table name -> Parquet files. ``pes``: the
    positional encodings whose results are reloaded (their old rows are replaced even when a
    table has no new rows for them).
    """

    runs: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, list[Path]] = field(default_factory=dict)
    pes: list[str] = field(default_factory=list)
    # the model keys of params `models:` (None: keep every run) and what the load dropped
    keep_models: list[str] | None = None
    notices: list[str] = field(default_factory=list)

    def add(self, table: str, path: Path) -> None:
        if path.exists():
            self.files.setdefault(table, []).append(path)

    def is_empty(self) -> bool:
        return not self.runs and not any(self.files.values())


RUN_TABLE_FILES = {
    "layer_metrics": "layer_metrics.parquet",
    "attention_profile": "attention_profile.parquet",
    "attention_heads": "attention_heads.parquet",
    "dataset_spectra": "dataset_spectra.parquet",
    "massive_activations": "massive_activations.parquet",
    "sentence_metrics": "sentence_metrics.parquet",
}
POSENC_TABLE_FILES = {
    "posenc_results": "results.parquet",
    "head_ablation": "head_ablation.parquet",
    "logit_decomposition": "logit_decomposition.parquet",
}


def collect_sources(
    params: Params | Mapping[str, Any], root: str | os.PathLike[str] = "."
) -> Sources:
    """Find the stage outputs named by ``params`` under ``root`` (the project directory).

    Reads the runs of the models of ``models:`` (the intervention directories of
    ``Layout.extract_dir(key)`` named by ``extract.interventions`` that hold a ``run.json``),
    each model's MAUVE scores and, when present, its ``homog posenc decompose`` output, the
    synthesised texts, the contrasts, and the results of every encoding of ``posenc.encodings``
    (paths: :class:`homog.layout.Layout`).
    Outputs of models no longer in params are not read (their runs stay in the database from
    earlier loads). Raises HomogError for an unreadable ``run.json`` or invalid params.
    """
    params = as_params(params)
    layout = Layout(Path(root))
    src = Sources(keep_models=list(params.models))
    src.add("texts", layout.texts)
    for run, run_dir in find_runs(
        params.models, layout.root, interventions=params.extract.interventions
    ):
        src.runs.append(run)
        for table, name in RUN_TABLE_FILES.items():
            src.add(table, run_dir / name)
    for key in params.models:
        src.add("mauve_scores", layout.mauve(key))
        # `homog posenc decompose --model KEY` (optional, outside dvc.yaml's default stages).
        src.add("logit_decomposition", layout.pretrained_decomposition(key))
        src.add("probe_metrics", layout.probe_metrics(key))  # `homog probe --model KEY`
        src.add("lm_sentiment", layout.lm_sentiment(key))
    src.add("contrasts", layout.contrasts)
    src.add("dose_response", layout.dose_response)
    src.add("separability", layout.separability)
    src.add("sentence_contrasts", layout.sentence_contrasts)
    for pe in params.posenc.encodings:
        pe_dir = layout.posenc_dir(pe)
        found = False
        for table, name in POSENC_TABLE_FILES.items():
            if (pe_dir / name).exists():
                src.add(table, pe_dir / name)
                found = True
        if found:
            src.pes.append(pe)
    return src


# ---------------------------------------------------------------------------------------------
# One atomic build: homog.store.target (atomic_database, previous_database)


# ---------------------------------------------------------------------------------------------
# Building the database


def _run_row(run: dict[str, Any]) -> dict[str, Any]:
    """One ``runs`` row from a ``run.json`` dict (extra keys go to config/timings JSON)."""
    row = {name: run.get(name) for name in TABLES["runs"].names}
    config = run.get("config_json")
    if config is not None and not isinstance(config, str):
        row["config_json"] = json.dumps(config, sort_keys=True, default=str)
    timings = run.get("timings", run.get("timings_json"))
    if timings is not None and not isinstance(timings, str):
        timings = json.dumps(timings, sort_keys=True, default=str)
    row["timings_json"] = timings
    created = run.get("created_at")
    if isinstance(created, str):
        try:
            parsed = datetime.fromisoformat(created)
        except ValueError as exc:
            raise HomogError(
                f"run {run.get('run_id')}: created_at {created!r} is not an ISO date"
            ) from exc
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
        row["created_at"] = parsed
    return row


def _quote_list(paths: Sequence[Path]) -> str:
    return "[" + ", ".join(quote_literal(p) for p in paths) + "]"


def _new_rows_sql(con: duckdb.DuckDBPyConnection, table: Table, files: Sequence[Path]) -> str:
    """A SELECT over the Parquet ``files`` giving ``table``'s columns in order.

    Missing optional columns become typed NULLs; a missing required column raises HomogError
    naming the file and the stage that writes it.
    """
    for path in files:
        try:
            have = {
                r[0]
                for r in con.execute(
                    f"DESCRIBE SELECT * FROM read_parquet({_quote_list([path])})"
                ).fetchall()
            }
        except duckdb.Error as exc:
            raise HomogError(f"cannot read {path}: {exc}; rerun the stage that writes it") from exc
        missing = [c for c in table.required if c not in have]
        if missing:
            raise HomogError(
                f"{path} lacks column(s) {', '.join(missing)} needed for table {table.name}; "
                "rerun the stage that writes it (`dvc repro`)"
            )
    have_all = {
        r[0]
        for r in con.execute(
            f"DESCRIBE SELECT * FROM read_parquet({_quote_list(files)}, union_by_name = true)"
        ).fetchall()
    }
    cols = ", ".join(
        f'CAST("{c}" AS {t}) AS "{c}"' if c in have_all else f'CAST(NULL AS {t}) AS "{c}"'
        for c, t in table.columns
    )
    return f"SELECT {cols} FROM read_parquet({_quote_list(files)}, union_by_name = true)"


def _build(
    con: duckdb.DuckDBPyConnection, sources: Sources, previous: Path | None, prune: bool = False
) -> dict:
    """Fill the empty database behind ``con``: earlier rows kept, new rows replacing theirs.

    Runs of models not in ``sources.keep_models`` (params ``models:``) and their rows are
    dropped only with ``prune`` (else HomogError listing them, before any row is copied), and
    rows of run-scoped tables whose run is not in ``runs`` too, each with a line in
    ``sources.notices``.
    """
    con.execute("SET enable_progress_bar = false")
    create_schema(con)
    con.execute("DELETE FROM homog_meta")
    import pandas as pd  # local: pandas is only needed while loading

    runs_df = pd.DataFrame([_run_row(r) for r in sources.runs], columns=TABLES["runs"].names)
    dup = runs_df["run_id"][runs_df["run_id"].duplicated()].tolist()
    if dup:
        raise HomogError(f"run_id(s) {dup} appear in more than one run.json; rerun extract")
    con.register("new_runs_df", runs_df)
    con.execute(
        "CREATE TEMP TABLE new_runs AS SELECT "
        + ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in TABLES["runs"].columns)
        + " FROM new_runs_df"
    )
    con.execute("CREATE TEMP TABLE new_pes (pe VARCHAR)")
    if sources.pes:
        con.executemany("INSERT INTO new_pes VALUES (?)", [[p] for p in sources.pes])
    if previous is not None:
        try:
            con.execute(f"ATTACH {quote_literal(previous.as_posix())} AS prev (READ_ONLY)")
        except duckdb.Error as exc:
            if lock_error(previous, exc) is not None or isinstance(exc, duckdb.ParserException):
                raise damaged(previous, exc) from exc
            raise HomogError(
                f"the existing database {previous} cannot be read ({exc}); move it aside "
                "(keep it: it holds the runs of earlier params) and run `homog load` again to "
                "build a new one from the stage outputs"
            ) from exc
        prev_tables = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'prev'"
            ).fetchall()
        }
    else:
        prev_tables = set()
    if "runs" in prev_tables and sources.keep_models is not None and not prune:
        _refuse_drop(con, sources.keep_models)

    counts: dict[str, int] = {}
    for table in TABLES.values():
        if table.name == "homog_meta":
            continue
        if table.name == "runs":
            new_sql = "SELECT * FROM new_runs"
        elif sources.files.get(table.name):
            new_sql = _new_rows_sql(con, table, sources.files[table.name])
        else:
            new_sql = None
        if new_sql is not None and table.name != "runs":  # new_runs exists already
            con.execute(f"CREATE TEMP TABLE new_{table.name} AS {new_sql}")
        parts = []
        if new_sql is not None:
            parts.append(f"SELECT * FROM new_{table.name}")
        if table.name in prev_tables:
            prev_cols = {
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM duckdb_columns() "
                    "WHERE database_name = 'prev' AND table_name = ?",
                    [table.name],
                ).fetchall()
            }
            cols = ", ".join(
                f'p."{c}"' if c in prev_cols else f'CAST(NULL AS {t}) AS "{c}"'
                for c, t in table.columns
            )
            if table.scope == "run":
                keep = "run_id NOT IN (SELECT run_id FROM new_runs)"
                if new_sql is not None and table.name != "runs":  # e.g. an old contrasts file
                    keep += f" AND run_id NOT IN (SELECT run_id FROM new_{table.name})"
            elif table.scope == "pe":
                keep = "pe NOT IN (SELECT pe FROM new_pes)"
            elif new_sql is not None:
                same = " AND ".join(f'n."{c}" IS NOT DISTINCT FROM p."{c}"' for c in table.scope)
                keep = f"NOT EXISTS (SELECT 1 FROM new_{table.name} AS n WHERE {same})"
            else:
                keep = "TRUE"
            parts.append(f"SELECT {cols} FROM prev.{table.name} AS p WHERE {keep}")
        if not parts:
            counts[table.name] = 0
            continue
        # every column after the storage order: ties broken the same way in every load
        order = ", ".join(
            f'"{c}"'
            for c in (*table.order_by, *(c for c in table.names if c not in table.order_by))
        )
        con.execute(
            f"INSERT INTO {table.name} SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY {order}"
        )
        counts[table.name] = con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
    con.execute("INSERT INTO homog_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
    if sources.keep_models is not None:
        _drop_gone_models(con, sources.keep_models, sources.notices)
    orphans = con.execute(
        "SELECT count(*) FROM layer_metrics WHERE run_id NOT IN (SELECT run_id FROM runs)"
    ).fetchone()[0]
    if orphans:
        raise HomogError(
            f"{orphans} layer_metrics rows belong to no run.json; the extract outputs are "
            "inconsistent: rerun `dvc repro` (or `homog extract`)"
        )
    _drop_orphans(con, sources.notices)
    if sources.notices:  # rows were dropped after counting
        for name in counts:
            counts[name] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
    if previous is not None:
        con.execute("DETACH prev")
    # Last, from the complete layer_metrics and runs: every reader's summary is a lookup.
    counts["layer_summary"] = materialize_layer_summary(con)
    return counts


RUN_TABLES = [t.name for t in TABLES.values() if t.scope == "run" and t.name != "runs"]


def _drop_gone_models(con: duckdb.DuckDBPyConnection, keep: list[str], notices: list[str]) -> None:
    """Drop the runs of models not in ``keep`` (params ``models:``) and all their rows."""
    gone = con.execute(
        "SELECT model, count(*) FROM runs WHERE model NOT IN (SELECT unnest(?::VARCHAR[])) "
        "GROUP BY model ORDER BY model",
        [keep],
    ).fetchall()
    if not gone:
        return
    ids = "SELECT run_id FROM runs WHERE model NOT IN (SELECT unnest(?::VARCHAR[]))"
    for table in RUN_TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_id IN ({ids})", [keep])
    con.execute("DELETE FROM runs WHERE model NOT IN (SELECT unnest(?::VARCHAR[]))", [keep])
    names = ", ".join(f"{m} ({n} run{'s' if n > 1 else ''})" for m, n in gone)
    notices.append(
        f"dropped the runs of models no longer in params `models:` and all their rows: {names}; "
        "to keep them, add the models back to `models:` and run `homog load` again"
    )


def _refuse_drop(con: duckdb.DuckDBPyConnection, keep: list[str]) -> None:
    """HomogError listing the runs of the previous database whose models are not in ``keep``
    (params ``models:``): dropping them needs ``--prune``."""
    gone = con.execute(
        "SELECT model, list(run_id ORDER BY run_id) FROM prev.runs "
        "WHERE model NOT IN (SELECT unnest(?::VARCHAR[])) GROUP BY model ORDER BY model",
        [keep],
    ).fetchall()
    if not gone:
        return
    shown = "; ".join(
        f"{m}: {len(ids)} run{'s' if len(ids) > 1 else ''} ({', '.join(ids[:5])}"
        + (", ..." if len(ids) > 5 else "")
        + ")"
        for m, ids in gone
    )
    raise HomogError(
        f"the database holds runs of models that are not in params `models:` ({shown}); this "
        "load would drop them and all their rows, so it stopped and the database is unchanged. "
        "Pass --prune to drop them, or add the models back to `models:` (or load into "
        "another --db)"
    )


def _drop_orphans(con: duckdb.DuckDBPyConnection, notices: list[str]) -> None:
    """Drop rows of run-scoped tables whose run is not in ``runs`` (a contrasts file made
    with other ``models:``), with a notice per table."""
    for table in RUN_TABLES:
        n = con.execute(
            f"SELECT count(*) FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)"
        ).fetchone()[0]
        if n:
            con.execute(f"DELETE FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)")
            notices.append(
                f"dropped {n} {table} rows of runs that are not in the database (their models "
                "are not in params `models:`); rerun `homog stats` (`dvc repro`) to remake them"
            )


def load_database(
    sources: Sources,
    db_path: str | os.PathLike[str],
    *,
    lock_timeout: float = LOCK_TIMEOUT_S,
    force: bool = False,
    notify: Callable[[str], None] | None = None,
    prune: bool = False,
) -> dict[str, int]:
    """Build ``db_path`` from ``sources`` atomically; return row counts per table.

    ``db_path`` may be a symlink: its target is rebuilt beside itself and the link kept.
    Only a database homog built is replaced (:func:`previous_database`; ``force`` replaces
    another DuckDB file). Runs of models not in ``sources.keep_models`` are dropped only with
    ``prune`` (else HomogError, the file unchanged). What the load dropped (:func:`_build`)
    goes to ``notify``.

    Rows of earlier runs (and of other posenc encodings, texts, logit sources) in the existing
    database are kept; rows of runs being loaded are replaced, so loading twice gives the same
    rows. The new database is built by :func:`atomic_database` (beside ``db_path``, then
    renamed onto it) while holding ``<db_path>.lock``: a crash leaves the previous file
    intact, and a concurrent load waits (up to ``lock_timeout`` seconds, then HomogError).
    The target directory is checked for writing first (a clear error, no wait), temporary
    builds left by killed loads are removed, and an interrupt (Ctrl-C, also inside a DuckDB
    query) leaves no temporary file and surfaces as KeyboardInterrupt.

    Raises HomogError when there is nothing to load, a source file is unreadable or lacks a
    required column, or the existing database cannot be read.
    """
    from filelock import FileLock, Timeout

    if sources.is_empty():
        raise HomogError(
            "no stage outputs to load (data/extract/<model>/*/run.json, data/synth/texts.parquet,"
            " data/posenc/<pe>/...): run the pipeline first with `dvc repro`"
        )
    db_path = Path(db_path)
    if db_path.is_dir():
        raise HomogError(f"--db {db_path} is a directory; give the database file's path")
    db_path = check_target(db_path, what="database")  # a symlink followed, a device refused
    # Before the lock: an unwritable directory would otherwise look like a lock held forever.
    writable_dir(db_path.parent, what="database")
    try:
        with FileLock(str(db_path) + ".lock", timeout=lock_timeout):
            remove_stale_builds(db_path)
            previous = previous_database(db_path, force=force)
            try:
                with atomic_database(db_path) as con:
                    counts = _build(con, sources, previous, prune=prune)
            except (duckdb.InterruptException, RuntimeError) as exc:
                if interrupted(exc):
                    raise KeyboardInterrupt from exc
                raise
            except duckdb.Error as exc:
                # A damaged block of the previous database shows up while its rows are copied.
                if previous is not None and ("prev" in str(exc) or "Corrupt" in str(exc)):
                    raise damaged(previous, exc) from exc
                raise HomogError(f"load failed: {str(exc).splitlines()[0]}") from exc
    except Timeout as exc:
        raise HomogError(
            f"another load holds {db_path}.lock for over {lock_timeout:.0f} s; wait for it "
            "(or, if no load runs, the lock file is stale: retry)"
        ) from exc
    for line in sources.notices:
        (notify or _stderr)(line)
    return counts


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def load(
    params: Params | Mapping[str, Any],
    db_path: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] = ".",
    *,
    force: bool = False,
    notify: Callable[[str], None] | None = None,
    prune: bool = False,
) -> dict[str, int]:
    """The ``load`` stage: every output named by ``params`` into the DuckDB file.

    ``params``: a ``Params`` or a params mapping (checked with ``as_params``). ``db_path``
    defaults to ``params.db`` relative to ``root``. Returns row counts per table. See
    :func:`load_database` for atomicity and failures. Runs of models no longer in
    ``models:`` are dropped, with a notice (``notify``, default stderr), only with ``prune``
    (else HomogError listing them); ``force`` replaces a DuckDB file homog did not build.
    """
    params = as_params(params)
    db = Path(db_path) if db_path is not None else Layout(Path(root)).db(params.db)
    return load_database(collect_sources(params, root), db, force=force, notify=notify, prune=prune)
