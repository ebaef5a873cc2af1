"""Losing a machine: the Ray engine on a simulated three-node cluster loses a node mid-run.

``ray.cluster_utils.Cluster`` starts a head node without CPUs (the driver and the ShardLog
live there) and three worker nodes with one CPU each, so the three actors sit on three
different nodes. On its first attempt at shard 1 an actor writes its node id to a marker file
and waits; the test removes that whole node. The run must complete with the local engine's
output, every shard written and counted once, and the driver must report the lost node and
the retried shard (log and run.json's ``engine`` record). Its own module: it needs a Ray
instance of its own, not test_ray_engine's local one.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest
from conftest import TINY
from test_ray_engine import assert_same_outputs, config, demo_texts

from homog.extract import run_extract
from homog.extract.ray_actor import ShardWorker
from homog.extract.ray_engine import run_extract_ray
from homog.extract.ray_faults import fault_report

HAS_RAY = importlib.util.find_spec("ray") is not None
pytestmark = [
    pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install 'homog[ray]'"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
]


def test_fault_report():
    starts = [("none", 0, "a"), ("none", 1, "b"), ("none", 1, "c"), ("none", 2, "c")]
    assert fault_report(starts, {"a", "b", "c"}, {"a", "c"}) == {
        "lost_nodes": ["b"],
        "retried_shards": ["none/1"],
        "shard_attempts": 4,
    }


def stalls_on(marker: Path, shard: int) -> type:
    """An actor class that, on its first attempt at ``shard``, writes its node id to
    ``marker`` and waits there to be taken down with its node."""

    class Stalls(ShardWorker):
        def compute(self, intervention, k, texts, tokens):
            if k == shard and not marker.exists():
                import ray

                marker.write_text(ray.get_runtime_context().get_node_id())
                time.sleep(300)
            return super().compute(intervention, k, texts, tokens)

    return Stalls


@pytest.fixture
def three_nodes():
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "object_store_memory": 100 * 2**20,
            # notice the lost node within seconds, not Ray's default half minute
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 500,
                "health_check_failure_threshold": 4,
            },
        },
    )
    workers = [cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20) for _ in range(3)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, workers
    ray.shutdown()
    cluster.shutdown()


@pytest.mark.slow  # about 90 s on 2 CPUs: four Ray nodes, three model loads, a node timeout
def test_lost_node_mid_run(three_nodes, tmp_path):
    cluster, workers = three_nodes
    texts, cfg = demo_texts(4), config()  # 8 texts, 2 per shard: 4 shards
    run_extract("tiny", TINY, texts, cfg, ["none"], tmp_path / "local", show_progress=False)

    marker = tmp_path / "node"
    removed: list[str] = []

    def remove_node_when_asked() -> None:
        deadline = time.monotonic() + 240
        while not marker.exists() or not marker.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        node_id = marker.read_text()
        node = next(n for n in workers if n.node_id == node_id)
        cluster.remove_node(node, allow_graceful=False)
        removed.append(node_id)

    killer = threading.Thread(target=remove_node_when_asked, daemon=True)
    killer.start()
    logged: list[str] = []
    records = run_extract_ray(
        "tiny",
        TINY,
        texts,
        cfg,
        ["none"],
        tmp_path / "ray",
        show_progress=False,
        log=logged.append,
        worker=stalls_on(marker, shard=1),
    )
    killer.join(5)
    assert removed, "the node was never removed"
    engine = records[0]["engine"]
    assert engine["actors"] == 3
    assert engine["lost_nodes"] == removed
    assert "none/1" in engine["retried_shards"]
    assert engine["shards"] == engine["shards_computed"] == 4  # every shard counted once
    assert engine["duplicate_results"] == 0
    assert any("lost 1 node(s)" in m and "none/1" in m for m in logged), logged
    assert_same_outputs(tmp_path / "ray" / "none", tmp_path / "local" / "none")
