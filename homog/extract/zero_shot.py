"""The probe's zero-shot answer from the extraction's own forward pass.

A causal model's states of a text's tokens do not depend on what follows them, so a
text-first prompt (``probe.prompt`` starting with ``{text}``, ``ZeroShotPrompt``) needs no
pass of its own: the ``Extractor`` keeps the text pass's KV cache and ``Continuation``
runs the prompt's suffix (what follows ``{text}``, tokenized without special tokens) over
it, with the hooks idle, so every metric and attention statistic stays the text's own. The
prompt's tokens are the text's as extraction reads them (special tokens, truncation) then
the suffix's.

Graded runs (homog.extract.edits) answer too: the suffix reads the cache of the text's
edited pass, and runs after the edit is removed. The question is asked of the edited text;
its own tokens are neither moved, averaged nor biased, so every dose asks the same question.

Positions: the text keeps the intervention's (``homog.extract.plan.position_ids``); the
suffix continues after the text's largest position (``none``, ``shuffle_pos``: n, n+1, ...),
or keeps the constant of a constant-position intervention (``zero_pos``: 0).

The answer is log p(positive) - log p(negative) of the next token after the suffix, for the
first token of each label word. The softmax's normaliser cancels, so only the two label
rows of the output embedding are applied to the last token's final hidden state (and the
model's final logit soft-cap, where it has one): the full logits' numbers without a
vocabulary-sized product.

Right padding leaves pad slots between a shorter text and its suffix in the cache; they are
masked, but a sliding-window layer counts cache slots, not positions. Where the window could
reach a padded text's first tokens (batch length + suffix > window), that text's answer
comes from a separate full pass over its prompt (``prompt_log_odds``) instead: the same
numbers, never a shifted window. A graded run's such text gets an unpadded text pass of its
own under the edit, continued over the suffix without it: the same numbers again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.extract.plan import EncodedText, make_batches, position_ids

# interventions that give every token the same position: the suffix gets it too
CONSTANT_POSITION = {"zero_pos": 0}


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


def suffix_ids(tokenizer: Any, prompt: str) -> np.ndarray:
    """The token ids of what follows ``{text}`` in a text-first ``prompt`` (no special
    tokens); HomogError when there is none."""
    suffix = prompt.removeprefix("{text}")
    ids = np.asarray(tokenizer(suffix, add_special_tokens=False)["input_ids"], dtype=np.int64)
    if not len(ids):
        raise HomogError(f"probe.prompt {prompt!r} has no token after {{text}}")
    return ids


def finite(log_odds: np.ndarray) -> np.ndarray:
    """``log_odds``; HomogError when one is NaN or infinite."""
    if not np.isfinite(log_odds).all():
        raise HomogError("zero-shot log-odds are not finite (float16 overflow? use float32)")
    return log_odds


class LabelHead:
    """The output embedding's rows of the two label tokens (and bias, final soft-cap):
    ``log_odds(hidden)`` of final hidden states (B, d)."""

    def __init__(self, loaded: Any, ids: tuple[int, int]):
        head = loaded.model.get_output_embeddings()
        self.weight = head.weight[list(ids)]
        bias = getattr(head, "bias", None)
        self.bias = bias[list(ids)] if bias is not None else None
        config = getattr(loaded.model.config, "text_config", None) or loaded.model.config
        self.cap = getattr(config, "final_logit_softcapping", None)

    def log_odds(self, hidden: Any) -> np.ndarray:
        import torch

        logits = hidden.to(self.weight.device, self.weight.dtype) @ self.weight.T
        if self.bias is not None:
            logits = logits + self.bias
        if self.cap:
            logits = torch.tanh(logits / self.cap) * self.cap
        logits = logits.double().cpu().numpy()
        return logits[:, 0] - logits[:, 1]


def suffix_positions(intervention: str, text_pos: np.ndarray, k: int) -> np.ndarray:
    """Position ids (k,) of a suffix after a text whose real tokens have ``text_pos``."""
    if intervention in CONSTANT_POSITION:
        return np.full(k, CONSTANT_POSITION[intervention], dtype=np.int64)
    return int(text_pos.max()) + 1 + np.arange(k, dtype=np.int64)


def sliding_window(model: Any) -> int | None:
    """The smallest sliding window of the model's attention layers (None: none slides)."""
    config = getattr(model.config, "text_config", None) or model.config
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if window is None or getattr(config, "use_sliding_window", True) is False:
        return None
    if types is not None and "sliding_attention" not in types:
        return None
    return int(window)


