"""A published result: the summary tables of a database as Parquet files in one folder, which
every reader opens read-only in place of the database (``--db DIR``).

A study's database holds per-text tables of millions of rows and the corpus's own texts; a
reader of the paper needs the tables the claims, the report, ``homog compare`` and the TUI are
computed from. :func:`write_bundle` writes, from one run per (model, intervention)
(:func:`homog.store.current.use_runs`):

- every table of the store (:data:`homog.schema.tables.TABLES`) that is not per text, whole;
- ``layer_summary`` (per run, variant, layer and metric: the curves);
- ``texts`` without its words (``text`` and ``keyphrase`` are NULL: the corpus is not ours to
  publish), so the counts, labels, BERTScores and key positions stay;
- of the per-text tables, only the slices a reader computes from (``slices``: table ->
  SELECT), and the readers' aggregates of the rest (``frames``: name -> SELECT, stored as
  table ``bundle_<name>``, which a reader prefers to its own query: :func:`frame_sql`);
- ``bundle.json``: what is where, row counts and bytes, the source, homog's version, and the
  publishing project's provenance (git commit, corpus and synth reports), which a report from
  the bundle shows in place of the reader's.

:func:`open_bundle` builds an in-memory database from the folder with the store's schema
(absent tables empty) and returns it locked down like a reader connection: nothing a reader
does reaches the files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from homog import __version__
from homog.errors import HomogError
from homog.interrupts import register
from homog.schema.tables import TABLES, create_schema
from homog.store.guard import READER_CONFIG

MANIFEST = "bundle.json"
FORMAT = "homog-bundle"
# per-text tables: only the slices and frames a reader computes from go into a bundle
PER_TEXT = ("layer_metrics", "sentence_metrics")
WORDS = ("text", "keyphrase")  # the corpus's words: never published
FRAME_PREFIX = "bundle_"
BUNDLE_KEY = "bundle"  # homog_meta's key of an opened bundle (its folder)


def bundle_provenance(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The provenance a bundle keeps (``write_bundle``'s ``provenance``); None for a database,
    or a bundle written without one."""
    if not is_bundle(path):
        return None
    record = json.loads((Path(path) / MANIFEST).read_text()).get("provenance")
    return record if isinstance(record, dict) else None


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder that :func:`write_bundle` wrote (its manifest says so)."""
    manifest = Path(path) / MANIFEST
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def opened_bundle(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con`` is a bundle's in-memory database (:func:`open_bundle`)."""
    try:
        row = con.execute("SELECT count(*) FROM homog_meta WHERE key = ?", [BUNDLE_KEY]).fetchone()
    except duckdb.Error:
        return False
    return bool(row and row[0])


def frame_sql(con: duckdb.DuckDBPyConnection, name: str, sql: str) -> str:
    """``sql``, or the SELECT of the bundle's stored result of it (table ``bundle_<name>``)
    when ``con`` is a bundle's database."""
    found = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [FRAME_PREFIX + name]
    ).fetchone()
    return f'SELECT * FROM "{FRAME_PREFIX}{name}"' if found and found[0] else sql


def _write(con: duckdb.DuckDBPyConnection, sql: str, path: Path) -> int:
    """Rows of ``sql`` to the Parquet file ``path`` (zstd); returns the row count."""
    import pyarrow.parquet as pq

    table = con.sql(sql).to_arrow_table()
    pq.write_table(table, path, compression="zstd")
    return table.num_rows


def _sources(
    present: set[str], slices: Mapping[str, str], frames: Mapping[str, str]
) -> dict[str, str]:
    """File stem -> the SELECT that fills it."""
    out: dict[str, str] = {}
    for name in TABLES:
        if name not in present or name in PER_TEXT:
            continue
        if name == "texts":
            blank = ", ".join(f"CAST(NULL AS VARCHAR) AS {w}" for w in WORDS)
            out[name] = f"SELECT * REPLACE ({blank}) FROM texts"
        else:
            out[name] = f'SELECT * FROM "{name}"'
    if "layer_summary" in present:
        out["layer_summary"] = "SELECT * FROM layer_summary"
    for name, sql in slices.items():
        if name in present:
            out[name] = sql
    for name, (table, sql) in frames.items():
        if table in present:
            out[FRAME_PREFIX + name] = sql
    return out


