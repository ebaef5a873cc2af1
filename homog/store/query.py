"""Read-only queries over the homog DuckDB file, shared by the CLI and the terminal UI.

Every function takes a connection from :func:`connect` (read-only) and returns plain Python
values: lists of dicts (one dict per row, keys = column names) or ``(columns, rows)``. Names
given by users (metrics, variants, models, runs) are checked against the database and a
HomogError lists the valid ones. Nothing here imports a UI toolkit or writes the database.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from homog.errors import HomogError
from homog.schema.summary import summary_kind
from homog.schema.tables import schema_problems
from homog.store.bundle import is_bundle, open_bundle, opened_bundle
from homog.store.guard import damaged, open_reader
from homog.store.sql import check_names, database_path, fetch_dicts, fetch_rows
from homog.variants import TEXT_VARIANTS

CREATE_HINT = "create it with `dvc repro` (the whole pipeline) or `homog load` (after the stages)"
# the registry's order (homog.variants; a finer sweep's key_p25 ... sorts after by name)
VARIANT_ORDER = TEXT_VARIANTS


def connect(db_path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """Open the database read-only, with the reader guards of :mod:`homog.store.guard`.

    Raises HomogError when the file is missing, empty (0 bytes), not a DuckDB database, or has
    no homog tables (the message names the pipeline command that creates it), and
    :class:`DatabaseLocked` while another process holds a write connection (retry; the file
    is fine).
    """
    path = Path(db_path)
    if not path.exists():
        raise HomogError(f"no database at {path}: {CREATE_HINT}")
    if path.is_dir():
        if is_bundle(path):  # a published result (homog publish): read in memory
            return open_bundle(path)
        raise HomogError(
            f"the database {path} is a directory, and not a bundle that `homog publish` wrote "
            "(it has no bundle.json); pass --db with the database file or a bundle folder"
        )
    if path.stat().st_size == 0:  # `homog load` never replaces a file that is not DuckDB's
        raise HomogError(
            f"the database {path} is empty (a 0-byte file, not a database: `homog load` does "
            f"not replace it); remove it (rm {path}), then {CREATE_HINT}"
        )
    con = open_reader(path)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    except duckdb.Error as exc:
        con.close()
        raise damaged(path, exc) from exc
    if "runs" not in tables or "layer_metrics" not in tables:
        con.close()
        raise HomogError(f"{path} holds no homog tables: {CREATE_HINT}")
    return con


def check_schema(con: duckdb.DuckDBPyConnection, tables: Sequence[str] = ()) -> None:
    """Raise HomogError before any computation when a table of ``tables`` (all when empty)
    lacks columns of the schema or has a column of a type readers cannot compute on (a
    VARCHAR ``layer_metrics.value``): the message names table, column, found and expected
    type, and says to rebuild with `homog load`."""
    problems = schema_problems(con, tables)
    if problems:
        path = database_path(con)
        raise HomogError(
            f"{path or 'the database'} is not a homog database this command can read: "
            f"{'; '.join(problems)}. Rebuild it with `homog load` (or pass --db with the "
            "database `homog load` built)"
        )


def list_runs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """All runs, newest model/intervention grouping first.

    Keys: run_id, model, model_source, n_layers, d_model, n_heads, dtype, device,
    intervention, n_texts, created_at (a datetime or None).
    """
    return fetch_dicts(
        con,
        "SELECT run_id, model, model_source, n_layers, d_model, n_heads, dtype, device, "
        "intervention, n_texts, created_at FROM runs ORDER BY model, intervention, created_at",
    )


def _per_layer(con: duckdb.DuckDBPyConnection) -> str:
    """Where the names of the per-layer rows are: ``layer_metrics``, or in a bundle (which
    keeps a slice of it) ``layer_summary``."""
    return "layer_summary" if opened_bundle(con) else "layer_metrics"


def metrics(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Metric names present in ``layer_metrics``, sorted."""
    table = _per_layer(con)
    return [r[0] for r in fetch_rows(con, f"SELECT DISTINCT metric FROM {table} ORDER BY metric")]


