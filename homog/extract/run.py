"""The engine-independent steps around computing shards: ``prepare_run`` and ``finish_run``.

Both engines call ``prepare_run`` (encode, plan the MAUVE sample, shard, name the work dirs)
before computing shards, and ``finish_run`` (the run record, ``merge_shards``, run.json,
removal of the work dir) once every shard of an intervention exists; in between, the local
engine computes the shards in this process and the Ray engine on actors.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from homog import __version__
from homog.config import ExtractConfig
from homog.errors import HomogError
from homog.extract.outputs import merge_shards
from homog.extract.plan import (
    EncodedText,
    RunSpec,
    SamplePlan,
    encode_texts,
    make_shards,
    plan_samples,
    shard_path,
    texts_hash,
    work_dir_for,
)
from homog.interventions import parse
from homog.io import write_json
from homog.models import ModelFacts


@dataclass
class PreparedRun:
    """Everything an engine needs before computing shards (from ``prepare_run``).

    The encoded texts, MAUVE sample plan and shards are the same for every intervention;
    ``specs`` and ``works`` give each intervention its RunSpec and work dir (in the order the
    interventions were asked for).
    """

    model: str
    source: str
    config: ExtractConfig
    encoded: list[EncodedText]
    plan: SamplePlan
    shards: list[list[EncodedText]]
    specs: dict[str, RunSpec]
    works: dict[str, Path]
    out_dir: Path
    # homog.extract.sentences.attach_sentences's counts (None: the texts have no spans)
    sentences: dict[str, int] | None = None

    @property
    def truncated(self) -> list[str]:
        return [t.name for t in self.encoded if t.truncated]

    @property
    def n_texts(self) -> int:
        """Texts of one intervention (all shards)."""
        return sum(len(s) for s in self.shards)

    def shard_paths(self, intervention: str) -> list[Path]:
        return [shard_path(self.works[intervention], k) for k in range(len(self.shards))]

    def pending(self) -> list[tuple[str, int]]:
        """(intervention, shard index) of every shard whose file is not written yet."""
        return [
            (iv, k)
            for iv in self.specs
            for k, path in enumerate(self.shard_paths(iv))
            if not path.exists()
        ]


def prepare_run(
    model: str,
    source: str,
    df: Any,
    config: ExtractConfig,
    interventions: Sequence[str],
    out_dir: str | Path,
    tokenizer: Any,
    max_context: int,
    log: Callable[[str], None] = print,
    pair_texts: str | None = None,
) -> PreparedRun:
    """The engine-independent first step: encode, plan the sample, shard, name work dirs.

    df: the texts from ``extract_inputs``; tokenizer / max_context: from the loaded model or
    ``homog.models.load_tokenizer``; pair_texts: the whole texts table's hash when df holds
    only some of its variants (``intervention_groups``). Logs how many texts were truncated and, per
    intervention, how many shards an earlier run left to resume from. Raises HomogError for
    empty texts (``encode_texts``).
    """
    out_dir = Path(out_dir)
    max_tokens = min(config.max_tokens, max_context)
    encoded = encode_texts(tokenizer, df, max_tokens)
    truncated = [t.name for t in encoded if t.truncated]
    if truncated:
        log(
            f"{len(truncated)} of {len(encoded)} texts truncated to {max_tokens} tokens "
            f"(e.g. {', '.join(truncated[:5])})"
        )
    sentences = None
    if config.sentence_metrics:
        from homog.extract.sentences import attach_sentences

        sentences = attach_sentences(tokenizer, df, encoded)
        if sentences:
            lost = [
                f"{k} {v}" for k, v in sentences.items() if k not in ("sentences", "kept") and v
            ]
            log(
                f"sentences: {sentences['kept']} of {sentences['sentences']} followed through "
                f"the layers; left out: {', '.join(lost) or 'none'}"
            )
    plan = plan_samples(
        encoded, config.sample_tokens, config.pooled_texts, config.seed, config.exclude_special
    )
    thash = texts_hash(df)
    specs = {iv: RunSpec(model, source, iv, config, thash, pair_texts) for iv in interventions}
    prepared = PreparedRun(
        model=model,
        source=source,
        config=config,
        encoded=encoded,
        plan=plan,
        shards=make_shards(encoded, config.shard_texts),
        specs=specs,
        works={iv: work_dir_for(out_dir, spec) for iv, spec in specs.items()},
        out_dir=out_dir,
        sentences=sentences,
    )
    n_shards = len(prepared.shards)
    for iv in specs:
        done = sum(path.exists() for path in prepared.shard_paths(iv))
        if done:
            log(f"{model}/{iv}: resuming, {done} of {n_shards} shards already done")
    return prepared


def run_variants(intervention: str, config: ExtractConfig) -> tuple[str, ...]:
    """The variants an intervention runs on (empty: all): ``none`` every text, a graded
    intervention ``extract.dose_variants`` (or, when empty, as the others), the others
    ``extract.intervention_variants``."""
    if intervention == "none":
        return ()
    if is_graded(intervention) and config.dose_variants:
        return config.dose_variants
    return config.intervention_variants


def is_graded(intervention: str) -> bool:
    """A run of a dose grid (sink_bias:-2, homogenize_control:0.5, ...)."""
    return parse(intervention).kind.dose is not None


def dose_samples(df: Any, config: ExtractConfig) -> list[str] | None:
    """The reviews the graded runs hold: a draw of ``extract.dose_texts`` of the texts'
    sample ids, seeded by ``seed`` and sorted (None: all of them)."""
    ids = sorted(set(df["sample_id"]))
    if config.dose_texts is None or config.dose_texts >= len(ids):
        return None
    rng = np.random.default_rng([config.seed, 0xD05E])
    return sorted(rng.choice(ids, size=config.dose_texts, replace=False).tolist())


def intervention_groups(
    df: Any, interventions: Sequence[str], config: ExtractConfig
) -> list[tuple[Any, list[str], str | None]]:
    """(texts, interventions, pair texts hash) per extraction pass.

    One pass per set of variants (``run_variants``), and the graded runs in a pass of their
    own when ``extract.dose_texts`` draws some of the reviews (``dose_samples``): without
    ``extract.intervention_variants`` and graded interventions one pass runs every
    intervention on every text. A pass on some texts only holds those rows, and its runs carry
    the whole table's hash as their pair key's texts (so ``stats`` pairs them with the
    unchanged run, variant by variant and review by review). Raises HomogError when a named
    variant is not in the texts.
    """
    draw = dose_samples(df, config)
    passes: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for iv in interventions:
        drawn = draw is not None and is_graded(iv)
        passes.setdefault((run_variants(iv, config), drawn), []).append(iv)
    groups = []
    for (keep, drawn), ivs in passes.items():
        if not keep and not drawn:
            groups.append((df, ivs, None))
            continue
        missing = sorted(set(keep) - set(df["variant"]))
        if missing:
            key = "dose_variants" if keep == config.dose_variants else "intervention_variants"
            raise HomogError(
                f"extract.{key} names {missing}, which the texts do not have (variants: "
                f"{', '.join(sorted(set(df['variant'])))}); fix the list or leave it empty"
            )
        rows = df["variant"].isin(keep) if keep else df["variant"].notna()
        if drawn:
            rows &= df["sample_id"].isin(draw)
        groups.append((df[rows].reset_index(drop=True), ivs, texts_hash(df)))
    return groups


def finished_runs(
    model: str,
    source: str,
    df: Any,
    config: ExtractConfig,
    interventions: Sequence[str],
    out_dir: str | Path,
    pair_texts: str | None = None,
) -> dict[str, dict[str, Any]]:
    """intervention -> its run record, for the interventions of one pass whose output under
    ``out_dir`` is complete with the run id this pass would give it (same model source,
    result settings and texts): their run.json, written after the merge, holds that id.

    A stopped extraction resumes at its next shard (``prepare_run``); this lets a stopped
    study skip the interventions it finished. DVC removes a stage's outputs before it runs
    one, so under ``dvc repro`` nothing is found here.
    """
    thash = texts_hash(df)
    done = {}
    for iv in interventions:
        path = Path(out_dir) / iv / "run.json"
        if not path.exists():
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # a damaged record: the run is computed again and replaces it
        if record.get("run_id") == RunSpec(model, source, iv, config, thash, pair_texts).run_id:
            done[iv] = record
    return done


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {
        "homog": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def run_record(
    facts: ModelFacts, spec: RunSpec, n_truncated: int, truncated: list[str]
) -> dict[str, Any]:
    """The run.json fields known before the run (sizes, conventions, versions).

    facts: the model's sizes, dtype, device and info (``LoadedModel.facts()``, or rebuilt
    from what a remote worker reported with ``ModelFacts.from_dict``).
    """
    conventions = {
        "extract": spec.config.run_options(),
        "hidden_layers": "0 = embedding output; l = output of block l; L = final-norm output "
        "(HF hidden_states[-1])",
        "attention_layers": "l = attention inside block l (1..L); A over all real tokens "
        "incl. special; padding excluded",
        "padding": "right",
        "metric_tokens": "special tokens excluded" if spec.config.exclude_special else "all",
        "std": "sample std (ddof=1) over texts",
        "vectors": "float32; tokens__ sampled uniformly per variant (seeded), "
        "pooled_mean__ for up to pooled_texts texts per variant",
        "token_sets": "all = metric tokens (names without suffix); no_sink = without the first "
        "metric token and tokens with norm > sink_norm_ratio x median norm; standardized = "
        "features z-scored over the text's tokens; stored as <metric>__<set>",
        "massive_activations": "act_* over the metric tokens; positions are 0-based sequence "
        "positions (special tokens counted); attn_massive at attention layer l uses the top "
        "token of hidden layer l-1 (the block's input)",
        "model": facts.info,
        "versions": _versions(),
    }
    return {
        "model": spec.model,
        "model_source": spec.source,
        "n_layers": facts.n_layers,
        "d_model": facts.d_model,
        "n_heads": facts.n_heads,
        "dtype": facts.dtype,
        "device": facts.device,
        "intervention": spec.intervention,
        "pair_key": spec.pair_key,
        "config_json": json.dumps(conventions, sort_keys=True, default=str),
        "homog_version": __version__,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "n_truncated": n_truncated,
        "truncated": truncated[:100],
    }


def finish_run(
    prepared: PreparedRun,
    intervention: str,
    facts: ModelFacts,
    timings: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The engine-independent last step for one intervention, once all its shards exist.

    Builds the run record (``run_record`` + ``timings`` + ``extra``, e.g. the engine's
    details), merges the shards into ``out_dir/<intervention>/`` (``merge_shards``), writes
    run.json with the merge time and removes the work dir. Returns the record. Raises
    HomogError when the shards do not cover the texts.
    """
    spec, work = prepared.specs[intervention], prepared.works[intervention]
    truncated = prepared.truncated
    record = run_record(facts, spec, len(truncated), truncated)
    if prepared.sentences is not None:
        record["sentences"] = prepared.sentences  # followed and left out, by reason
    record["timings"] = dict(timings)
    record.update(extra or {})
    target = prepared.out_dir / intervention
    t0 = time.perf_counter()
    paths = prepared.shard_paths(intervention)
    record = merge_shards(paths, prepared.encoded, spec, prepared.plan, target, record)
    record["timings"]["merge_s"] = round(time.perf_counter() - t0, 2)
    write_json(target / "run.json", record)
    shutil.rmtree(work, ignore_errors=True)
    if work.parent.exists() and not any(work.parent.iterdir()):
        work.parent.rmdir()
    return record
