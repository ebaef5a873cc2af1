"""The Ray engine's actors (``homog.extract.ray_engine``): ``ShardWorker``, the Ray Data actor
that loads the model once and maps shards to results, and ``actor_resources``, how many of
them to start and what each holds.

Importing this module does not import Ray.
"""

from __future__ import annotations

import json
import pickle
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from homog.config import ExtractConfig, RayConfig
from homog.errors import HomogError
from homog.extract.batches import compute_shard
from homog.extract.hooks import Extractor
from homog.extract.plan import EncodedText, SamplePlan
from homog.extract.result import BatchResult
from homog.models import load_for


class ShardWorker:
    """A Ray Data actor: loads the model once, then maps rows (one shard each) to results.

    Input rows: intervention (str), shard (int), payload (bytes: the pickled ``(texts,
    tokens)``, the shard's ``EncodedText`` list and its part of the sample plan). Output
    rows: intervention, shard, result (bytes: the pickled ``BatchResult``), facts (JSON: the
    model's sizes, dtype, device and load time, for run.json), error (str, '' when none),
    compute_s (the shard's time inside the actor: throughput without Ray's overheads).
    A HomogError (bad input, NaN, CUDA missing on the node) comes back as the row's error
    rather than as an exception, because Ray does not carry an exception's cause across
    processes and the user would lose the message; the driver raises it.
    """

    def __init__(
        self, source: str, config: dict[str, Any], num_threads: int = 0, shard_log: Any = None
    ):
        import torch

        self.shard_log = shard_log  # a ShardLog actor handle (None: attempts not reported)

        if num_threads > 0:  # CPU actors: as many torch threads as CPUs reserved, no more
            torch.set_num_threads(num_threads)
        self.config = ExtractConfig(**config)
        self.error = ""
        self.facts = "{}"
        t0 = time.perf_counter()
        try:
            loaded = load_for(source, self.config)
        except HomogError as exc:
            self.error = f"{platform.node()}: {exc}"
            return
        self.extractor = Extractor(loaded, self.config)
        # ModelFacts (for run.json, rebuilt by the driver with ModelFacts.from_dict) plus
        # where and how fast the model loaded
        self.facts = json.dumps(
            {
                **asdict(loaded.facts()),
                "load_s": round(time.perf_counter() - t0, 2),
                "node": platform.node(),
            },
            default=str,
        )

    def compute(
        self, intervention: str, shard: int, texts: list[EncodedText], tokens: dict
    ) -> BatchResult:
        """One shard's ``BatchResult`` (``tokens``: the shard's part of ``SamplePlan.tokens``)."""
        if self.error:
            raise HomogError(self.error)
        plan = SamplePlan(tokens=tokens)
        return compute_shard(self.extractor, texts, intervention, plan, self.config.batch_tokens)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results, errors, seconds = [], [], []
        rows = zip(batch["intervention"], batch["shard"], batch["payload"], strict=True)
        for iv, k, payload in rows:
            t0 = time.perf_counter()
            if self.shard_log is not None:
                import ray

                node = ray.get_runtime_context().get_node_id()
                ray.get(self.shard_log.started.remote(str(iv), int(k), node))
            try:
                result = self.compute(str(iv), int(k), *pickle.loads(payload))
                results.append(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
                errors.append("")
            except HomogError as exc:
                results.append(b"")
                errors.append(str(exc))
            seconds.append(time.perf_counter() - t0)
        return {
            "intervention": np.asarray(batch["intervention"]),
            "shard": np.asarray(batch["shard"]),
            "result": np.array(results, dtype=object),
            "facts": np.array([self.facts] * len(results), dtype=object),
            "error": np.array(errors, dtype=object),
            "compute_s": np.array(seconds, dtype=np.float64),
        }


def actor_resources(
    config: ExtractConfig, ray_config: RayConfig, nodes: Sequence[dict[str, float]], n_todo: int
) -> dict[str, Any]:
    """How many actors to start and what each holds (pure: from the nodes' resources).

    nodes: the resources of each live node (``{"CPU": 64, "GPU": 8}``); an actor must fit on
    one node, so capacity is counted per node. GPU actors when a node has GPUs and
    ``extract.device`` is not 'cpu'; CPU actors otherwise. Never more actors than shards to
    compute. Raises HomogError when no node can hold one GPU actor (``extract.device: cuda``
    on a CPU cluster, or ``ray.num_gpus_per_actor`` above any node's GPUs; Ray would wait for
    ever) unless ``ray.actors`` is set, e.g. for an autoscaling cluster that adds GPU nodes.
    Returns dict(actors, num_gpus, num_cpus, num_threads) (num_threads 0: torch's default).
    """
    per_cpu = float(ray_config.num_cpus_per_actor)
    gpus = [float(n.get("GPU", 0)) for n in nodes]
    use_gpu = config.device != "cpu" and (any(gpus) or config.device.startswith("cuda"))
    if use_gpu:
        per_gpu = float(ray_config.num_gpus_per_actor) or 1.0
        capacity = sum(int(g // per_gpu) for g in gpus)
        if capacity < 1 and ray_config.actors is None:
            raise HomogError(
                f"extract.device {config.device!r} needs GPUs but no node of the Ray cluster "
                f"has ray.num_gpus_per_actor={per_gpu:g} GPU(s) (GPUs per node: "
                f"{[int(g) for g in gpus]}): lower ray.num_gpus_per_actor, use extract.device: "
                "cpu, or set ray.actors for an autoscaling cluster"
            )
        resources = {"num_gpus": per_gpu, "num_cpus": per_cpu, "num_threads": 0}
    else:
        capacity = max(1, sum(int(float(n.get("CPU", 0)) // per_cpu) for n in nodes))
        resources = {"num_gpus": 0.0, "num_cpus": per_cpu, "num_threads": max(1, int(per_cpu))}
    actors = int(ray_config.actors) if ray_config.actors is not None else capacity
    return {"actors": max(1, min(actors, n_todo)), **resources}
