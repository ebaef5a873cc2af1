"""Fluency of sentences under a small causal LM: mean token log-probability, batched, cached.

``FluencyScorer(source).score(texts)`` returns, per text, the mean natural-log probability of
its tokens given the ones before it (the first token given the model's BOS, or EOS when it has
none), so a rewrite and its original are compared per token whatever their lengths. The synth
stage accepts a rewrite when ``score(rewrite) >= score(original) - synth.fluency.threshold``
(``delta`` below) and audits the accepted rewrites with a second model.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np


class FluencyScorer:
    """Mean token log-probability under the causal LM ``source`` (``homog.models`` source)."""

    def __init__(
        self,
        source: str,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        max_tokens: int = 96,
        seed: int = 0,
    ) -> None:
        from homog.models import load_model

        self.source = source
        self.loaded = load_model(source, device=device, attention=False, seed=seed)
        self.tokenizer = self.loaded.tokenizer
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        tok = self.tokenizer
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self._start = int(start)
        self._pad = int(tok.pad_token_id if tok.pad_token_id is not None else start)
        self._cache: dict[str, float] = {}
        # work done so far (``usage``): texts and tokens run through the model, seconds
        self._used = {"texts": 0, "tokens": 0, "wall": 0.0, "cpu": 0.0}

    def score(self, texts: Iterable[str]) -> np.ndarray:
        """Mean token log-probability of each text (cached by text: a string is scored once
        however often it recurs; batches hold texts of similar token length)."""
        texts = list(texts)
        todo = sorted({t for t in texts if t not in self._cache}, key=self._length)
        w0, c0 = time.perf_counter(), time.process_time()
        for i in range(0, len(todo), self.batch_size):
            batch = todo[i : i + self.batch_size]
            for text, value in zip(batch, self._score_batch(batch), strict=True):
                self._cache[text] = value
        self._used["wall"] += time.perf_counter() - w0
        self._used["cpu"] += time.process_time() - c0
        return np.array([self._cache[t] for t in texts], dtype=float)

    def _length(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def usage(self) -> dict[str, float | int | str]:
        """The model, texts and tokens scored so far, and the wall/CPU seconds it took."""
        return {"model": self.source, **{k: round(v, 2) if isinstance(v, float) else v
                                         for k, v in self._used.items()}}  # fmt: skip

    def _score_batch(self, texts: list[str]) -> list[float]:
        import torch

        ids = [
            [self._start, *self.tokenizer(t, add_special_tokens=False)["input_ids"]][
                : self.max_tokens + 1
            ]
            for t in texts
        ]
        width = max(len(x) for x in ids)
        self._used["texts"] += len(ids)
        self._used["tokens"] += sum(len(x) for x in ids)
        inp = torch.full((len(ids), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for r, x in enumerate(ids):
            inp[r, : len(x)] = torch.tensor(x)
            mask[r, : len(x)] = 1
        dev = self.loaded.input_device
        with torch.inference_mode():
            logits = self.loaded.model(
                input_ids=inp.to(dev), attention_mask=mask.to(dev)
            ).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            target = inp[:, 1:].to(logp.device)
            tok_lp = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
            m = mask[:, 1:].to(logp.device).float()
            mean = (tok_lp * m).sum(1) / m.sum(1).clamp(min=1)
        return [float(v) for v in mean.cpu()]

    def delta(self, rewrites: list[str], originals: list[str]) -> np.ndarray:
        """score(rewrite) - score(original), per pair (negative: the rewrite reads worse)."""
        return self.score(rewrites) - self.score(originals)


def fluency_source(name: str, sources: dict[str, str]) -> str:
    """A ``models:`` key or a model source, as a source for ``homog.models.load_model``; the
    name of an embedded model (``smollm2-135m``) works even when ``models:`` lacks it."""
    from homog.models import EMBEDDED, resolve_source

    if name not in sources and name in EMBEDDED:
        return f"embedded:{name}"
    return resolve_source(name, sources)


def summary(values: Any) -> dict[str, float | int | None]:
    """n, mean and quantiles (5/25/50/75/95%) of fluency differences, rounded (pure)."""
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"n": 0, "mean": None, "p05": None, "p25": None, "median": None, "p75": None,
                "p95": None}  # fmt: skip
    q = np.quantile(v, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {"n": int(len(v)), "mean": round(float(v.mean()), 4),
            **{k: round(float(x), 4) for k, x in zip(("p05", "p25", "median", "p75", "p95"), q,
                                                      strict=True)}}  # fmt: skip
