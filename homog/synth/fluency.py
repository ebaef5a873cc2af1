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

from homog.models import load_model, resolve_source
from homog.models_gguf import EMBEDDED

# the self-check's probe: a rewrite-like sentence (two rows: full length and half, padded)
_PROBE = "As for the acting, it was far better than I had expected from a film like this."


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
        dtype: str = "float32",
    ) -> None:
        self.source = source
        self.dtype = resolve_dtype(dtype, device)
        self.loaded = load_model(
            source, device=device, dtype=self.dtype, attention=False, seed=seed
        )
        self.tokenizer = self.loaded.tokenizer
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        tok = self.tokenizer
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self._start = int(start)
        self._pad = int(tok.pad_token_id if tok.pad_token_id is not None else start)
        self._cache: dict[str, float] = {}
        self._head, self._head_rows, self._softcap = None, 0, None
        self.split_head = self._setup_head()
        # work done so far (``usage``): texts and tokens run through the model, seconds
        self._used = {"texts": 0, "tokens": 0, "wall": 0.0, "cpu": 0.0}

    @classmethod
    def from_config(cls, name: str, fcfg: Any, sources: dict[str, str], seed: int) -> FluencyScorer:
        """The scorer of ``synth.fluency`` (``fcfg``) for the model ``name`` (``model`` or
        ``audit_model``: a ``models:`` key, an embedded name or a source)."""
        source = fluency_source(name, sources)
        return cls(source, batch_size=fcfg.batch_size, seed=seed, dtype=fcfg.dtype)

    def _setup_head(self) -> bool:
        """Use the decoder + the LM head on real tokens only when this model splits that way
        and the split reproduces the whole model's log-probabilities on a probe (to 1e-4);
        otherwise keep the whole-model path. Returns which path is used."""
        import torch

        model = self.loaded.model
        get_head = getattr(model, "get_output_embeddings", None)
        head = get_head() if callable(get_head) else None
        if head is None or self.loaded.decoder is None or not hasattr(head, "weight"):
            return False
        self._head = head
        self._head_rows = max(1, 2**25 // int(head.weight.shape[0]))  # <= 128 MB of logits
        self._softcap = getattr(model.config, "final_logit_softcapping", None)
        ids = [self._start, *self.tokenizer(_PROBE, add_special_tokens=False)["input_ids"]]
        half = len(ids) // 2
        inp = torch.full((2, len(ids)), self._pad, dtype=torch.long)
        inp[0], inp[1, :half] = torch.tensor(ids), torch.tensor(ids[:half])
        mask = torch.zeros_like(inp)
        mask[0], mask[1, :half] = 1, 1
        with torch.inference_mode():
            try:
                split = self._token_logprobs(inp, mask)
            except Exception:  # noqa: BLE001 - any failure of the split means: do not use it
                split = None
            full = self._token_logprobs_full(inp, mask)
        tol = 1e-4 if self.dtype == "float32" else 2e-2  # bfloat16: 8 mantissa bits
        if split is None or not torch.allclose(split, full, rtol=tol, atol=tol):
            self._head = None
            return False
        return True

    def score(self, texts: Iterable[str]) -> np.ndarray:
        """Mean token log-probability of each text (cached by text: a string is scored once
        however often it recurs; batches hold texts of similar token length)."""
        texts = list(texts)
        # by length, then by text: a set's order changes from run to run (string hashing), and
        # a text's score depends (at rounding level, in bfloat16) on the batch it shares
        todo = sorted(
            {t for t in texts if t not in self._cache}, key=lambda t: (self._length(t), t)
        )
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
        used = {k: round(v, 2) if isinstance(v, float) else v for k, v in self._used.items()}
        return {"model": self.source, "dtype": self.dtype, **used}

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
        with torch.inference_mode():
            m = mask[:, 1:].float()
            tok_lp = self._token_logprobs(inp, mask)
            mean = (tok_lp * m).sum(1) / m.sum(1).clamp(min=1)
        return [float(v) for v in mean]

    def _token_logprobs(self, inp: Any, mask: Any) -> Any:
        """log p(token t | tokens < t) for t = 1..T-1 of each row, (B, T-1) on the CPU, zero
        where ``mask`` is 0. The LM head runs only at the real tokens' positions, in chunks of
        rows, so the (B, T, vocab) logits (1 GB per batch for a 262k vocabulary) never exist."""
        import torch

        if self._head is None:
            return self._token_logprobs_full(inp, mask)
        dev = self.loaded.input_device
        hidden = self.loaded.decoder(
            input_ids=inp.to(dev), attention_mask=mask.to(dev)
        ).last_hidden_state[:, :-1]
        keep = mask[:, 1:].bool()
        h = hidden[keep.to(hidden.device)]
        target = inp[:, 1:][keep].to(h.device)
        out = torch.empty(len(target), dtype=torch.float32)
        for i in range(0, len(target), self._head_rows):
            logits = self._head(h[i : i + self._head_rows]).float()
            if self._softcap:
                logits = torch.tanh(logits / self._softcap) * self._softcap
            picked = logits.gather(1, target[i : i + self._head_rows, None]).squeeze(1)
            out[i : i + self._head_rows] = (picked - torch.logsumexp(logits, 1)).cpu()
        tok_lp = torch.zeros(keep.shape, dtype=torch.float32)
        tok_lp[keep] = out
        return tok_lp

    def _token_logprobs_full(self, inp: Any, mask: Any) -> Any:
        """The same through the whole model's logits (the reference of the self-check, and the
        path for models whose decoder and head homog cannot split)."""
        import torch

        dev = self.loaded.input_device
        logits = self.loaded.model(input_ids=inp.to(dev), attention_mask=mask.to(dev)).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        target = inp[:, 1:].to(logp.device)
        tok_lp = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1).cpu()
        return tok_lp * mask[:, 1:].float()

    def delta(self, rewrites: list[str], originals: list[str]) -> np.ndarray:
        """score(rewrite) - score(original), per pair (negative: the rewrite reads worse)."""
        return self.score(rewrites) - self.score(originals)


def bf16_is_fast(device: str) -> bool:
    """Whether bfloat16 matrix products run natively here: a CUDA device, or a CPU whose
    oneDNN has bfloat16 kernels (AVX512-BF16 or AMX). Elsewhere bfloat16 is emulated and
    slower than float32."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without the check: assume not
        return False


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """``synth.fluency.dtype``: ``auto`` is bfloat16 where it is fast (``bf16_is_fast``),
    float32 elsewhere; ``float32`` and ``bfloat16`` are taken as they are."""
    if dtype == "auto":
        return "bfloat16" if bf16_is_fast(device) else "float32"
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"fluency dtype must be auto, float32 or bfloat16, got {dtype!r}")
    return dtype


def fluency_source(name: str, sources: dict[str, str]) -> str:
    """A ``models:`` key or a model source, as a source for ``homog.models.load_model``; the
    name of an embedded model (``smollm2-135m``) works even when ``models:`` lacks it."""
    if name not in sources and name in EMBEDDED:
        return f"embedded:{name}"
    return resolve_source(name, sources)


def summary(values: Any) -> dict[str, float | int | None]:
    """n, mean and quantiles (5/25/50/75/95%) of fluency differences, rounded (pure)."""
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {
            "n": 0,
            "mean": None,
            "p05": None,
            "p25": None,
            "median": None,
            "p75": None,
            "p95": None,
        }
    q = np.quantile(v, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {
        "n": int(len(v)),
        "mean": round(float(v.mean()), 4),
        **{
            k: round(float(x), 4)
            for k, x in zip(("p05", "p25", "median", "p75", "p95"), q, strict=True)
        },
    }
