"""Rephrasers: rewrite a sentence so its key phrase comes first, last, or stays where it is.

One interface (``Rephraser``), with implementations registered by name in ``REPHRASERS``
(the name is ``synth.rephraser`` in params.yaml):

- ``parse`` (``parse.py``, ``ParseRephraser``; default): a spaCy dependency parse, a catalogue
  of licensed constituent moves (``moves.py``) and a language-model fluency check
  (``homog.synth.fluency``).
- ``rule`` (``rule.py``, ``RuleRephraser``; offline, deterministic): parses the
  sentence into clauses and moves whole clauses or phrases; a sentence it cannot rewrite
  safely is left as it is and counted. Its word lists are in ``lexicon.py``.
- ``llm`` (``llm.py``, ``LLMRephraser``): asks an instruct LM to rewrite the sentence with the
  phrase at its beginning or end; the output is checked (``position_ok``) and retried with
  sampling, then rejected (sentence left as is, counted).

Targets: ``front`` (key phrase as early as possible), ``end`` (as late as possible),
``control`` (the same kind of rewrite, but the key phrase keeps its relative position as
closely as possible, within ``synth.control_tolerance``). Positions are
``homog.synth.keyphrase.relative_position``.

Adding a rephraser: write a module in this package with a ``Rephraser`` subclass whose
``from_params`` builds it from the typed params, and add ``"name": "module:Class"`` to
``REPHRASERS`` (and the name to ``synth.rephraser`` in ``homog.config``). A rephraser's module
is imported only when that rephraser is made, so a heavy dependency (torch, spaCy) costs
nothing until then; importing this package never imports torch.

This module holds what every rephraser shares: the targets, ``Rewrite``, the base class, the
registry, ``choose`` (the best of candidate rewrites for a target) and ``position_ok`` (is the
phrase where it was asked).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from homog.config import Params
from homog.config.synth import LLMRephraserConfig, SynthConfig
from homog.errors import HomogError
from homog.synth.keyphrase import phrase_span, relative_position
from homog.variants import PAPER_VARIANTS

TARGETS = PAPER_VARIANTS  # front, end, control (homog.variants)

# name -> "module:class"; imported lazily by ``rephraser_class``.
REPHRASERS: dict[str, str] = {
    "parse": "homog.synth.rephrase.parse:ParseRephraser",
    "rule": "homog.synth.rephrase.rule:RuleRephraser",
    "llm": "homog.synth.rephrase.llm:LLMRephraser",
}


@dataclass(frozen=True)
class Rewrite:
    """A rewritten sentence and what happened: rewritten | at_target | left_alone | rejected
    (the parse rephraser adds unparsed | too_long | empty | not_fluent); ``kinds`` names the
    moves applied, ``fluency`` is the LM score difference rewrite - original where checked."""

    text: str
    status: str
    kinds: tuple[str, ...] = ()
    fluency: float | None = None


def check_target(target: str) -> None:
    """HomogError unless ``target`` is one of ``TARGETS``."""
    if target not in TARGETS:
        raise HomogError(f"unknown rephrase target {target!r}; use one of {TARGETS}")


def choose(
    sentence: str,
    phrase: str,
    target: str,
    options: list[tuple[str, int]],
    *,
    control_tolerance: float = SynthConfig.control_tolerance,
    at_target: float = 0.15,
) -> Rewrite:
    """Pick the best of ``options`` ((text, n_moves) rewrites, e.g. ``rule.candidates``) for
    ``target`` (pure).

    front/end: the option with the smallest/largest relative position of ``phrase``, if it
    improves on the original (ties: fewer moves first). control: the option whose position is
    closest to the original's, if within ``control_tolerance``. Otherwise the sentence is
    returned unchanged with status ``at_target`` (front/end, already within ``at_target`` of
    the extreme) or ``left_alone``.
    """
    check_target(target)
    orig = relative_position(sentence, phrase)
    if orig is None:
        return Rewrite(sentence, "left_alone")
    scored = [
        (pos, moves, text)
        for text, moves in options
        if (pos := relative_position(text, phrase)) is not None
    ]
    if target == "control":
        best = min(scored, key=lambda s: (abs(s[0] - orig), s[1]), default=None)
        if best is not None and abs(best[0] - orig) <= control_tolerance:
            return Rewrite(best[2], "rewritten")
        return Rewrite(sentence, "left_alone")
    sign = 1.0 if target == "front" else -1.0
    best = min(scored, key=lambda s: (sign * s[0], s[1]), default=None)
    if best is not None and sign * best[0] < sign * orig - 1e-9:
        return Rewrite(best[2], "rewritten")
    extreme = orig if target == "front" else 1.0 - orig
    return Rewrite(sentence, "at_target" if extreme <= at_target else "left_alone")


def position_ok(
    original: str,
    rewritten: str,
    phrase: str,
    target: str,
    *,
    slack_words: int = LLMRephraserConfig.slack_words,
    control_tolerance: float = SynthConfig.control_tolerance,
) -> bool:
    """Is ``phrase`` at the asked position in ``rewritten``? (used to check LLM output).

    front: the phrase starts within the first ``slack_words`` + 1 words; end: it ends within
    the last ``slack_words`` + 1 words; control: the text changed and the relative position
    moved by at most ``control_tolerance``.
    """
    span = phrase_span(rewritten, phrase)
    if span is None:
        return False
    i, k, n = span
    if target == "front":
        return i <= slack_words
    if target == "end":
        return n - (i + k) <= slack_words
    orig, new = relative_position(original, phrase), relative_position(rewritten, phrase)
    return (
        rewritten.strip() != original.strip()
        and orig is not None
        and new is not None
        and abs(orig - new) <= control_tolerance
    )


class Rephraser(ABC):
    """Rewrites (sentence, key phrase) pairs for a target in ``TARGETS``."""

    name: str = "base"

    @classmethod
    @abstractmethod
    def from_params(cls, params: Params) -> Rephraser:
        """This rephraser configured by ``params`` (``params.synth`` and what it refers to)."""

    def select_phrase(self, sentence: str, options: list[str], context: str = "") -> str:
        """The key phrase to use among ranked ``options`` (default: the best-ranked)."""
        return options[0]

    def alternative_phrase(
        self, sentence: str, options: list[str], context: str, exclude: frozenset[str]
    ) -> str | None:
        """The phrase to try instead when the chosen one's rewrites failed the fluency check:
        ``select_phrase`` among the options not in ``exclude`` (lower case); None if none."""
        rest = [o for o in options if o.lower() not in exclude]
        return self.select_phrase(sentence, rest, context) if rest else None

    def prepare(self, sentences: list[str]) -> None:  # noqa: B027 (optional hook)
        """Called once with every sentence before ``select_phrase`` (batching; default no-op)."""

    @abstractmethod
    def rewrite_many(
        self, items: list[tuple[str, str, str]], target: str, on_done: Any = None
    ) -> list[Rewrite]:
        """Rewrite (sentence, phrase, context) items for ``target``; one Rewrite per item.

        ``on_done(k)`` (optional) is called after each k finished items, for progress bars.
        """


def rephraser_class(name: str) -> type[Rephraser]:
    """The registered rephraser class ``name`` (its module imported now); HomogError if none."""
    target = REPHRASERS.get(name)
    if target is None:
        raise HomogError(
            f"unknown rephraser {name!r}; use one of {', '.join(REPHRASERS)} (synth.rephraser)"
        )
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def make_rephraser(name: str, **options: Any) -> Rephraser:
    """The rephraser ``name`` built with ``options`` (passed to its class); HomogError for an
    unregistered name."""
    return rephraser_class(name)(**options)


def rephraser_from_params(params: Params) -> Rephraser:
    """The rephraser that ``params.synth.rephraser`` names, configured by ``params``."""
    return rephraser_class(params.synth.rephraser).from_params(params)
