"""A stopped extraction skips the interventions it finished (``finished_runs``): a rerun
keeps an intervention whose run.json holds the run id this run would give it, and computes
the rest; other settings or other texts give another id, and the run is computed again."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import TINY, extract_config
from test_extract import make_texts

from homog.config import Params
from homog.errors import HomogError
from homog.extract import extract_runner
from homog.extract.plan import extract_inputs
from homog.extract.run import finished_runs


def run(tiny, texts, cfg, out, logs):
    runner = extract_runner(Params(), "local")
    return runner(
        "tiny",
        TINY,
        texts,
        cfg,
        list(cfg.interventions),
        out,
        loaded=tiny,
        show_progress=False,
        log=logs.append,
    )


def test_a_rerun_keeps_finished_interventions_and_computes_the_rest(tiny, tmp_path):
    texts = make_texts(4)
    cfg = extract_config(interventions=("none", "shuffle_pos"))
    out = tmp_path / "out"
    first = run(tiny, texts, cfg, out, [])
    assert [r["intervention"] for r in first] == ["none", "shuffle_pos"]
    kept = out / "none" / "layer_metrics.parquet"
    before = kept.stat().st_mtime_ns
    # the second intervention was stopped before its merge: no run.json, so not finished
    (out / "shuffle_pos" / "run.json").unlink()
    logs: list[str] = []
    second = run(tiny, texts, cfg, out, logs)
    assert [r["intervention"] for r in second] == ["none", "shuffle_pos"]
    assert [r["run_id"] for r in second] == [r["run_id"] for r in first]
    assert kept.stat().st_mtime_ns == before  # not written again
    assert any("tiny/none: already extracted" in m for m in logs)
    assert not any("tiny/shuffle_pos: already" in m for m in logs)
    assert (out / "shuffle_pos" / "run.json").exists()


def test_other_settings_or_texts_or_a_damaged_record_are_not_finished(tiny, tmp_path):
    raw = make_texts(3)
    cfg = extract_config(interventions=("none",))
    out = tmp_path / "out"
    run(tiny, raw, cfg, out, [])
    texts = extract_inputs(raw, ["none"])[0]  # as the engines see them
    assert set(finished_runs("tiny", TINY, texts, cfg, ["none"], out)) == {"none"}
    other = dataclasses.replace(cfg, max_tokens=cfg.max_tokens - 1)
    assert finished_runs("tiny", TINY, texts, other, ["none"], out) == {}
    assert finished_runs("tiny", TINY, texts.iloc[1:], cfg, ["none"], out) == {}
    assert finished_runs("tiny", "random:tiny-gemma", texts, cfg, ["none"], out) == {}
    record = out / "none" / "run.json"
    record.write_text(record.read_text()[:-5])  # cut short: not valid JSON
    assert finished_runs("tiny", TINY, texts, cfg, ["none"], out) == {}
    record.write_text(json.dumps({"run_id": "something else"}))
    assert finished_runs("tiny", TINY, texts, cfg, ["none"], out) == {}


@pytest.mark.parametrize(
    ("setting", "value", "dose"),
    [("homogenize_layer", 99, "homogenize_doses"), ("sink_bias_onset", 99, "sink_bias_doses")],
)
def test_a_graded_runs_missing_layer_stops_before_the_first_pass(
    tiny, tmp_path, setting, value, dose
):
    """The unchanged run comes first and may take hours: a graded run's layer that the
    model lacks is named when the model loads, and nothing is written."""
    cfg = extract_config(interventions=("none",), **{setting: value, dose: [0, 1]})
    with pytest.raises(HomogError, match=rf"extract.{setting} is 99 but this model has layers"):
        run(tiny, make_texts(2), cfg, tmp_path / "out", [])
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
