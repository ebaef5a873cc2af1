"""The ``extract.engine: ray`` engine: the extract stage on a Ray cluster (Ray Data).

The same code runs on a laptop (a local Ray cluster started on the fly), on one multi-GPU
node, or on a cluster that is already running (``ray.address`` or ``RAY_ADDRESS``, e.g. one
started under Slurm or KubeRay). It reuses the engine-independent pieces of ``homog.extract``
(``run.prepare_run`` / ``run.finish_run``, ``batches.compute_shard``), so both engines produce
the same rows:

1. On the driver (no model loaded, only its tokenizer: ``homog.models.load_tokenizer``):
   ``prepare_run`` encodes the texts, plans the MAUVE sample and cuts the
   shards, as for the local engine. Each (intervention, shard) pair not already on disk
   becomes one row of a Ray Dataset.
2. ``map_batches`` runs a pool of ``ShardWorker`` actors (``homog.extract.ray_actor``), one
   per GPU (``num_gpus`` each; ``num_gpus_per_actor: k`` with ``extract.device_map: auto``
   spreads one model larger than a GPU over k GPUs of a node), or CPU actors when the
   cluster has no GPU. An actor loads the model once and turns a shard into its
   ``BatchResult`` with the local engine's ``compute_shard`` (the same batches, position
   ids and sampled token positions, so the same values).
3. The driver writes each returned shard atomically into the local engine's work dir as it
   arrives, then ``finish_run`` merges them into the final Parquet/npz outputs
   and run.json. Workers never touch the file system, so a cluster needs no shared storage.

Fault tolerance: an actor that dies (killed, OOM, lost node) is restarted and its shard is
retried (Ray's actor restarts and task retries, ``ray.max_retries`` times). Each actor reports
the start of every shard attempt to a small ``ShardLog`` actor on the driver's node, so the
driver logs (and run.json's ``engine`` record keeps) the nodes lost during the run and the
shards that were retried; a shard result that arrives twice is written and counted once. A
run that is interrupted resumes from the shard files already written: a shard file exists =>
that shard is done and is never computed or counted again; ``merge_shards`` checks that the
shards cover every text exactly once. Shards are the local engine's files, so a run started with
one engine can be resumed with the other.

Importing this module does not import Ray (it is an optional extra: ``pip install
'homog[ray]'``); the local engine never imports this module (``homog.extract.engines``).
"""

from __future__ import annotations

import json
import os
import pickle
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from homog.config import ExtractConfig, RayConfig
from homog.errors import HomogError
from homog.extract.plan import EncodedText, extract_inputs, n_tokens, shard_path
from homog.extract.ray_actor import ShardWorker, actor_resources
from homog.extract.ray_faults import alive_nodes, fault_report, start_shard_log
from homog.extract.result import BatchResult
from homog.extract.run import PreparedRun, finish_run, prepare_run
from homog.io import atomic_path, write_json
from homog.models import ModelFacts, load_tokenizer
from homog.progress import rate_progress

MODEL_FACTS = "model.json"  # written in each work dir, so a fully resumed run needs no actor


