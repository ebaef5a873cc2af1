"""The ``extract@<model>`` stage: streamed per-layer summaries of a causal LM over every text.

Three layers, so a distributed engine can reuse the middle one:

1. Pure preparation (no model run): ``encode_texts`` tokenizes and validates the texts,
   ``plan_samples`` fixes which token vectors and texts are kept for MAUVE (seeded, before
   anything runs, so the sample does not depend on batching or on where a run resumed),
   ``make_shards`` / ``make_batches`` order texts by length to limit padding.
2. ``Extractor``: loads nothing itself; wraps a ``LoadedModel`` with forward hooks and maps
   one batch of encoded texts to a ``BatchResult`` (per-text metrics per layer, attention
   statistics per head, pooled vectors, sampled token vectors). Each layer's summaries are
   computed on the device as soon as the layer's output exists, and only those small results
   go to the CPU; hidden states and attention weights are never kept.
3. The drivers: ``prepare_run`` (encode, plan, shard, name the work dirs) and ``finish_run``
   (``merge_shards`` + run.json, renamed into place only when complete) are shared by both
   engines; in between, the local ``run_extract`` computes the missing shards in this process
   (``run_shards``: each shard written atomically to a hidden work dir next to the output, so
   an interrupted run resumes) and ``homog.ray_engine`` computes them on Ray actors. Both call
   ``compute_shard``, so a shard is batched the same way wherever it runs.
   ``extract_runner`` picks the engine (Ray is imported only for the ray engine).

Conventions (recorded in every run's ``config_json``): hidden layer 0 is the embedding output
(as HF returns it, e.g. scaled by sqrt(d) in Gemma), layer l in 1..L-1 the output of block l,
and layer L the final-norm output, which is what HF returns as ``hidden_states[-1]``.
Attention layer l (1..L) is the attention inside block l. Texts are padded on the right so
real tokens keep positions 0..n-1; position ids are always passed explicitly.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import platform
import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from homog import __version__
from homog.attention import HEAD_METRICS
from homog.io import HomogError, atomic_path, config_from_section, content_hash, write_json
from homog.metrics import METRIC_NAMES
from homog.models import ModelFacts, load_model

INTERVENTIONS: tuple[str, ...] = ("none", "zero_pos", "shuffle_pos")
ENGINES: tuple[str, ...] = ("local", "ray")
POOLINGS: tuple[str, ...] = ("mean", "last")
WORK_SUFFIX = ".work"


# ---------------------------------------------------------------------------------------------
# configuration and preparation (pure)


@dataclass(frozen=True)
class ExtractConfig:
    """The extract parameters that shape results (``params.yaml`` ``extract:`` section)."""

    dtype: str = "float32"
    device: str = "auto"
    device_map: str | None = None
    max_tokens: int = 128
    batch_tokens: int = 4096
    attention: bool = True
    center: bool = False
    exclude_special: bool = True
    sample_tokens: int = 100
    pooled_texts: int = 32
    shard_texts: int = 64
    seed: int = 0

    @classmethod
    def from_params(cls, params: dict[str, Any], **overrides: Any) -> ExtractConfig:
        """Build from a full params dict (``extract:`` section plus top-level ``seed``)."""
        # engine and interventions are read by the driver (extract_runner, the CLI)
        config = config_from_section(
            cls, params, "extract", read_elsewhere=("engine", "interventions"),
            seed=int(params.get("seed", 0)), **overrides,
        )  # fmt: skip
        for name in ("max_tokens", "batch_tokens", "shard_texts"):
            if int(getattr(config, name)) < 1:
                raise HomogError(f"extract.{name} must be >= 1, got {getattr(config, name)}")
        return config

    def result_keys(self) -> dict[str, Any]:
        """The fields that change results (they enter the run_id)."""
        skip = {"device", "device_map", "batch_tokens", "shard_texts"}
        return {k: v for k, v in asdict(self).items() if k not in skip}


@dataclass
class EncodedText:
    """One tokenized text. ``index`` is its place in the (variant, sample_id)-sorted table."""

    index: int
    variant: str
    sample_id: str
    input_ids: np.ndarray  # (n,) int64, after truncation
    special: np.ndarray  # (n,) bool: tokenizer-added special tokens
    truncated: bool

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.sample_id}"


def read_texts(texts: Any) -> Any:
    """A texts table (columns variant, sample_id, text) sorted by (variant, sample_id).

    texts: a DataFrame or the path of a Parquet file. Raises HomogError when the file or a
    column is missing or a (variant, sample_id) pair repeats.
    """
    import pandas as pd

    where = "texts table"
    if isinstance(texts, str | Path):
        path = Path(texts)
        if not path.exists():
            raise HomogError(
                f"texts file {path} not found: run `homog synth` first or pass --texts PATH"
            )
        texts, where = pd.read_parquet(path), f"texts file {path}"
    missing = [c for c in ("variant", "sample_id", "text") if c not in texts.columns]
    if missing:
        raise HomogError(f"{where} lacks column(s) {', '.join(missing)}")
    df = texts.astype({"variant": str, "sample_id": str})
    dup = df.duplicated(["variant", "sample_id"])
    if dup.any():
        first = df.loc[dup, ["variant", "sample_id"]].head(5).to_records(index=False).tolist()
        raise HomogError(f"{where} repeats (variant, sample_id) pairs: {first}")
    if len(df) == 0:
        raise HomogError(f"{where} is empty: no texts to extract")
    return df.sort_values(["variant", "sample_id"], kind="stable").reset_index(drop=True)


def encode_texts(tokenizer: Any, df: Any, max_tokens: int) -> list[EncodedText]:
    """Tokenize every text (with the tokenizer's special tokens), truncating to max_tokens.

    Raises HomogError naming every empty or whitespace-only text (variant/sample_id): such a
    text has no tokens to measure and is never dropped silently. Truncated texts are flagged.
    """
    texts = df["text"].tolist()
    empty = [
        f"{v}/{s}"
        for v, s, t in zip(df["variant"], df["sample_id"], texts, strict=True)
        if not isinstance(t, str) or not t.strip()
    ]
    if empty:
        raise HomogError(
            f"{len(empty)} empty or whitespace-only text(s) (variant/sample_id): "
            f"{', '.join(empty[:10])}{' ...' if len(empty) > 10 else ''}; fix or remove them"
        )
    enc = tokenizer(texts, add_special_tokens=True, return_special_tokens_mask=True)
    out = []
    for i, (v, s) in enumerate(zip(df["variant"], df["sample_id"], strict=True)):
        ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
        special = np.asarray(enc["special_tokens_mask"][i], dtype=bool)
        out.append(
            EncodedText(i, v, s, ids[:max_tokens], special[:max_tokens], len(ids) > max_tokens)
        )
    return out


def _rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator seeded by the run seed and stable string keys (no Python hash salt)."""
    return np.random.default_rng([seed, *(zlib.crc32(k.encode()) for k in keys)])


def position_ids(intervention: str, text: EncodedText, n_pad: int, seed: int) -> np.ndarray:
    """Position ids (n_pad,) of one right-padded text under an intervention.

    'none': 0..n_pad-1; 'zero_pos': all 0 (positions carry nothing, the causal mask stays);
    'shuffle_pos': a permutation of 0..n-1 over the text's n real tokens, seeded by
    (seed, variant, sample_id) so it does not depend on the batch; padding keeps n..n_pad-1.
    """
    if intervention == "none":
        return np.arange(n_pad)
    if intervention == "zero_pos":
        return np.zeros(n_pad, dtype=np.int64)
    if intervention == "shuffle_pos":
        n = len(text.input_ids)
        perm = _rng(seed, "shuffle_pos", text.variant, text.sample_id).permutation(n)
        return np.concatenate([perm, np.arange(n, n_pad)])
    raise HomogError(
        f"unknown intervention {intervention!r}: use one of {', '.join(INTERVENTIONS)}"
    )


@dataclass
class SamplePlan:
    """Which token vectors (per variant) and pooled vectors are written for MAUVE.

    ``tokens[index]`` is the sorted array of token positions kept for text ``index`` (the
    same positions at every layer); ``pooled`` is the set of text indices whose pooled-mean
    vectors are written. Positions are among the metric tokens (special tokens excluded when
    ``exclude_special``).
    """

    tokens: dict[int, np.ndarray] = field(default_factory=dict)
    pooled: set[int] = field(default_factory=set)


def metric_positions(text: EncodedText, exclude_special: bool) -> np.ndarray:
    keep = ~text.special if exclude_special else np.ones(len(text.input_ids), dtype=bool)
    return np.flatnonzero(keep)


def plan_samples(
    encoded: Sequence[EncodedText],
    sample_tokens: int,
    pooled_texts: int,
    seed: int,
    exclude_special: bool,
) -> SamplePlan:
    """Choose, per variant and with a fixed seed, up to ``sample_tokens`` token positions
    (uniformly among all metric tokens of the variant) and up to ``pooled_texts`` texts."""
    plan = SamplePlan()
    by_variant: dict[str, list[EncodedText]] = {}
    for t in encoded:
        by_variant.setdefault(t.variant, []).append(t)
    for variant, texts in sorted(by_variant.items()):
        pairs = np.concatenate(
            [
                np.stack([np.full(len(p), t.index), p], axis=1)
                for t in texts
                if len(p := metric_positions(t, exclude_special))
            ]
            or [np.zeros((0, 2), dtype=np.int64)]
        )
        rng = _rng(seed, "tokens", variant)
        chosen = pairs[np.sort(rng.choice(len(pairs), min(sample_tokens, len(pairs)), False))]
        for idx in np.unique(chosen[:, 0]):
            plan.tokens[int(idx)] = chosen[chosen[:, 0] == idx, 1]
        rng = _rng(seed, "pooled", variant)
        picked = rng.choice(len(texts), min(pooled_texts, len(texts)), replace=False)
        plan.pooled.update(texts[i].index for i in picked)
    return plan


def make_shards(encoded: Sequence[EncodedText], shard_texts: int) -> list[list[EncodedText]]:
    """Texts ordered by (length, index) and cut into shards of ``shard_texts``.

    The order depends only on the texts, so shard k is the same in every run of the same
    config: a resumed run recomputes exactly the shards that were missing.
    """
    order = sorted(encoded, key=lambda t: (len(t.input_ids), t.index))
    return [order[i : i + shard_texts] for i in range(0, len(order), shard_texts)]


def make_batches(texts: Sequence[EncodedText], batch_tokens: int) -> list[list[EncodedText]]:
    """Greedy batches of length-sorted texts with at most ``batch_tokens`` padded tokens
    (a single text longer than that forms its own batch)."""
    batches: list[list[EncodedText]] = []
    current: list[EncodedText] = []
    longest = 0
    for t in sorted(texts, key=lambda t: (len(t.input_ids), t.index)):
        n = len(t.input_ids)
        if current and (len(current) + 1) * max(longest, n) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(t)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


# ---------------------------------------------------------------------------------------------
# the per-batch extractor


@dataclass
class BatchResult:
    """Summaries of a batch (or, concatenated, of a shard); arrays are on the CPU.

    indices (B,); metrics (B, L+1, len(METRIC_NAMES)) float64; heads (B, L, H, 3) float32
    with HEAD_METRICS (None without attention); profile (B, L, H, N_BINS) float32 (or None);
    pooled_mean, pooled_last (B, L+1, d) float16; tokens (L+1, K, d) float16 with
    token_index / token_pos (K,) naming the text and position of each sampled token;
    n_tokens (B,) real tokens per text.
    """

    indices: np.ndarray
    n_tokens: np.ndarray
    metrics: np.ndarray
    heads: np.ndarray | None
    profile: np.ndarray | None
    pooled_mean: np.ndarray
    pooled_last: np.ndarray
    tokens: np.ndarray
    token_index: np.ndarray
    token_pos: np.ndarray

    @classmethod
    def concat(cls, parts: Sequence[BatchResult]) -> BatchResult:
        def cat(name: str, axis: int = 0) -> Any:
            values = [getattr(p, name) for p in parts]
            return None if values[0] is None else np.concatenate(values, axis=axis)

        return cls(
            **{
                name: cat(name, axis=1 if name == "tokens" else 0)
                for name in cls.__dataclass_fields__
            }
        )

    def save(self, path: Path) -> None:
        arrays = {k: v for k, v in asdict(self).items() if v is not None}
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: Path) -> BatchResult:
        with np.load(path) as data:
            fields = cls.__dataclass_fields__
            return cls(**{k: (data[k] if k in data.files else None) for k in fields})