def variants(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Variant names present in ``layer_metrics``: original, front, end, control first."""
    table = _per_layer(con)
    found = {r[0] for r in fetch_rows(con, f"SELECT DISTINCT variant FROM {table}")}
    return [v for v in VARIANT_ORDER if v in found] + sorted(found - set(VARIANT_ORDER))


def models(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Model keys present in ``runs``, sorted."""
    return [r[0] for r in fetch_rows(con, "SELECT DISTINCT model FROM runs ORDER BY 1")]


def run_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """All run ids, sorted."""
    return [r[0] for r in fetch_rows(con, "SELECT run_id FROM runs ORDER BY 1")]


_all_variants, _all_models, _all_run_ids = variants, models, run_ids


def summary_names(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """(metrics, variants) that ``layer_summary`` has rows for, ordered as :func:`metrics` and
    :func:`variants` order them: the names a curve can be drawn for.

    A lookup on a materialised summary (databases built by ``homog load``); on the view of an
    older database, :func:`metrics` and :func:`variants` (a scan of ``layer_metrics``; the
    view would aggregate every row first). The two differ only for a metric without one finite
    value, which the summary leaves out (nothing to draw).
    """
    # lazy: the homog.extract package loads homog.config, which `from homog.store import
    # connect` (the terminal UI's first paint) must not (tests/test_store.py)
    from homog.extract import PER_TEXT_METRICS

    try:
        kind = summary_kind(con)
    except duckdb.Error as exc:
        raise damaged(database_path(con), exc) from exc
    if kind != "table":
        found_metrics = metrics(con)
        found_variants = variants(con)
    else:
        found_metrics = [
            r[0]
            for r in fetch_rows(con, "SELECT DISTINCT metric FROM layer_summary ORDER BY metric")
        ]
        found = {r[0] for r in fetch_rows(con, "SELECT DISTINCT variant FROM layer_summary")}
        found_variants = [v for v in VARIANT_ORDER if v in found] + sorted(
            found - set(VARIANT_ORDER)
        )
    # per-text counts (n_tokens, layer 0 only) are no curve
    return [m for m in found_metrics if m not in PER_TEXT_METRICS], found_variants


def has_summary(con: duckdb.DuckDBPyConnection, metric: str) -> bool:
    """True when ``layer_summary`` has a row of ``metric`` (a lookup on the materialised table)."""
    return bool(fetch_rows(con, "SELECT 1 FROM layer_summary WHERE metric = ? LIMIT 1", [metric]))


def _in(column: str, values: Sequence[Any] | None, args: list[Any]) -> str:
    if not values:
        return ""
    args.append(list(values))
    return f" AND {column} IN (SELECT unnest(?))"


def layer_curves(
    con: duckdb.DuckDBPyConnection,
    metric: str,
    run_ids: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    models: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Per-layer mean curves of ``metric`` with 95 % CIs and the contrast p-values.

    Filters (None = all): ``run_ids``, ``variants``, ``layers`` (layer indices), ``models``
    (model keys). Rows, ordered by model, run, variant (original, front, end, control), layer:
    run_id, model, intervention, variant, layer, rel_depth (layer / n_layers), n, mean, std,
    ci_low, ci_high, p_holm_vs_original (Holm-corrected p, stats.test, of variant vs original at
    that layer from ``contrasts``; None for the original itself or when stats did not run).
    Raises HomogError for an unknown metric, variant, model or run, listing the valid ones.
    """
    args: list[Any] = [metric]
    where = "s.metric = ?"
    where += _in("s.run_id", run_ids, args)
    where += _in("s.variant", variants, args)
    where += _in("s.layer", layers, args)
    where += _in("s.model", models, args)
    order = ", ".join(f"'{v}'" for v in VARIANT_ORDER)
    pairs = _pair_source(con, metric) or "contrasts"
    sql = f"""
        SELECT s.run_id, s.model, r.intervention, s.variant, s.layer,
               s.layer / r.n_layers AS rel_depth, s.n, s.mean, s.std, s.ci_low, s.ci_high,
               c.p_holm AS p_holm_vs_original
        FROM layer_summary AS s
        JOIN runs AS r USING (run_id)
        LEFT JOIN {pairs} AS c
          ON c.run_id = s.run_id AND c.metric = s.metric AND c.layer = s.layer
         AND c.variant_a = s.variant AND c.variant_b = 'original'
         AND c.band IS NULL AND c.baseline_run_id IS NULL
        WHERE {where}
        ORDER BY s.model, r.intervention, s.run_id,
                 coalesce(list_position([{order}], s.variant), 99), s.variant, s.layer
    """
    rows = fetch_dicts(con, sql, args)
    if rows:
        # Names that matched nothing among the rows found: a typo (listed with the valid
        # names) or a valid name without rows for this metric (fine). Only then the scan.
        for kind, given, field, listing in (
            ("variant", variants, "variant", _all_variants),
            ("model", models, "model", _all_models),
            ("run", run_ids, "run_id", _all_run_ids),
        ):
            seen = {r[field] for r in rows}
            unseen = [g for g in given or () if g not in seen]
            if unseen:
                check_names(kind, unseen, listing(con))
    else:
        # Validate names only when nothing matched: the DISTINCT scans cost a full pass over
        # layer_metrics, too much for the TUI's redraw on every metric switch.
        # The filter arguments shadow the module's listing functions, hence the _all_* aliases.
        # the key sentence's sent_* curves live in layer_summary only (sentence_metrics)
        known = metrics(con) + (summary_names(con)[0] if metric.startswith("sent_") else [])
        check_names("metric", [metric], list(dict.fromkeys(known)))
        check_names("variant", variants, _all_variants(con))
        check_names("model", models, _all_models(con))
        check_names("run", run_ids, _all_run_ids(con))
    return rows


def _pair_source(con: duckdb.DuckDBPyConnection, metric: str) -> str | None:
    """The relation holding ``metric``'s per-layer paired contrasts: ``contrasts``, or for a
    ``sent_*`` metric (the key sentence's curve) the key rows of ``sentence_contrasts``; None
    when the database lacks that table."""
    table = "sentence_contrasts" if metric.startswith("sent_") else "contrasts"
    if not fetch_rows(con, "SELECT 1 FROM duckdb_tables() WHERE table_name = ?", [table]):
        return None
    return f"(SELECT * FROM {table} WHERE sentence = 'key')" if table != "contrasts" else table


def paired_layers(
    con: duckdb.DuckDBPyConnection, metric: str, run_ids: Sequence[str] | None = None
) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(run_id, variant, layer) -> the paired contrast of that variant against the original
    at that layer (mean_diff, ci_low, ci_high, p_holm), from :func:`_pair_source`'s table;
    ``run_ids`` None: every run."""
    source = _pair_source(con, metric)
    if source is None:
        return {}
    args: list[Any] = [metric]
    where = _in("run_id", run_ids, args)
    rows = fetch_rows(
        con,
        f"SELECT run_id, variant_a, layer, mean_diff, ci_low, ci_high, p_holm FROM {source} "
        "WHERE metric = ? AND variant_b = 'original' AND band IS NULL "
        f"AND baseline_run_id IS NULL AND layer IS NOT NULL{where}",
        args,
    )
    keys = ("mean_diff", "ci_low", "ci_high", "p_holm")
    return {(r[0], r[1], r[2]): dict(zip(keys, r[3:], strict=True)) for r in rows}


def difference_curves(
    con: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]], metric: str
) -> list[dict[str, Any]]:
    """``layer_curves`` rows turned into each variant's paired difference from the original
    (variant - original per text, mean and 95 % bootstrap CI of :func:`paired_layers`), one
    row per (run, variant other than the original, layer) that has a contrast; ``mean``,
    ``ci_low``, ``ci_high`` hold the difference, the rest is the curve's row."""
    diff = paired_layers(con, metric) if rows else {}
    out = []
    for r in rows:
        d = diff.get((r["run_id"], r["variant"], r["layer"]))
        if r["variant"] != "original" and d is not None:
            out.append(
                {**r, "mean": d["mean_diff"], "ci_low": d["ci_low"], "ci_high": d["ci_high"]}
            )
    return out


def contrasts(
    con: duckdb.DuckDBPyConnection,
    metric: str,
    run_ids: Sequence[str] | None = None,
    bands: bool = False,
) -> list[dict[str, Any]]:
    """Rows of ``contrasts`` for ``metric``: per layer (``bands=False``) or per depth band.

    Keys: every column of ``contrasts`` plus ``model``. Raises HomogError for an unknown metric.
    """
    check_names("metric", [metric], metrics(con))
    args: list[Any] = [metric]
    where = "c.metric = ? AND c.band IS " + ("NOT NULL" if bands else "NULL")
    where += _in("c.run_id", run_ids, args)
    return fetch_dicts(
        con,
        f"SELECT r.model, c.* FROM contrasts AS c JOIN runs AS r USING (run_id) WHERE {where} "
        "ORDER BY r.model, c.run_id, c.baseline_run_id NULLS FIRST, c.variant_a, c.variant_b, "
        "c.band, c.layer",
        args,
    )


def attention_profile(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    variant: str,
    head: int | None = None,
) -> list[dict[str, Any]]:
    """Attention column mass by relative-position bin for one run and variant.

    ``head=None`` averages over heads. Rows (layer, bin, mass) ordered by layer, bin.
    Raises HomogError for an unknown run or variant.
    """
    check_names("run", [run_id], run_ids(con))
    check_names("variant", [variant], variants(con))
    args: list[Any] = [run_id, variant]
    head_sql = ""
    if head is not None:
        heads = [
            r[0]
            for r in fetch_rows(
                con,
                "SELECT DISTINCT head FROM attention_profile WHERE run_id = ? ORDER BY 1",
                [run_id],
            )
        ]
        if heads and int(head) not in heads:
            raise HomogError(
                f"head {head} is out of range: run {run_id[:8]} has heads {heads[0]}..{heads[-1]}"
            )
        head_sql = " AND head = ?"
        args.append(int(head))
    return fetch_dicts(
        con,
        "SELECT layer, bin, avg(mass) AS mass FROM attention_profile "
        f"WHERE run_id = ? AND variant = ?{head_sql} GROUP BY layer, bin ORDER BY layer, bin",
        args,
    )


def attn_first_curves(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The attention sink curve of one run: ``attn_first`` per variant and layer.

    Rows (variant, layer, n, mean, ci_low, ci_high), ordered by variant then layer.
    Raises HomogError for an unknown run.
    """
    check_names("run", [run_id], run_ids(con))
    if not has_summary(con, "attn_first"):  # extracted without attention statistics
        return []
    return [
        {k: r[k] for k in ("variant", "layer", "n", "mean", "ci_low", "ci_high")}
        for r in layer_curves(con, "attn_first", run_ids=[run_id])
    ]


def posenc_results(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """All rows of ``posenc_results`` (pe, task, split, accuracy, n_params, epochs, seed)."""
    return fetch_dicts(
        con,
        "SELECT pe, task, split, accuracy, n_params, epochs, seed FROM posenc_results "
        "ORDER BY pe, task, split, seed",
    )


def head_ablation(con: duckdb.DuckDBPyConnection, pe: str, task: str) -> list[dict[str, Any]]:
    """Per-head ablation of one encoding and task: rows (layer, head, accuracy, drop).

    Raises HomogError for an unknown encoding or task.
    """
    pes = [r[0] for r in fetch_rows(con, "SELECT DISTINCT pe FROM head_ablation ORDER BY 1")]
    check_names("positional encoding", [pe], pes)
    tasks = [
        r[0]
        for r in fetch_rows(
            con, "SELECT DISTINCT task FROM head_ablation WHERE pe = ? ORDER BY 1", [pe]
        )
    ]
    check_names("task", [task], tasks)
    return fetch_dicts(
        con,
        "SELECT layer, head, accuracy, drop FROM head_ablation WHERE pe = ? AND task = ? "
        "ORDER BY layer, head",
        [pe, task],
    )