def import_ray() -> Any:
    """``import ray`` (with Ray Data), or HomogError saying how to install the extra."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise HomogError(
            "extract.engine: ray needs Ray Data: pip install 'homog[ray]' "
            f"(or 'ray[data]>=2.30'), or use extract.engine: local ({exc})"
        ) from exc
    return ray


# ---------------------------------------------------------------------------------------------
# the driver


@dataclass
class ShardJob:
    """What the driver prepared (``prepare_run``) and which of its shards are to compute.

    ``pending`` lists the (intervention, shard index) pairs whose shard file is missing.
    """

    prepared: PreparedRun
    pending: list[tuple[str, int]]
    # per intervention, the shards' summed time inside the actors (what an actor sustains)
    compute_s: dict[str, float] = field(default_factory=dict)

    @property
    def config(self) -> ExtractConfig:
        return self.prepared.config

    @property
    def shards(self) -> list[list[EncodedText]]:
        return self.prepared.shards

    @property
    def works(self) -> dict[str, Path]:
        return self.prepared.works

    def n_texts(self, pairs: Iterable[tuple[str, int]]) -> int:
        return sum(len(self.shards[k]) for _, k in pairs)

    def rows(self, todo: Sequence[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
        """One Ray Dataset row per shard of ``todo`` (default: the pending ones), carrying
        its texts and sampled positions."""
        rows = []
        for iv, k in self.pending if todo is None else todo:
            texts = self.shards[k]
            planned = self.prepared.plan.tokens
            tokens = {t.index: planned[t.index] for t in texts if t.index in planned}
            payload = pickle.dumps((texts, tokens), protocol=pickle.HIGHEST_PROTOCOL)
            rows.append({"intervention": iv, "shard": k, "payload": payload})
        return rows

    def save(self, iv: str, k: int, result: BatchResult, facts: str) -> None:
        """Write one returned shard atomically (and the model facts once per work dir).

        Raises HomogError when the result is not the shard's own texts (never written).
        """
        expected = sorted(t.index for t in self.shards[k])
        if sorted(result.indices.tolist()) != expected:
            raise HomogError(
                f"shard {k} of {iv} came back with other texts than its own "
                f"({result.indices[:5].tolist()}... vs {expected[:5]}...): not written"
            )
        work = self.works[iv]
        with atomic_path(shard_path(work, k)) as tmp:
            result.save(tmp)
        if not (work / MODEL_FACTS).exists():
            write_json(work / MODEL_FACTS, json.loads(facts))


def run_extract_ray(
    model: str,
    source: str,
    texts: Any,
    config: ExtractConfig,
    interventions: Iterable[str],
    out_dir: str | Path,
    *,
    show_progress: bool = True,
    log: Callable[[str], None] = print,
    ray_config: RayConfig | None = None,
    worker: type = ShardWorker,
    pair_texts: str | None = None,
) -> list[dict[str, Any]]:
    """``homog.extract.local.run_extract`` on Ray: same arguments, same outputs, same records.

    texts: a DataFrame (variant, sample_id, text) or a Parquet path; config: an
    ``ExtractConfig``. Writes ``out_dir/<intervention>/`` for each intervention (renamed into
    place when complete) and returns the run records; their ``engine`` field says how the
    work was spread. Resumes from shard files left by an interrupted run of either engine.
    worker: the actor class (a ``ShardWorker`` subclass; tests inject failures with it).
    Raises HomogError on bad input, when Ray is not installed, or when an actor raised one
    (the shards written until then are kept, so a re-run resumes).
    """
    ray_config = ray_config or RayConfig()
    df, interventions = extract_inputs(texts, interventions)
    ray = import_ray()  # before any work: a missing extra fails at once
    if ray_config.num_gpus_per_actor > 1 and not config.device_map and config.device != "cpu":
        log(
            f"ray.num_gpus_per_actor={ray_config.num_gpus_per_actor:g} without "
            "extract.device_map: auto: each actor's model sits on one GPU and the others idle"
        )
    # the local engine's preparation, with the tokenizer alone (the actors load the model)
    tokenizer, max_context = load_tokenizer(source)
    prepared = prepare_run(
        model, source, df, config, interventions, out_dir, tokenizer, max_context, log, pair_texts
    )
    job = ShardJob(prepared, prepared.pending())

    t1 = time.perf_counter()
    engine = run_job(ray, job, ray_config, worker, show_progress, f"{model} (ray)", log)
    extract_s = time.perf_counter() - t1

    records = []
    for iv in prepared.specs:
        facts = json.loads((prepared.works[iv] / MODEL_FACTS).read_text())
        timings = {"load_s": facts["load_s"], "extract_s": round(extract_s, 2)}
        details = {
            **engine,
            "shards": len(prepared.shards),
            "shards_computed": sum(p[0] == iv for p in job.pending),
            "actor_compute_s": round(job.compute_s.get(iv, 0.0), 3),
        }
        model_facts = ModelFacts.from_dict(facts)
        records.append(finish_run(prepared, iv, model_facts, timings, {"engine": details}))
    return records


def run_job(
    ray: Any,
    job: ShardJob,
    ray_config: RayConfig,
    worker: type = ShardWorker,
    show_progress: bool = False,
    label: str = "extract (ray)",
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Compute a job's pending shards on Ray, writing each one as soon as it arrives.

    Connects to ``ray_config.address`` (or RAY_ADDRESS) or starts a local cluster unless
    Ray is already initialised (then that cluster is used and left running). Also makes sure
    every work dir holds the model facts for run.json: when all shards were already on disk
    but the facts were not (shards of the local engine), one short task loads the model to
    read them. Returns what run.json records about the engine.
    """
    for work in job.works.values():
        work.mkdir(parents=True, exist_ok=True)
    no_facts = [iv for iv, w in job.works.items() if not (w / MODEL_FACTS).exists()]
    info: dict[str, Any] = {"name": "ray", "actors": 0}
    if not job.pending and not no_facts:
        return info
    started = not ray.is_initialized()
    if started:
        address = ray_config.address or os.environ.get("RAY_ADDRESS") or None
        # a private local cluster needs no dashboard server; an existing one keeps its own
        extra = {} if address else {"include_dashboard": False}
        ray.init(address=address, runtime_env=ray_config.runtime_env, **extra)
    try:
        cluster = ray.cluster_resources()
        alive = alive_nodes(ray)
        nodes = list(alive.values())
        res = actor_resources(job.config, ray_config, nodes, max(1, len(job.pending)))
        shard_log = start_shard_log(ray) if job.pending else None
        info.update(
            ray_version=ray.__version__,
            actors=res["actors"] if job.pending else 0,
            num_gpus_per_actor=res["num_gpus"],
            num_cpus_per_actor=res["num_cpus"],
            cluster={k: cluster.get(k, 0.0) for k in ("CPU", "GPU")},
        )
        kwargs = {
            "source": job.prepared.source,
            "config": asdict(job.config),
            "num_threads": res["num_threads"],
        }
        total = len(job.works) * job.prepared.n_texts
        done = total - job.n_texts(job.pending)
        with rate_progress(label, total, completed=done, show=show_progress) as advance:
            actor_kwargs = {**kwargs, "shard_log": shard_log}
            facts, duplicates, restarts, res = _compute_pending(
                ray, job, ray_config, worker, actor_kwargs, res, advance, log
            )
        info["pool_restarts"] = restarts
        if shard_log is not None:
            faults = _fault_info(ray, shard_log, alive, log)
            info.update(faults, duplicate_results=duplicates)
        _write_missing_facts(ray, job, worker, kwargs, res, facts)
    finally:
        if started:
            ray.shutdown()
    return info