class Extractor:
    """Maps a batch of encoded texts to a ``BatchResult`` with one forward pass.

    Forward hooks on the embedding, the decoder blocks, the final norm and (with attention)
    each block's self-attention compute that layer's summaries on the device while the
    forward pass runs; nothing of size (tokens x d) outlives its layer. The LM head is never
    run (the decoder is called, not the causal-LM wrapper). Reusable by any engine: it holds
    the model and the config, not the texts.
    """

    def __init__(self, loaded: Any, config: ExtractConfig):
        self.loaded = loaded
        self.config = config
        self.metric_names = METRIC_NAMES
        self._state: dict[str, Any] | None = None
        self._handles: list[Any] = []
        L = loaded.n_layers
        self._handles.append(loaded.embed.register_forward_hook(self._hidden_hook(0)))
        for i, block in enumerate(loaded.layers[:-1]):
            self._handles.append(block.register_forward_hook(self._hidden_hook(i + 1)))
        # HF's hidden_states[-1] is the final-norm output, not the last block's output.
        self._handles.append(loaded.norm.register_forward_hook(self._hidden_hook(L)))
        if config.attention:
            for i, attn in enumerate(loaded.attn_modules):
                self._handles.append(attn.register_forward_hook(self._attention_hook(i)))

    def close(self) -> None:
        """Remove the hooks (the model behaves as before)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()

    # -- hooks ------------------------------------------------------------------------------

    def _hidden_hook(self, layer: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if self._state is not None:
                hidden = output[0] if isinstance(output, tuple) else output
                self._summarise_hidden(layer, hidden)

        return hook

    def _attention_hook(self, index: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if self._state is None:
                return
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:
                raise HomogError(
                    "attention statistics need attention weights but the model returned none: "
                    "load it with attention=True (eager attention)"
                )
            self._summarise_attention(index, weights)

        return hook

    def _summarise_hidden(self, layer: int, hidden: Any) -> None:
        from homog.metrics import MetricInputError, NonFiniteError, layer_metrics, pool

        st = self._state
        mask = st["mask"].to(hidden.device)
        try:
            values = layer_metrics(hidden, mask, center=self.config.center)
        except NonFiniteError as exc:
            names = sorted({st["names"][i[0]] for i in exc.indices})
            raise HomogError(
                f"NaN/inf in hidden states at layer {layer} for text(s) {', '.join(names[:10])} "
                f"(dtype {self.loaded.dtype}; float16/bfloat16 overflow? use --dtype float32)"
            ) from exc
        except MetricInputError as exc:
            raise HomogError(f"layer {layer}: {exc} (texts {', '.join(st['names'][:10])})") from exc
        dev, vec = st["device"], st["vec_dtype"]
        st["metrics"][layer] = torch.stack([values[m] for m in self.metric_names], -1).to(dev)
        # float32 is plenty for vectors stored as float16, and layer_metrics has just checked
        # these tokens for NaN/inf.
        for how in POOLINGS:
            pooled = pool(hidden, mask, how, dtype=torch.float32, check_finite=False)
            st[f"pooled_{how}"][layer] = pooled.to(dev, vec)
        b, p = st["sample_b"], st["sample_p"]
        st["tokens"][layer] = hidden[b.to(hidden.device), p.to(hidden.device)].to(dev, vec)

    def _summarise_attention(self, index: int, weights: Any) -> None:
        from homog.attention import attention_stats

        st = self._state
        stats = attention_stats(weights, st["lengths"])
        dev = st["device"]
        st["heads"][index] = torch.stack([stats[m] for m in HEAD_METRICS], -1).to(dev)
        st["profile"][index] = stats["profile"].to(dev)

    # -- one batch --------------------------------------------------------------------------

    def run_batch(
        self, texts: Sequence[EncodedText], intervention: str, plan: SamplePlan
    ) -> BatchResult:
        """One forward pass over ``texts`` (right-padded) under ``intervention``.

        Raises HomogError naming the text when hidden states hold NaN/inf.
        """
        lm = self.loaded
        dev = lm.input_device
        n_pad = max(len(t.input_ids) for t in texts)
        b = len(texts)
        pad_id = lm.tokenizer.pad_token_id or 0
        ids = np.full((b, n_pad), pad_id, dtype=np.int64)
        attn = np.zeros((b, n_pad), dtype=np.int64)
        special = np.zeros((b, n_pad), dtype=bool)
        pos = np.zeros((b, n_pad), dtype=np.int64)
        sample_b, sample_p = [], []
        for row, t in enumerate(texts):
            n = len(t.input_ids)
            ids[row, :n], attn[row, :n], special[row, :n] = t.input_ids, 1, t.special
            pos[row] = position_ids(intervention, t, n_pad, self.config.seed)
            chosen = plan.tokens.get(t.index, np.zeros(0, dtype=np.int64))
            sample_b += [row] * len(chosen)
            sample_p += chosen.tolist()
        attn_t = torch.from_numpy(attn)
        from homog.metrics import token_mask

        mask = token_mask(attn_t, torch.from_numpy(special), self.config.exclude_special)
        L = lm.n_layers
        self._state = {
            "names": [t.name for t in texts],
            "mask": mask.to(dev),
            "lengths": attn_t.sum(1).to(dev),
            "sample_b": torch.tensor(sample_b, dtype=torch.long),
            "sample_p": torch.tensor(sample_p, dtype=torch.long),
            "device": dev,
            "vec_dtype": torch.float16,
            "metrics": [None] * (L + 1),
            "pooled_mean": [None] * (L + 1),
            "pooled_last": [None] * (L + 1),
            "tokens": [None] * (L + 1),
            "heads": [None] * L,
            "profile": [None] * L,
        }
        try:
            with torch.inference_mode():
                lm.decoder(
                    input_ids=torch.from_numpy(ids).to(dev),
                    attention_mask=attn_t.to(dev),
                    position_ids=torch.from_numpy(pos).to(dev),
                    use_cache=False,
                )
            st = self._state
            missing = [i for i, v in enumerate(st["metrics"]) if v is None]
            if missing:
                raise HomogError(f"no hidden states were captured for layer(s) {missing}")

            def gather(key: str, dim: int) -> np.ndarray:
                return torch.stack(st[key], dim).cpu().numpy()

            result = BatchResult(
                indices=np.array([t.index for t in texts]),
                n_tokens=attn.sum(1),
                metrics=gather("metrics", 1),
                heads=gather("heads", 1) if self.config.attention else None,
                profile=gather("profile", 1) if self.config.attention else None,
                pooled_mean=gather("pooled_mean", 1),
                pooled_last=gather("pooled_last", 1),
                tokens=gather("tokens", 0),
                token_index=np.array([texts[r].index for r in sample_b], dtype=np.int64),
                token_pos=np.array(sample_p, dtype=np.int64),
            )
        finally:
            self._state = None
        return result


# ---------------------------------------------------------------------------------------------
# local driver: shards, resume, merge


@dataclass
class RunSpec:
    """Everything that identifies one (model, intervention) run."""

    model: str
    source: str
    intervention: str
    config: ExtractConfig
    texts_hash: str

    @property
    def run_id(self) -> str:
        return content_hash(
            {
                "source": self.source,
                "intervention": self.intervention,
                "extract": self.config.result_keys(),
                "texts": self.texts_hash,
            }
        )

    @property
    def work_key(self) -> str:
        # shards depend on how texts are cut, which does not change results but does
        # change which texts a shard file holds
        c = self.config
        return f"{self.run_id}-{content_hash([c.shard_texts, c.batch_tokens], 6)}"


def texts_hash(df: Any) -> str:
    return content_hash(df[["variant", "sample_id", "text"]].to_numpy().tolist(), 16)


def work_dir_for(out_dir: Path, spec: RunSpec) -> Path:
    """Hidden work dir beside the model's output dir (outside it, so DVC's removal of the
    stage output before a re-run does not delete the shards a resume needs)."""
    return out_dir.parent / f".{out_dir.name}{WORK_SUFFIX}" / f"{spec.intervention}-{spec.work_key}"


def shard_path(work: Path, k: int) -> Path:
    """The file of shard k in a work dir (one name for every engine, so resume crosses them)."""
    return work / f"shard_{k:05d}.npz"


def _n_tokens(texts: Sequence[EncodedText]) -> int:
    return int(sum(len(t.input_ids) for t in texts))


def compute_shard(
    extractor: Extractor,
    shard: Sequence[EncodedText],
    intervention: str,
    plan: SamplePlan,
    batch_tokens: int,
    on_batch: Callable[[int, int], None] | None = None,
) -> BatchResult:
    """One shard -> its ``BatchResult``: the shard's texts in ``make_batches`` batches of at
    most ``batch_tokens`` padded tokens, one ``extractor.run_batch`` each, concatenated.

    Every engine computes shards with this function, so a shard holds the same batches (and
    the same values) wherever it runs. ``on_batch(texts, tokens)`` is called after each batch.
    Raises what ``Extractor.run_batch`` raises (HomogError on NaN/inf).
    """
    parts = []
    for batch in make_batches(shard, batch_tokens):
        parts.append(extractor.run_batch(batch, intervention, plan))
        if on_batch:
            on_batch(len(batch), _n_tokens(batch))
    return BatchResult.concat(parts)


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
    ``on_batch(texts, tokens)`` is called after each batch (progress reporting).
    """
    work.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, shard in enumerate(shards):
        path = shard_path(work, k)
        paths.append(path)
        if path.exists():
            if on_batch:
                on_batch(len(shard), _n_tokens(shard))
            continue
        result = compute_shard(
            extractor, shard, spec.intervention, plan, spec.config.batch_tokens, on_batch
        )
        with atomic_path(path) as tmp:
            result.save(tmp)
    return paths


