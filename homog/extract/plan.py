"""Planning an extract run before any model runs: texts, encoding, the sample, shards, run ids.

Everything here is pure (numpy, no torch): ``read_texts`` / ``extract_inputs`` check the texts
table and the interventions, ``encode_texts`` tokenizes, ``plan_samples`` fixes which token
vectors and texts are kept for MAUVE (seeded, before anything runs, so the sample does not
depend on batching or on where a run resumed), ``make_shards`` / ``make_batches`` order texts
by length to limit padding, ``position_ids`` applies an intervention, and ``RunSpec`` /
``work_dir_for`` / ``shard_path`` name a run and where its resumable shards live.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from homog.config import ExtractConfig
from homog.errors import HomogError
from homog.interventions import POSITION_IDS, check_names, parse
from homog.io import content_hash

WORK_SUFFIX = ".work"


@dataclass
class EncodedText:
    """One tokenized text. ``index`` is its place in the (variant, sample_id)-sorted table."""

    index: int
    variant: str
    sample_id: str
    input_ids: np.ndarray  # (n,) int64, after truncation
    special: np.ndarray  # (n,) bool: tokenizer-added special tokens
    truncated: bool
    # the kept sentences (homog.extract.sentences.SENTENCE_FIELDS rows); None: no spans
    sentences: np.ndarray | None = None

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
        where = f"texts file {path}"
        if path.is_dir():
            raise HomogError(f"{where} is a directory; pass the Parquet file written by synth")
        try:
            texts = pd.read_parquet(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a bad file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise HomogError(
                f"{where} is not a readable Parquet file ({first}); pass the texts.parquet "
                "written by `homog synth`"
            ) from exc
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


def extract_inputs(texts: Any, interventions: Iterable[str]) -> tuple[Any, list[str]]:
    """(sorted texts table, interventions in their canonical names) checked before any model
    or cluster is started.

    texts: a DataFrame (columns variant, sample_id, text) or a Parquet path (see
    ``read_texts``). Raises HomogError for an unknown or malformed intervention
    (``homog.interventions.parse``) or a bad texts table.
    """
    interventions = list(check_names(interventions, "intervention"))
    return read_texts(texts), interventions


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


def seeded_rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator seeded by the run seed and stable string keys (no Python hash salt)."""
    return np.random.default_rng([seed, *(zlib.crc32(k.encode()) for k in keys)])


def position_ids(intervention: str, text: EncodedText, n_pad: int, seed: int) -> np.ndarray:
    """Position ids (n_pad,) of one right-padded text under an intervention.

    'none' and the interventions that act elsewhere (homog.interventions: attention logits,
    block outputs): 0..n_pad-1; 'zero_pos': all 0 (positions carry nothing, the causal mask
    stays); 'shuffle_pos': a permutation of 0..n-1 over the text's n real tokens, seeded by
    (seed, variant, sample_id) so it does not depend on the batch; padding keeps n..n_pad-1.
    """
    if intervention == "none" or parse(intervention).target != POSITION_IDS:
        return np.arange(n_pad)
    if intervention == "zero_pos":
        return np.zeros(n_pad, dtype=np.int64)
    if intervention == "shuffle_pos":
        n = len(text.input_ids)
        perm = seeded_rng(seed, "shuffle_pos", text.variant, text.sample_id).permutation(n)
        return np.concatenate([perm, np.arange(n, n_pad)])
    raise HomogError(f"intervention {intervention!r} has no position ids here")


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
    """Positions of the tokens that enter the hidden-state metrics."""
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
        rng = seeded_rng(seed, "tokens", variant)
        chosen = pairs[np.sort(rng.choice(len(pairs), min(sample_tokens, len(pairs)), False))]
        for idx in np.unique(chosen[:, 0]):
            plan.tokens[int(idx)] = chosen[chosen[:, 0] == idx, 1]
        rng = seeded_rng(seed, "pooled", variant)
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


# a batch's padded tokens at most this many times its real tokens (``make_batches``)
PAD_SLACK = 1.2


