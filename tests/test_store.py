"""The DuckDB store: schema contract, atomic and idempotent load, keeping earlier runs."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import homog.store.fill as fill
from homog.errors import HomogError
from homog.store import TABLES, collect_sources, create_schema, load, load_database

# docs/design.md's public contract: these columns, in this order, must stay (extensions come after).
DESIGN_COLUMNS = {
    "texts": ["dataset", "variant", "sample_id", "text", "label", "keyphrase", "bertscore_f1"],
    "runs": [
        "run_id",
        "model",
        "model_source",
        "n_layers",
        "d_model",
        "n_heads",
        "dtype",
        "device",
        "intervention",
        "config_json",
        "homog_version",
        "created_at",
    ],
    "layer_metrics": ["run_id", "variant", "sample_id", "layer", "metric", "value"],
    "attention_profile": ["run_id", "variant", "layer", "head", "bin", "mass"],
    "mauve_scores": ["run_id", "variant", "layer", "mauve"],
    "layer_summary": [
        "run_id",
        "model",
        "variant",
        "layer",
        "metric",
        "n",
        "mean",
        "std",
        "ci_low",
        "ci_high",
    ],
    "contrasts": [
        "run_id",
        "variant_a",
        "variant_b",
        "layer",
        "metric",
        "mean_diff",
        "ci_low",
        "ci_high",
        "p_value",
        "p_holm",
    ],
    "posenc_results": ["pe", "task", "split", "accuracy", "n_params", "epochs", "seed"],
    "head_ablation": ["pe", "task", "layer", "head", "accuracy", "drop"],
    "logit_decomposition": ["source", "layer", "head", "term", "share"],
    "attention_heads": ["run_id", "variant", "layer", "head", "metric", "mean", "std", "n"],
    "dataset_spectra": ["run_id", "variant", "layer", "pooling", "metric", "value"],
}
VARIANTS = ["original", "front", "end", "control"]


def write_run(
    root: Path,
    model: str,
    intervention: str,
    run_id: str,
    *,
    n_texts: int = 6,
    n_layers: int = 4,
    shift: float = 0.0,
    seed: int = 0,
) -> None:
    """Synthetic extract outputs for one run under root/data/extract/<model>/<intervention>/."""
    rng = np.random.default_rng(seed)
    d = root / "data" / "extract" / model / intervention
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "model": model,
                "model_source": f"random:{model}",
                "n_layers": n_layers,
                "d_model": 16,
                "n_heads": 2,
                "dtype": "float32",
                "device": "cpu",
                "intervention": intervention,
                "config_json": "{}",
                "homog_version": "0.1.0",
                "created_at": "2025-06-01T10:00:00+00:00",
                "n_texts": n_texts,
                "n_truncated": 0,
                "timings": {"total_s": 1.0},
            }
        )
    )
    rows = [
        (run_id, v, f"s{t}", layer, m, float(rng.normal(layer + shift + i, 1.0)))
        for i, v in enumerate(VARIANTS)
        for t in range(n_texts)
        for layer in range(n_layers + 1)
        for m in ("erank", "mev")
    ]
    pd.DataFrame(
        rows, columns=["run_id", "variant", "sample_id", "layer", "metric", "value"]
    ).to_parquet(d / "layer_metrics.parquet")
    prof = [
        (run_id, v, layer, h, b, 1 / 20)
        for v in VARIANTS
        for layer in range(1, n_layers + 1)
        for h in range(2)
        for b in range(20)
    ]
    pd.DataFrame(prof, columns=["run_id", "variant", "layer", "head", "bin", "mass"]).to_parquet(
        d / "attention_profile.parquet"
    )
    heads = [
        (run_id, v, layer, h, "attn_first", 0.5, 0.1, n_texts)
        for v in VARIANTS
        for layer in range(1, n_layers + 1)
        for h in range(2)
    ]
    pd.DataFrame(
        heads, columns=["run_id", "variant", "layer", "head", "metric", "mean", "std", "n"]
    ).to_parquet(d / "attention_heads.parquet")
    spec = [
        (run_id, v, layer, "mean", "rankme", 3.0) for v in VARIANTS for layer in range(n_layers + 1)
    ]
    pd.DataFrame(
        spec, columns=["run_id", "variant", "layer", "pooling", "metric", "value"]
    ).to_parquet(d / "dataset_spectra.parquet")


def write_project(root: Path, runs: list[tuple[str, str, str]], **kw) -> dict:
    """Synthetic outputs of every stage; returns the params naming them."""
    for model, intervention, run_id in runs:
        write_run(root, model, intervention, run_id, **kw)
    (root / "data" / "synth").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        [
            ("demo", v, f"s{t}", f"text {t} {v}", "pos", "kp", 1.0)
            for v in VARIANTS
            for t in range(6)
        ],
        columns=["dataset", "variant", "sample_id", "text", "label", "keyphrase", "bertscore_f1"],
    ).to_parquet(root / "data" / "synth" / "texts.parquet")
    (root / "data" / "mauve").mkdir(parents=True, exist_ok=True)
    for model in {m for m, _, _ in runs}:
        pd.DataFrame(
            [
                (rid, v, layer, 0.9)
                for m, _, rid in runs
                if m == model
                for v in VARIANTS
                for layer in range(4)
            ],
            columns=["run_id", "variant", "layer", "mauve"],
        ).to_parquet(root / "data" / "mauve" / f"{model}.parquet")
    pe_dir = root / "data" / "posenc" / "rope"
    pe_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        [("rope", "distance", "test", 0.9, 1000, 2, 0)],
        columns=["pe", "task", "split", "accuracy", "n_params", "epochs", "seed"],
    ).to_parquet(pe_dir / "results.parquet")
    return {
        "models": {m: {"source": f"random:{m}"} for m, _, _ in runs},
        "posenc": {"encodings": ["rope", "nope"]},
        "db": "data/homog.duckdb",
    }


def table_rows(db: Path, table: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
    finally:
        con.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_schema_keeps_design_contract():
    con = duckdb.connect()
    create_schema(con)
    create_schema(con)  # idempotent
    for table, cols in DESIGN_COLUMNS.items():
        got = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
        assert got[: len(cols)] == cols, table
    cols = [r[0] for r in con.execute("DESCRIBE contrasts").fetchall()]
    assert {"band", "baseline_run_id", "n"} <= set(cols)


def test_load_counts_and_layer_summary(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1"), ("m1", "zero_pos", "r2")])
    counts = load(params, root=tmp_path)
    db = tmp_path / "data" / "homog.duckdb"
    assert counts["runs"] == 2
    assert counts["layer_metrics"] == 2 * 4 * 6 * 5 * 2
    assert counts["posenc_results"] == 1 and counts["texts"] == 24
    frame = pd.concat(
        pd.read_parquet(p)
        for p in sorted((tmp_path / "data" / "extract").glob("*/*/layer_metrics.parquet"))
    )
    want = frame.groupby(["run_id", "variant", "layer", "metric"])["value"].agg(
        ["mean", "std", "count"]
    )
    con = duckdb.connect(str(db), read_only=True)
    got = con.execute(
        "SELECT run_id, variant, layer, metric, mean, std, n, ci_low, ci_high FROM layer_summary"
    ).fetchall()
    assert len(got) == len(want)
    for run_id, variant, layer, metric, mean, std, n, lo, hi in got:
        w = want.loc[(run_id, variant, layer, metric)]
        assert mean == pytest.approx(w["mean"]) and std == pytest.approx(w["std"])
        assert n == w["count"]
        assert hi - mean == pytest.approx(1.959964 * w["std"] / np.sqrt(n), rel=1e-5)
        assert mean - lo == pytest.approx(hi - mean)
    run = con.execute(
        "SELECT created_at, n_texts, timings_json FROM runs WHERE run_id='r1'"
    ).fetchone()
    assert str(run[0]) == "2025-06-01 10:00:00" and run[1] == 6
    assert json.loads(run[2]) == {"total_s": 1.0}


def test_load_twice_is_idempotent_and_keeps_earlier_runs(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    first = {t: table_rows(db, t) for t in TABLES}
    load(params, root=tmp_path)
    assert {t: table_rows(db, t) for t in TABLES} == first
    # New params -> a new run id in the same place: the earlier run stays, comparable.
    write_run(tmp_path, "m1", "none", "r9", shift=5.0)
    load(params, root=tmp_path)
    ids = [r[0] for r in table_rows(db, "runs")]
    assert ids == ["r1", "r9"]
    assert len(table_rows(db, "layer_metrics")) == 2 * len(first["layer_metrics"])
    # Reloading r9 with changed values replaces its rows instead of duplicating them.
    write_run(tmp_path, "m1", "none", "r9", shift=50.0)
    load(params, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    n, lo = con.execute(
        "SELECT count(*), min(value) FROM layer_metrics WHERE run_id='r9'"
    ).fetchone()
    assert n == len(first["layer_metrics"]) and lo > 40


def test_missing_column_and_nothing_to_load(tmp_path):
    with pytest.raises(HomogError, match="dvc repro"):
        load({"models": {"m1": {"source": "random:m1"}}}, root=tmp_path)
    params = write_project(tmp_path, [("m1", "none", "r1")])
    bad = tmp_path / "data" / "extract" / "m1" / "none" / "layer_metrics.parquet"
    pd.read_parquet(bad).drop(columns=["metric"]).to_parquet(bad)
    with pytest.raises(HomogError, match=r"layer_metrics.parquet lacks column\(s\) metric"):
        load(params, root=tmp_path)
    assert not (tmp_path / "data" / "homog.duckdb").exists()
    assert not list((tmp_path / "data").glob(".homog.duckdb*"))


def test_failed_load_leaves_previous_database(tmp_path, monkeypatch):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    before = digest(db)
    write_run(tmp_path, "m1", "zero_pos", "r2")
    real = fill.new_rows_sql
    calls = {"n": 0}

    def boom(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 4:  # in the middle of the build, after some tables were filled
            raise RuntimeError("simulated crash")
        return real(*args, **kw)

    monkeypatch.setattr(fill, "new_rows_sql", boom)
    with pytest.raises(RuntimeError):
        load(params, root=tmp_path)
    assert digest(db) == before
    assert [p.name for p in db.parent.iterdir() if p.name.startswith(".homog")] == []


KILL_SCRIPT = """
import os, signal, sys
import homog.store.loader as loader
real = loader._build
def build(con, sources, previous, **kw):
    counts = real(con, sources, previous, **kw)
    os.kill(os.getpid(), signal.SIGKILL)   # die after the new file is complete, before rename
