"""Length-matched rewrites (``synth.length_match``) and what the manipulation did to the texts.

With ``synth.length_match: true`` a front/end/control rewrite is kept only when the text keeps
its token count under every model's tokenizer (the keys of ``models:``, tokenized as
extraction tokenizes, ``homog.text.tokens``):

- the parse rephraser asks ``LengthFilter.keep`` about every rewrite it ranks, each measured
  in a window of the review around its sentence (tokens may merge across a join), before the
  fluency check, so the check scores only rewrites that keep the count; a sentence whose
  rewrites all change it gets the status ``length_mismatch``;
- after every sentence is rewritten, ``enforce`` measures the whole variant texts and reverts,
  one at a time, the rewrites of a text that together change its count (rewrites of one text
  may interact at a join).

``manipulation`` builds ``report.json["manipulation"]``:

- ``length_match``: per variant, side by side: the share of rewritable sentences whose
  rewrite kept the token count, the token change of every kept text against its original
  per model (mean and distribution), and the move-kind mix of the kept rewrites, with
  ``control_kind_distance`` (``kind_distance``: how far the control's mix is from front's and
  end's);
- ``edges``: per variant, the share of key phrases within ``EDGE_WORDS`` words of their
  sentence's start and end, beside the original's share of the same sentences and the shift
  between them, counting only the sentences that reach the model (all their tokens within
  ``min(extract.max_tokens, context)`` of the text, in the original and in the variant, under
  every model's tokenizer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from homog.config import Params
from homog.synth.keyphrase import edges
from homog.synth.rephrase import TARGETS
from homog.synth.variants import assemble
from homog.text.sentences import LEAD
from homog.text.tokens import model_tokenizers, token_budgets, token_counts

if TYPE_CHECKING:
    from homog.synth.variants import Sentences, Variants

EDGE_WORDS = 2
WINDOW = 40  # characters of the review on each side of a sentence when its rewrites are measured
MISMATCH = "length_mismatch"


class LengthFilter:
    """Token counts of texts under every model's tokenizer (``tokenizers``: key -> tokenizer),
    and which rewrites keep them."""

    def __init__(self, tokenizers: Mapping[str, Any], window: int = WINDOW) -> None:
        self.tokenizers = dict(tokenizers)
        self.window = window
        self._cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_params(cls, params: Params) -> LengthFilter:
        """A filter over the tokenizers of every key of ``params.models``."""
        return cls(model_tokenizers(params))

    def counts(self, texts: Sequence[str]) -> list[tuple[int, ...]]:
        """Each text's token count (special tokens included) per model, in ``tokenizers``
        order, as the model sees it: after ``LEAD`` (every variant text starts with it, and
        the first word is another token without it: "Bizarre" vs " Bizarre"); one batch per
        tokenizer for the texts not seen before."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            seen = [LEAD + t for t in todo]
            per_model = [token_counts(tok, seen) for tok in self.tokenizers.values()]
            for k, t in enumerate(todo):
                self._cache[t] = tuple(c[k] for c in per_model)
        return [self._cache[t] for t in texts]

    def keep(self, sentence: str, context: str, rewrites: Sequence[str]) -> list[bool]:
        """Does each rewrite of ``sentence`` keep the token count of its window of
        ``context`` (``window`` characters either side; the sentence alone when ``context``
        does not hold it) under every tokenizer? Windows are counted after ``LEAD``, so a
        sentence that opens the review is measured as it opens the variant text."""
        if not rewrites:
            return []
        a = context.find(sentence) if context else -1
        if a < 0:
            left, right = "", ""
        else:
            left = context[max(0, a - self.window) : a]
            right = context[a + len(sentence) : a + len(sentence) + self.window]
        texts = [left + s + right for s in (sentence, *rewrites)]
        base, *rest = self.counts(texts)
        return [c == base for c in rest]


def enforce(
    variants: Variants, lf: LengthFilter, rebuild: Callable[[Variants, str, Any], None]
) -> dict[str, int]:
    """Make every front/end/control text keep its original's token count under every
    tokenizer: a text that does not has its rewrites reverted one at a time (the first whose
    revert restores the count; all of them when none does). Reverted rewrites get the status
    ``length_mismatch`` in ``variants.rewrites``. Returns {"texts": texts fixed, "rewrites":
    rewrites reverted}."""
    table = variants.table
    originals = table[table["variant"] == "original"].set_index("sample_id")["text"]
    fixed = reverted = 0
    for target in TARGETS:
        edits = variants.edits.get(target, {})
        sids = [s for s, done in edits.items() if done]
        texts = [assemble(variants.docs[s], edits[s]) for s in sids]
        counts = lf.counts(texts)
        base = lf.counts([originals[s] for s in sids])
        for sid, c, b in zip(sids, counts, base, strict=True):
            if c == b:
                continue
            done, doc = edits[sid], variants.docs[sid]
            trials = {i: {j: t for j, t in done.items() if j != i} for i in done}
            ok = [i for i, rest in trials.items() if lf.counts([assemble(doc, rest)])[0] == b]
            drop = [ok[0]] if ok else list(done)
            for i in drop:
                del done[i]
                _mark(variants, target, sid, i, doc)
            reverted += len(drop)
            fixed += 1
            rebuild(variants, target, sid)
    return {"texts": fixed, "rewrites": reverted}


