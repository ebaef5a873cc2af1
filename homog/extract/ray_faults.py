"""What the Ray engine learns about faults (``homog.extract.ray_engine``'s "Fault tolerance"):
the ``ShardLog`` actor that records every shard attempt with its node, the nodes alive, and
the report run.json's engine record keeps. Imports no Ray at module level."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ShardLog:
    """A Ray actor on the driver's node: every shard attempt an actor starts, with its node.

    Two starts of one shard mean it was retried (its actor died: killed, OOM, a lost node).
    """

    def __init__(self) -> None:
        self.starts: list[tuple[str, int, str]] = []

    def started(self, intervention: str, shard: int, node: str) -> None:
        self.starts.append((intervention, shard, node))

    def snapshot(self) -> list[tuple[str, int, str]]:
        return list(self.starts)


def fault_report(
    starts: Sequence[tuple[str, int, str]], nodes_before: set[str], nodes_after: set[str]
) -> dict[str, Any]:
    """What run.json's engine record says about faults (pure): the nodes alive at the start
    and gone at the end, and the shards started more than once (``"iv/k"``)."""
    counts: dict[tuple[str, int], int] = {}
    for iv, k, _ in starts:
        counts[(iv, k)] = counts.get((iv, k), 0) + 1
    return {
        "lost_nodes": sorted(nodes_before - nodes_after),
        "retried_shards": [f"{iv}/{k}" for (iv, k), n in sorted(counts.items()) if n > 1],
        "shard_attempts": len(starts),
    }


def alive_nodes(ray: Any) -> dict[str, dict[str, float]]:
    return {n["NodeID"]: n["Resources"] for n in ray.nodes() if n.get("Alive")}


def start_shard_log(ray: Any) -> Any:
    """A ShardLog actor pinned to the driver's node (which outlives the worker nodes)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    return (
        ray.remote(ShardLog)
        .options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
        )
        .remote()
    )