def _compute_pending(
    ray: Any,
    job: ShardJob,
    ray_config: RayConfig,
    worker: type,
    actor_kwargs: dict[str, Any],
    res: dict[str, Any],
    advance: Callable[[int, int], None],
    log: Callable[[str], None],
) -> tuple[str | None, int, int, dict[str, Any]]:
    """Map the pending shards and save each result, on a new actor pool after a Ray failure.

    Returns (the last model facts received or None, duplicate results, pool restarts, the
    resources of the last pool).
    """
    facts = None
    saved: set[tuple[str, int]] = set()
    duplicates = 0
    restarts = 0
    todo = list(job.pending)
    while todo:
        try:
            for row in _map_shards(ray, job, todo, worker, actor_kwargs, res, ray_config):
                iv, k = str(row["intervention"]), int(row["shard"])
                if row["error"]:
                    raise HomogError(
                        f"{row['error']} ({iv} shard {k}; the shards written so far "
                        "are kept: re-run to resume)"
                    )
                if (iv, k) in saved:  # a retried task's second result: counted once
                    duplicates += 1
                    continue
                saved.add((iv, k))
                facts = str(row["facts"])
                job.save(iv, k, pickle.loads(row["result"]), facts)
                advance(len(job.shards[k]), n_tokens(job.shards[k]))
                job.compute_s[iv] = job.compute_s.get(iv, 0.0) + float(row["compute_s"])
            todo = []
        except ray.exceptions.RayError as exc:
            # Ray gave up on a shard (its actor's node is gone and the task retries
            # ran out while the actor restarted elsewhere): the shards written so far
            # stay; a new actor pool on the nodes still alive computes the rest.
            todo = [p for p in job.pending if p not in saved]
            restarts += 1
            if restarts > int(ray_config.max_retries) or not todo:
                raise HomogError(
                    f"the Ray cluster failed {restarts} time(s) ({type(exc).__name__}); "
                    "the shards written so far are kept: re-run to resume"
                ) from exc
            res = actor_resources(
                job.config, ray_config, list(alive_nodes(ray).values()), len(todo)
            )
            log(
                f"ray: {type(exc).__name__} (a lost node or actor); computing the "
                f"{len(todo)} remaining shard(s) on a new pool of {res['actors']} "
                f"actor(s) (restart {restarts} of at most {ray_config.max_retries})"
            )
    return facts, duplicates, restarts, res


