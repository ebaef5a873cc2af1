"""The model's own answer: zero-shot sentiment log-odds from a prompt around the review.

A text-first prompt (``probe.prompt`` starting with ``{text}``, the default) is answered in
the extraction's own forward pass (``homog.extract.zero_shot``: the text's pass continued
over the prompt's suffix); the features step reads those answers
(``homog.probe.reuse.zero_shot_from_run``) and runs ``zero_shot`` only where the extraction
has none. ``zero_shot`` gives the model the same tokens and positions in a pass of its own:
the text's tokens as extraction reads them, under the intervention's positions, then the
suffix's. A prompt with something before ``{text}`` changes the text's own states, so it
always needs this pass: the review (cut to ``extract.max_tokens`` tokens like extraction's,
``cut_review``) stripped of surrounding white space goes where ``{text}`` stands, and the
whole prompt is tokenized with the tokenizer's special tokens and run under the
intervention's position ids (``homog.extract.plan.position_ids``). The log-odds are
log p(positive) - log p(negative) of the next token after the prompt, for the first token
of each label word (``homog.extract.zero_shot.LabelHead``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from homog.extract.plan import EncodedText, encode_texts, position_ids
from homog.extract.zero_shot import (
    LabelHead,
    label_token_ids,
    prompt_log_odds,
    suffix_ids,
    text_first_prompts,
)

__all__ = ["build_prompt", "cut_review", "label_token_ids", "with_margin", "zero_shot"]


def cut_review(tokenizer: Any, text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut after the token where extraction truncates it (``max_tokens`` tokens with
    the tokenizer's special tokens), and whether it was cut."""
    n_special = len(tokenizer("", add_special_tokens=True)["input_ids"])
    keep = max(1, max_tokens - n_special)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= keep:
        return text, False
    return text[: enc["offset_mapping"][keep - 1][1]], True


def build_prompt(template: str, review: str) -> str:
    """``template`` with the review (stripped) in place of ``{text}``."""
    return template.replace("{text}", review.strip())


def zero_shot(
    loaded: Any,
    df: Any,
    config: Any,
    probe: Any,
    intervention: str,
    *,
    on_batch: Callable[[int], None] | None = None,
) -> Any:
    """A frame (variant, sample_id, label, log_odds, n_prompt_tokens, truncated), one row per
    text of ``df`` (sorted texts with a ``label`` column), under ``intervention``, from a
    forward pass of its own.

    config: the ``ExtractConfig`` (max_tokens, batch_tokens, seed); probe: the
    ``ProbeConfig`` (prompt, label words).
    """
    tok = loaded.tokenizer
    head = LabelHead(loaded, label_token_ids(tok, probe.positive_word, probe.negative_word))
    max_tokens = min(config.max_tokens, loaded.max_context)
    if probe.text_first:
        encoded = encode_texts(tok, df, max_tokens)
        suffix = suffix_ids(tok, probe.prompt)
        prompts = text_first_prompts(encoded, suffix, intervention, config.seed)
        truncated = [t.truncated for t in encoded]
    else:
        prompts, truncated = _prefix_prompts(
            tok, df, probe.prompt, max_tokens, intervention, config.seed
        )
    log_odds = prompt_log_odds(loaded, head, prompts, config.batch_tokens, on_batch)
    return pd.DataFrame(
        {
            "variant": df["variant"].to_numpy(),
            "sample_id": df["sample_id"].to_numpy(),
            "label": df["label"].astype(str).to_numpy(),
            "log_odds": log_odds,
            "n_prompt_tokens": [len(ids) for ids, _ in prompts],
            "truncated": truncated,
        }
    )


def _prefix_prompts(
    tok: Any, df: Any, template: str, max_tokens: int, intervention: str, seed: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[bool]]:
    """(token ids, position ids) of each text's prompt as one string (the cut review in the
    template), and whether the review was cut."""
    cut = [cut_review(tok, t, max_tokens) for t in df["text"]]
    enc = tok([build_prompt(template, text) for text, _ in cut], add_special_tokens=True)
    prompts = []
    for i, (v, s) in enumerate(zip(df["variant"], df["sample_id"], strict=True)):
        ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
        text = EncodedText(i, v, s, ids, np.zeros(len(ids), bool), cut[i][1])
        prompts.append((ids, position_ids(intervention, text, len(ids), seed)))
    return prompts, [c[1] for c in cut]


def with_margin(frame: Any, positive_label: str) -> Any:
    """``frame`` with ``margin`` (the log-odds toward the true label: +log_odds for the
    positive label, -log_odds otherwise) and ``correct`` (margin > 0)."""
    sign = np.where(frame["label"].astype(str) == positive_label, 1.0, -1.0)
    out = frame.copy()
    out["margin"] = sign * out["log_odds"].to_numpy()
    out["correct"] = out["margin"] > 0
    return out
