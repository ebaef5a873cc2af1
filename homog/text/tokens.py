"""Texts as the models see them: every model's tokenizer, token ids, counts and multisets.

Extraction (``homog.extract.plan.encode_texts``) calls
``tokenizer(texts, add_special_tokens=True, return_special_tokens_mask=True)`` and keeps the
first ``min(extract.max_tokens, max_context)`` ids; with ``extract.exclude_special`` (the
default) the tokenizer-added special tokens (Gemma's ``<bos>``) do not enter the hidden-state
metrics. The helpers here tokenize exactly that way, so that what synth and corpus measure is
what the model gets. Leading whitespace is kept (no strip): " Great" and "Great" are
different tokens.

Tokenizers are loaded once per model source (``load_cached``) without the model's weights.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from homog.config import Params
from homog.models import load_tokenizer, resolve_source


@functools.lru_cache(maxsize=16)
def load_cached(source: str) -> tuple[Any, int]:
    """(tokenizer, max_context) of a model source (``homog.models.load_tokenizer``), cached."""
    return load_tokenizer(source)


def model_tokenizers(params: Params) -> dict[str, Any]:
    """model key -> its tokenizer, for every key of ``params.models`` (in their order).

    Raises HomogError when a source cannot be loaded (``homog.models.load_tokenizer``)."""
    return {key: load_cached(resolve_source(key, params.models))[0] for key in params.models}


def token_budgets(params: Params) -> dict[str, int]:
    """model key -> the number of tokens extraction keeps: min(extract.max_tokens, context)."""
    return {
        key: min(params.extract.max_tokens, load_cached(resolve_source(key, params.models))[1])
        for key in params.models
    }


def encode(tokenizer: Any, texts: Sequence[str]) -> list[tuple[list[int], list[bool]]]:
    """(ids, special mask) of every text, with the special tokens, untruncated (one batch)."""
    if not texts:
        return []
    enc = tokenizer(list(texts), add_special_tokens=True, return_special_tokens_mask=True)
    return [
        (list(ids), [bool(s) for s in mask])
        for ids, mask in zip(enc["input_ids"], enc["special_tokens_mask"], strict=True)
    ]


def token_ids(
    tokenizer: Any, text: str, *, special: bool = True, max_tokens: int | None = None
) -> list[int]:
    """The ids extraction gives ``text``: with the tokenizer's special tokens (``special``;
    False drops them, as ``exclude_special`` does for the metrics), truncated to the first
    ``max_tokens`` of the full sequence (special tokens included) as extraction truncates."""
    ((ids, mask),) = encode(tokenizer, [text])
    if max_tokens is not None:
        ids, mask = ids[:max_tokens], mask[:max_tokens]
    return list(ids) if special else [i for i, s in zip(ids, mask, strict=True) if not s]


def token_counts(tokenizer: Any, texts: Sequence[str], *, special: bool = True) -> list[int]:
    """Untruncated token count of every text (with the special tokens unless ``special`` is
    False): a text fits a budget of B tokens when its count with special tokens is <= B."""
    return [len(ids) if special else len(ids) - sum(mask) for ids, mask in encode(tokenizer, texts)]


def token_multisets(tokenizer: Any, texts: Sequence[str]) -> list[Counter[int]]:
    """The multiset (Counter) of every text's non-special token ids (what the metrics see)."""
    return [
        Counter(i for i, s in zip(ids, mask, strict=True) if not s)
        for ids, mask in encode(tokenizer, texts)
    ]