def write_bundle(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    *,
    slices: Mapping[str, str],
    frames: Mapping[str, tuple[str, str]],
    source: str,
    max_mb: float | None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the bundle of the reader connection ``con`` (its runs already chosen by
    ``use_runs``) to the folder ``out``: into a temporary folder beside it, renamed into place
    when complete, so a failure leaves no half-written bundle. ``out`` is replaced when it is a
    bundle; the caller refuses anything else. HomogError (nothing written) when the files
    exceed ``max_mb``. ``provenance``: the publishing project's record
    (homog.report.provenance.project_record), kept in the manifest. Returns the manifest."""
    present = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()} | {
        r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()
    }
    if "runs" not in present:
        raise HomogError("the database holds no runs table: nothing to publish")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files = {}
        for stem, sql in _sources(present, slices, frames).items():
            path = tmp / f"{stem}.parquet"
            rows = _write(con, sql, path)
            files[stem] = {"file": path.name, "rows": rows, "bytes": path.stat().st_size}
        total = sum(f["bytes"] for f in files.values())
        if max_mb is not None and total > max_mb * 2**20:
            big = sorted(files.items(), key=lambda kv: -kv[1]["bytes"])[:3]
            names = ", ".join(f"{k} {v['bytes'] / 2**20:.1f} MB" for k, v in big)
            raise HomogError(
                f"the bundle would be {total / 2**20:.1f} MB, over --max-mb {max_mb:g} "
                f"(largest: {names}); nothing was written. Raise --max-mb, or publish a "
                "database of fewer runs"
            )
        manifest = {
            "format": FORMAT,
            "version": 1,
            "source": source,
            "tables": files,
            "bytes": total,
            "homog_version": _version(),
        }
        if provenance is not None:
            manifest["provenance"] = dict(provenance)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
        return manifest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _version() -> str:
    return __version__


def open_bundle(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory database of the bundle at ``path`` with the store's schema (a table the
    bundle lacks is empty; a column an older bundle lacks is NULL), then locked down as a
    reader connection. HomogError naming the file that cannot be read."""
    folder = Path(path)
    manifest = json.loads((folder / MANIFEST).read_text())
    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    create_schema(con)
    con.execute("DELETE FROM homog_meta")
    for stem, entry in manifest.get("tables", {}).items():
        file = folder / str(entry["file"])
        if not file.is_file():
            con.close()
            raise HomogError(
                f"the bundle {folder} lacks {file.name} (its {MANIFEST} lists it): "
                "publish it again with `homog publish`"
            )
        quoted = str(file).replace("'", "''")
        try:
            rows = f"SELECT * FROM read_parquet('{quoted}')"
            if stem in TABLES or stem == "layer_summary":  # the schema's types and columns
                con.execute(f'INSERT INTO "{stem}" BY NAME {rows}')
            else:
                con.execute(f'CREATE TABLE "{stem}" AS {rows}')
        except duckdb.Error as exc:
            con.close()
            raise HomogError(
                f"cannot read {file} of the bundle {folder}: {str(exc).splitlines()[0]}; "
                "publish it again with `homog publish`"
            ) from exc
    con.execute("INSERT INTO homog_meta VALUES (?, ?)", [BUNDLE_KEY, str(folder)])
    # the reader's settings, the configuration's lock last (after it nothing can be SET)
    for key, value in sorted(READER_CONFIG.items(), key=lambda kv: kv[0] == "lock_configuration"):
        con.execute(f"SET {key} = {_literal(value)}")

    return register(con)


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"
