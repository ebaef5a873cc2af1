"""The Ray engine: same outputs as the local engine, a killed actor, resume, errors, and no
Ray import on the local path. The Ray tests start one local cluster on 2 CPUs (module
fixture) and skip when Ray is not installed (`pip install 'homog[ray]'`)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, TINY, extract_config

from homog.config import ENGINES, RayConfig, as_params
from homog.errors import HomogError
from homog.extract import (
    RUNNERS,
    BatchResult,
    Extractor,
    RunSpec,
    encode_texts,
    extract_runner,
    make_shards,
    plan_samples,
    run_extract,
    run_shards,
    shard_path,
    texts_hash,
    work_dir_for,
)
from homog.extract.ray_actor import ShardWorker, actor_resources
from homog.extract.ray_engine import run_extract_ray

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install 'homog[ray]'")
# Ray Data's own DataContext warns about its deprecated settings; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
OUTPUT_TABLES = (
    "layer_metrics",
    "attention_profile",
    "attention_heads",
    "dataset_spectra",
    "massive_activations",
)


def demo_texts(n: int) -> pd.DataFrame:
    """n demo reviews in two variants (the second one a cheap stand-in for a rephrasing)."""
    rows = []
    lines = (ROOT / "data/demo/reviews.jsonl").read_text().splitlines()[:n]
    for line in lines:
        r = json.loads(line)
        for variant, text in (("original", r["text"]), ("front", "Honestly, " + r["text"])):
            rows.append({"variant": variant, "sample_id": r["id"], "text": text})
    return pd.DataFrame(rows)


# fewer tokens than test_extract's config (the smollm2 comparison runs twice) and 2 texts
# per shard, so 4 demo reviews in two variants make 4 shards
RAY_BASE = dict(max_tokens=40, sample_tokens=24, pooled_texts=3, shard_texts=2)


def config(**kw):
    """``extract_config`` with ``RAY_BASE``."""
    return extract_config(**{**RAY_BASE, **kw})


def assert_same_outputs(a: Path, b: Path, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same rows (keys equal, same order) and values within float tolerance, in every
    output file of two extract runs; same run_id, sizes and conventions in run.json."""
    for name in OUTPUT_TABLES:
        x, y = pd.read_parquet(a / f"{name}.parquet"), pd.read_parquet(b / f"{name}.parquet")
        assert list(x.columns) == list(y.columns), name
        assert len(x) == len(y), name
        value_cols = [c for c in ("value", "mass", "mean", "std") if c in x.columns]
        keys = [c for c in x.columns if c not in value_cols]
        pd.testing.assert_frame_equal(x[keys], y[keys], obj=name)
        for c in value_cols:
            np.testing.assert_allclose(x[c], y[c], rtol=rtol, atol=atol, err_msg=f"{name}.{c}")
    with np.load(a / "vectors.npz") as va, np.load(b / "vectors.npz") as vb:
        assert sorted(va.files) == sorted(vb.files)
        for key in va.files:
            if va[key].dtype.kind in "fc":  # float16 vectors: a rounding step of slack
                np.testing.assert_allclose(va[key], vb[key], rtol=2e-3, atol=2e-3, err_msg=key)
            else:
                np.testing.assert_array_equal(va[key], vb[key], err_msg=key)
    ra, rb = (json.loads((d / "run.json").read_text()) for d in (a, b))
    same = "run_id n_texts n_tokens n_sampled_tokens n_layers d_model n_heads dtype device"
    for key in [*same.split(), "intervention", "config_json"]:
        assert ra[key] == rb[key], key


def dies_once(marker: Path, shard: int) -> type:
    """An actor class whose process exits (like a killed worker) on its first call for
    `shard`; the marker file makes it fail only once across restarts."""

    class DiesOnce(ShardWorker):
        def compute(self, intervention, k, texts, tokens):
            if k == shard and not marker.exists():
                marker.touch()
                os._exit(1)
            return super().compute(intervention, k, texts, tokens)

    return DiesOnce


def raises_on(shard: int | None = None, done: frozenset[int] = frozenset()) -> type:
    """An actor class that raises HomogError on `shard`, or on any shard already in `done`
    (so a resumed run that recomputed a finished shard fails)."""

    class Raises(ShardWorker):
        def compute(self, intervention, k, texts, tokens):
            if k == shard or k in done:
                raise HomogError(f"test actor refuses shard {k}")
            return super().compute(intervention, k, texts, tokens)

    return Raises


def run_tiny(out: Path, texts: pd.DataFrame | None = None, **kw) -> list[dict]:
    """The Ray engine on the tiny model, intervention 'none', with the test config."""
    texts = demo_texts(4) if texts is None else texts
    return run_extract_ray("tiny", TINY, texts, config(), ["none"], out, show_progress=False, **kw)


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    # address="local": a fresh cluster even where RAY_ADDRESS points at another one
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=150 * 2**20,
        log_to_driver=False,
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny_local(tmp_path_factory):
    """The local engine's output for the tiny model (reference for the fault tests)."""
    out = tmp_path_factory.mktemp("tiny_local")
    run_extract("tiny", TINY, demo_texts(4), config(), ["none"], out, show_progress=False)
    return out / "none"


