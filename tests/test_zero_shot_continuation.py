"""One forward pass per text: the extraction answers the probe's text-first zero-shot prompt by
continuing each text's pass over the prompt's suffix with its KV cache (homog.extract.zero_shot).
The answers equal a separate full pass over the same prompt (transformers' own logits), the
text's own outputs do not change, and the probe's features step then runs no forward pass."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, TINY
from test_probe import labelled_texts

from homog.config import ExtractConfig, parse_params
from homog.config.probe import ProbeConfig, ZeroShotPrompt
from homog.errors import HomogError
from homog.extract import run_extract
from homog.layout import Layout

PREFIX = "Review: {text}\nSentiment (positive or negative):"  # the prompt before text-first


ALL = ["none", "zero_pos", "shuffle_pos"]


def _params(source: str = TINY, interventions: list[str] = ALL, **probe) -> object:
    extract = {"device": "cpu", "max_tokens": 32, "interventions": interventions}
    return parse_params(
        {"models": {"m": {"source": source}}, "extract": extract, "probe": {"folds": 2, **probe}}
    )


def _extract(params, source, df, root, interventions=None) -> Layout:
    layout = Layout(root)
    ivs = interventions or params.extract.interventions
    run_extract(
        "m",
        source,
        df,
        params.extract,
        ivs,
        layout.extract_dir("m"),
        show_progress=False,
        log=lambda _: None,
    )
    return layout


def _full_pass_log_odds(model, df, params, intervention: str) -> np.ndarray:
    """transformers' own next-token log-odds after each text's whole prompt in a pass of its
    own: the text's tokens (special tokens, truncation) then the suffix's, the text under the
    intervention's positions, the suffix after them (zero_pos: all 0)."""
    import torch

    from homog.extract.plan import encode_texts, position_ids

    tok, probe = model.tokenizer, params.probe
    suffix = tok(probe.prompt.removeprefix("{text}"), add_special_tokens=False)["input_ids"]
    pos_id, neg_id = (
        tok(w, add_special_tokens=False)["input_ids"][0]
        for w in (probe.positive_word, probe.negative_word)
    )
    out = []
    for t in encode_texts(tok, df, params.extract.max_tokens):
        n, k = len(t.input_ids), len(suffix)
        text_pos = position_ids(intervention, t, n, params.extract.seed)
        tail = np.zeros(k, int) if intervention == "zero_pos" else text_pos.max() + 1 + np.arange(k)
        ids = torch.tensor([[*t.input_ids.tolist(), *suffix]])
        pos = torch.tensor([[*text_pos.tolist(), *tail.tolist()]])
        with torch.no_grad():
            logits = model.model(
                input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos
            ).logits[0, -1]
        lp = torch.log_softmax(logits.double(), -1)
        out.append(float(lp[pos_id] - lp[neg_id]))
    return np.array(out)


@pytest.mark.parametrize("source", [TINY, "random:tiny-gemma-softcap"])
def test_the_continued_pass_gives_a_full_pass_log_odds(tmp_path, source):
    """tiny-gemma-softcap's sliding window (8 tokens) is shorter than a batch's texts with the
    suffix: its padded texts take the full-pass path, the others the continuation."""
    from homog.models import load_model

    df = labelled_texts()
    params = _params(source)
    layout = _extract(params, source, df, tmp_path)
    model = load_model(source, device="cpu", attention=False)
    sub = df.sort_values(["variant", "sample_id"]).reset_index(drop=True)
    for iv in params.extract.interventions:
        got = pd.read_parquet(layout.run_dir("m", iv) / "zero_shot.parquet")
        assert list(got["sample_id"]) == list(sub["sample_id"])
        want = _full_pass_log_odds(model, sub, params, iv)
        np.testing.assert_allclose(got["log_odds"], want, atol=1e-4, rtol=0)
        assert got["log_odds"].std() > 1e-3  # the texts' answers differ: not a constant
    record = json.loads((layout.run_dir("m", "none") / "run.json").read_text())
    settings = json.loads(record["config_json"])["extract"]
    assert settings["zero_shot"] == dataclasses.asdict(params.probe.extraction_prompt())


@pytest.mark.slow  # the embedded model's load, ~30 s on the loaded 2-core machine
def test_the_continued_pass_of_an_embedded_model_gives_a_full_pass_log_odds(tmp_path):
    from homog.models import load_model

    source = "embedded:smollm2-135m"
    rows = [json.loads(x) for x in (ROOT / "data/demo/reviews.jsonl").read_text().splitlines()]
    df = pd.DataFrame(
        {
            "variant": "original",
            "sample_id": [r["id"] for r in rows[:6]],
            "text": [r["text"] for r in rows[:6]],
            "label": [r["label"] for r in rows[:6]],
        }
    )
    params = _params(source)
    layout = _extract(params, source, df, tmp_path, ["none", "zero_pos"])
    model = load_model(source, device="cpu", attention=False)
    for iv in ("none", "zero_pos"):
        got = pd.read_parquet(layout.run_dir("m", iv) / "zero_shot.parquet")
        want = _full_pass_log_odds(model, df.sort_values("sample_id"), params, iv)
        np.testing.assert_allclose(got["log_odds"], want, atol=1e-4, rtol=0)


