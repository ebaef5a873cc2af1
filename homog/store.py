"""The DuckDB store: the schema of DESIGN.md and the atomic, idempotent ``load``.

Everything the pipeline produces ends up in one DuckDB file (default ``data/homog.duckdb``).
The schema is a public contract (DESIGN.md): tables are only ever extended, never renamed.

Additive extensions (documented in the README):

- ``runs`` carries ``n_texts``, ``n_truncated`` and ``timings_json`` from ``run.json``.
- ``attention_heads(run_id, variant, layer, head, metric, mean, std, n)``: per-head attention
  statistics (``attn_first``, ``attn_last``, ``attn_entropy``) over texts.
- ``dataset_spectra(run_id, variant, layer, pooling, metric, value)``: dataset-level spectra
  (``rankme``, ``alpha_req``, ``alpha_req_r2``) of mean- or last-token pooled vectors.
- ``contrasts`` carries ``band``, ``baseline_run_id`` and ``n``:
  ``band`` is NULL for a single layer and ``'early'|'middle'|'late'`` for a depth band (first
  25 %, middle 50 %, last 25 % of the layers); band rows have ``layer`` NULL.
  ``baseline_run_id`` is NULL for a contrast between two variants of the same run; for an
  intervention run (``zero_pos``, ``shuffle_pos``) compared with its unchanged run it holds
  the unchanged run's id, ``variant_a = variant_b`` and ``mean_diff`` is intervention minus
  unchanged. ``n`` is the number of paired texts.
- ``homog_meta(key, value)``: ``schema_version``.

The load never touches the live file: it builds a new database beside it (copying the rows of
earlier runs from the previous file), then renames it into place, all under a lock file. A
load interrupted at any point leaves the previous database intact; two loads at once queue on
the lock. Runs are keyed by ``run_id`` (a content hash of the run's config), so loading the
same outputs twice gives the same rows and runs made with other params stay comparable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from homog.io import HomogError, load_params

SCHEMA_VERSION = "1"
DEFAULT_DB = Path("data/homog.duckdb")


def default_db(params_path: str | os.PathLike[str] = "params.yaml") -> Path:
    """The database readers open by default: ``db:`` of the params file, else DEFAULT_DB.

    A missing or unreadable params file falls back to DEFAULT_DB (a viewer must still open).
    """
    try:
        return Path(str(load_params(params_path).get("db") or DEFAULT_DB))
    except (HomogError, OSError):
        return DEFAULT_DB


# Seconds a load waits for another load holding the lock before giving up.
LOCK_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Table:
    """One table of the store.

    ``columns``: (name, DuckDB type) in order. ``required``: columns a source file must have
    (the others are filled with NULL when absent). ``scope``: how rows of the previous database
    are replaced: ``'run'`` (rows whose run_id is among the newly loaded runs), ``'pe'`` (rows of
    a positional encoding being reloaded) or a tuple of key columns (rows whose key reappears).
    ``order_by``: storage order, which keeps DuckDB's zone maps useful for the filters the CLI
    and the terminal UI apply (run, metric, variant).
    """

    name: str
    columns: tuple[tuple[str, str], ...]
    scope: str | tuple[str, ...]
    order_by: tuple[str, ...]
    required: tuple[str, ...] = field(default=())

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c}" {t}' for c, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"


V = "VARCHAR"
I = "INTEGER"  # noqa: E741 - a type name, not a loop variable
D = "DOUBLE"

TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        Table(
            "texts",
            (
                ("dataset", V),
                ("variant", V),
                ("sample_id", V),
                ("text", V),
                ("label", V),
                ("keyphrase", V),
                ("bertscore_f1", D),
            ),
            scope=("dataset", "variant", "sample_id"),
            order_by=("dataset", "sample_id", "variant"),
            required=("dataset", "variant", "sample_id", "text"),
        ),
        Table(
            "runs",
            (
                ("run_id", V),
                ("model", V),
                ("model_source", V),
                ("n_layers", I),
                ("d_model", I),
                ("n_heads", I),
                ("dtype", V),
                ("device", V),
                ("intervention", V),
                ("config_json", V),
                ("homog_version", V),
                ("created_at", "TIMESTAMP"),
                ("n_texts", I),
                ("n_truncated", I),
                ("timings_json", V),
            ),
            scope="run",
            order_by=("model", "intervention", "run_id"),
            required=("run_id", "model", "n_layers"),
        ),
        Table(
            "layer_metrics",
            (
                ("run_id", V),
                ("variant", V),
                ("sample_id", V),
                ("layer", I),
                ("metric", V),
                ("value", D),
            ),
            scope="run",
            order_by=("run_id", "metric", "variant", "layer", "sample_id"),
            required=("run_id", "variant", "sample_id", "layer", "metric", "value"),
        ),
        Table(
            "attention_profile",
            (("run_id", V), ("variant", V), ("layer", I), ("head", I), ("bin", I), ("mass", D)),
            scope="run",
            order_by=("run_id", "variant", "layer", "head", "bin"),
            required=("run_id", "variant", "layer", "head", "bin", "mass"),
        ),
        Table(
            "attention_heads",
            (
                ("run_id", V),
                ("variant", V),
                ("layer", I),
                ("head", I),
                ("metric", V),
                ("mean", D),
                ("std", D),
                ("n", I),
            ),
            scope="run",
            order_by=("run_id", "metric", "variant", "layer", "head"),
            required=("run_id", "variant", "layer", "head", "metric", "mean"),
        ),
        Table(
            "dataset_spectra",
            (
                ("run_id", V),
                ("variant", V),
                ("layer", I),
                ("pooling", V),
                ("metric", V),
                ("value", D),
            ),
            scope="run",
            order_by=("run_id", "metric", "pooling", "variant", "layer"),
            required=("run_id", "variant", "layer", "pooling", "metric", "value"),
        ),
        Table(
            "mauve_scores",
            (("run_id", V), ("variant", V), ("layer", I), ("mauve", D)),
            scope="run",
            order_by=("run_id", "variant", "layer"),
            required=("run_id", "variant", "layer", "mauve"),
        ),
        Table(
            "contrasts",
            (
                ("run_id", V),
                ("variant_a", V),
                ("variant_b", V),
                ("layer", I),
                ("metric", V),
                ("mean_diff", D),
                ("ci_low", D),
                ("ci_high", D),
                ("p_value", D),
                ("p_holm", D),
                ("band", V),
                ("baseline_run_id", V),
                ("n", I),
            ),
            scope="run",
            order_by=("run_id", "metric", "variant_a", "variant_b", "band", "layer"),
            required=("run_id", "variant_a", "variant_b", "layer", "metric", "mean_diff"),
        ),
        Table(
            "posenc_results",
            (
                ("pe", V),
                ("task", V),
                ("split", V),
                ("accuracy", D),
                ("n_params", "BIGINT"),
                ("epochs", I),
                ("seed", I),
            ),
            scope="pe",
            order_by=("pe", "task", "split", "seed"),
            required=("pe", "task", "split", "accuracy"),
        ),
        Table(
            "head_ablation",
            (("pe", V), ("task", V), ("layer", I), ("head", I), ("accuracy", D), ("drop", D)),
            scope="pe",
            order_by=("pe", "task", "layer", "head"),
            required=("pe", "task", "layer", "head", "accuracy"),
        ),
        Table(
            "logit_decomposition",
            (("source", V), ("layer", I), ("head", I), ("term", V), ("share", D)),
            scope=("source",),
            order_by=("source", "layer", "head", "term"),
            required=("source", "layer", "head", "term", "share"),
        ),
        Table(
            "homog_meta",
            (("key", V), ("value", V)),
            scope=("key",),
            order_by=("key",),
        ),
    ]
}

# Normal-approximation 95 % interval over texts. DuckDB has no t quantile; with the >= 20 texts
# of any real run the difference from a t interval is under 5 %. Non-finite values (e.g.
# mean_cosine of a one-token text) are left out of n, mean and std instead of poisoning them.
LAYER_SUMMARY_VIEW = """
CREATE OR REPLACE VIEW layer_summary AS
SELECT run_id, model, variant, layer, metric, n, mean, std,
       mean - 1.959963984540054 * std / sqrt(n) AS ci_low,
       mean + 1.959963984540054 * std / sqrt(n) AS ci_high