def _std(x: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    return x.std(axis=axis, ddof=1) if n > 1 else np.full(x.mean(axis=axis).shape, np.nan)


def merge_shards(
    paths: Sequence[Path],
    encoded: Sequence[EncodedText],
    spec: RunSpec,
    plan: SamplePlan,
    target: Path,
    record: dict[str, Any],
) -> dict[str, Any]:
    """Turn shard files into the final output directory (atomically renamed into place).

    Writes layer_metrics, attention_profile, attention_heads and dataset_spectra Parquet
    files, vectors.npz and run.json (``record`` plus sizes). Everything is ordered by the
    (variant, sample_id) order of ``encoded``, so the output does not depend on how the
    texts were sharded, batched or resumed. Returns the run record.
    """
    import pandas as pd

    from homog.metrics import dataset_spectra

    res = BatchResult.concat([BatchResult.load(p) for p in paths])
    order = np.argsort(res.indices, kind="stable")
    n_texts = len(encoded)
    if not np.array_equal(res.indices[order], np.arange(n_texts)):
        raise HomogError(f"shards in {paths[0].parent} do not cover the {n_texts} texts")
    metrics = res.metrics[order]  # (N, L+1, M)
    variants = np.array([t.variant for t in encoded])
    sample_ids = np.array([t.sample_id for t in encoded])
    n_layers = metrics.shape[1] - 1
    run_id = spec.run_id
    names = list(METRIC_NAMES)

    frames = [_long_frame(metrics, names, variants, sample_ids, first_layer=0)]
    heads = profile = None
    if res.heads is not None:
        heads = res.heads[order].astype(np.float64)  # (N, L, H, 3)
        profile = res.profile[order].astype(np.float64)  # (N, L, H, BINS)
        frames.append(_long_frame(heads.mean(2), list(HEAD_METRICS), variants, sample_ids, 1))
    layer_df = pd.concat(frames, ignore_index=True)
    layer_df.insert(0, "run_id", run_id)

    profile_rows, head_rows, spectra_rows = [], [], []
    vectors: dict[str, np.ndarray] = {}
    token_index = res.token_index
    for variant in sorted(set(variants)):
        sel = np.flatnonzero(variants == variant)
        if heads is not None:
            mass = profile[sel].mean(0)  # (L, H, BINS)
            li, hi, bi = np.meshgrid(*(np.arange(s) for s in mass.shape), indexing="ij")
            profile_rows.append(
                pd.DataFrame(
                    {
                        "variant": variant,
                        "layer": li.ravel() + 1,
                        "head": hi.ravel(),
                        "bin": bi.ravel(),
                        "mass": mass.ravel(),
                    }
                )
            )
            h = heads[sel]  # (n, L, H, 3)
            mean, std = h.mean(0), _std(h, 0)
            li, hi, mi = np.meshgrid(*(np.arange(s) for s in mean.shape), indexing="ij")
            head_rows.append(
                pd.DataFrame(
                    {
                        "variant": variant,
                        "layer": li.ravel() + 1,
                        "head": hi.ravel(),
                        "metric": np.array(HEAD_METRICS)[mi.ravel()],
                        "mean": mean.ravel(),
                        "std": std.ravel(),
                        "n": len(sel),
                    }
                )
            )
        for pooling, pooled in (("mean", res.pooled_mean), ("last", res.pooled_last)):
            vecs = pooled[order][sel]  # (n, L+1, d) float16
            if len(sel) >= 2:
                spectra = dataset_spectra(torch.from_numpy(vecs.transpose(1, 0, 2).copy()))
                values = {k: v.numpy() for k, v in spectra.items()}
            else:  # one text: no dataset spectrum; written as NaN and noted in run.json
                values = {
                    k: np.full(n_layers + 1, np.nan)
                    for k in ("rankme", "alpha_req", "alpha_req_r2")
                }
                record.setdefault("warnings", []).append(
                    f"variant {variant}: 1 text, dataset spectra are NaN"
                )
            for metric, value in values.items():
                spectra_rows.append(
                    pd.DataFrame(
                        {
                            "variant": variant,
                            "layer": np.arange(n_layers + 1),
                            "pooling": pooling,
                            "metric": metric,
                            "value": value,
                        }
                    )
                )
        keep = np.array([i for i in sel if i in plan.pooled], dtype=np.int64)
        vectors[f"pooled_mean__{variant}"] = res.pooled_mean[order][keep].transpose(1, 0, 2)
        vectors[f"sample_ids__{variant}"] = sample_ids[keep].astype(str)
        # sampled tokens of this variant, ordered by (text index, position)
        tsel = np.flatnonzero(variants[token_index] == variant) if len(token_index) else []
        tsel = np.asarray(tsel, dtype=np.int64)
        tord = tsel[np.lexsort((res.token_pos[tsel], token_index[tsel]))]
        vectors[f"tokens__{variant}"] = res.tokens[:, tord]
        vectors[f"token_sample_ids__{variant}"] = sample_ids[token_index[tord]].astype(str)
        vectors[f"token_positions__{variant}"] = res.token_pos[tord]

    def with_run(frames: list[Any]) -> Any:
        df = pd.concat(frames, ignore_index=True)
        df.insert(0, "run_id", run_id)
        return df

    record = {
        **record,
        "run_id": run_id,
        "n_texts": int(n_texts),
        "n_tokens": int(res.n_tokens.sum()),
        "n_sampled_tokens": int(len(token_index)),
    }
    with atomic_path(target, directory=True) as tmp:
        _write_parquet(layer_df, tmp / "layer_metrics.parquet")
        if heads is not None:
            _write_parquet(with_run(profile_rows), tmp / "attention_profile.parquet")
            _write_parquet(with_run(head_rows), tmp / "attention_heads.parquet")
        _write_parquet(with_run(spectra_rows), tmp / "dataset_spectra.parquet")
        with open(tmp / "vectors.npz", "wb") as fh:
            np.savez(fh, **vectors)
        record["output_bytes"] = int(sum(p.stat().st_size for p in tmp.iterdir()))
        write_json(tmp / "run.json", record)
    return record


def _long_frame(
    values: np.ndarray,
    names: list[str],
    variants: np.ndarray,
    sample_ids: np.ndarray,
    first_layer: int,
) -> Any:
    """(N, layers, M) per-text values -> long rows (variant, sample_id, layer, metric, value)."""
    import pandas as pd

    n, n_layers, m = values.shape
    ti, li, mi = np.meshgrid(np.arange(n), np.arange(n_layers), np.arange(m), indexing="ij")
    return pd.DataFrame(
        {
            "variant": variants[ti.ravel()],
            "sample_id": sample_ids[ti.ravel()],
            "layer": (li.ravel() + first_layer).astype(np.int32),
            "metric": np.array(names)[mi.ravel()],
            "value": values.ravel(),
        }
    )


def _write_parquet(df: Any, path: Path) -> None:
    """Parquet with dictionary-encoded strings and zstd (small files, fast to load)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for col in ("layer", "head", "bin", "n"):
        if col in df.columns:
            df[col] = df[col].astype(np.int32)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, compression="zstd")


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
        "extract": asdict(spec.config),
        "hidden_layers": "0 = embedding output; l = output of block l; L = final-norm output "
        "(HF hidden_states[-1])",
        "attention_layers": "l = attention inside block l (1..L); A over all real tokens "
        "incl. special; padding excluded",
        "padding": "right",
        "metric_tokens": "special tokens excluded" if spec.config.exclude_special else "all",
        "std": "sample std (ddof=1) over texts",
        "vectors": "float16; tokens__ sampled uniformly per variant (seeded), "
        "pooled_mean__ for up to pooled_texts texts per variant",
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
        "config_json": json.dumps(conventions, sort_keys=True, default=str),
        "homog_version": __version__,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "n_truncated": n_truncated,
        "truncated": truncated[:100],
    }


def extract_inputs(texts: Any, interventions: Iterable[str]) -> tuple[Any, list[str]]:
    """(sorted texts table, interventions) checked before any model or cluster is started.

    texts: a DataFrame (columns variant, sample_id, text) or a Parquet path (see
    ``read_texts``). Raises HomogError for an unknown intervention or a bad texts table.
    """
    interventions = list(interventions)
    for iv in interventions:
        if iv not in INTERVENTIONS:
            raise HomogError(f"unknown intervention {iv!r}: use one of {', '.join(INTERVENTIONS)}")
    return read_texts(texts), interventions


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

    @property
    def truncated(self) -> list[str]:
        return [t.name for t in self.encoded if t.truncated]

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
) -> PreparedRun:
    """The engine-independent first step: encode, plan the sample, shard, name work dirs.

    df: the texts from ``extract_inputs``; tokenizer / max_context: from the loaded model or
    ``homog.models.load_tokenizer``. Logs how many texts were truncated and, per
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
    plan = plan_samples(
        encoded, config.sample_tokens, config.pooled_texts, config.seed, config.exclude_special
    )
    thash = texts_hash(df)
    specs = {iv: RunSpec(model, source, iv, config, thash) for iv in interventions}
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
    )
    n_shards = len(prepared.shards)
    for iv in specs:
        done = sum(path.exists() for path in prepared.shard_paths(iv))
        if done:
            log(f"{model}/{iv}: resuming, {done} of {n_shards} shards already done")
    return prepared


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
) -> list[dict[str, Any]]:
    """Run the extract stage for one model over a texts table, one run per intervention.

    texts: a DataFrame (columns variant, sample_id, text) or a path to a Parquet file.
    Writes ``out_dir/<intervention>/`` for each intervention (each renamed into place only
    when complete) and returns the run records. Resumes from shards left by an interrupted
    run of the same config. Raises HomogError on bad input (see ``encode_texts``,
    ``homog.models.load_model``) and on NaN/inf in hidden states.
    """
    df, interventions = extract_inputs(texts, interventions)
    t0 = time.perf_counter()
    if loaded is None:
        loaded = load_model(
            source,
            dtype=config.dtype,
            device=config.device,
            device_map=config.device_map,
            attention=config.attention,
            seed=config.seed,
        )
    load_s = time.perf_counter() - t0
    prepared = prepare_run(
        model, source, df, config, interventions, out_dir, loaded.tokenizer, loaded.max_context, log
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


def extract_runner(params: dict[str, Any], engine: str | None = None) -> Callable[..., Any]:
    """The function that runs the extract stage for ``engine`` (default ``extract.engine``,
    else 'local').

    Both returned functions take ``(model, source, texts, config, interventions, out_dir, *,
    show_progress, log)`` like ``run_extract`` and return the run records: 'local' is
    ``run_extract`` (nothing of Ray is imported), 'ray' is ``homog.ray_engine.run_extract_ray``
    with the ``ray:`` params. Raises HomogError for an unknown engine or bad ``ray:`` params.
    """
    name = engine or (params.get("extract") or {}).get("engine") or "local"
    if name == "local":
        return run_extract
    if name == "ray":
        # imported here: homog.ray_engine builds on this module (and Ray is an optional extra)
        from homog.ray_engine import RayConfig, run_extract_ray

        return functools.partial(run_extract_ray, ray_config=RayConfig.from_params(params))
    raise HomogError(f"unknown extract engine {name!r}: use one of {', '.join(ENGINES)}")


def _run_with_progress(
    extractor: Extractor, prepared: PreparedRun, spec: RunSpec, show: bool
) -> list[Path]:
    from rich.progress import TextColumn

    from homog.progress import progress

    shards, plan = prepared.shards, prepared.plan
    work = prepared.works[spec.intervention]
    label = f"{prepared.model}/{spec.intervention}"
    total = sum(len(s) for s in shards)
    if not show:
        return run_shards(extractor, shards, spec, plan, work)
    bar = progress(TextColumn("{task.fields[rate]}"))
    start = time.perf_counter()
    counts = {"texts": 0, "tokens": 0}
    with bar:
        task = bar.add_task(label, total=total, rate="")

        def on_batch(n_texts: int, n_tokens: int) -> None:
            counts["texts"] += n_texts
            counts["tokens"] += n_tokens
            dt = max(time.perf_counter() - start, 1e-9)
            rate = f"{counts['texts'] / dt:.1f} texts/s {counts['tokens'] / dt:.0f} tok/s"
            bar.update(task, advance=n_texts, rate=rate)

        return run_shards(extractor, shards, spec, plan, work, on_batch)