def _mark(variants: Variants, target: str, sid: Any, i: int, doc: Sentences) -> None:
    rw = variants.rewrites
    if rw is None:
        return
    row = (rw["variant"] == target) & (rw["sample_id"] == sid) & (rw["sentence"] == i)
    rw.loc[row, "status"] = MISMATCH
    rw.loc[row, "text"] = doc.sentence(i)


# ---------------------------------------------------------------------------------------------
# the report


def token_changes(variants: Variants, kept: set, lf: LengthFilter) -> dict[str, Any]:
    """Per variant and model: the token count of each kept text minus its original's (mean,
    and the distribution as {change: texts})."""
    table = variants.table[variants.table["sample_id"].isin(kept)]
    wide = table.pivot(index="sample_id", columns="variant", values="text")
    out: dict[str, Any] = {}
    if wide.empty:
        return out
    base = np.array(lf.counts(wide["original"].tolist()))
    for v in (c for c in wide.columns if c != "original"):
        delta = np.array(lf.counts(wide[v].tolist())) - base
        out[str(v)] = {
            model: {
                "mean": round(float(delta[:, m].mean()), 4),
                "distribution": {
                    str(k): int(n) for k, n in sorted(Counter(delta[:, m].tolist()).items())
                },
            }
            for m, model in enumerate(lf.tokenizers)
        }
    return out


