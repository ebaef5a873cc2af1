"""The llm rephraser: an instruct LM asked to move the key phrase, its replies checked.

For ``front`` the reply is forced to begin with the key phrase (the prompt ends with it), so
even a small model only has to finish the sentence. Every reply must put the phrase where it
was asked (``position_ok``), keep its length within a factor of two, and, with
``synth.fluency.model`` set, be at most ``synth.fluency.threshold`` less fluent than the
original (mean token log-probability); the stage's BERTScore check follows.

The model is loaded through ``homog.models.load_model`` (torch is imported only when an
``LLMRephraser`` is built or generates, never by importing this module).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from homog.config import Params
from homog.config.synth import FluencyConfig, LLMRephraserConfig, SynthConfig
from homog.models import load_model, resolve_source
from homog.synth.fluency import FluencyScorer
from homog.synth.rephrase import Rephraser, Rewrite, check_target, position_ok

PROMPTS = {
    "front": (
        'Rewrite the sentence so that it begins with the exact words "{phrase}". Keep its '
        "meaning and all of its information; change the order of words, not the words. "
        "Reply with the rewritten sentence only.\nSentence: {sentence}"
    ),
    "end": (
        'Rewrite the sentence so that it ends with the exact words "{phrase}". Keep its '
        "meaning and all of its information; change the order of words, not the words. "
        "Reply with the rewritten sentence only.\nSentence: {sentence}"
    ),
    "control": (
        "Rewrite the sentence by changing the order of its clauses or words, keeping its "
        'meaning, and keep the exact words "{phrase}" where they are in the sentence. '
        "Reply with the rewritten sentence only.\nSentence: {sentence}"
    ),
}


def forced_prefix(phrase: str, target: str) -> str:
    """What the reply is made to begin with: the key phrase, capitalised, for ``front``."""
    return phrase[:1].upper() + phrase[1:] if target == "front" else ""


def clean_generation(text: str) -> str:
    """First non-empty line of a model reply, without a 'Sentence:' label or wrapping quotes."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    line = lines[0] if lines else ""
    line = re.sub(r"^(rewritten sentence|sentence|answer)\s*:\s*", "", line, flags=re.I)
    if len(line) >= 2 and line[0] in "\"'\u201c" and line[-1] in "\"'\u201d":
        line = line[1:-1].strip()
    return line