loader._build = build
loader.load({params}, root=sys.argv[1])
"""


def test_killed_load_leaves_previous_database_readable(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    before = table_rows(db, "runs")
    write_run(tmp_path, "m1", "zero_pos", "r2")
    proc = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT.format(params=repr(params)), str(tmp_path)],
        capture_output=True,
    )
    assert proc.returncode == -9
    assert table_rows(db, "runs") == before  # the old file, intact and readable
    load(params, root=tmp_path)  # the stale temp file of the killed load does not get in the way
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r2"]


def _load_in_process(root: str, params: dict) -> None:
    load(params, root=root)


def test_concurrent_loads_do_not_corrupt(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1"), ("m2", "none", "r2")])
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_load_in_process, args=(str(tmp_path), params)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    db = tmp_path / "data" / "homog.duckdb"
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r2"]
    assert len(table_rows(db, "layer_metrics")) == 2 * 4 * 6 * 5 * 2


def test_lock_held_times_out(tmp_path):
    from filelock import FileLock

    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    with FileLock(str(db) + ".lock"), pytest.raises(HomogError, match="another load"):
        load_database(collect_sources(params, tmp_path), db, lock_timeout=0.2)
    assert not db.exists()


def test_corrupt_previous_database_is_reported(tmp_path):
    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    db.write_bytes(os.urandom(5000))
    with pytest.raises(HomogError, match="not a DuckDB database; homog never replaces it"):
        load(params, root=tmp_path)


def test_load_reads_only_the_interventions_params_name(tmp_path):
    """Issue 16: an intervention directory the params no longer name is not loaded."""
    params = write_project(tmp_path, [("m1", "none", "r1"), ("m1", "shuffle_pos", "r3")])
    params["extract"] = {"interventions": ["none", "zero_pos"]}
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    assert [r[0] for r in table_rows(db, "runs")] == ["r1"]
    params["extract"] = {"interventions": ["none", "shuffle_pos"]}
    load(params, root=tmp_path)
    assert [r[0] for r in table_rows(db, "runs")] == ["r1", "r3"]


# -- layer_summary: a table built by load (issue 15), the view of older databases still read --

# Rows of the table that differ from the view's aggregation on the same connection: keys on
# one side only, or a value off by more than rounding (DuckDB's parallel sums may differ in
# the last bits between two evaluations of the same aggregate).
SUMMARY_MISMATCHES = """
SELECT count(*) FROM layer_summary AS t
FULL OUTER JOIN ({select}) AS v USING (run_id, model, variant, layer, metric)
WHERE t.n IS NULL OR v.n IS NULL OR t.n <> v.n
   OR NOT (abs(t.mean - v.mean) <= 1e-12 * (1 + abs(v.mean)))
   OR (v.std IS NULL) <> (t.std IS NULL)
   OR abs(t.std - v.std) > 1e-12 * (1 + abs(v.std))
   OR abs(t.ci_low - v.ci_low) > 1e-12 * (1 + abs(v.ci_low))
   OR abs(t.ci_high - v.ci_high) > 1e-12 * (1 + abs(v.ci_high))
