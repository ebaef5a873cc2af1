"""Per-sentence measures: the position family's sentences followed through the layers.

Whole-text spectra average a local effect away: the position family moves one
sentence and keeps every token, so each sentence can be measured where it stands in each
variant. This module holds both halves:

**Token spans (numpy, before any model runs).** synth writes each family text's
``sentence_spans`` (``homog.synth.position.sentence_spans``: [index in the original, start,
end] per sentence, the character span *with* the space before it) and the family's
``control_sentence``. ``sentence_tokens`` maps a text's character spans to token spans with
the tokenizer's offsets: a token belongs to the sentence whose span holds its characters. A
sentence is left out (never guessed), with the reason counted by ``match_sentences``, when

- ``straddle``: a token crosses its boundary (the tokenizer merged characters across
  sentences);
- ``truncated``: a token of it lies beyond ``extract.max_tokens``;
- ``tokens_differ``: its token ids differ from the same sentence's ids in the original of the
  review (the family keeps the multiset, but a sentence's ids could still change by place);
- ``no_original``: its review has no original with spans in the run.

Each kept sentence's row is [sentence index in the original, index in this text, first
token, end token, sentences in the text, is_key, is_control, is_ctrl] (``SENTENCE_FIELDS``;
is_control: the sentence key_control moves, is_ctrl: the same-place control ctrl_* move).

**Metrics (torch, in the extraction hooks).** For one sentence at one hidden layer, with X the
(m x d) matrix of its token vectors, c the text's mean metric token and f its first metric
token (the attention sink in most models):

- ``sent_cos_centroid``  mean_t cos(x_t, c)
- ``sent_cos_first``     mean_t cos(x_t, f)
- ``sent_erank``         erank of X (``homog.metrics.spectra``: exp of the entropy of
  sigma_i / sum sigma, eigenvalues at rounding level dropped)
- ``sent_erank_c``       erank of X with its own column mean removed (NaN for one token)
- ``sent_norm``          mean_t ||x_t||

and per attention layer (``SENT_ATTENTION``):

- ``sent_attn_in``       mean over the sentence's tokens j of the attention j receives per
  query that can see it (causal, and within the sliding window where there is one),
  averaged over heads: mean_j mean_h (sum_i A_hij / #{i: i sees j}).

Layer 0 is the built-in control: the embedding of a token does not depend on its place, so
``sent_erank``, ``sent_erank_c``, ``sent_norm`` and ``sent_cos_centroid`` (the text's
centroid is the same multiset's mean) agree across variants up to rounding at layer 0.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from homog.errors import HomogError

SENT_HIDDEN: tuple[str, ...] = (
    "sent_cos_centroid",
    "sent_cos_first",
    "sent_erank",
    "sent_erank_c",
    "sent_norm",
)
SENT_ATTENTION: tuple[str, ...] = ("sent_attn_in",)
SENTENCE_METRICS: tuple[str, ...] = SENT_HIDDEN + SENT_ATTENTION
SENTENCE_FIELDS: tuple[str, ...] = (
    "sentence",
    "sent_index",
    "tok_start",
    "tok_end",
    "n_sentences",
    "is_key",
    "is_control",
    "is_ctrl",
)
LEFT_OUT: tuple[str, ...] = ("straddle", "truncated", "tokens_differ", "no_original")


def parse_spans(value: Any) -> list[tuple[int, int, int]] | None:
    """The [(sentence, start, end), ...] of a ``sentence_spans`` cell; None when null."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return [(int(a), int(b), int(c)) for a, b, c in value]


def sentence_tokens(
    offsets: Sequence[tuple[int, int]],
    special: np.ndarray,
    spans: Sequence[tuple[int, int, int]],
    kept: int,
) -> tuple[list[tuple[int, int, int, int]], Counter[str]]:
    """Token spans of one text's sentences: [(sentence, index in the text, start, end)] for
    the sentences whose tokens lie wholly inside their character span and within the first
    ``kept`` tokens, and the count of the others by reason (``straddle``, ``truncated``).

    ``offsets``: the tokenizer's (start, end) character offsets of every token (before
    truncation); ``special``: the special-token mask (special tokens belong to no sentence).
    """
    starts = np.array([o[0] for o in offsets], dtype=np.int64)
    ends = np.array([o[1] for o in offsets], dtype=np.int64)
    real = ~np.asarray(special, dtype=bool) & (ends > starts)
    out, left = [], Counter()
    for k, (sent, a, b) in enumerate(spans):
        inside = real & (starts >= a) & (ends <= b)
        crosses = real & (starts < b) & (ends > a) & ~inside
        idx = np.flatnonzero(inside)
        if crosses.any() or idx.size == 0 or idx[-1] - idx[0] + 1 != idx.size:
            left["straddle"] += 1
        elif idx[-1] >= kept:
            left["truncated"] += 1
        else:
            out.append((sent, k, int(idx[0]), int(idx[-1]) + 1))
    return out, left


