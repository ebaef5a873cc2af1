"""Read-only query library: connection errors, curves vs independent SQL, read-only SQL."""

from __future__ import annotations

import time

import duckdb
import pandas as pd
import pytest

from homog import store as q
from homog.errors import HomogError
from homog.store.demo import make_demo_db
from homog.store.guard import reader_config


@pytest.fixture(scope="module")
def demo_db(demo_db_factory):
    return demo_db_factory(4, 12)


@pytest.fixture
def con(demo_db):
    c = q.connect(demo_db)
    yield c
    c.close()


def test_connect_errors_name_the_pipeline_command(tmp_path):
    with pytest.raises(HomogError, match="no database at .*dvc repro"):
        q.connect(tmp_path / "missing.duckdb")
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    with pytest.raises(HomogError, match="is empty.*homog load"):
        q.connect(empty)
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database" * 500)
    with pytest.raises(HomogError, match="not a readable DuckDB database"):
        q.connect(junk)
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE x (a INT)").close()
    with pytest.raises(HomogError, match="no homog tables"):
        q.connect(other)


def test_connection_is_read_only(con):
    with pytest.raises(duckdb.Error):
        con.execute("CREATE TABLE t (a INT)")


def test_listings(con):
    runs = q.list_runs(con)
    assert len(runs) == 4
    assert set(runs[0]) == {
        "run_id",
        "model",
        "model_source",
        "n_layers",
        "d_model",
        "n_heads",
        "dtype",
        "device",
        "intervention",
        "n_texts",
        "created_at",
    }
    assert q.variants(con) == ["original", "front", "end", "control"]
    assert "erank" in q.metrics(con) and "attn_first" in q.metrics(con)


def test_layer_curves_match_independent_computation(con, demo_db):
    rows = q.layer_curves(con, "erank", variants=["original", "front"], layers=[0, 3, 7])
    raw = (
        duckdb.connect(str(demo_db), read_only=True, config=reader_config())
        .execute("SELECT run_id, variant, layer, value FROM layer_metrics WHERE metric = 'erank'")
        .df()
    )
    want = raw.groupby(["run_id", "variant", "layer"])["value"].agg(["mean", "std", "count"])
    assert {r["layer"] for r in rows} == {0, 3, 7}
    assert len(rows) == 4 * 2 * 3
    for r in rows:
        w = want.loc[(r["run_id"], r["variant"], r["layer"])]
        assert r["mean"] == pytest.approx(w["mean"]) and r["n"] == w["count"]
        assert r["ci_high"] - r["ci_low"] == pytest.approx(
            2 * 1.959964 * w["std"] / 12**0.5, rel=1e-5
        )
        if r["variant"] == "original":
            assert r["p_holm_vs_original"] is None
        else:
            assert 0 <= r["p_holm_vs_original"] <= 1
    runs = {x["run_id"]: x for x in q.list_runs(con)}
    assert all(r["rel_depth"] == r["layer"] / runs[r["run_id"]]["n_layers"] for r in rows)
    # Ordering: original before front within a run.
    first = [r["variant"] for r in rows if r["run_id"] == rows[0]["run_id"]]
    assert first.index("original") < first.index("front")


def test_unknown_names_list_valid_ones(con):
    with pytest.raises(HomogError, match="unknown metric nope; valid: .*erank"):
        q.layer_curves(con, "nope")
    with pytest.raises(HomogError, match="unknown variant middle; valid: original, front"):
        q.layer_curves(con, "erank", variants=["middle"])
    with pytest.raises(HomogError, match="unknown model gpt; valid: "):
        q.layer_curves(con, "erank", models=["gpt"])
    with pytest.raises(HomogError, match="unknown run"):
        q.attention_profile(con, "zzz", "front")
    with pytest.raises(HomogError, match="unknown positional encoding"):
        q.head_ablation(con, "xpos", "distance")


def test_attention_profile_mean_over_heads(con, demo_db):
    run_id = q.list_runs(con)[0]["run_id"]
    rows = q.attention_profile(con, run_id, "front")
    raw = (
        duckdb.connect(str(demo_db), read_only=True, config=reader_config())
        .execute("SELECT * FROM attention_profile WHERE run_id = ? AND variant = 'front'", [run_id])
        .df()
    )
    want = raw.groupby(["layer", "bin"])["mass"].mean()
    assert len(rows) == len(want)
    for r in rows:
        assert r["mass"] == pytest.approx(want.loc[(r["layer"], r["bin"])])
    one = q.attention_profile(con, run_id, "front", head=0)
    assert len(one) == len(rows)
    assert q.attn_first_curves(con, run_id)[0]["layer"] == 1


def test_posenc_and_head_ablation(con):
    res = q.posenc_results(con)
    assert {r["pe"] for r in res} >= {"rope", "nope"}
    rows = q.head_ablation(con, "rope", "distance")
    assert max(rows, key=lambda r: r["drop"])["layer"] == 1


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM runs",
        "INSERT INTO runs (run_id) VALUES ('x')",
        "SELECT 1; DROP TABLE runs",
        "/* harmless? */ UPDATE runs SET model = 'x'",
        "COPY runs TO '/tmp/x.csv'",
        "ATTACH '/tmp/other.duckdb' AS o",
        "CREATE TABLE t AS SELECT 1",
        "SET threads = 1",
    ],
)
def test_run_sql_refuses_writes(con, sql):
    with pytest.raises(HomogError, match="refused: .* homog sql is read-only"):
        q.run_sql(con, sql)


def test_run_sql_reads_and_reports_errors(con):
    cols, rows = q.run_sql(con, "SELECT count(*) AS n FROM layer_metrics")
    assert cols == ["n"] and rows[0][0] > 0
    cols, rows = q.run_sql(con, "-- comment\nWITH a AS (SELECT 2 AS x) SELECT x FROM a;")
    assert rows == [(2,)]
    assert q.run_sql(con, "SHOW TABLES")[1]
    with pytest.raises(HomogError, match="does not exist"):
        q.run_sql(con, "SELECT * FROM no_such_table")
    with pytest.raises(HomogError, match="syntax error"):
        q.run_sql(con, "SELEC 1")


def test_export(con, tmp_path):
    n = q.export(con, "runs", tmp_path / "runs.parquet")
    assert n == 4 and len(pd.read_parquet(tmp_path / "runs.parquet")) == 4
    n = q.export(con, "SELECT run_id FROM runs LIMIT 2", tmp_path / "two.csv")
    assert n == 2 and list(pd.read_csv(tmp_path / "two.csv").columns) == ["run_id"]
    with pytest.raises(HomogError, match="unknown table"):
        q.export(con, "nonsense", tmp_path / "x.csv")
    with pytest.raises(HomogError, match="refused"):
        q.export(con, "DROP TABLE runs", tmp_path / "x.csv")


@pytest.mark.slow  # about a minute of wall time on a loaded 2-core machine
def test_demo_db_full_size_builds_in_seconds(tmp_path):
    # CPU seconds of this process (DuckDB's threads included): on a busy shared machine wall
    # time mostly measures waiting for a core.
    t0 = time.process_time()
    counts = make_demo_db(tmp_path / "big.duckdb")
    elapsed = time.process_time() - t0
    assert counts["runs"] == 10 and counts["layer_metrics"] >= 2_000_000
    assert elapsed < 30, elapsed  # a few seconds on 2 cores; generous for a loaded CI box
    con = q.connect(tmp_path / "big.duckdb")
    assert q.summary_kind(con) == "table"
    t0 = time.process_time()
    q.layer_curves(con, "erank")
    assert time.process_time() - t0 < 1  # a lookup on the materialised layer_summary