FROM (
    SELECT m.run_id, r.model, m.variant, m.layer, m.metric,
           count(m.value) AS n, avg(m.value) AS mean, stddev_samp(m.value) AS std
    FROM layer_metrics AS m
    JOIN runs AS r USING (run_id)
    WHERE isfinite(m.value)
    GROUP BY m.run_id, r.model, m.variant, m.layer, m.metric
)
"""


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table of the store and the ``layer_summary`` view (idempotent).

    Input: a writable DuckDB connection. Existing tables are left as they are.
    """
    for table in TABLES.values():
        con.execute(table.ddl())
    con.execute(LAYER_SUMMARY_VIEW)
    con.execute(
        "INSERT INTO homog_meta SELECT 'schema_version', ? "
        "WHERE NOT EXISTS (SELECT 1 FROM homog_meta WHERE key = 'schema_version')",
        [SCHEMA_VERSION],
    )


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
}
POSENC_TABLE_FILES = {
    "posenc_results": "results.parquet",
    "head_ablation": "head_ablation.parquet",
    "logit_decomposition": "logit_decomposition.parquet",
}


def collect_sources(params: dict[str, Any], root: str | os.PathLike[str] = ".") -> Sources:
    """Find the stage outputs named by ``params`` under ``root`` (the project directory).

    Reads the models of ``models:`` (``data/extract/<key>/<intervention>/``, every intervention
    directory with a ``run.json``), ``data/mauve/<key>.parquet``, ``data/synth/texts.parquet``,
    ``data/stats/contrasts.parquet``, ``data/posenc/<pe>/`` for ``posenc.encodings`` and
    ``data/posenc/pretrained/<key>/logit_decomposition.parquet`` when present.
    Outputs of models no longer in params are not read (their runs stay in the database from
    earlier loads). Raises HomogError for an unreadable ``run.json``.
    """
    root = Path(root)
    data = root / "data"
    src = Sources()
    src.add("texts", data / "synth" / "texts.parquet")
    for key in params.get("models") or {}:
        model_dir = data / "extract" / str(key)
        for run_json in sorted(model_dir.glob("*/run.json")):
            try:
                run = json.loads(run_json.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise HomogError(f"cannot read {run_json}: {exc}; rerun `dvc repro`") from exc
            if not isinstance(run, dict) or "run_id" not in run:
                raise HomogError(f"{run_json} has no run_id; rerun `homog extract --model {key}`")
            run.setdefault("model", str(key))
            src.runs.append(run)
            for table, name in RUN_TABLE_FILES.items():
                src.add(table, run_json.parent / name)
        src.add("mauve_scores", data / "mauve" / f"{key}.parquet")
        # `homog posenc decompose --model KEY` (optional, outside dvc.yaml's default stages).
        src.add(
            "logit_decomposition",
            data / "posenc" / "pretrained" / str(key) / "logit_decomposition.parquet",
        )
    src.add("contrasts", data / "stats" / "contrasts.parquet")
    posenc = params.get("posenc") or {}
    for pe in posenc.get("encodings") or []:
        pe_dir = data / "posenc" / str(pe)
        found = False
        for table, name in POSENC_TABLE_FILES.items():
            if (pe_dir / name).exists():
                src.add(table, pe_dir / name)
                found = True
        if found:
            src.pes.append(str(pe))
    return src


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
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


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


def _build(con: duckdb.DuckDBPyConnection, sources: Sources, previous: Path | None) -> dict:
    """Fill the empty database behind ``con``: earlier rows kept, new rows replacing theirs."""
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
            con.execute(f"ATTACH '{previous.as_posix()}' AS prev (READ_ONLY)")
        except duckdb.Error as exc:
            raise HomogError(
                f"the existing database {previous} cannot be read ({exc}); move it away and "
                "run `homog load` again to rebuild it from the stage outputs"
            ) from exc
        prev_tables = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'prev'"
            ).fetchall()
        }
    else:
        prev_tables = set()

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
        order = ", ".join(f'"{c}"' for c in table.order_by)
        con.execute(
            f"INSERT INTO {table.name} SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY {order}"
        )
        counts[table.name] = con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
    con.execute("INSERT INTO homog_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
    orphans = con.execute(
        "SELECT count(*) FROM layer_metrics WHERE run_id NOT IN (SELECT run_id FROM runs)"
    ).fetchone()[0]
    if orphans:
        raise HomogError(
            f"{orphans} layer_metrics rows belong to no run.json; the extract outputs are "
            "inconsistent: rerun `dvc repro` (or `homog extract`)"
        )
    if previous is not None:
        con.execute("DETACH prev")
    return counts


def _remove_db_files(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)


def load_database(
    sources: Sources,
    db_path: str | os.PathLike[str] = DEFAULT_DB,
    *,
    lock_timeout: float = LOCK_TIMEOUT_S,
) -> dict[str, int]:
    """Build ``db_path`` from ``sources`` atomically; return row counts per table.

    Rows of earlier runs (and of other posenc encodings, texts, logit sources) in the existing
    database are kept; rows of runs being loaded are replaced, so loading twice gives the same
    rows. The new database is written to a temporary file beside ``db_path`` and renamed onto
    it, all while holding ``<db_path>.lock``: a crash leaves the previous file intact, and a
    concurrent load waits (up to ``lock_timeout`` seconds, then HomogError).

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
    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(db_path) + ".lock", timeout=lock_timeout):
            tmp = db_path.with_name(f".{db_path.name}.{os.getpid()}.tmp")
            _remove_db_files(tmp)
            try:
                con = duckdb.connect(str(tmp))
                try:
                    counts = _build(con, sources, db_path if db_path.exists() else None)
                    con.execute("CHECKPOINT")
                finally:
                    con.close()
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
                os.replace(tmp, db_path)
            finally:
                _remove_db_files(tmp)
    except Timeout as exc:
        raise HomogError(
            f"another load holds {db_path}.lock for over {lock_timeout:.0f} s; wait for it"
        ) from exc
    return counts


def load(
    params: dict[str, Any],
    db_path: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] = ".",
) -> dict[str, int]:
    """The ``load`` stage: every output named by ``params`` into the DuckDB file.

    ``db_path`` defaults to ``params['db']`` (or ``data/homog.duckdb``), relative to ``root``.
    Returns row counts per table. See :func:`load_database` for atomicity and failures.
    """
    db = Path(db_path) if db_path is not None else Path(root) / str(params.get("db") or DEFAULT_DB)
    return load_database(collect_sources(params, root), db)


def table_names() -> Iterable[str]:
    """Names of the tables of the store (not the view)."""
    return [t for t in TABLES if t != "homog_meta"]