def kind_mix(rewrites: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per variant: the share of the kept rewrites that used each move kind (a rewrite with
    two moves counts for both)."""
    out: dict[str, dict[str, float]] = {}
    for v, rows in rewrites.groupby("variant", sort=False):
        done = rows.loc[rows["status"] == "rewritten", "kinds"]
        counts = Counter(k for kinds in done for k in str(kinds).split("+") if k)
        out[str(v)] = {k: round(n / max(len(done), 1), 4) for k, n in counts.most_common()}
    return out


def kind_distance(mix: Mapping[str, Mapping[str, float]]) -> float | None:
    """Total-variation distance (0: the same mix, 1: no kind in common) between the control's
    move kinds and front's and end's pooled (each mix normalised to sum 1; front and end
    weigh equally); None when a side has no rewrite."""

    def norm(m: Mapping[str, float]) -> dict[str, float]:
        total = sum(m.values())
        return {k: x / total for k, x in m.items()} if total else {}

    ctrl = norm(mix.get("control", {}))
    sides = [norm(mix.get(v, {})) for v in ("front", "end")]
    sides = [m for m in sides if m]
    if not ctrl or not sides:
        return None
    pooled = {k: sum(m.get(k, 0.0) for m in sides) / len(sides) for m in sides for k in m}
    keys = set(ctrl) | set(pooled)
    return round(0.5 * sum(abs(ctrl.get(k, 0.0) - pooled.get(k, 0.0)) for k in keys), 4)


def length_report(
    variants: Variants, keep: pd.Series, lf: LengthFilter, enabled: bool, reverts: dict
) -> dict[str, Any]:
    """``report.json["manipulation"]["length_match"]`` (module docstring)."""
    kept = set(keep[keep].index)
    rw = variants.rewrites if variants.rewrites is not None else pd.DataFrame()
    changes = token_changes(variants, kept, lf)
    mix = kind_mix(rw[rw["sample_id"].isin(kept)]) if len(rw) else {}
    per_variant = {}
    for v in TARGETS:
        status = variants.status.get(v, {})
        rows = rw[rw["variant"] == v] if len(rw) else rw
        done = int((rows["status"] == "rewritten").sum()) if len(rows) else 0
        lost = int((rows["status"] == MISMATCH).sum()) if len(rows) else 0
        per_variant[v] = {
            "rewritten": done,
            "length_mismatch": lost,
            "kept_share": round(done / (done + lost), 4) if done + lost else None,
            "sentence_status": status,
            "token_change": changes.get(v, {}),
            "kinds": mix.get(v, {}),
        }
    n_in = int(variants.table["sample_id"].nunique())
    return {
        "enabled": enabled,
        "models": list(lf.tokenizers),
        "texts_in": n_in,
        "texts_kept": len(kept),
        "texts_kept_share": round(len(kept) / max(n_in, 1), 4),
        "text_reverts": reverts,
        "variants": per_variant,
        "control_kind_distance": kind_distance(mix),
    }


def reach_limits(texts: Sequence[str], lf: LengthFilter, budgets: Mapping[str, int]) -> list[int]:
    """For each text, the number of its leading characters that reach every model: all of it
    when it fits every budget, else the end of the last token kept by the tightest model."""
    limits = [len(t) for t in texts]
    for key, tok in lf.tokenizers.items():
        enc = tok(list(texts), add_special_tokens=True, return_offsets_mapping=True)
        for k, offsets in enumerate(enc["offset_mapping"]):
            budget = budgets[key]
            if len(offsets) > budget:
                kept = [e for _s, e in offsets[:budget]]
                limits[k] = min(limits[k], max(kept))
    return limits


def sentence_spans(doc: Sentences, text: str, done: Mapping[int, str] | None) -> list[tuple]:
    """(start, end) of each of the doc's sentences in a variant ``text``: from the rewrites
    ``done`` replacing sentences in place, or (``done`` None: sentences moved, not rewritten)
    where the sentence's text first occurs (None where it does not)."""
    if done is not None:
        spans, shift = [], 0
        for i, (a, b) in enumerate(doc.spans):
            new = len(done.get(i, doc.text[a:b]))
            spans.append((a + shift, a + shift + new))
            shift += new - (b - a)
        return spans
    out: list[tuple] = []
    for i in range(len(doc.spans)):
        a = text.find(doc.sentence(i))
        out.append((a, a + len(doc.sentence(i))) if a >= 0 else None)
    return out


def edge_shares(
    variants: Variants, keep: pd.Series, lf: LengthFilter, budgets: Mapping[str, int]
) -> dict[str, dict[str, float | int | None]]:
    """``report.json["manipulation"]["edges"]`` (module docstring): per variant,
    start_share / end_share of its key phrases, the original's over the same sentences, the
    shifts and the number of sentences counted."""
    kept = list(keep[keep].index)
    table = variants.table[variants.table["sample_id"].isin(kept)]
    wide = table.pivot(index="sample_id", columns="variant", values="text")
    out: dict[str, dict[str, float | int | None]] = {}
    if wide.empty:
        return out
    limit = {
        v: dict(zip(wide.index, reach_limits(wide[v].tolist(), lf, budgets), strict=True))
        for v in wide.columns
    }
    for v in (c for c in wide.columns if c != "original"):
        rows = []
        for sid in wide.index:
            doc = variants.docs[sid]
            done = variants.edits[v].get(sid, {}) if v in variants.edits else None
            spans_o = doc.spans
            spans_v = sentence_spans(doc, wide.at[sid, v], done)
            for i in doc.keyed:
                if spans_v[i] is None or spans_o[i][1] > limit["original"][sid]:
                    continue
                if spans_v[i][1] > limit[v][sid]:
                    continue
                phrase = doc.phrases[i] or ""
                sent_v = wide.at[sid, v][spans_v[i][0] : spans_v[i][1]]
                eo, ev = edges(doc.sentence(i), phrase), edges(sent_v, phrase)
                if eo is None or ev is None:
                    continue
                rows.append(
                    (
                        ev[0] <= EDGE_WORDS,
                        ev[1] <= EDGE_WORDS,
                        eo[0] <= EDGE_WORDS,
                        eo[1] <= EDGE_WORDS,
                    )
                )
        counted = np.array(rows, dtype=bool).reshape(-1, 4)
        n = len(counted)
        share = [round(float(counted[:, j].mean()), 4) if n else None for j in range(4)]
        out[str(v)] = {
            "start_share": share[0],
            "end_share": share[1],
            "start_share_original": share[2],
            "end_share_original": share[3],
            "start_shift": round(share[0] - share[2], 4) if n else None,
            "end_shift": round(share[1] - share[3], 4) if n else None,
            "sentences": n,
        }
    return out


def prepare(
    params: Params, rephraser: Any, variants: Variants, rebuild: Callable
) -> tuple[LengthFilter, dict[str, int]]:
    """The rephraser's length filter (a new one when it has none) and, with
    ``synth.length_match``, ``enforce`` on the variant texts (else no reverts)."""
    lf = getattr(rephraser, "length_filter", None) or LengthFilter.from_params(params)
    if not params.synth.length_match:
        return lf, {"texts": 0, "rewrites": 0}
    return lf, enforce(variants, lf, rebuild)


def manipulation(
    params: Params, variants: Variants, keep: pd.Series, lf: LengthFilter, reverts: dict
) -> dict[str, Any]:
    """``report.json["manipulation"]``'s ``length_match`` and ``edges`` (module docstring)."""
    return {
        "length_match": length_report(variants, keep, lf, params.synth.length_match, reverts),
        "edges": edge_shares(variants, keep, lf, token_budgets(params)),
    }
