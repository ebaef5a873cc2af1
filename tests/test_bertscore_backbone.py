"""The BERTScore backbone is the model it names, whatever its path spells: a folder called
``t5`` or a user ``t5dev`` made bert-score build a random T5 (F1 0.974 where MiniLM gives
0.940). A checkpoint that would leave weights random, or an embedded one whose weights are
not the pinned ones, is refused."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from homog.errors import HomogError
from homog.synth import bertscore
from homog.synth.bertscore import Scorer, resolve_backbone

NAME = "embedded:all-minilm-l6-v2"
CANDIDATES = ["The songs are wonderful, but the plot is thin.", "A film about a quiet farmer."]
REFERENCES = ["The plot is thin, but the songs are wonderful.", "An unrelated line on pasta."]


@pytest.fixture(scope="module")
def expected() -> np.ndarray:
    return Scorer(NAME, num_layers=6).f1(CANDIDATES, REFERENCES)


def package_under_t5(tmp_path: Path, monkeypatch) -> Path:
    """The embedded package importable from ``<tmp>/t5dev/site`` (a symlink to the real one),
    ahead of the installed copy; returns the model folder resolve_backbone now gives."""
    real = Path(resolve_backbone(NAME)[0]).parent
    site = tmp_path / "t5dev" / "site"
    site.mkdir(parents=True)
    (site / real.name).symlink_to(real, target_is_directory=True)
    monkeypatch.delitem(sys.modules, real.name, raising=False)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    moved = Path(resolve_backbone(NAME)[0])
    assert "t5" in str(moved) and moved.parent.parent == site
    return moved


def test_a_path_containing_t5_scores_with_the_named_minilm(tmp_path, monkeypatch, expected):
    moved = package_under_t5(tmp_path, monkeypatch)
    for backbone in (NAME, f"hf:{moved}"):
        scorer = Scorer(backbone, num_layers=6)
        assert type(scorer.encoder.model).__name__ == "BertModel"
        assert len(scorer.encoder.model.encoder.layer) == 6
        np.testing.assert_allclose(scorer.f1(CANDIDATES, REFERENCES), expected, atol=1e-6)


def test_embedded_weights_that_are_not_the_pinned_ones_are_refused(monkeypatch):
    entry = bertscore.EMBEDDED["all-minilm-l6-v2"]
    monkeypatch.setitem(bertscore.EMBEDDED, "all-minilm-l6-v2", (*entry[:4], "0" * 64))
    with pytest.raises(HomogError, match="not the embedded one.*BertModel.*reinstall"):
        Scorer(NAME, num_layers=6)


def test_a_checkpoint_that_leaves_weights_random_is_refused(tmp_path):
    """A T5 config beside MiniLM's weights: every T5 weight would be newly initialized."""
    from transformers import T5Config

    real = Path(resolve_backbone(NAME)[0])
    folder = tmp_path / "mixed"
    folder.mkdir()
    for f in real.iterdir():
        if f.name != "config.json":
            (folder / f.name).symlink_to(f)
    config = T5Config(d_model=8, d_ff=16, num_layers=1, num_heads=2, d_kv=4, vocab_size=64)
    (folder / "config.json").write_text(json.dumps(config.to_dict()))
    with pytest.raises(HomogError, match=r"mixed lacks \d+ of the T5EncoderModel's weights"):
        Scorer(f"hf:{folder}", num_layers=1)


def test_num_layers_past_the_backbone_is_refused():
    with pytest.raises(HomogError, match="num_layers is 7 but the backbone .* has 6 layers"):
        Scorer(NAME, num_layers=7)