def test_the_continuation_leaves_the_texts_outputs_as_they_were(tmp_path):
    """The same run with and without the prompt: every table and the pooled vectors equal
    (the attention statistics stay over the text's own queries); only zero_shot.parquet
    is added."""
    df = labelled_texts()
    with_prompt = _params()
    without = _params(lm=False)
    assert with_prompt.extract.zero_shot is not None and without.extract.zero_shot is None
    a = _extract(with_prompt, TINY, df, tmp_path / "a", ["none", "zero_pos"])
    b = _extract(without, TINY, df, tmp_path / "b", ["none", "zero_pos"])
    for iv in ("none", "zero_pos"):
        files_a = {p.name for p in a.run_dir("m", iv).iterdir()}
        files_b = {p.name for p in b.run_dir("m", iv).iterdir()}
        assert files_a - files_b == {"zero_shot.parquet"} and files_b <= files_a
        for name in sorted(files_b):
            if name.endswith(".parquet"):
                pd.testing.assert_frame_equal(
                    pd.read_parquet(a.run_dir("m", iv) / name),
                    pd.read_parquet(b.run_dir("m", iv) / name),
                )
        assert np.array_equal(np.load(a.run_pooled("m", iv)), np.load(b.run_pooled("m", iv)))
        ra, rb = (json.loads((x.run_dir("m", iv) / "run.json").read_text()) for x in (a, b))
        assert ra["run_id"] == rb["run_id"] and ra["pair_key"] == rb["pair_key"]


def test_the_probe_runs_no_forward_pass_when_the_extraction_exists(tmp_path, monkeypatch):
    import homog.models
    from homog.probe.features import read_features, run_features

    df = labelled_texts()
    params = _params()
    _extract(params, TINY, df, tmp_path)
    own = run_features(params, "m", TINY, df, tmp_path / "own", show_progress=False)
    loads = []
    real_load = homog.models.load_model
    monkeypatch.setattr(
        homog.models, "load_model", lambda *a, **k: loads.append(a) or real_load(*a, **k)
    )
    record = run_features(
        params, "m", TINY, df, tmp_path / "reused", root=tmp_path, show_progress=False
    )
    assert loads == [] and record["forward_passes"] == 0 and not record["model_loaded"]
    every = {iv: "extract" for iv in params.extract.interventions}
    assert record["pooled_from"] == every and record["zero_shot_from"] == every
    assert own["forward_passes"] == 2 * 3 * 24 and own["zero_shot_from"]["none"] == "forward"
    a, b = read_features(tmp_path / "reused"), read_features(tmp_path / "own")
    key = ["intervention", "variant", "sample_id"]
    za, zb = (f["zero_shot"].sort_values(key).reset_index(drop=True) for f in (a, b))
    pd.testing.assert_frame_equal(za.drop(columns="log_odds"), zb.drop(columns="log_odds"))
    np.testing.assert_allclose(za["log_odds"], zb["log_odds"], atol=1e-4, rtol=0)
    # a loaded model handed in is not run either (its decoder's calls counted)
    from homog.models import load_model

    loaded = load_model(TINY, device="cpu", attention=False)
    calls = []
    loaded.decoder.register_forward_pre_hook(lambda *_: calls.append(1))
    run_features(
        params,
        "m",
        TINY,
        df,
        tmp_path / "handed",
        root=tmp_path,
        loaded=loaded,
        show_progress=False,
    )
    assert calls == []


def test_a_prompt_with_a_prefix_gets_a_pass_of_its_own(tmp_path):
    """Anything before {text} changes the text's states: the extraction answers nothing and
    the features step runs the prompt itself (and reads the pooled vectors)."""
    from homog.probe.features import run_features

    df = labelled_texts()
    params = _params(interventions=["none"], prompt=PREFIX)
    assert params.extract.zero_shot is None
    layout = _extract(params, TINY, df, tmp_path)
    assert not (layout.run_dir("m", "none") / "zero_shot.parquet").exists()
    prefix = _params(interventions=["none"], prompt=PREFIX)
    record = run_features(prefix, "m", TINY, df, tmp_path / "f", root=tmp_path, show_progress=False)
    assert record["pooled_from"] == {"none": "extract"}
    assert record["zero_shot_from"] == {"none": "forward"} and record["forward_passes"] == 24
    # an extraction of another prompt (or label words) is not this prompt's answer
    text_first = _params(interventions=["none"], prompt="{text}\nWas it good?")
    _extract(text_first, TINY, df, tmp_path / "other")
    again = run_features(
        _params(interventions=["none"]),
        "m",
        TINY,
        df,
        tmp_path / "g",
        root=tmp_path / "other",
        show_progress=False,
    )
    assert again["zero_shot_from"]["none"] == "forward"


def test_the_extraction_prompt_comes_from_probe_and_never_from_extract():
    params = _params()
    assert params.extract.zero_shot == ZeroShotPrompt(
        ProbeConfig().prompt, " positive", " negative"
    )
    assert params.extract.zero_shot.suffix == "\nSentiment of this review (positive or negative):"
    assert ProbeConfig().text_first and not ProbeConfig(prompt=PREFIX).text_first
    assert "zero_shot" not in ExtractConfig().result_keys()
    with pytest.raises(HomogError, match="unknown key.*zero_shot"):
        parse_params({"extract": {"zero_shot": {"prompt": "{text} ok"}}})
    with pytest.raises(HomogError, match="starts with"):
        ZeroShotPrompt("Review: {text}", " a", " b")
    # a Ray actor rebuilds the config from asdict: the prompt survives
    rebuilt = ExtractConfig(**dataclasses.asdict(params.extract))
    assert rebuilt == params.extract
