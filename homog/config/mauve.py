"""``mauve:`` (MAUVE between consecutive layers) and ``ray:`` (the Ray engine) sections of
params.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from homog.validate import check as _check


@dataclass(frozen=True)
class MauveConfig:
    """``mauve:``: MAUVE between consecutive layers."""

    path: Literal["auto", "faiss", "torch"] = "auto"  # auto: torch on CUDA, else faiss
    max_points: int = 256
    pca_variance: float = 0.9
    kmeans_max_clusters: int = 50
    scaling: float = 5.0
    n_mixtures: int = 25
    kmeans_num_redo: int = 5
    kmeans_max_iter: int = 500
    device: str = "auto"  # auto: extract.device
    seed: int = 0  # the top-level seed

    def __post_init__(self) -> None:
        _check(0 < self.pca_variance < 1, "mauve.pca_variance must lie in (0, 1)")
        _check(
            self.scaling > 0, f"mauve.scaling must be > 0 (MAUVE's exp(-c KL)), got {self.scaling}"
        )
        for name in (
            "max_points",
            "kmeans_max_clusters",
            "n_mixtures",
            "kmeans_num_redo",
            "kmeans_max_iter",
        ):
            _check(getattr(self, name) >= 1, f"mauve.{name} must be >= 1")

    def n_clusters(self, n_points: int) -> int:
        """mauve-text's 'auto' bucket count, capped."""
        return max(2, min(self.kmeans_max_clusters, int(round(n_points / 10))))


@dataclass(frozen=True)
class RayConfig:
    """``ray:``: the Ray engine (``extract.engine: ray``; the README explains each key)."""

    address: str | None = None  # auto | ray://head:10001 | head:6379; None: RAY_ADDRESS/local
    num_gpus_per_actor: float = 1  # k > 1 with extract.device_map: auto for a big model
    num_cpus_per_actor: float = 1  # the torch threads of a CPU actor
    actors: int | None = None  # None: as many as the cluster's GPUs (or CPUs) allow
    max_retries: int = 3  # restarts of a dead actor / retries of its shard
    runtime_env: dict[str, Any] | None = None  # ray.init runtime_env (nodes without homog)

    def __post_init__(self) -> None:
        _check(
            self.num_gpus_per_actor >= 0 and self.num_cpus_per_actor > 0,
            "ray.num_gpus_per_actor must be >= 0 and ray.num_cpus_per_actor > 0, got "
            f"{self.num_gpus_per_actor} and {self.num_cpus_per_actor}",
        )
        _check(
            self.actors is None or self.actors >= 1,
            f"ray.actors must be >= 1 or null (auto), got {self.actors}",
        )
        _check(self.max_retries >= 0, f"ray.max_retries must be >= 0, got {self.max_retries}")