def make_batches(texts: Sequence[EncodedText], batch_tokens: int) -> list[list[EncodedText]]:
    """Greedy batches of length-sorted texts with at most ``batch_tokens`` padded tokens
    (a single text longer than that forms its own batch), and at most ``PAD_SLACK`` times as
    many padded tokens as real ones: every padded position costs a forward's work, and a few
    long texts in a batch of short ones (a draw of reviews) padded it by half."""
    batches: list[list[EncodedText]] = []
    current: list[EncodedText] = []
    longest = real = 0
    for t in sorted(texts, key=lambda t: (len(t.input_ids), t.index)):
        n = len(t.input_ids)
        padded = (len(current) + 1) * max(longest, n)
        if current and (padded > batch_tokens or padded > PAD_SLACK * (real + n)):
            batches.append(current)
            current, longest, real = [], 0, 0
        current.append(t)
        longest, real = max(longest, n), real + n
    if current:
        batches.append(current)
    return batches


def n_tokens(texts: Sequence[EncodedText]) -> int:
    """Real tokens of a list of texts (what progress bars count)."""
    return int(sum(len(t.input_ids) for t in texts))


# ---------------------------------------------------------------------------------------------
# run identity and the resumable work dir


@dataclass
class RunSpec:
    """Everything that identifies one (model, intervention) run."""

    model: str
    source: str
    intervention: str
    config: ExtractConfig
    texts_hash: str
    # the texts hash of the whole texts table when this run holds only some of its variants
    # (extract.intervention_variants): it pairs with the unchanged run of all of them
    pair_texts_hash: str | None = None

    @property
    def run_id(self) -> str:
        keys = {
            "source": self.source,
            "intervention": self.intervention,
            "extract": self.config.result_keys(),
            "texts": self.texts_hash,
        }
        edit = self.config.edit_keys(self.intervention)
        if edit:  # a graded intervention's layer settings (the other runs' ids stay as they were)
            keys["edit"] = edit
        return content_hash(keys)

    @property
    def pair_key(self) -> str:
        """The run id's inputs minus the intervention: runs of one model with the same
        pair_key differ only by their intervention, so ``stats`` may pair them."""
        return content_hash(
            {
                "source": self.source,
                "extract": self.config.result_keys(),
                "texts": self.pair_texts_hash or self.texts_hash,
            }
        )

    @property
    def work_key(self) -> str:
        # shards depend on how texts are cut, which does not change results but does
        # change which texts a shard file holds
        c = self.config
        return f"{self.run_id}-{content_hash([c.shard_texts, c.batch_tokens], 6)}"


def encoded_key(encoded: Sequence[EncodedText]) -> str:
    """A hash of what the model reads of each text, in order: (variant, sample_id, token ids
    after truncation). run.json's ``pooled_key``: the probe reuses the run's pooled vectors
    when its own texts give the same key (homog.probe.pooled.from_extraction)."""
    return content_hash([[t.variant, t.sample_id, t.input_ids.tolist()] for t in encoded], 16)


def texts_hash(df: Any) -> str:
    """A hash of the (variant, sample_id, text) rows (it enters the run id)."""
    return content_hash(df[["variant", "sample_id", "text"]].to_numpy().tolist(), 16)


def work_dir_for(out_dir: Path, spec: RunSpec) -> Path:
    """Hidden work dir beside the model's output dir (outside it, so DVC's removal of the
    stage output before a re-run does not delete the shards a resume needs)."""
    return out_dir.parent / f".{out_dir.name}{WORK_SUFFIX}" / f"{spec.intervention}-{spec.work_key}"


def shard_path(work: Path, k: int) -> Path:
    """The file of shard k in a work dir (one name for every engine, so resume crosses them)."""
    return work / f"shard_{k:05d}.npz"


def pad_batch(
    texts: Sequence[EncodedText], pad_id: int, intervention: str, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(input ids, attention mask, special mask, position ids), each (B, n_pad), of encoded
    texts padded on the right, the positions those of ``intervention`` (as extraction's)."""
    n_pad = max(len(t.input_ids) for t in texts)
    b = len(texts)
    ids = np.full((b, n_pad), pad_id, dtype=np.int64)
    attn = np.zeros((b, n_pad), dtype=np.int64)
    special = np.zeros((b, n_pad), dtype=bool)
    pos = np.zeros((b, n_pad), dtype=np.int64)
    for row, t in enumerate(texts):
        n = len(t.input_ids)
        ids[row, :n], attn[row, :n], special[row, :n] = t.input_ids, 1, t.special
        pos[row] = position_ids(intervention, t, n_pad, seed)
    return ids, attn, special, pos
