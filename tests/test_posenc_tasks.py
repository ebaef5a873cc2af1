"""The positional-encoding lab's task generators and presets."""

from __future__ import annotations

import pytest
import torch

from homog.config.posenc_presets import PRESETS
from homog.io import HomogError
from homog.posenc.presets import resolve
from homog.posenc.tasks import PAD, make_count, make_distance, make_task

DIST = dict(vocab_size=20, seq_len=32, left=[1, 6], middle=[2, 17], right=[1, 8])
COUNT = dict(vocab_size=20, seq_len=24, n_triggers=5, max_count=12)


def _balanced(labels: torch.Tensor, n_classes: int, tolerance: float) -> bool:
    freq = torch.bincount(labels, minlength=n_classes).float()
    expected = len(labels) / n_classes
    return bool(((freq - expected).abs() <= tolerance * expected).all())


def test_distance_labels_triggers_and_padding():
    data = make_distance(3000, seed=1, **DIST)
    assert data.n_classes == 16 and data.tokens.shape == (3000, 32)
    for row, label in zip(data.tokens.tolist(), data.labels.tolist(), strict=True):
        length = sum(t != PAD for t in row)
        assert all(t == PAD for t in row[length:])  # padding only at the end
        assert row.count(1) == 1 and row.count(2) == 1  # no trigger among the fillers
        a, b = row.index(1), row.index(2)
        middle = b - a - 1  # fillers strictly between the triggers
        assert label == middle - 2
        left, right = a + 1, length - b
        assert 1 <= left <= 6 and 2 <= middle <= 17 and 1 <= right <= 8
        assert all(t >= 3 for i, t in enumerate(row[:length]) if i not in (a, b))
    assert _balanced(data.labels, data.n_classes, 0.3)


def test_count_labels_and_fillers():
    data = make_count(4000, seed=2, **COUNT)
    assert data.n_classes == 13 and data.tokens.shape == (4000, 24)
    assert (data.tokens != PAD).all()
    is_trigger = (data.tokens >= 1) & (data.tokens <= 5)
    assert torch.equal(is_trigger.sum(1), data.labels)
    # every trigger id is used, and triggers are spread over all positions
    assert set(data.tokens[is_trigger].unique().tolist()) == {1, 2, 3, 4, 5}
    assert (is_trigger.float().mean(0) > 0.1).all()
    assert _balanced(data.labels, data.n_classes, 0.25)


def test_generators_are_seeded():
    a, b = make_count(50, seed=3, **COUNT), make_count(50, seed=3, **COUNT)
    c = make_count(50, seed=4, **COUNT)
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)


def test_split_is_disjoint_and_70_30():
    data = make_task("count", {"n_samples": 100, **COUNT}, seed=0)
    train, test = data.split(0.7, seed=0)
    assert len(train.labels) == 70 and len(test.labels) == 30
    rows = {tuple(r) for r in train.tokens.tolist()} | {tuple(r) for r in test.tokens.tolist()}
    assert len(rows) == 100


@pytest.mark.parametrize(
    "bad",
    [
        lambda: make_distance(10, seed=0, **{**DIST, "seq_len": 20}),  # segments do not fit
        lambda: make_distance(10, seed=0, **{**DIST, "middle": [5, 2]}),
        lambda: make_count(10, seed=0, **{**COUNT, "max_count": 30}),
        lambda: make_count(10, seed=0, **{**COUNT, "vocab_size": 6}),  # no filler ids left
        lambda: make_task("sorting", {"n_samples": 3}, seed=0),
        lambda: make_task("count", {"n_samples": 3, "colour": 1}, seed=0),
    ],
)
def test_bad_task_params_raise(bad):
    with pytest.raises(HomogError):
        bad()


def test_reference_preset_matches_the_paper():
    ref = PRESETS["reference"]
    assert (ref["model"]["n_layer"], ref["model"]["n_head"], ref["model"]["n_embd"]) == (6, 16, 256)
    assert ref["model"]["d_ff"] == 512 and ref["train"]["batch_size"] == 512
    data = make_task("distance", {**ref["distance"], "n_samples": 2000}, seed=0)
    assert data.n_classes == 70 and data.tokens.shape[1] == 128
    assert (data.tokens != PAD).sum(1).max() <= 120
    assert make_task("count", {**ref["count"], "n_samples": 10}, seed=0).n_classes == 101


def test_resolve_overrides_and_rejects_typos():
    cfg = resolve({"preset": "cpu", "train": {"epochs": 3}, "count": {"max_count": 9}})
    assert cfg["train"]["epochs"] == 3 and cfg["count"]["max_count"] == 9
    assert cfg["train"]["batch_size"] == PRESETS["cpu"]["train"]["batch_size"]
    assert PRESETS["cpu"]["train"]["epochs"] != 3  # the preset itself is untouched
    assert resolve({"preset": "cpu"}, "reference")["preset"] == "reference"
    with pytest.raises(HomogError, match="epoch"):
        resolve({"train": {"epoch": 3}})
    with pytest.raises(HomogError, match="preset"):
        resolve({"preset": "huge"})