def _cache_kwarg(decoder: Any) -> str:
    """The decoder's name for a KV cache argument (transformers 5 renamed it ``cache``)."""
    return (
        "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    )


def output_cache(out: Any) -> Any:
    """The KV cache a decoder's output holds."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _out_of_memory(exc: Exception, what: str) -> HomogError:
    return HomogError(
        f"out of memory for the zero-shot prompt's {what}: lower extract.batch_tokens or "
        "extract.max_tokens, or set probe.lm: false"
    )


class Continuation:
    """The answer of a text-first prompt from a batch's text pass: ``answer(cache, ...)``.

    loaded: a ``homog.models.LoadedModel``; prompt: a ``ZeroShotPrompt``. HomogError when
    the suffix has no token or the label words start with the same token.
    """

    def __init__(self, loaded: Any, prompt: Any):
        tok = loaded.tokenizer
        self.loaded = loaded
        self.suffix = suffix_ids(tok, prompt.prompt)
        self.head = LabelHead(
            loaded, label_token_ids(tok, prompt.positive_word, prompt.negative_word)
        )
        self.window = sliding_window(loaded.model)
        self._cache_arg = _cache_kwarg(loaded.decoder)

    def answer(
        self,
        cache: Any,
        ids: np.ndarray,
        attn: np.ndarray,
        pos: np.ndarray,
        intervention: str,
        edit: Callable[[int, int], Any] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(log-odds (B,), prompt tokens (B,)) of the texts whose right-padded text pass
        (ids, attn, pos: (B, n_pad)) left ``cache``. ``edit(row, n)``: a context manager
        that installs a graded run's edit for text ``row`` alone (its n tokens), for the
        texts a sliding window makes answer from a pass of their own."""
        b, n_pad = ids.shape
        k = len(self.suffix)
        lengths = attn.sum(1)
        self._check_context(lengths, k)
        s_pos = np.stack(
            [suffix_positions(intervention, pos[i, : lengths[i]], k) for i in range(b)]
        )
        mask = np.concatenate([attn, np.ones((b, k), dtype=attn.dtype)], axis=1)
        log_odds = self._suffix_pass(cache, mask, s_pos)
        if self.window is not None and n_pad + k > self.window:
            redo = np.flatnonzero(lengths < n_pad)  # padded: their window would be shifted
            if len(redo) and edit is not None:
                for i in redo:
                    n = int(lengths[i])
                    log_odds[i] = self._alone(ids[i, :n], pos[i, :n], s_pos[i : i + 1], edit(i, n))
            elif len(redo):
                prompts = [
                    (
                        np.concatenate([ids[i, : lengths[i]], self.suffix]),
                        np.concatenate([pos[i, : lengths[i]], s_pos[i]]),
                    )
                    for i in redo
                ]
                log_odds[redo] = prompt_log_odds(self.loaded, self.head, prompts, b * (n_pad + k))
        return finite(log_odds), lengths + k

    def _suffix_pass(self, cache: Any, mask: np.ndarray, s_pos: np.ndarray) -> np.ndarray:
        """Log-odds (B,) of the suffix run over ``cache`` (mask: the text's and the suffix's
        slots, (B, n_pad + k); s_pos: the suffix's positions, (B, k))."""
        import torch

        b = len(s_pos)
        dev = self.loaded.input_device
        try:
            with torch.inference_mode():
                out = self.loaded.decoder(
                    input_ids=torch.from_numpy(np.tile(self.suffix, (b, 1))).to(dev),
                    attention_mask=torch.from_numpy(mask).to(dev),
                    position_ids=torch.from_numpy(s_pos).to(dev),
                    use_cache=False,
                    **{self._cache_arg: cache},
                )
                return self.head.log_odds(out.last_hidden_state[:, -1])
        except torch.OutOfMemoryError as exc:
            raise _out_of_memory(exc, "suffix") from exc

    def _alone(self, ids: np.ndarray, pos: np.ndarray, s_pos: np.ndarray, edit: Any) -> float:
        """The answer of one text from an unpadded text pass of its own under ``edit`` (the
        graded run's edit for this text), continued over the suffix without it."""
        import torch

        dev = self.loaded.input_device
        attn = np.ones((1, len(ids)), dtype=np.int64)
        try:
            with edit, torch.inference_mode():
                out = self.loaded.decoder(
                    input_ids=torch.from_numpy(ids[None]).to(dev),
                    attention_mask=torch.from_numpy(attn).to(dev),
                    position_ids=torch.from_numpy(pos[None]).to(dev),
                    use_cache=True,
                )
        except torch.OutOfMemoryError as exc:
            raise _out_of_memory(exc, "own pass") from exc
        mask = np.ones((1, len(ids) + s_pos.shape[1]), dtype=np.int64)
        return float(self._suffix_pass(output_cache(out), mask, s_pos)[0])

    def _check_context(self, lengths: np.ndarray, k: int) -> None:
        longest = int(lengths.max()) + k
        if longest > self.loaded.max_context:
            raise HomogError(
                f"a text with the zero-shot prompt's {k} suffix tokens has {longest} tokens, "
                f"beyond the model's context of {self.loaded.max_context}: lower "
                "extract.max_tokens or set probe.lm: false"
            )


def continuation(loaded: Any, prompt: Any) -> Continuation | None:
    """``Continuation(loaded, prompt)``, or None without a prompt."""
    return None if prompt is None else Continuation(loaded, prompt)


def text_first_prompts(
    encoded: Sequence[Any], suffix: np.ndarray, intervention: str, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(token ids, position ids) of each text's whole text-first prompt: the text's tokens
    (``EncodedText``) under the intervention's positions, then the suffix's (the tokens and
    positions ``Continuation`` gives the model)."""
    out = []
    for t in encoded:
        pos = position_ids(intervention, t, len(t.input_ids), seed)
        s_pos = suffix_positions(intervention, pos, len(suffix))
        out.append((np.concatenate([t.input_ids, suffix]), np.concatenate([pos, s_pos])))
    return out


def prompt_log_odds(
    loaded: Any,
    head: LabelHead,
    prompts: Sequence[tuple[np.ndarray, np.ndarray]],
    batch_tokens: int,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Log-odds (N,) of whole prompts, (token ids, position ids) each, in forward passes of
    their own: batched by length up to ``batch_tokens`` padded tokens, right-padded."""
    import torch

    log_odds = np.zeros(len(prompts))
    items = [
        EncodedText(i, "", "", ids, np.zeros(len(ids), bool), False)
        for i, (ids, _) in enumerate(prompts)
    ]
    pad_id = loaded.tokenizer.pad_token_id or 0
    dev = loaded.input_device
    for batch in make_batches(items, batch_tokens):
        rows = [t.index for t in batch]
        n_pad = max(len(t.input_ids) for t in batch)
        ids = np.full((len(rows), n_pad), pad_id, dtype=np.int64)
        attn = np.zeros((len(rows), n_pad), dtype=np.int64)
        pos = np.zeros((len(rows), n_pad), dtype=np.int64)  # padding: masked, any position
        for r, i in enumerate(rows):
            n = len(prompts[i][0])
            ids[r, :n], attn[r, :n], pos[r, :n] = prompts[i][0], 1, prompts[i][1]
        try:
            with torch.inference_mode():
                hidden = loaded.decoder(
                    input_ids=torch.from_numpy(ids).to(dev),
                    attention_mask=torch.from_numpy(attn).to(dev),
                    position_ids=torch.from_numpy(pos).to(dev),
                    use_cache=False,
                ).last_hidden_state
                last = torch.from_numpy(attn.sum(1) - 1).to(hidden.device)
                log_odds[rows] = head.log_odds(hidden[torch.arange(len(rows)), last])
        except torch.OutOfMemoryError as exc:
            raise _out_of_memory(exc, "own pass") from exc
        if on_batch:
            on_batch(len(rows))
    return finite(log_odds)
