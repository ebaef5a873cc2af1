"""The model's own answer: zero-shot sentiment log-odds from a fixed prompt around the review.

Per text: the review (what extraction sees: cut to ``extract.max_tokens`` tokens, see
``cut_review``) stripped of surrounding white space goes into ``probe.prompt`` where
``{text}`` stands; the prompt is tokenized with the tokenizer's special tokens and run under
the intervention's position ids (``homog.extract.plan.position_ids``, right padding). The
log-odds are log p(positive) - log p(negative) of the next token after the prompt, for the
first token of each label word (``probe.positive_word``, ``probe.negative_word``). The
softmax's normaliser cancels, so only the two label rows of the output embedding are applied
to the last real token's final hidden state (and the model's final logit soft-cap, where it
has one): the same numbers as the full logits, without a vocabulary-sized product.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from homog.errors import HomogError


def label_token_ids(tokenizer: Any, positive: str, negative: str) -> tuple[int, int]:
    """The first token id of each label word; HomogError when they coincide."""
    ids = []
    for word in (positive, negative):
        tok = tokenizer(word, add_special_tokens=False)["input_ids"]
        if not tok:
            raise HomogError(f"label word {word!r} has no token")
        ids.append(int(tok[0]))
    if ids[0] == ids[1]:
        raise HomogError(
            f"label words {positive!r} and {negative!r} start with the same token: choose words "
            "whose first tokens differ (probe.positive_word, probe.negative_word)"
        )
    return ids[0], ids[1]


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


def _label_head(loaded: Any, ids: tuple[int, int]) -> tuple[Any, Any, float | None]:
    """(weight rows (2, d), bias (2,) or None, final soft-cap) of the two label tokens."""
    head = loaded.model.get_output_embeddings()
    weight = head.weight[list(ids)]
    bias = head.bias[list(ids)] if getattr(head, "bias", None) is not None else None
    config = getattr(loaded.model.config, "text_config", None) or loaded.model.config
    cap = getattr(config, "final_logit_softcapping", None)
    return weight, bias, cap


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
    text of ``df`` (sorted texts with a ``label`` column), under ``intervention``.

    config: the ``ExtractConfig`` (max_tokens, batch_tokens, seed); probe: the
    ``ProbeConfig`` (prompt, label words).
    """
    import pandas as pd
    import torch

    from homog.extract.plan import EncodedText, make_batches, pad_batch

    tok = loaded.tokenizer
    ids = label_token_ids(tok, probe.positive_word, probe.negative_word)
    max_tokens = min(config.max_tokens, loaded.max_context)
    cut = [cut_review(tok, t, max_tokens) for t in df["text"]]
    prompts = [build_prompt(probe.prompt, text) for text, _ in cut]
    enc = tok(prompts, add_special_tokens=True, return_special_tokens_mask=True)
    encoded = [
        EncodedText(
            i,
            v,
            s,
            np.asarray(enc["input_ids"][i], dtype=np.int64),
            np.asarray(enc["special_tokens_mask"][i], dtype=bool),
            cut[i][1],
        )
        for i, (v, s) in enumerate(zip(df["variant"], df["sample_id"], strict=True))
    ]
    weight, bias, cap = _label_head(loaded, ids)
    log_odds = np.zeros(len(encoded))
    pad_id = tok.pad_token_id or 0
    dev = loaded.input_device
    for batch in make_batches(encoded, config.batch_tokens):
        in_ids, attn, _special, pos = pad_batch(batch, pad_id, intervention, config.seed)
        with torch.inference_mode():
            out = loaded.decoder(
                input_ids=torch.from_numpy(in_ids).to(dev),
                attention_mask=torch.from_numpy(attn).to(dev),
                position_ids=torch.from_numpy(pos).to(dev),
                use_cache=False,
            )
            hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
            last = torch.from_numpy(attn.sum(1) - 1).to(hidden.device)
            h = hidden[torch.arange(len(batch), device=hidden.device), last]
            logits = h.to(weight.dtype) @ weight.T
            if bias is not None:
                logits = logits + bias
            if cap:
                logits = torch.tanh(logits / cap) * cap
            logits = logits.double().cpu().numpy()
        log_odds[[t.index for t in batch]] = logits[:, 0] - logits[:, 1]
        if on_batch:
            on_batch(len(batch))
    if not np.isfinite(log_odds).all():
        raise HomogError("zero-shot log-odds are not finite (float16 overflow? use float32)")
    return pd.DataFrame(
        {
            "variant": df["variant"].to_numpy(),
            "sample_id": df["sample_id"].to_numpy(),
            "label": df["label"].astype(str).to_numpy(),
            "log_odds": log_odds,
            "n_prompt_tokens": [len(t.input_ids) for t in encoded],
            "truncated": [t.truncated for t in encoded],
        }
    )


def with_margin(frame: Any, positive_label: str) -> Any:
    """``frame`` with ``margin`` (the log-odds toward the true label: +log_odds for the
    positive label, -log_odds otherwise) and ``correct`` (margin > 0)."""
    sign = np.where(frame["label"].astype(str) == positive_label, 1.0, -1.0)
    out = frame.copy()
    out["margin"] = sign * out["log_odds"].to_numpy()
    out["correct"] = out["margin"] > 0
    return out
