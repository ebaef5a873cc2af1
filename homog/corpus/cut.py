"""Only what the model sees: cut each review at a sentence boundary so that it fits extraction.

Extraction keeps the first ``min(extract.max_tokens, max_context)`` tokens of a text (special
tokens included). A review longer than that would have its later sentences, and any rewrite
or move there, never reach the model. The corpus stage therefore keeps the longest run of a
review's first sentences (``homog.synth.keyphrase.split_sentences``) whose text, as synth
writes it (``homog.synth.position.LEAD`` + the sentences joined by one space), fits every
model's budget; a review whose first sentence alone does not fit is dropped (``no_fit``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from homog.text.sentences import LEAD, split_sentences
from homog.text.tokens import model_tokenizers, token_budgets, token_counts

# texts -> whether each fits every model's budget
FitCheck = Callable[[Sequence[str]], list[bool]]


def sentences_of(text: str) -> list[str]:
    """The text's sentences (spans of ``split_sentences``)."""
    return [text[a:b] for a, b in split_sentences(text)]


def cut_texts(texts: Sequence[str], fits: FitCheck) -> list[str | None]:
    """Every text cut to its longest fitting run of first sentences, joined by one space
    (unchanged when it fits whole; None when not even the first sentence fits). ``fits``
    receives the texts as synth writes them (with ``LEAD``). A binary search over the number
    of sentences kept (token counts grow with every sentence added)."""
    out: list[str | None] = list(texts)
    whole = fits([LEAD + t for t in texts])
    todo = [i for i, ok in enumerate(whole) if not ok]
    parts = {i: sentences_of(texts[i]) for i in todo}
    lo = {i: 0 for i in todo}  # the most sentences known to fit
    hi = {i: len(parts[i]) for i in todo}  # the fewest known not to fit
    while active := [i for i in todo if hi[i] - lo[i] > 1]:
        mid = {i: (lo[i] + hi[i]) // 2 for i in active}
        ok = fits([LEAD + " ".join(parts[i][: mid[i]]) for i in active])
        for i, good in zip(active, ok, strict=True):
            if good:
                lo[i] = mid[i]
            else:
                hi[i] = mid[i]
    for i in todo:
        out[i] = " ".join(parts[i][: lo[i]]) if lo[i] else None
    return out


def budget_check(tokenizers: dict[str, Any], budgets: dict[str, int]) -> FitCheck:
    """A ``FitCheck``: every model's token count (special tokens included) <= its budget."""

    def fits(texts: Sequence[str]) -> list[bool]:
        ok = [True] * len(texts)
        for key, tok in tokenizers.items():
            for i, n in enumerate(token_counts(tok, texts)):
                ok[i] = ok[i] and n <= budgets[key]
        return ok

    return fits


def params_check(params: Any) -> tuple[FitCheck, dict[str, int]]:
    """(``budget_check`` for every model of ``params.models``, model key -> budget)."""
    budgets = token_budgets(params)
    return budget_check(model_tokenizers(params), budgets), budgets
