"""What the probe's features step takes from the extraction instead of a forward pass.

``homog extract`` runs every text once and keeps, per run directory, every text's
mean-pooled vectors (``pooled_mean.npy``) and, for a text-first ``probe.prompt``, the
zero-shot answers of that same pass (``zero_shot.parquet``, ``homog.extract.zero_shot``);
run.json's ``pooled_key`` (``homog.extract.plan.encoded_key``: variant, sample_id and the
token ids) says which texts the model read. ``matching_run`` finds a run of the same model
source, intervention, dtype and seed whose key is these texts' (an older run, other texts or
settings, a damaged record: None, and the caller runs the pass itself);
``zero_shot_from_run`` reads its answers when they are of this prompt and these label words
(``homog.probe.pooled.pooled_from_run`` its vectors).

``ModelOnDemand`` loads the model only when a pass is needed: a features step that finds
everything in the extraction reads the tokenizer alone.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from homog import models
from homog.extract.plan import EncodedText, encode_texts, encoded_key


@dataclass
class ExtractionRun:
    """An extraction run whose texts are the probe's: its directory, run.json, the
    extraction settings it ran with (config_json's ``extract``) and the texts encoded."""

    run_dir: Path
    record: dict[str, Any]
    settings: dict[str, Any]
    encoded: list[EncodedText]


class ModelOnDemand:
    """A model source's tokenizer, and the model itself loaded at its first use (``loaded``)
    with the extraction's dtype, device, device map and seed (no attention statistics)."""

    def __init__(self, source: str, config: Any, loaded: Any = None):
        self.source, self.config, self._loaded = source, config, loaded
        self._tokenizer: tuple[Any, int] | None = None
        self.load_s = 0.0  # seconds spent loading the tokenizer and the model here

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    @property
    def loaded(self) -> Any:
        if self._loaded is None:
            cfg, t0 = self.config, time.perf_counter()
            self._loaded = models.load_model(
                self.source,
                dtype=cfg.dtype,
                device=cfg.device,
                device_map=cfg.device_map,
                attention=False,
                seed=cfg.seed,
            )
            self.load_s = round(self.load_s + time.perf_counter() - t0, 2)
        return self._loaded

    def _tokens(self) -> tuple[Any, int]:
        if self._loaded is not None:
            return self._loaded.tokenizer, self._loaded.max_context
        if self._tokenizer is None:
            t0 = time.perf_counter()
            self._tokenizer = models.load_tokenizer(self.source)
            self.load_s = round(self.load_s + time.perf_counter() - t0, 2)
        return self._tokenizer

    @property
    def tokenizer(self) -> Any:
        return self._tokens()[0]

    @property
    def max_context(self) -> int:
        return self._tokens()[1]


def matching_run(
    run_dir: Path, model: Any, df: Any, config: Any, source: str, intervention: str
) -> ExtractionRun | None:
    """The extraction run in ``run_dir`` when it read ``df``'s texts (``pooled_key``) from
    the same model ``source`` under ``intervention``, ``config``'s dtype and seed; else None.

    model: anything with ``tokenizer`` and ``max_context`` (a ``LoadedModel``,
    ``ModelOnDemand``); config: the ``ExtractConfig``.
    """
    run_json = Path(run_dir) / "run.json"
    if not run_json.exists():
        return None
    try:
        record = json.loads(run_json.read_text())
        settings = json.loads(record.get("config_json") or "{}").get("extract", {})
    except (OSError, ValueError, AttributeError):
        return None
    expected = {"model_source": source, "intervention": intervention, "dtype": config.dtype}
    if any(record.get(k) != v for k, v in expected.items()) or not record.get("pooled_key"):
        return None
    if settings.get("seed") != config.seed:
        return None
    encoded = encode_texts(model.tokenizer, df, min(config.max_tokens, model.max_context))
    if record["pooled_key"] != encoded_key(encoded):
        return None
    return ExtractionRun(Path(run_dir), record, settings, encoded)


def zero_shot_from_run(run: ExtractionRun, df: Any, probe: Any) -> Any:
    """``homog.probe.lm.zero_shot``'s frame for ``df`` read from the run's
    ``zero_shot.parquet``, or None when the run answered no prompt, another prompt or other
    label words, or its file is missing, damaged or of other texts."""
    prompt = probe.extraction_prompt()
    if prompt is None or run.settings.get("zero_shot") != dataclasses.asdict(prompt):
        return None
    try:
        answers = pd.read_parquet(run.run_dir / "zero_shot.parquet")
    except (OSError, ValueError):
        return None
    keys = ["variant", "sample_id"]
    answers = answers.astype({"variant": str, "sample_id": str})
    frame = df[[*keys, "label"]].astype({"variant": str, "sample_id": str, "label": str})
    try:
        frame = frame.merge(answers, on=keys, how="left", validate="one_to_one")
    except pd.errors.MergeError:  # a text twice: not a file extraction wrote
        return None
    if len(answers) != len(frame) or frame["log_odds"].isna().any():
        return None
    return frame[[*keys, "label", "log_odds", "n_prompt_tokens", "truncated"]]