def _fault_info(
    ray: Any, shard_log: Any, alive: dict[str, Any], log: Callable[[str], None]
) -> dict[str, Any]:
    """The ``fault_report`` of the run (nodes lost, shards retried), logged when not empty."""
    faults = fault_report(ray.get(shard_log.snapshot.remote()), set(alive), set(alive_nodes(ray)))
    if faults["lost_nodes"] or faults["retried_shards"]:
        log(
            f"ray: lost {len(faults['lost_nodes'])} node(s) during the run "
            f"({', '.join(n[:12] for n in faults['lost_nodes']) or 'none'}); retried "
            f"shard(s): {', '.join(faults['retried_shards']) or 'none'}; every shard "
            "is written once"
        )
    return faults


def _write_missing_facts(
    ray: Any,
    job: ShardJob,
    worker: type,
    kwargs: dict[str, Any],
    res: dict[str, Any],
    facts: str | None,
) -> None:
    """Write the model facts into the work dirs that lack them (``facts``, or one short task
    that loads the model to read them when no shard was computed)."""
    no_facts = [iv for iv, w in job.works.items() if not (w / MODEL_FACTS).exists()]
    if no_facts:
        remote = {"num_cpus": res["num_cpus"], "num_gpus": res["num_gpus"]}
        facts = facts or ray.get(ray.remote(**remote)(_facts).remote(worker, kwargs))
        for iv in no_facts:
            write_json(job.works[iv] / MODEL_FACTS, json.loads(facts))


def _facts(worker: type, kwargs: dict[str, Any]) -> str:
    return worker(**kwargs).facts


def _map_shards(
    ray: Any,
    job: ShardJob,
    todo: Sequence[tuple[str, int]],
    worker: type,
    kwargs: dict[str, Any],
    res: dict[str, Any],
    ray_config: RayConfig,
) -> Iterator[dict[str, Any]]:
    """Result rows of the ``todo`` shards, mapped by a fixed pool of actors (streamed)."""
    if not todo:
        return
    ray.data.DataContext.get_current().enable_progress_bars = False  # homog's bar counts texts
    # one block per shard, so each shard is scheduled (and retried) on its own; the rows
    # are not kept here (they live in the object store until their shard is done)
    ds = ray.data.from_items(job.rows(todo), override_num_blocks=len(todo))
    remote: dict[str, Any] = {"num_cpus": res["num_cpus"]}
    if res["num_gpus"]:
        remote["num_gpus"] = res["num_gpus"]
    with warnings.catch_warnings():
        # Ray >= 2.5x deprecates passing actor options as keyword arguments but has no named
        # parameter for them yet; without them a shard that always kills its actor (e.g. an
        # out-of-memory) would be retried forever (Ray Data's default is -1, unlimited).
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        ds = ds.map_batches(
            worker,
            batch_size=1,
            batch_format="numpy",
            fn_constructor_kwargs=kwargs,
            compute=ray.data.ActorPoolStrategy(size=res["actors"]),
            max_restarts=int(ray_config.max_retries),
            max_task_retries=int(ray_config.max_retries),
            **remote,
        )
    yield from ds.iter_rows()
