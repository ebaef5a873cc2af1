"""The probe's features step reuses the extraction's pooled vectors (one forward pass per text
instead of two) only when they are the same texts' under the same settings."""

from __future__ import annotations

import json

import numpy as np
from conftest import TINY
from test_probe import labelled_texts

from homog.config import parse_params
from homog.extract import run_extract
from homog.layout import Layout
from homog.probe.features import read_features, run_features


def test_probe_features_reuse_the_extractions_pooled_vectors(tmp_path):
    df = labelled_texts()
    params = parse_params(
        {
            "models": {"tiny": {"source": TINY}},
            "extract": {"device": "cpu", "max_tokens": 32},
            "probe": {"folds": 2},
        }
    )
    layout = Layout(tmp_path)
    run_extract(
        "tiny",
        TINY,
        df,
        params.extract,
        params.extract.interventions,
        layout.extract_dir("tiny"),
        show_progress=False,
        log=lambda _: None,
    )
    # the extraction keeps every text's mean-pooled vectors, with the key of what it read
    stored = np.load(layout.run_pooled("tiny", "none"))
    record = json.loads((layout.run_dir("tiny", "none") / "run.json").read_text())
    assert stored.dtype == np.float16 and stored.shape[0] == 24
    assert record["pooled_dtype"] == "float16" and len(record["pooled_key"]) == 16

    reused = run_features(
        params, "tiny", TINY, df, tmp_path / "a", root=tmp_path, show_progress=False
    )
    own = run_features(params, "tiny", TINY, df, tmp_path / "b", show_progress=False)
    assert reused["pooled_from"] == {"none": "extract", "zero_pos": "extract"}
    assert own["pooled_from"] == {"none": "forward", "zero_pos": "forward"}
    # the extraction answered the text-first prompt too: no pass, against 2 passes each
    assert reused["forward_passes"] == 0 and own["forward_passes"] == 96
    a, b = read_features(tmp_path / "a"), read_features(tmp_path / "b")
    for iv in ("none", "zero_pos"):
        va, vb = a["pooled"][iv], b["pooled"][iv]
        assert list(va["sample_id"]) == list(vb["sample_id"])
        assert np.array_equal(va["n_tokens"], vb["n_tokens"])
        # the same vectors up to the attention kernels' rounding and float16 storage
        np.testing.assert_allclose(
            va["vectors"].astype(np.float32), vb["vectors"].astype(np.float32), rtol=5e-3, atol=5e-3
        )
    # layer 0 stays the control: the same tokens in another order give the same vector
    v = a["pooled"]["none"]
    order = {
        (var, s): i for i, (var, s) in enumerate(zip(v["variant"], v["sample_id"], strict=True))
    }
    for s in df["sample_id"].unique():
        first, moved = order[("original", s)], order[("key_last", s)]
        assert np.array_equal(v["vectors"][first, 0], v["vectors"][moved, 0])
    # other texts, or other settings: the run's vectors are not theirs, so a pass of its own
    other = df.assign(text=df["text"].str.replace("Film", "Movie"))
    again = run_features(
        params, "tiny", TINY, other, tmp_path / "c", root=tmp_path, show_progress=False
    )
    assert again["pooled_from"] == {"none": "forward", "zero_pos": "forward"}
    reseeded = parse_params(
        {
            "seed": 3,
            "models": {"tiny": {"source": TINY}},
            "extract": {"device": "cpu", "max_tokens": 32},
            "probe": {"folds": 2},
        }
    )
    seeded = run_features(
        reseeded, "tiny", TINY, df, tmp_path / "d", root=tmp_path, show_progress=False
    )
    assert seeded["pooled_from"]["none"] == "forward"


def test_a_damaged_pooled_file_falls_back_to_the_forward_pass(tmp_path):
    from homog.models import load_model
    from homog.probe.pooled import from_extraction

    df = labelled_texts()
    params = parse_params(
        {"models": {"tiny": {"source": TINY}}, "extract": {"device": "cpu", "max_tokens": 32}}
    )
    layout = Layout(tmp_path)
    run_extract(
        "tiny",
        TINY,
        df,
        params.extract,
        ["none"],
        layout.extract_dir("tiny"),
        show_progress=False,
        log=lambda _: None,
    )
    loaded = load_model(TINY, device="cpu", attention=False)
    run_dir = layout.run_dir("tiny", "none")
    sub = df.sort_values(["variant", "sample_id"]).reset_index(drop=True)
    args = (loaded, sub, params.extract, TINY, "none", "float16")
    assert from_extraction(run_dir, *args) is not None
    path = layout.run_pooled("tiny", "none")
    path.write_bytes(path.read_bytes()[:200])  # cut short
    assert from_extraction(run_dir, *args) is None
    (run_dir / "run.json").write_text("{not json")
    assert from_extraction(run_dir, *args) is None