# --- Ray on a local 2-CPU cluster ------------------------------------------------------------


@needs_ray
def test_ray_matches_local_smollm2(ray_cluster, tmp_path):
    texts = demo_texts(2)  # 4 texts in 2 shards, one per actor
    cfg = config()
    ivs = ["none", "shuffle_pos"]
    args = ("smollm2-135m", "embedded:smollm2-135m", texts, cfg, ivs)
    local = run_extract(*args, tmp_path / "local", show_progress=False)
    remote = run_extract_ray(*args, tmp_path / "ray", show_progress=False)
    assert [r["run_id"] for r in remote] == [r["run_id"] for r in local]
    engine = remote[0]["engine"]
    assert engine["name"] == "ray" and engine["actors"] == 2  # both CPUs used
    assert engine["shards"] == engine["shards_computed"] == 2
    for iv in ivs:
        lm = pd.read_parquet(tmp_path / "ray" / iv / "layer_metrics.parquet")
        per_text = lm.groupby(["variant", "sample_id"]).size()
        assert len(per_text) == 4 and per_text.nunique() == 1  # every text, the same rows
        assert set(lm["layer"]) == set(range(31))  # embeddings + 30 blocks (+ final norm)
        assert not lm.duplicated(["variant", "sample_id", "layer", "metric"]).any()
        assert_same_outputs(tmp_path / "ray" / iv, tmp_path / "local" / iv)
    assert not any(p.name.endswith(".work") for p in tmp_path.iterdir())  # work dirs removed


@needs_ray
def test_killed_actor_is_retried_and_output_complete(ray_cluster, tmp_path, tiny_local):
    marker = tmp_path / "killed"
    records = run_tiny(tmp_path / "out", worker=dies_once(marker, shard=1))
    assert marker.exists()  # the actor really died mid-run
    assert records[0]["engine"]["shards_computed"] == 4
    assert_same_outputs(tmp_path / "out" / "none", tiny_local)


@needs_ray
def test_actor_error_fails_the_run_and_keeps_finished_shards(ray_cluster, tmp_path):
    texts, cfg = demo_texts(4), config()
    with pytest.raises(HomogError, match="refuses shard 2.*re-run to resume"):
        run_tiny(tmp_path / "out", texts, worker=raises_on(shard=2), ray_config=RayConfig(actors=1))
    assert not (tmp_path / "out").exists()  # no partial output where stages would read it
    spec = RunSpec("tiny", TINY, "none", cfg, texts_hash(sorted_texts(texts)))
    work = work_dir_for(tmp_path / "out", spec)
    kept = sorted(work.glob("shard_*.npz"))  # whatever finished before the error, complete
    assert shard_path(work, 2) not in kept
    for path in kept:
        assert len(BatchResult.load(path).indices) == cfg.shard_texts


def sorted_texts(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["variant", "sample_id"], kind="stable").reset_index(drop=True)


@needs_ray
def test_resume_computes_only_missing_shards(ray_cluster, tmp_path, tiny_local, tiny):
    """Shards 0-1 written by an interrupted *local* run; the Ray run computes the other two
    (its actors refuse finished ones) and the merged output equals an uninterrupted run."""
    texts, cfg = sorted_texts(demo_texts(4)), config()
    loaded = tiny
    encoded = encode_texts(loaded.tokenizer, texts, cfg.max_tokens)
    plan = plan_samples(encoded, cfg.sample_tokens, cfg.pooled_texts, cfg.seed, True)
    shards = make_shards(encoded, cfg.shard_texts)
    spec = RunSpec("tiny", TINY, "none", cfg, texts_hash(texts))
    work = work_dir_for(tmp_path / "out", spec)
    run_shards(Extractor(loaded, cfg), shards[:2], spec, plan, work)
    assert sorted(p.name for p in work.glob("shard_*")) == ["shard_00000.npz", "shard_00001.npz"]

    messages = []
    records = run_tiny(
        tmp_path / "out", texts, log=messages.append, worker=raises_on(done=frozenset({0, 1}))
    )
    assert any("resuming, 2 of 4 shards" in m for m in messages)
    assert records[0]["engine"]["shards_computed"] == 2
    assert_same_outputs(tmp_path / "out" / "none", tiny_local)


