"""The synth stage's texts in memory: a text's sentences (``Sentences``), every variant of the
corpus (``Variants``), and how a text is put back together from its rewritten sentences.
Below ``stage``, ``lengthmatch``, ``report`` and ``repair``, which all read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from homog.synth.keyphrase import relative_position


@dataclass
class Sentences:
    """A text's sentences: spans, key phrase (None when there is none) per sentence."""

    text: str
    spans: list[tuple[int, int]]
    phrases: list[str | None]
    options: list[list[str]] = field(default_factory=list)  # the extractor's, per sentence

    def sentence(self, i: int) -> str:
        a, b = self.spans[i]
        return self.text[a:b]

    def extracted(self, i: int) -> list[str]:
        """The extractor's phrases for sentence i (none when they were not kept)."""
        return self.options[i] if i < len(self.options) else []

    @property
    def keyed(self) -> list[int]:
        return [i for i, p in enumerate(self.phrases) if p]


@dataclass
class Variants:
    """Every variant of the corpus (long DataFrame) plus sentence counts per status."""

    table: pd.DataFrame
    sentences: int
    keyed_sentences: int
    status: dict[str, dict[str, int]] = field(default_factory=dict)
    # one row per (keyed sentence, target): sample_id, variant, sentence, phrase, original,
    # text, status, kinds, fluency (see ``homog.synth.report``)
    rewrites: pd.DataFrame | None = None
    docs: dict[Any, Sentences] = field(default_factory=dict)  # sample_id -> its sentences
    # variant -> sample_id -> {sentence index: rewritten sentence} (what ``table`` assembles)
    edits: dict[str, dict[Any, dict[int, str]]] = field(default_factory=dict)
    # where the chosen key phrases came from ("extractor", "noun_chunk"), and the second
    # phrase tried for sentences whose rewrites failed the fluency check ("tried", "changed")
    keyphrase_sources: dict[str, int] = field(default_factory=dict)
    phrase_retries: dict[str, int] = field(default_factory=dict)


def assemble(doc: Sentences, rewrites: dict[int, str]) -> str:
    """The text with sentence i replaced by ``rewrites[i]``; everything between kept (pure)."""
    out, last = [], 0
    for i, (a, b) in enumerate(doc.spans):
        out.append(doc.text[last:a])
        out.append(rewrites.get(i, doc.text[a:b]))
        last = b
    out.append(doc.text[last:])
    return "".join(out)


def mean_position(doc: Sentences, rewrites: dict[int, str]) -> float:
    """Mean relative position of the key phrases over the text's keyed sentences (NaN if none)."""
    pos = [
        relative_position(rewrites.get(i, doc.sentence(i)), doc.phrases[i] or "") for i in doc.keyed
    ]
    vals = [p for p in pos if p is not None]
    return float(np.mean(vals)) if vals else float("nan")