"""


def summary_mismatches(con: duckdb.DuckDBPyConnection) -> int:
    from homog.schema.summary import LAYER_SUMMARY_SELECT

    return con.execute(SUMMARY_MISMATCHES.format(select=LAYER_SUMMARY_SELECT)).fetchone()[0]


def to_old_layout(db: Path) -> None:
    """Turn a database into what homog built before materialising: layer_summary a view."""
    from homog.schema.summary import LAYER_SUMMARY_VIEW

    con = duckdb.connect(str(db))
    try:
        con.execute("DROP TABLE layer_summary")
        con.execute(LAYER_SUMMARY_VIEW)
    finally:
        con.close()


def test_layer_summary_is_a_table_equal_to_the_view(tmp_path):
    from homog.schema.summary import LAYER_SUMMARY_SELECT
    from homog.store import LAYER_SUMMARY, summary_kind

    params = write_project(tmp_path, [("m1", "none", "r1"), ("m2", "zero_pos", "r2")])
    # Non-finite values are left out of the summary: one NaN among finite values, one group
    # (layer 0 of r2's mev, original) with nothing finite, which the view has no row for.
    path = tmp_path / "data" / "extract" / "m2" / "zero_pos" / "layer_metrics.parquet"
    frame = pd.read_parquet(path)
    nan_one = (frame.metric == "erank") & (frame.layer == 1) & (frame.sample_id == "s0")
    frame.loc[nan_one, "value"] = np.nan
    all_inf = (frame.metric == "mev") & (frame.layer == 0) & (frame.variant == "original")
    frame.loc[all_inf, "value"] = np.inf
    frame.to_parquet(path)
    counts = load(params, root=tmp_path)
    db = tmp_path / "data" / "homog.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    assert summary_kind(con) == "table"
    # same columns and types as the view's SELECT
    table_types = con.execute("DESCRIBE layer_summary").fetchall()
    view_types = con.execute(f"DESCRIBE {LAYER_SUMMARY_SELECT}").fetchall()
    assert [r[:2] for r in table_types] == [r[:2] for r in view_types]
    assert [r[0] for r in table_types] == LAYER_SUMMARY.names
    # same rows as the view's aggregation over the loaded layer_metrics
    n_groups = 2 * 4 * 5 * 2  # runs x variants x layers x metrics
    assert counts["layer_summary"] == n_groups - 1
    assert con.execute("SELECT count(*) FROM layer_summary").fetchone()[0] == n_groups - 1
    assert summary_mismatches(con) == 0
    assert not con.execute(
        "SELECT 1 FROM layer_summary WHERE run_id = 'r2' AND metric = 'mev' AND layer = 0 "
        "AND variant = 'original'"
    ).fetchall()
    n_erank = con.execute(
        "SELECT n FROM layer_summary WHERE run_id = 'r2' AND metric = 'erank' AND layer = 1 "
        "AND variant = 'original'"
    ).fetchone()[0]
    assert n_erank == 5  # 6 texts, one NaN left out
    # the check itself sees a changed row
    con.close()
    con = duckdb.connect(str(db))
    con.execute("UPDATE layer_summary SET mean = mean + 1e-6 WHERE run_id = 'r1' AND layer = 2")
    assert summary_mismatches(con) == 2 * 4  # metrics x variants of that layer
    con.close()


def test_layer_summary_follows_reloads_and_replaces_an_old_view(tmp_path):
    from homog.store import connect, layer_curves, summary_kind, summary_names

    params = write_project(tmp_path, [("m1", "none", "r1")])
    db = tmp_path / "data" / "homog.duckdb"
    load(params, root=tmp_path)
    con = connect(db)
    table_curves = layer_curves(con, "erank")
    table_names = summary_names(con)
    con.close()
    # A database built by older homog: the view gives the same answers to the same readers.
    to_old_layout(db)
    con = connect(db)
    assert summary_kind(con) == "view"
    old_curves = layer_curves(con, "erank")
    assert [(r["run_id"], r["variant"], r["layer"], r["n"]) for r in old_curves] == [
        (r["run_id"], r["variant"], r["layer"], r["n"]) for r in table_curves
    ]
    for old, new in zip(old_curves, table_curves, strict=True):
        assert old["mean"] == pytest.approx(new["mean"], rel=1e-12)
    assert summary_names(con) == table_names == (["erank", "mev"], list(VARIANTS))
    con.close()
    # Loading on top of it (a new run, r1 replaced): the new file has the table, with r9's rows.
    write_run(tmp_path, "m1", "none", "r9", shift=50.0)
    load(params, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    assert summary_kind(con) == "table"
    assert summary_mismatches(con) == 0
    runs = con.execute("SELECT DISTINCT run_id FROM layer_summary ORDER BY 1").fetchall()
    assert runs == [("r1",), ("r9",)]
    assert con.execute("SELECT min(mean) FROM layer_summary WHERE run_id = 'r9'").fetchone()[0] > 40


def test_create_schema_summary_kinds():
    from homog.store import materialize_layer_summary, summary_kind

    con = duckdb.connect()
    create_schema(con, summary="view")
    assert summary_kind(con) == "view"
    create_schema(con)  # an existing layer_summary (here the view) is kept
    assert summary_kind(con) == "view"
    con.execute("INSERT INTO runs (run_id, model, n_layers) VALUES ('r', 'm', 2)")
    con.execute("INSERT INTO layer_metrics VALUES ('r', 'original', 's', 1, 'erank', 2.0)")
    assert materialize_layer_summary(con) == 1  # the view replaced by the table
    assert summary_kind(con) == "table"
    assert summary_mismatches(con) == 0
    with pytest.raises(ValueError, match="summary"):
        create_schema(duckdb.connect(), summary="materialised")


# -- the package's public names are imported on first use ------------------------------------


def test_store_public_names_resolve():
    import importlib

    import homog.store as store

    for name in store.__all__:
        where = store._EXPORTS[name]
        module = importlib.import_module(where if "." in where else f"homog.store.{where}")
        assert getattr(store, name) is getattr(module, name), name
    assert set(store.__all__) == set(store._EXPORTS)
    assert set(store.__all__) <= set(dir(store))
    with pytest.raises(AttributeError, match="no_such_name"):
        store.no_such_name  # noqa: B018
    namespace: dict = {}
    exec("from homog.store import *", namespace)
    assert set(store.__all__) <= set(namespace)


def test_store_import_is_lazy():
    """`from homog.store import connect` (what the terminal UI's first paint needs) does not
    import the loader, homog.config or YAML; asking for `load` then does."""
    code = (
        "import sys; from homog.store import connect, DatabaseLocked; "
        "heavy = ('homog.store.loader', 'homog.config', 'yaml'); "
        "before = [m for m in heavy if m in sys.modules]; "
        "from homog.store import load; import homog.store.loader as loader; "
        "assert load is loader.load; "
        "print(before, [m for m in heavy if m not in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"
