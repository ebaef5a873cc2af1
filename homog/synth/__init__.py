"""The ``synth`` stage: positional variants (original/front/end/control and the position
family key_first/key_mid/key_last/key_control) of every corpus text.

Importing this package imports neither torch nor pandas: the stage's names
(``build_synth``, ``VARIANTS``, ``TEXT_COLUMNS``, ...) are resolved lazily from ``stage`` on
first use, and the rephrasers load their models only when built. The modules:

- ``stage``: the stage itself (it validates the variants and writes the ``texts`` table of
  docs/design.md and ``report.json``); ``variants_build``: the variants built in memory
  (``build_variants``); ``variants``: the texts' sentences and variants as data;
- ``selection``: BERTScore of every variant, and which texts are kept (``select``);
- ``report``: the report's per-variant measures and ``make_report``;
- ``keyphrase``: sentence splitting, key-phrase extractors, relative positions;
- ``rephrase``: the rephrasers by name (``rule``, ``llm``: ``REPHRASERS``) and what they
  share; ``rephrase.lexicon``, ``rephrase.rule``, ``rephrase.llm`` hold the kinds;
- ``bertscore``: the BERTScore scorer (built from ``synth.bertscore``) and threshold helpers;
- ``salience``, ``position``, ``position_stage``, ``position_report``: the position family
  (docs/variants.md); ``tokens``: every model's tokenizer as extraction uses it; ``budget``:
  rewrites reverted to fit extraction's token budget.
"""

from __future__ import annotations

from homog.lazy import lazy_names
from homog.synth.rephrase import REPHRASERS, TARGETS

# name -> submodule, for the names resolved on first use (they import pandas)
_LAZY = {
    **dict.fromkeys(
        (
            "REQUIRE_REWRITE",
            "TEXT_COLUMNS",
            "VARIANTS",
            "Variants",
            "assemble",
            "build_synth",
            "make_report",
            "mean_position",
            "score_variants",
            "select",
        ),
        "stage",
    ),
    **dict.fromkeys(("PHRASE_SEP", "build_variants", "key_sentences"), "variants_build"),
    "Sentences": "variants",
}

__all__ = ["REPHRASERS", "TARGETS", *_LAZY]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
