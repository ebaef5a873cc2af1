"""Fixtures shared by the test modules.

Each area keeps its shared fixtures in its own section below; a fixture used by one module
only stays in that module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
IMDB_SAMPLE = ROOT.parent / "shared" / "data" / "imdb" / "imdb_sample.jsonl"


def project_params() -> dict[str, Any]:
    """A fresh copy of the project's params.yaml as a dict."""
    return yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture
def write_params(tmp_path: Path):
    """``write_params(**sections)`` -> path of a params file: the project's params with each
    given section's keys updated (``write_params(corpus={"n": 20})``); a non-mapping value
    replaces the top-level key."""

    def write(name: str = "params.yaml", **sections: Any) -> Path:
        params = project_params()
        for key, value in sections.items():
            if isinstance(value, dict) and isinstance(params.get(key), dict):
                params[key].update(value)
            else:
                params[key] = value
        path = tmp_path / name
        path.write_text(yaml.safe_dump(params, sort_keys=False))
        return path

    return write


# --- extract fixtures ---------------------------------------------------------------------

TINY = "random:tiny-llama"  # a random-initialised 3-layer LLaMA: fast on a CPU, no download


def extract_config(**kw: Any):
    """A small CPU ``ExtractConfig`` for the extract tests; ``kw`` overrides its fields."""
    from homog.config import ExtractConfig

    base = dict(device="cpu", max_tokens=64, sample_tokens=30, pooled_texts=4, shard_texts=4)
    return ExtractConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def tiny():
    """The tiny random LLaMA (``TINY``) with eager attention on the CPU, loaded once per
    test module."""
    from homog.models import load_model

    return load_model(TINY, device="cpu", attention=True)


# --- store and TUI fixtures ---------------------------------------------------------------


@pytest.fixture(scope="session")
def demo_db_factory(tmp_path_factory: pytest.TempPathFactory):
    """``demo_db_factory(n_runs, n_texts)`` -> the path of a ``make_demo_db`` database of that
    size, built once per session and shared: read it, or copy it before changing it."""
    from homog.store.demo import make_demo_db

    built: dict[tuple[int, int], Path] = {}

    def make(n_runs: int, n_texts: int) -> Path:
        if (n_runs, n_texts) not in built:
            path = tmp_path_factory.mktemp("demo") / "homog.duckdb"
            make_demo_db(path, n_runs, n_texts)
            built[n_runs, n_texts] = path
        return built[n_runs, n_texts]

    return make


# --- synth and corpus fixtures ------------------------------------------------------------


def largest_tensor_mode() -> Any:
    """A torch dispatch mode that records the element count of the largest tensor any op
    makes inside it (``mode.largest``): memory-bound tests check what is never allocated."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    type(self).largest = max(type(self).largest, t.numel())
            return out

    return Largest()


def save_run(
    layout: Any,
    model: str,
    intervention: str,
    frame: Any,
    n_layers: int,
    *,
    generation: str = "",
    created_at: str = "2026-01-01T00:00:00+00:00",
) -> None:
    """Write a synthetic run as ``homog extract`` would: ``frame`` (variant, sample_id, layer,
    metric, value) as ``layer_metrics.parquet`` with run id ``<model>-<intervention>`` (plus
    ``generation``: the run ids of other params), and its ``run.json`` (a random:tiny-llama
    record with ``n_layers``, made at ``created_at``)."""
    import json

    run_id = f"{model}-{intervention}{generation}"
    frame = frame.copy()
    frame.insert(0, "run_id", run_id)
    frame["layer"] = frame["layer"].astype("int32")
    out = layout.run_dir(model, intervention)
    out.mkdir(parents=True)
    frame.to_parquet(out / "layer_metrics.parquet", index=False)
    record = {
        "run_id": run_id,
        "model": model,
        "model_source": "random:tiny-llama",
        "n_layers": n_layers,
        "d_model": 64,
        "n_heads": 4,
        "dtype": "float32",
        "device": "cpu",
        "intervention": intervention,
        "config_json": json.dumps({"extract": {"max_tokens": 64}, "versions": {"homog": "t"}}),
        "homog_version": "test",
        "created_at": created_at,
        "pair_key": f"{model}-pair{generation}",
    }
    (out / "run.json").write_text(json.dumps(record))


def forward_edited(lm, texts, intervention, cfg, modules, take) -> list:
    """One decoder forward over ``texts`` (EncodedTexts, right-padded) under the edits of
    ``intervention`` (homog.extract.edits.edit_batch); ``take(output)`` of every module in
    ``modules``, in call order (the graded interventions' tests)."""
    import torch

    from homog.extract.edits import edit_batch
    from homog.extract.plan import pad_batch

    got: list = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: got.append(take(out))) for m in modules]
    ids, attn, special, pos = pad_batch(texts, 0, "none", 0)
    mask = torch.from_numpy(attn.astype(bool) & ~special)
    try:
        with torch.inference_mode(), edit_batch(lm, cfg, intervention, texts, mask):
            lm.decoder(
                input_ids=torch.from_numpy(ids),
                attention_mask=torch.from_numpy(attn),
                position_ids=torch.from_numpy(pos),
                use_cache=False,
            )
    finally:
        for h in hooks:
            h.remove()
    return got
