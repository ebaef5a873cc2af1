"""The ``extract@<model>`` stage: streamed per-layer summaries of a causal LM over every text.

Importing this package imports neither torch nor Ray: it re-exports the option lists and
configs of ``homog.config`` and the engine registry, and resolves every other name lazily
from its module on first use. The modules, in the order a run uses them:

- ``plan``: read and check the texts, tokenize, fix the MAUVE sample (seeded, before
  anything runs), cut shards and batches, name a run (``RunSpec``) and its work dir;
- ``hooks``: the ``Extractor`` (forward hooks that reduce each layer on the device);
- ``batch_state``: a batch's padded inputs and the per-layer slots its hooks fill;
- ``batches``: ``run_batches`` and ``compute_shard``, which every engine calls, so a shard
  is batched the same way anywhere;
- ``sentences``: the position family's sentences, token spans and per-sentence metrics;
- ``zero_shot``: the probe's text-first prompt answered by continuing each batch's pass;
- ``outputs``: shard results -> output tables (pure), then one atomic write;
- ``frames``: the output tables' rows, one builder per table (pure);
- ``run``: ``prepare_run`` / ``finish_run``, the steps both engines share;
- ``local``: the local engine (``run_extract``, ``run_shards``);
- ``ray_engine``: the Ray engine (``run_extract_ray``; Ray is imported only when it runs);
- ``ray_actor``: the Ray engine's actors (``ShardWorker``) and their sizing (``actor_resources``);
- ``engines``: the registry, ``extract_runner(params, engine)`` -> the engine's runner.
"""

from __future__ import annotations

from homog.config import ENGINES, INTERVENTIONS, ExtractConfig, RayConfig
from homog.extract.engines import RUNNERS, extract_runner
from homog.extract.names import PER_TEXT_METRICS, TOKEN_COUNT
from homog.lazy import lazy_names

# name -> submodule, for the names resolved on first use (they import numpy / torch)
_LAZY = {
    **dict.fromkeys(
        (
            "EncodedText",
            "RunSpec",
            "SamplePlan",
            "encode_texts",
            "extract_inputs",
            "make_batches",
            "make_shards",
            "plan_samples",
            "position_ids",
            "read_texts",
            "shard_path",
            "texts_hash",
            "work_dir_for",
        ),
        "plan",
    ),
    "Extractor": "hooks",
    "POOLINGS": "batch_state",
    "compute_shard": "batches",
    "BatchResult": "result",
    **dict.fromkeys(("RunOutputs", "build_outputs", "merge_shards", "write_outputs"), "outputs"),
    **dict.fromkeys(("PreparedRun", "finish_run", "prepare_run", "run_record"), "run"),
    **dict.fromkeys(("run_extract", "run_shards"), "local"),
}

__all__ = [
    "ENGINES",
    "INTERVENTIONS",
    "RUNNERS",
    "ExtractConfig",
    "PER_TEXT_METRICS",
    "RayConfig",
    "TOKEN_COUNT",
    "extract_runner",
    *_LAZY,
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