@needs_ray
def test_cli_extract_engine_ray(ray_cluster, tmp_path, tiny_local):
    """`homog extract` runs the engine that params' extract.engine names (--engine overrides
    it: extract_runner, tested below)."""
    from click.testing import CliRunner

    from homog.cli import main
    from homog.typed import FROM_TOP

    texts = tmp_path / "texts.parquet"
    demo_texts(4).to_parquet(texts)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    # seed (top level) and zero_shot (from probe:) are not extract: keys
    same = {k: v for k, v in config().run_options().items() if k not in FROM_TOP}
    params["extract"].update(engine="ray", **same)
    params["probe"]["lm"] = False  # as tiny_local: no zero-shot answers
    params["ray"].update(actors=1)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    args = f"extract --model {TINY} --params {tmp_path / 'params.yaml'} --texts {texts} "
    args += f"--out {tmp_path / 'out'} --intervention none --no-progress"
    result = CliRunner().invoke(main, args.split())
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "none" / "run.json").read_text())
    assert record["engine"]["name"] == "ray"
    assert_same_outputs(tmp_path / "out" / "none", tiny_local)


# --- pure parts and the optional-extra boundary (no cluster) ---------------------------------


def test_actor_resources():
    cpu, auto = config(), config(device="auto")
    gpu_node = [{"CPU": 64.0, "GPU": 8.0}]
    assert actor_resources(auto, RayConfig(), gpu_node, 100)["actors"] == 8
    big = actor_resources(auto, RayConfig(num_gpus_per_actor=4), gpu_node, 100)
    assert (big["actors"], big["num_gpus"]) == (2, 4.0)  # a 70B model over 4 GPUs, twice
    # an actor lives on one node: two nodes of 3 GPUs hold two 2-GPU actors, not three
    two_nodes = [{"CPU": 8.0, "GPU": 3.0}] * 2
    assert actor_resources(auto, RayConfig(num_gpus_per_actor=2), two_nodes, 100)["actors"] == 2
    with pytest.raises(HomogError, match="no node"):
        actor_resources(auto, RayConfig(num_gpus_per_actor=4), two_nodes, 100)
    assert actor_resources(auto, RayConfig(), gpu_node, 3)["actors"] == 3  # never > shards
    on_cpu = actor_resources(cpu, RayConfig(num_cpus_per_actor=8), gpu_node, 100)
    assert (on_cpu["actors"], on_cpu["num_gpus"], on_cpu["num_threads"]) == (8, 0.0, 8)
    assert actor_resources(auto, RayConfig(), [{"CPU": 2.0}], 100)["actors"] == 2
    with pytest.raises(HomogError, match="needs GPUs"):
        actor_resources(config(device="cuda"), RayConfig(), [{"CPU": 2.0}], 10)
    # an autoscaling cluster adds GPU nodes on demand: ray.actors says how many to wait for
    autoscaled = actor_resources(config(device="cuda"), RayConfig(actors=2), [{"CPU": 2.0}], 10)
    assert autoscaled["actors"] == 2


def test_ray_config_and_engine_choice():
    assert as_params({"ray": {"address": "auto", "actors": 3}}).ray.actors == 3
    with pytest.raises(HomogError, match="unknown key.*gpus"):
        as_params({"ray": {"gpus": 2}})
    with pytest.raises(HomogError, match="ray.actors"):
        as_params({"ray": {"actors": 0}})
    assert set(RUNNERS) == set(ENGINES)  # the registry serves every engine the config allows
    # each runner comes wrapped in the intervention_variants split (homog.extract.engines)
    assert extract_runner({"extract": {"engine": "local"}}).__wrapped__ is run_extract
    assert extract_runner({}).__wrapped__ is run_extract  # local is the default
    ray_runner = extract_runner({"extract": {"engine": "local"}, "ray": {"actors": 2}}, "ray")
    ray_runner = ray_runner.__wrapped__
    assert ray_runner.func is run_extract_ray and ray_runner.keywords["ray_config"].actors == 2
    with pytest.raises(HomogError, match="unknown extract engine 'spark'"):
        extract_runner({}, "spark")
    with pytest.raises(HomogError, match="extract.engine.*'spark'"):  # refused by the config
        extract_runner({"extract": {"engine": "spark"}})


def test_missing_ray_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(HomogError, match=r"pip install 'homog\[ray\]'"):
        run_extract_ray("tiny", TINY, demo_texts(1), config(), ["none"], tmp_path)


def test_local_engine_imports_no_ray(tmp_path):
    code = textwrap.dedent(
        f"""
        import sys
        import homog.extract, homog.extract.ray_engine
        from homog.config import ExtractConfig, load_config
        import pandas as pd
        run = homog.extract.extract_runner(load_config({str(ROOT / "params.yaml")!r}))
        df = pd.DataFrame({{"variant": ["original"], "sample_id": ["a"],
                           "text": ["a short review of a film"]}})
        run("tiny", {TINY!r}, df, ExtractConfig(device="cpu"), ["none"], {str(tmp_path)!r},
            show_progress=False)
        leaked = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray."))
        print("RAY_MODULES", leaked)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "RAY_MODULES []" in out.stdout
    assert (tmp_path / "none" / "layer_metrics.parquet").exists()
