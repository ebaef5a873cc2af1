"""extract.dose_texts end to end: the graded runs hold a seeded draw of the reviews, the
unchanged run all of them, and the stats pair them on the reviews they share (a tiny random
model through `homog extract`, the stats stage and the store)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from test_intervention_cost import extracted_tiny_project

from homog.stats.stage import stats_stage
from homog.store import load


def test_graded_runs_on_a_draw_pair_with_the_whole_unchanged_run(tmp_path, monkeypatch):
    params, layout = extracted_tiny_project(tmp_path, monkeypatch, dose_texts=10)

    def samples(iv: str) -> set[str]:
        frame = pd.read_parquet(layout.run_dir("m", iv) / "layer_metrics.parquet")
        return set(frame.loc[frame["variant"] == "original", "sample_id"])

    drawn = samples("homogenize:0")
    assert len(samples("none")) == 12 and len(drawn) == 10 and drawn < samples("none")
    assert samples("homogenize:1") == samples("homogenize_control:1") == drawn
    written = stats_stage(params, tmp_path)
    assert written["intervention_doses"] > 0 and written["intervention_cost"] > 0
    load(params, layout.db(), tmp_path)
    with duckdb.connect(str(layout.db()), read_only=True) as con:
        doses = con.execute(
            "SELECT n, kind, family_holm, value, sesoi FROM intervention_doses WHERE n IS NOT NULL"
        ).df()
        cost = con.execute("SELECT n FROM intervention_cost WHERE n IS NOT NULL").df()
        contrasts = con.execute(
            "SELECT c.n FROM contrasts c JOIN runs r ON c.run_id = r.run_id "
            "WHERE r.intervention = 'homogenize:1' AND c.baseline_run_id IS NOT NULL"
        ).df()
    checks = doses["family_holm"] == "check"
    assert set(doses.loc[~checks, "n"]) == {10} and set(cost["n"]) == {10}
    # the checks count values and layers: homogenize:0 on the draw equals the whole unchanged
    # run on those texts (batched otherwise: float32 rounding at most)
    (ident,) = doses[checks & (doses["kind"] == "identity")].itertuples()
    assert ident.n > 10 and ident.value <= ident.sesoi
    assert not contrasts.empty and set(contrasts["n"]) == {10}


def test_the_contrasts_computed_beside_the_rest_are_the_same(tmp_path, monkeypatch):
    # the stage computes the per-layer contrasts in a spawned process on a machine with two
    # cores or more and runs large enough; the same files with the process and without
    import homog.stats.stage as stage

    params, layout = extracted_tiny_project(tmp_path, monkeypatch, dose_texts=10)
    monkeypatch.setattr(stage, "side_workers", lambda: 1)
    stats_stage(params, tmp_path, tmp_path / "here")
    monkeypatch.setattr(stage, "side_workers", lambda: 2)
    monkeypatch.setattr(stage, "SIDE_ROWS", 0)
    stats_stage(params, tmp_path, tmp_path / "beside")
    for name in ("contrasts", "separability", "intervention_doses", "sentence_contrasts"):
        here = pd.read_parquet(tmp_path / "here" / f"{name}.parquet")
        pd.testing.assert_frame_equal(
            here, pd.read_parquet(tmp_path / "beside" / f"{name}.parquet")
        )
    assert len(pd.read_parquet(tmp_path / "beside" / "contrasts.parquet")) > 0


def test_an_error_in_the_side_process_is_raised(tmp_path, monkeypatch):
    import homog.stats.stage as stage

    params, _ = extracted_tiny_project(tmp_path, monkeypatch, dose_texts=10)
    params = stage.as_params(params)
    monkeypatch.setattr(stage, "side_workers", lambda: 2)
    monkeypatch.setattr(stage, "SIDE_ROWS", 0)
    # the spawned process reads the runs itself: a run removed after this process read them
    # fails there, and the stage fails with its message (no half-written output)
    read = stage.read_runs(params, tmp_path)
    for path in (tmp_path / "data" / "extract").rglob("layer_metrics.parquet"):
        path.unlink()
    thunk = stage.beside(stage.compute_all, params, tmp_path, read=read)
    with pytest.raises(Exception, match="layer_metrics|rerun|no extracted"):
        thunk()
