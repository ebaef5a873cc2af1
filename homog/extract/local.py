"""The local engine: every shard computed in this process, written to a resumable work dir.

``run_extract`` loads the model (``homog.models.load_for``), prepares the run
(``homog.extract.run.prepare_run``), computes the missing shards with ``run_shards`` (each
written atomically to a hidden work dir next to the output, so an interrupted run resumes)
and merges them (``finish_run``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from homog.config import ExtractConfig
from homog.extract.batches import compute_shard
from homog.extract.edits import check_edit_layers
from homog.extract.hooks import Extractor
from homog.extract.plan import (
    EncodedText,
    RunSpec,
    SamplePlan,
    extract_inputs,
    n_tokens,
    shard_path,
)
from homog.extract.run import PreparedRun, finish_run, prepare_run
from homog.io import atomic_path
from homog.models import load_for
from homog.progress import rate_progress


def run_shards(
    extractor: Extractor,
    shards: Sequence[Sequence[EncodedText]],
    spec: RunSpec,
    plan: SamplePlan,
    work: Path,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Compute every shard missing from ``work``; return all shard paths in order.

    A shard file is written atomically, so after a kill only complete shards exist.
    ``on_batch(texts, tokens)`` is called after each batch (progress reporting), and once
    per shard already on disk.
    """
    work.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, shard in enumerate(shards):
        path = shard_path(work, k)
        paths.append(path)
        if path.exists():
            if on_batch:
                on_batch(len(shard), n_tokens(shard))
            continue
        result = compute_shard(
            extractor, shard, spec.intervention, plan, spec.config.batch_tokens, on_batch
        )
        with atomic_path(path) as tmp:
            result.save(tmp)
    return paths


def _run_with_progress(
    extractor: Extractor, prepared: PreparedRun, spec: RunSpec, show: bool
) -> list[Path]:
    label = f"{prepared.model}/{spec.intervention}"
    work = prepared.works[spec.intervention]
    with rate_progress(label, prepared.n_texts, show=show) as advance:
        return run_shards(extractor, prepared.shards, spec, prepared.plan, work, advance)


def run_extract(
    model: str,
    source: str,
    texts: Any,
    config: ExtractConfig,
    interventions: Iterable[str],
    out_dir: str | Path,
    *,
    show_progress: bool = True,
    log: Callable[[str], None] = print,
    loaded: Any = None,
    pair_texts: str | None = None,
) -> list[dict[str, Any]]:
    """Run the extract stage for one model over a texts table, one run per intervention.

    texts: a DataFrame (columns variant, sample_id, text) or a path to a Parquet file.
    Writes ``out_dir/<intervention>/`` for each intervention (each renamed into place only
    when complete) and returns the run records. Resumes from shards left by an interrupted
    run of the same config. pair_texts: see ``prepare_run``. loaded: an already loaded model
    (else ``load_for(source, config)``). Raises HomogError on bad input (see ``encode_texts``,
    ``homog.models.load_model``) and on NaN/inf in hidden states.
    """
    df, interventions = extract_inputs(texts, interventions)
    t0 = time.perf_counter()
    if loaded is None:
        loaded = load_for(source, config)
    load_s = time.perf_counter() - t0
    check_edit_layers(config, loaded.n_layers)  # every graded run's layer, before any pass
    prepared = prepare_run(
        model,
        source,
        df,
        config,
        interventions,
        out_dir,
        loaded.tokenizer,
        loaded.max_context,
        log,
        pair_texts,
    )
    extractor = Extractor(loaded, config)
    records = []
    try:
        for iv, spec in prepared.specs.items():
            t1 = time.perf_counter()
            _run_with_progress(extractor, prepared, spec, show_progress)
            timings = {"load_s": round(load_s, 2), "extract_s": round(time.perf_counter() - t1, 2)}
            records.append(finish_run(prepared, iv, loaded.facts(), timings))
    finally:
        extractor.close()
    return records