def match_sentences(
    texts: Sequence[Any], spans: dict[int, list[tuple[int, int, int, int]]], meta: Any
) -> tuple[dict[int, np.ndarray], Counter[str]]:
    """The kept sentences of every text with spans, as int64 arrays of ``SENTENCE_FIELDS``,
    and the left-out count by reason (see the module doc).

    ``texts``: the run's ``EncodedText``s; ``spans``: text index -> ``sentence_tokens`` of
    it; ``meta``: per text index, (n_sentences, key sentence, control sentence, same-place
    control sentence) as indices in the original (-1 when unknown). A sentence is kept only when
    its token ids equal those of the same sentence in its review's original.
    """
    originals = {
        t.sample_id: t.index for t in texts if t.variant == "original" and t.index in spans
    }
    ids = {t.index: t.input_ids for t in texts}
    variant = {t.index: t for t in texts}
    reference: dict[tuple[str, int], tuple[int, ...]] = {}
    for sid, i in originals.items():
        for sent, _, a, b in spans[i]:
            reference[(sid, sent)] = tuple(ids[i][a:b].tolist())
    out: dict[int, np.ndarray] = {}
    left: Counter[str] = Counter()
    for i, rows in spans.items():
        t = variant[i]
        n_sent, key, control, ctrl = meta[i]
        kept = []
        for sent, k, a, b in rows:
            ref = reference.get((t.sample_id, sent))
            if t.sample_id not in originals:
                left["no_original"] += 1
            elif ref is None or ref != tuple(ids[i][a:b].tolist()):
                left["tokens_differ"] += 1
            else:
                flags = (int(sent == key), int(sent == control), int(sent == ctrl))
                kept.append((sent, k, a, b, n_sent, *flags))
        out[i] = np.array(kept, dtype=np.int64).reshape(-1, len(SENTENCE_FIELDS))
    return out, left


# ---------------------------------------------------------------------------------------------
# metrics (torch)


def gather_index(rows: Sequence[int], bounds: Sequence[tuple[int, int]]) -> tuple[Tensor, ...]:
    """(row (S,), positions (S, m), valid (S, m)) of S sentences given as token bounds
    [start, end) in batch row ``rows[s]``; m is the longest sentence. Invalid slots hold -1:
    ``hidden_sentence_metrics`` points them at a zero row."""
    lengths = [b - a for a, b in bounds]
    m = max(lengths, default=1)
    pos = torch.full((len(bounds), m), -1, dtype=torch.long)
    for s, (a, b) in enumerate(bounds):
        pos[s, : b - a] = torch.arange(a, b)
    return torch.as_tensor(list(rows), dtype=torch.long), pos, pos >= 0


def hidden_sentence_metrics(
    hidden: Tensor, mask: Tensor, row: Tensor, pos: Tensor, valid: Tensor
) -> Tensor:
    """(S, len(SENT_HIDDEN)) float64: the sentence metrics of one hidden layer (B, n, d)
    for the sentences given by ``gather_index`` (on any device); ``mask`` (B, n): the
    metric tokens whose mean is the text's centroid and whose first is its first token.

    One gather of the sentences' tokens (float64, zero rows for padding) and one Gram matrix
    per sentence: the norms are its diagonal, the centred Gram matrix follows from it, and
    the cosines are one matrix-vector product each."""
    from homog.metrics.spectra import gram_eigenvalues, spectral_metrics

    dev = hidden.device
    b, n, d = hidden.shape
    row, pos, valid = row.to(dev), pos.to(dev), valid.to(dev)
    w = valid.to(torch.float64)
    count = w.sum(-1)
    # one zero row after the batch's rows: the padding slots (-1) point at it
    flat = torch.cat([hidden.reshape(b * n, d), hidden.new_zeros(1, d)])
    at = torch.where(valid, row.unsqueeze(-1) * n + pos, b * n)
    x = flat[at].to(torch.float64)  # (S, m, d), padding rows zero
    m = mask.to(dev)
    counts = m.sum(1, keepdim=True).clamp_min(1).to(torch.float64)
    centroid = torch.bmm(m.unsqueeze(1).to(hidden.dtype), hidden).squeeze(1).to(torch.float64)
    centroid = (centroid / counts)[row]  # (S, d)
    first = hidden[torch.arange(b, device=dev), m.long().argmax(1)].to(torch.float64)[row]
    gram = x @ x.mT  # (S, m, m)
    sq = gram.diagonal(dim1=-2, dim2=-1)
    norms = sq.clamp_min(0).sqrt()

    def mean_cos(ref: Tensor) -> Tensor:
        dots = torch.bmm(x, ref.unsqueeze(-1)).squeeze(-1)  # (S, m)
        cos = dots / (norms * ref.norm(dim=-1, keepdim=True)).clamp_min(1e-300)
        return (cos * w).sum(-1) / count

    # centred: G - r 1' - 1 r' + t on the valid rows and columns (r: row means, t: mean)
    r = (gram * w.unsqueeze(1)).sum(-1) / count.unsqueeze(-1)
    t = (r * w).sum(-1) / count
    centred = gram - r.unsqueeze(-1) - r.unsqueeze(-2) + t[:, None, None]
    centred = centred * (w.unsqueeze(-1) * w.unsqueeze(-2))
    size = max(pos.shape[1], d)
    erank = spectral_metrics(gram_eigenvalues(gram, size))["erank"]
    erank_c = spectral_metrics(gram_eigenvalues(centred, size))["erank"]
    erank_c = torch.where(count > 1, erank_c, torch.full_like(erank_c, float("nan")))
    return torch.stack(
        [mean_cos(centroid), mean_cos(first), erank, erank_c, (norms * w).sum(-1) / count], -1
    )


