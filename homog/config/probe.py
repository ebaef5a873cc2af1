"""The ``probe:`` section of params.yaml: does homogenization cost the model anything?

Its own module, re-exported by ``homog.config`` (``ProbeConfig``), like the posenc and
position sections. The stage (``homog probe --model KEY``, ``homog.probe``) reads the texts
with ``extract.max_tokens``, ``extract.exclude_special``, ``extract.interventions`` and
``extract.intervention_variants``, and takes its bootstrap and test settings from ``stats:``;
this section holds only what the probe and the zero-shot prompt add (docs/probe.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from homog.validate import check as _check

# The zero-shot prompt: the review, then the question. A prompt that starts with {text} is
# answered by the extraction's own forward pass continued over what follows {text} (a causal
# model's states of the text's tokens do not depend on what comes after them); a prompt with
# something before {text} needs a pass of its own. The label words are scored by the first
# token of each.
DEFAULT_PROMPT = "{text}\nSentiment of this review (positive or negative):"
TEXT = "{text}"


@dataclass(frozen=True)
class ZeroShotPrompt:
    """A text-first zero-shot prompt (it starts with ``{text}``) and its label words: what the
    extraction continues each text's pass with (``homog.extract.zero_shot``). ``suffix``
    is what follows the text."""

    prompt: str
    positive_word: str
    negative_word: str

    def __post_init__(self) -> None:
        _check(
            self.prompt.startswith(TEXT) and self.prompt.count(TEXT) == 1 and self.prompt != TEXT,
            f"a prompt continued from the text's pass starts with {TEXT} and has text after it, "
            f"got {self.prompt!r}",
        )

    @property
    def suffix(self) -> str:
        return self.prompt[len(TEXT) :]

    @classmethod
    def of(cls, value: ZeroShotPrompt | Mapping[str, Any] | None) -> ZeroShotPrompt | None:
        """``value`` as a ZeroShotPrompt (a mapping: its fields, as ``asdict`` gives them)."""
        return cls(**value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class ProbeConfig:
    """``probe:``: linear sentiment probes per layer and the LM's zero-shot answer."""

    seed: int = 0  # the top-level seed
    # which label is the positive class (the other label of the two is the negative)
    positive_label: str = "pos"
    folds: int = 5  # outer cross-validation folds, grouped by sample_id
    # L2 inverse strength of the logistic regression on standardized features: one value is
    # used as is; several are chosen per fit by an inner grouped CV on the training fold
    c: tuple[float, ...] = (0.1,)
    inner_folds: int = 3  # the inner CV's folds (only with several values of c)
    # scikit-learn's lbfgs limit, for homog stats' intervention-cost probes (the probe's own
    # fits are Newton's: homog.probe.fit)
    max_iter: int = 2000
    # pooled vectors are stored in this dtype (float16 halves the file; a value beyond
    # float16's range is an error naming the layer, then use float32)
    vector_dtype: Literal["float16", "float32"] = "float16"
    # the zero-shot answer: from the extraction's pass for a text-first prompt, else one more
    # forward pass per text
    lm: bool = True
    prompt: str = DEFAULT_PROMPT
    positive_word: str = " positive"  # scored by its first token
    negative_word: str = " negative"

    def __post_init__(self) -> None:
        _check(self.folds >= 2, f"probe.folds must be >= 2, got {self.folds}")
        _check(self.inner_folds >= 2, f"probe.inner_folds must be >= 2, got {self.inner_folds}")
        _check(self.max_iter >= 1, f"probe.max_iter must be >= 1, got {self.max_iter}")
        object.__setattr__(self, "c", tuple(float(v) for v in self.c))
        _check(
            len(self.c) >= 1 and all(v > 0 for v in self.c),
            f"probe.c must hold one or more values > 0, got {list(self.c)}",
        )
        _check(
            self.prompt.count("{text}") == 1,
            f"probe.prompt must hold {{text}} exactly once, got {self.prompt!r}",
        )
        _check(
            bool(self.positive_word.strip()) and bool(self.negative_word.strip()),
            "probe.positive_word and probe.negative_word must hold a word (a space alone "
            f"scores the space token), got {self.positive_word!r} and {self.negative_word!r}",
        )
        _check(
            self.positive_word != self.negative_word,
            "probe.positive_word and probe.negative_word must differ",
        )

    @property
    def text_first(self) -> bool:
        """Whether the prompt starts with the text (nothing before ``{text}``)."""
        return self.prompt.startswith(TEXT) and len(self.prompt) > len(TEXT)

    def extraction_prompt(self) -> ZeroShotPrompt | None:
        """What the extraction continues each text's pass with: the prompt under ``lm`` when
        it is text-first, else None (the probe's features step runs its own pass)."""
        if not (self.lm and self.text_first):
            return None
        return ZeroShotPrompt(self.prompt, self.positive_word, self.negative_word)
