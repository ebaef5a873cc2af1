"""The zero-shot answer of the graded runs (homog.extract.zero_shot): the suffix reads the
cache that the edit shaped and runs with the edit removed. Dose 0 answers as the unchanged
run does, a dose answers otherwise, a text that a sliding window sends to a pass of its own
answers as it would in a batch of its own, and the probe never pools the graded answers
with the unchanged run's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import TINY
from test_probe import labelled_texts
from test_zero_shot_continuation import _extract

from homog.config import parse_params

SOFTCAP = "random:tiny-gemma-softcap"  # an 8-token sliding window: padded texts redo alone


def _params(interventions: list[str], **extract) -> object:
    raw = {
        "models": {"m": {"source": TINY}},
        "extract": {
            "device": "cpu",
            "max_tokens": 32,
            "interventions": interventions,
            "homogenize_layer": 1,
            "sink_bias_onset": 1,
            **extract,
        },
        "stats": {"n_boot": 100, "n_perm": 200},
        "probe": {"folds": 2},
    }
    return parse_params(raw)


def _answers(layout, iv: str) -> pd.DataFrame:
    return pd.read_parquet(layout.run_dir("m", iv) / "zero_shot.parquet")


@pytest.mark.parametrize("source", [TINY, SOFTCAP])
def test_dose_zero_answers_as_the_unchanged_run_and_a_dose_otherwise(tmp_path, source):
    ivs = ["none", "homogenize:0", "homogenize:1", "homogenize_control:1", "sink_bias:0"]
    params = _params(ivs)
    layout = _extract(params, source, labelled_texts(), tmp_path)
    none = _answers(layout, "none")
    for iv in ("homogenize:0", "sink_bias:0"):
        got = _answers(layout, iv)
        assert list(got["sample_id"]) == list(none["sample_id"])
        # a redone text: its own pass continued against a full pass, float32 rounding apart
        np.testing.assert_allclose(got["log_odds"], none["log_odds"], rtol=1e-6, atol=1e-6)
    for iv in ("homogenize:1", "homogenize_control:1"):
        moved = np.abs(_answers(layout, iv)["log_odds"] - none["log_odds"])
        assert moved.max() > 1e-3, iv


def test_a_graded_text_redone_alone_answers_as_in_a_batch_of_its_own(tmp_path):
    """tiny-gemma-softcap's window makes its padded texts answer from a pass of their own:
    under the edit that pass must give what an unpadded batch of one text gives."""
    ivs = ["homogenize:0.5", "homogenize_control:0.5"]
    batched = _extract(_params(ivs), SOFTCAP, labelled_texts(), tmp_path / "a")
    alone = _extract(_params(ivs, batch_tokens=1), SOFTCAP, labelled_texts(), tmp_path / "b")
    for iv in ivs:
        a, b = _answers(batched, iv), _answers(alone, iv)
        np.testing.assert_allclose(a["log_odds"], b["log_odds"], rtol=0, atol=1e-5)


def test_the_probe_pools_no_graded_answer_with_the_unchanged_run(tmp_path):
    from homog.layout import Layout
    from homog.probe.stage import run_probe

    params = _params(["none", "homogenize:0.5"])
    df = labelled_texts()
    _extract(params, TINY, df, tmp_path)
    layout = Layout(tmp_path)
    assert len(_answers(layout, "homogenize:0.5")) == len(df)  # the graded run answered
    record = run_probe(
        params, "m", TINY, df, layout.probe_dir("m"), root=tmp_path, show_progress=False
    )
    assert record["forward_passes"] == 0  # both read from the unchanged run
    lm = pd.read_parquet(layout.probe_dir("m") / "lm_sentiment.parquet")
    assert set(lm["intervention"]) == {"none"} and len(lm) == len(df)
    np.testing.assert_allclose(
        lm.sort_values(["variant", "sample_id"])["log_odds"],
        _answers(layout, "none").sort_values(["variant", "sample_id"])["log_odds"],
    )