def seen_by(lengths: Tensor, n: int, window: int | None) -> Tensor:
    """(B, n) float: how many real queries see each key position (causal: i >= j, i <
    length; with a sliding window w also i - j < w); 0 on padding."""
    j = torch.arange(n, device=lengths.device)
    top = lengths.unsqueeze(-1).to(j.dtype)
    if window is not None:
        top = torch.minimum(top, j + window)
    return (top - j).clamp_min(0).to(torch.float64)


def attention_sentence_metric(
    column: Tensor, seen: Tensor, row: Tensor, pos: Tensor, valid: Tensor
) -> Tensor:
    """(S,) float64 ``sent_attn_in`` from one attention layer's column sums (B, H, n) and
    ``seen_by`` (B, n)."""
    dev = column.device
    row, pos, valid = row.to(dev), pos.to(dev), valid.to(dev)
    per_query = column.to(torch.float64).mean(1) / seen.to(dev).clamp_min(1)  # (B, n)
    w = valid.to(torch.float64)
    return (per_query[row.unsqueeze(-1), pos] * w).sum(-1) / w.sum(-1)


# ---------------------------------------------------------------------------------------------
# planning: the run's texts


def attach_sentences(tokenizer: Any, df: Any, encoded: Sequence[Any]) -> dict[str, int] | None:
    """Set ``sentences`` (int64 (k, len(SENTENCE_FIELDS)) of ``match_sentences``) on every
    encoded text whose row of ``df`` has ``sentence_spans``; the others keep None.

    Returns the counts for run.json (``sentences``: spans given, ``kept``, and each reason of
    ``LEFT_OUT``), or None when ``df`` has no spans (a texts table without the family, or
    from a synth that wrote no spans). Needs a fast tokenizer (offsets): a slow one raises
    HomogError with what to do.
    """
    if "sentence_spans" not in df.columns or df["sentence_spans"].isna().all():
        return None
    if not getattr(tokenizer, "is_fast", False):
        raise HomogError(
            "sentence metrics need the tokenizer's character offsets (a fast tokenizer): "
            "set extract.sentence_metrics: false for this model"
        )
    spans = {i: parse_spans(v) for i, v in enumerate(df["sentence_spans"])}
    which = [i for i, s in spans.items() if s is not None]
    texts = df["text"].tolist()
    enc = tokenizer(
        [texts[i] for i in which],
        add_special_tokens=True,
        return_special_tokens_mask=True,
        return_offsets_mapping=True,
    )
    roles = ("key_index", "control_sentence", "ctrl_sentence")
    role_of: dict[Any, tuple[int, ...]] = {}
    for i, (v, s) in enumerate(zip(df["variant"], df["sample_id"], strict=True)):
        if v == "original":  # columns absent from an older synth's texts: -1, no sentence
            role_of[s] = tuple(_int(df[c].iloc[i]) if c in df.columns else -1 for c in roles)
    token_spans, meta, left = {}, {}, Counter()
    for j, i in enumerate(which):
        t = encoded[i]  # encode_texts keeps df's order: text i is row i
        found, lost = sentence_tokens(
            enc["offset_mapping"][j], enc["special_tokens_mask"][j], spans[i], len(t.input_ids)
        )
        token_spans[i] = found
        left.update(lost)
        meta[i] = (len(spans[i]), *role_of.get(t.sample_id, (-1, -1, -1)))
    matched, differ = match_sentences(encoded, token_spans, meta)
    left.update(differ)
    for i, arr in matched.items():
        encoded[i].sentences = arr
    total = sum(len(spans[i]) for i in which)
    return {
        "sentences": total,
        "kept": total - sum(left.values()),
        **{r: left[r] for r in LEFT_OUT},
    }


def _int(value: Any) -> int:
    try:
        return -1 if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return -1
