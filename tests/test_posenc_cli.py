"""`homog posenc train|ablate` end to end on the tiny preset, and training itself."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import torch
import yaml
from click.testing import CliRunner
from test_posenc_model import one_thread  # noqa: F401  (autouse: one torch thread)

from homog.cli import main
from homog.posenc.presets import resolve
from homog.posenc.train import build_model, cosine_with_warmup, fit, make_splits

POSENC_RESULTS = ["pe", "task", "split", "accuracy", "n_params", "epochs", "seed"]


@pytest.fixture
def params(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "posenc": {
                    "preset": "tiny",
                    "tasks": ["distance", "count"],
                    "device": "cpu",
                    "encodings": ["mla"],
                    "decompose_samples": 16,
                    "train": {"seeds": [0, 1]},
                }
            }
        )
    )
    return path


ABLATE_OUTPUTS = ["head_ablation.parquet", "logit_decomposition.parquet", "ablation.json"]


def test_train_then_ablate(params, tmp_path):
    """`train` also writes the ablation's outputs (from the models it has just trained);
    `ablate` alone rewrites them from the checkpoints, the same numbers."""
    out = tmp_path / "mla"
    runner = CliRunner()
    res = runner.invoke(
        main, ["posenc", "train", "--pe", "mla", "--params", str(params), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "mla/distance: largest drop" in res.output
    results = pd.read_parquet(out / "results.parquet")
    assert list(results.columns) == POSENC_RESULTS
    assert len(results) == 2 * 2 * 2  # tasks x seeds x splits
    assert set(results["split"]) == {"train", "test"} and (results["epochs"] == 2).all()
    assert results["accuracy"].between(0, 1).all() and (results["n_params"] > 0).all()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "count-seed0.pt",
        "count-seed1.pt",
        "distance-seed0.pt",
        "distance-seed1.pt",
    ]
    log = pd.read_csv(out / "train_log.csv")
    assert len(log) == 2 * 2 * 2 and {"loss", "lr", "test_accuracy"} <= set(log.columns)
    from_train = {n: (out / n).read_bytes() for n in ABLATE_OUTPUTS}
    for name in ABLATE_OUTPUTS:
        (out / name).unlink()

    res = runner.invoke(
        main, ["posenc", "ablate", "--pe", "mla", "--params", str(params), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert {n: (out / n).read_bytes() for n in ABLATE_OUTPUTS} == from_train
    heads = pd.read_parquet(out / "head_ablation.parquet")
    assert list(heads.columns) == ["pe", "task", "layer", "head", "accuracy", "drop"]
    assert len(heads) == 2 * 2 * 2  # tasks x layers x heads (seeds averaged)
    terms = pd.read_parquet(out / "logit_decomposition.parquet")
    assert list(terms.columns) == ["source", "layer", "head", "term", "share"]
    assert set(terms["source"]) == {"posenc:mla:distance", "posenc:mla:count"}
    assert set(terms["term"]) == {"unrotated", "rotation"}
    total = terms.groupby(["source", "layer", "head"])["share"].sum()
    assert total.to_numpy() == pytest.approx(1.0)


def test_train_no_ablate(params, tmp_path):
    out = tmp_path / "rope"
    args = ["posenc", "train", "--pe", "rope", "--params", str(params), "--out", str(out)]
    res = CliRunner().invoke(main, [*args, "--no-ablate"])
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").is_file() and "largest drop" not in res.output
    assert not any((out / n).exists() for n in ABLATE_OUTPUTS)


def test_errors_exit_nonzero(params, tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        main,
        [
            "posenc",
            "ablate",
            "--pe",
            "rope",
            "--params",
            str(params),
            "--out",
            str(tmp_path / "none"),
        ],
    )
    assert res.exit_code == 1 and "homog posenc train" in res.output
    res = runner.invoke(
        main, ["posenc", "train", "--pe", "rope", "--params", str(params), "--device", "cuda:7"]
    )
    assert res.exit_code == 1 and ("CUDA" in res.output or "cuda" in res.output)
    res = runner.invoke(main, ["posenc", "train", "--pe", "fourier", "--params", str(params)])
    assert res.exit_code == 2


def test_training_learns_the_count_task():
    config = resolve({"preset": "tiny", "train": {"epochs": 12}})
    train, test = make_splits("count", config)
    torch.manual_seed(0)
    model = build_model("nope", "count", config, train.n_classes)
    log = fit(model, train, test, config["train"], seed=0, device=torch.device("cpu"))
    assert log[-1]["loss"] < 0.7 * log[0]["loss"]
    assert log[-1]["train_accuracy"] > 2.5 / train.n_classes  # well above chance


def test_cosine_schedule():
    values = [cosine_with_warmup(s, 100, 0.1) for s in range(100)]
    assert values[0] == pytest.approx(0.1) and values[9] == pytest.approx(1.0)
    assert values[10] == pytest.approx(1.0) and values[55] == pytest.approx(0.5)
    assert all(a >= b for a, b in zip(values[10:], values[11:], strict=False))


@pytest.mark.parametrize("pe", ["rope", "mla"])
def test_reference_preset_builds_the_papers_model(pe):
    config = resolve({"preset": "reference"})
    model = build_model(pe, "distance", config, n_classes=70)
    assert len(model.blocks) == 6 and model.blocks[0].attn.n_head == 16
    assert 3_000_000 < model.n_params() < 3_600_000
    with torch.no_grad():
        out = model(torch.randint(1, 128, (2, 128)))
    assert out.shape == (2, 70)


def test_decompose_a_random_llama(tmp_path, params):
    pytest.importorskip("homog.models")
    texts = tmp_path / "texts.parquet"
    pd.DataFrame(
        {"variant": ["original", "front", "original"], "text": ["a b c d e", "x", "the cat sat"]}
    ).to_parquet(texts)
    out = tmp_path / "dec.parquet"
    res = CliRunner().invoke(
        main,
        [
            "posenc",
            "decompose",
            "--model",
            "random:tiny-llama",
            "--params",
            str(params),
            "--texts",
            str(texts),
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert res.exit_code == 0, res.output
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["source", "layer", "head", "term", "share"]
    assert set(frame["source"]) == {"random:tiny-llama"}
    assert frame.groupby(["layer", "head"])["share"].sum().to_numpy() == pytest.approx(1.0)
    assert frame["layer"].min() == 1


def test_runs_trained_side_by_side_equal_one_after_another(tmp_path):
    """train.workers: 2 trains the (task, seed) runs in two spawned processes, and ablates
    each there; every output (accuracies, the epoch log but its seconds, the weights, the
    ablation) equals the one-process run's, and the ablation equals `run_ablate`'s from the
    checkpoints."""
    from homog.posenc.ablate import run_ablate
    from homog.posenc.train import run_train

    outs = {}
    for workers in (1, 2):
        posenc = {
            "preset": "tiny",
            "tasks": ["distance", "count"],
            "device": "cpu",
            "decompose_samples": 16,
            "train": {"workers": workers, "seeds": [0, 1]},
        }
        outs[workers] = tmp_path / f"w{workers}"
        _, heads = run_train(posenc, "rope", outs[workers], device="cpu", ablate=True)
        assert len(heads) == 2 * 2 * 2  # tasks x layers x heads
    one, two = outs[1], outs[2]
    shutil.copytree(two / "checkpoints", tmp_path / "again" / "checkpoints")
    again = run_ablate(posenc, "rope", tmp_path / "again", device="cpu")
    for name, frame in zip(("head_ablation", "logit_decomposition"), again, strict=True):
        for o in (one, two):
            pd.testing.assert_frame_equal(pd.read_parquet(o / f"{name}.parquet"), frame)
    pd.testing.assert_frame_equal(
        pd.read_parquet(one / "results.parquet"), pd.read_parquet(two / "results.parquet")
    )
    logs = [pd.read_csv(o / "train_log.csv").drop(columns="seconds") for o in (one, two)]
    pd.testing.assert_frame_equal(*logs)
    names = sorted(p.name for p in (one / "checkpoints").iterdir())
    assert names == sorted(p.name for p in (two / "checkpoints").iterdir()) and len(names) == 4
    for name in names:
        a, b = (torch.load(o / "checkpoints" / name, weights_only=False) for o in (one, two))
        assert a["meta"] == b["meta"] and a["state_dict"].keys() == b["state_dict"].keys()
        assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])


def test_train_workers(monkeypatch):
    from homog.posenc.train import train_workers

    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert train_workers({"workers": 0, "threads": 1}, cpu, runs=2) == 2  # capped by the runs
    assert train_workers({"workers": 0, "threads": 1}, cpu, runs=8) == 4  # by the cores
    assert train_workers({"workers": 0, "threads": 2}, cpu, runs=8) == 2
    assert train_workers({"workers": 1, "threads": 1}, cpu, runs=8) == 1
    assert train_workers({"workers": 3, "threads": 1}, cpu, runs=8) == 3
    assert train_workers({"workers": 0, "threads": 1}, cpu, runs=1) == 1
    assert train_workers({"workers": 0, "threads": 1}, gpu, runs=8) == 1  # a GPU: one process


def test_bad_model_config_fails_before_workers_start(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "posenc": {
                    "preset": "tiny",
                    "tasks": ["distance", "count"],
                    "device": "cpu",
                    "model": {"n_head": 3},
                    "train": {"workers": 2},
                }
            }
        )
    )
    out = tmp_path / "rope"
    res = CliRunner().invoke(
        main, ["posenc", "train", "--pe", "rope", "--params", str(path), "--out", str(out)]
    )
    assert res.exit_code == 1
    assert "n_embd 16 is not a multiple of n_head 3" in res.output
    assert not out.exists() or list(out.iterdir()) == []  # nothing (half-)written
