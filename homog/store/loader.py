"""The ``load`` stage: every stage output into the DuckDB file, atomically and idempotently.

The load never touches the live file: it builds a new database beside it (copying the rows of
earlier runs from the previous file), then renames it into place, all under a lock file. A
load interrupted at any point leaves the previous database intact; two loads at once queue on
the lock. Runs are keyed by ``run_id`` (a content hash of the run's config), so loading the
same outputs twice gives the same rows and runs made with other params stay comparable.
Where each stage's outputs lie comes from :mod:`homog.layout`; the design is docs/design.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from homog.config import Params, as_params
from homog.errors import HomogError
from homog.io import check_target
from homog.layout import Layout, find_runs, writable_dir
from homog.schema.summary import materialize_layer_summary
from homog.schema.tables import SCHEMA_VERSION, TABLES, create_schema
from homog.store.fill import drop_gone_models, drop_orphans, fill_table, refuse_drop, run_row
from homog.store.guard import damaged, lock_error, quote_literal
from homog.store.target import (
    atomic_database,
    interrupted,
    previous_database,
    refuse_read_only,
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
    src.add("intervention_doses", layout.intervention_doses)
    src.add("intervention_cost", layout.intervention_cost)
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
# Building the database (one atomic build: homog.store.target; each table: homog.store.fill)


def _stage_new_runs(con: duckdb.DuckDBPyConnection, sources: Sources) -> None:
    """Create the schema and the temporary ``new_runs`` and ``new_pes`` tables of this load
    (HomogError for a run_id in more than one run.json)."""
    con.execute("SET enable_progress_bar = false")
    create_schema(con)
    con.execute("DELETE FROM homog_meta")
    import pandas as pd  # local: pandas is only needed while loading

    runs_df = pd.DataFrame([run_row(r) for r in sources.runs], columns=TABLES["runs"].names)
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


def _attach_previous(con: duckdb.DuckDBPyConnection, previous: Path | None) -> set[str]:
    """Attach ``previous`` read-only as ``prev``; return its table names (none without it)."""
    if previous is None:
        return set()
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
    return {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'prev'"
        ).fetchall()
    }


def _drop_stale(con: duckdb.DuckDBPyConnection, sources: Sources, counts: dict) -> None:
    """Drop the runs of models gone from ``models:`` and the rows of no run (recounting
    ``counts`` when rows were dropped); HomogError for layer_metrics rows of no run.json."""
    if sources.keep_models is not None:
        drop_gone_models(con, sources.keep_models, sources.notices)
    orphans = con.execute(
        "SELECT count(*) FROM layer_metrics WHERE run_id NOT IN (SELECT run_id FROM runs)"
    ).fetchone()[0]
    if orphans:
        raise HomogError(
            f"{orphans} layer_metrics rows belong to no run.json; the extract outputs are "
            "inconsistent: rerun `dvc repro` (or `homog extract`)"
        )
    drop_orphans(con, sources.notices)
    if sources.notices:  # rows were dropped after counting
        for name in counts:
            counts[name] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]


def _build(
    con: duckdb.DuckDBPyConnection, sources: Sources, previous: Path | None, prune: bool = False
) -> dict:
    """Fill the empty database behind ``con``: earlier rows kept, new rows replacing theirs.

    Runs of models not in ``sources.keep_models`` (params ``models:``) and their rows are
    dropped only with ``prune`` (else HomogError listing them, before any row is copied), and
    rows of run-scoped tables whose run is not in ``runs`` too, each with a line in
    ``sources.notices``.
    """
    _stage_new_runs(con, sources)
    prev_tables = _attach_previous(con, previous)
    if "runs" in prev_tables and sources.keep_models is not None and not prune:
        refuse_drop(con, sources.keep_models)

    counts: dict[str, int] = {}
    for table in TABLES.values():
        if table.name == "homog_meta":
            continue
        counts[table.name] = fill_table(con, table, sources.files.get(table.name), prev_tables)
    con.execute("INSERT INTO homog_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
    _drop_stale(con, sources, counts)
    if previous is not None:
        con.execute("DETACH prev")
    # Last, from the complete layer_metrics and runs: every reader's summary is a lookup.
    counts["layer_summary"] = materialize_layer_summary(con)
    return counts


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
    refuse_read_only(db_path)
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