class LLMRephraser(Rephraser):
    """An instruct LM asked to move the phrase; outputs are checked, retried, or rejected.

    ``source`` is a model source for ``homog.models.load_model`` (``embedded:smollm2-135m``,
    ``hf:<id-or-dir>``). The first try is greedy; up to ``retries`` more tries sample with
    ``temperature``. A reply is accepted when ``position_ok`` holds and its length is within
    a factor of two of the original's; otherwise the sentence stays as it is (``rejected``).
    """

    name = "llm"

    def __init__(
        self,
        source: str,
        *,
        device: str = LLMRephraserConfig.device,
        dtype: str = LLMRephraserConfig.dtype,
        max_new_tokens: int = LLMRephraserConfig.max_new_tokens,
        retries: int = LLMRephraserConfig.retries,
        temperature: float = 0.7,
        batch_size: int = LLMRephraserConfig.batch_size,
        slack_words: int = LLMRephraserConfig.slack_words,
        control_tolerance: float = SynthConfig.control_tolerance,
        seed: int = Params.seed,
        fluency: Any = None,
        threshold: float = FluencyConfig.threshold,
    ) -> None:
        self.loaded = load_model(source, dtype=dtype, device=device, attention=False, seed=seed)
        self.tokenizer = self.loaded.tokenizer
        self.model = self.loaded.model
        self.max_new_tokens = max_new_tokens
        self.retries = retries
        self.temperature = temperature
        self.batch_size = batch_size
        self.slack_words = slack_words
        self.control_tolerance = control_tolerance
        self.seed = seed
        self.fluency = fluency  # a FluencyScorer: replies much less fluent are rejected
        self.threshold = threshold

    @classmethod
    def from_params(cls, params: Params) -> LLMRephraser:
        """The model ``synth.llm_model`` (a key of ``models:`` or a source) with the options of
        ``synth.llm``, ``synth.control_tolerance`` and the top-level seed."""
        synth = params.synth
        source = resolve_source(synth.llm_model, params.model_sources())
        fluency = None
        if synth.fluency.model:
            fluency = FluencyScorer.from_config(
                synth.fluency.model, synth.fluency, params.model_sources(), params.seed
            )
        return cls(
            source,
            control_tolerance=synth.control_tolerance,
            seed=params.seed,
            fluency=fluency,
            threshold=synth.fluency.threshold,
            **dataclasses.asdict(synth.llm),
        )

    def _prompt(self, sentence: str, phrase: str, target: str) -> str:
        """The prompt; for ``front`` it ends with the key phrase itself (a forced prefix), so
        the model only has to finish a sentence that already begins with it."""
        content = PROMPTS[target].format(phrase=phrase, sentence=sentence)
        messages = [{"role": "user", "content": content}]
        if getattr(self.tokenizer, "chat_template", None):
            prompt = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        else:
            prompt = content + "\nRewritten sentence: "
        return prompt + forced_prefix(phrase, target)

    def generate(self, prompts: list[str], *, sample: bool) -> list[str]:
        """Replies (decoded new tokens) for ``prompts``, one batch; left padding for decoding."""
        import torch

        tok = self.tokenizer
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = side
        enc = {k: v.to(self.loaded.input_device) for k, v in enc.items()}
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "pad_token_id": tok.pad_token_id,
            "do_sample": sample,
        }
        if sample:
            kwargs["temperature"] = self.temperature
        with torch.no_grad():
            out = self.model.generate(**enc, **kwargs)
        new = out[:, enc["input_ids"].shape[1] :]
        return tok.batch_decode(new, skip_special_tokens=True)

    def _accept(self, sentence: str, reply: str, phrase: str, target: str) -> bool:
        n_in, n_out = len(sentence.split()), len(reply.split())
        return n_in / 2 <= n_out <= n_in * 2 and position_ok(
            sentence,
            reply,
            phrase,
            target,
            slack_words=self.slack_words,
            control_tolerance=self.control_tolerance,
        )

    def _fluency(self, ok: dict[int, str], items: list) -> dict[int, float | None]:
        """Fluency differences (reply - original) under the check's LM (None without one)."""
        if self.fluency is None or not ok:
            return dict.fromkeys(ok)
        keys = list(ok)
        d = self.fluency.delta([ok[i] for i in keys], [items[i][0] for i in keys])
        return {i: float(x) for i, x in zip(keys, d, strict=True)}

    def rewrite_many(
        self, items: list[tuple[str, str, str]], target: str, on_done: Any = None
    ) -> list[Rewrite]:
        import torch

        check_target(target)
        torch.manual_seed(self.seed)
        results: list[Rewrite | None] = [None] * len(items)
        for start in range(0, len(items), self.batch_size):
            idx = list(range(start, min(start + self.batch_size, len(items))))
            for attempt in range(self.retries + 1):
                todo = [i for i in idx if results[i] is None]
                if not todo:
                    break
                prompts = [self._prompt(items[i][0], items[i][1], target) for i in todo]
                replies = self.generate(prompts, sample=attempt > 0)
                ok = {}
                for i, reply in zip(todo, replies, strict=True):
                    text = clean_generation(forced_prefix(items[i][1], target) + reply)
                    if self._accept(items[i][0], text, items[i][1], target):
                        ok[i] = text
                deltas = self._fluency(ok, items)
                for i, text in ok.items():
                    if deltas[i] is None or deltas[i] >= -self.threshold:
                        results[i] = Rewrite(text, "rewritten", ("llm",), deltas[i])
            for i in idx:
                if results[i] is None:
                    results[i] = Rewrite(items[i][0], "rejected")
            if on_done is not None:
                on_done(len(idx))
        return [r for r in results if r is not None]
