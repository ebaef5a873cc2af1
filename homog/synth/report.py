"""The synth report's per-variant measures: key-phrase edges and moves, edit distance, rewrite
kinds, fluency (filter and audit model) and examples for a person to read.

All functions but ``audit`` are pure: they read the sentence-level table of
``homog.synth.stage.Variants.rewrites`` (one row per keyed sentence and target: sample_id,
variant, sentence, phrase, original, text, status, kinds, fluency) restricted to kept texts.

Positions are measured per key phrase in its sentence, as ``../shared/tools/kp_positions.py``
does: ``at_front`` = at most 2 words before the phrase, ``at_end`` = at most 2 words after it,
``moved`` = the relative position moved by 0.2 or more toward the variant's edge (front: down,
end: up, control: either way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from homog.progress import progress
from homog.synth.fluency import summary
from homog.synth.keyphrase import phrase_span, relative_position, words
from homog.synth.rephrase import TARGETS
from homog.synth.selection import VARIANTS

if TYPE_CHECKING:
    from homog.synth.variants import Variants

EDGE_WORDS = 2
MOVE = 0.2


def word_edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between the word sequences of ``a`` and ``b``."""
    x, y = words(a), words(b)
    if x == y:
        return 0
    prev = list(range(len(y) + 1))
    for i, wx in enumerate(x, 1):
        cur = [i]
        for j, wy in enumerate(y, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (wx != wy)))
        prev = cur
    return prev[-1]


def _edges(sentence: str, phrase: str) -> tuple[bool, bool] | None:
    span = phrase_span(sentence, phrase)
    if span is None:
        return None
    i, k, n = span
    return i <= EDGE_WORDS, n - k - i <= EDGE_WORDS


def position_measures(rewrites: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Per variant (original included, from the front rows' originals): phrases measured,
    share at the front, at the end, and share moved by >= 0.2 toward the variant's edge."""
    out: dict[str, dict[str, float | int]] = {}
    if rewrites.empty:
        return out
    base = rewrites[rewrites["variant"] == rewrites["variant"].iloc[0]]
    views = {"original": (base, "original")}
    for v in rewrites["variant"].unique():
        views[v] = (rewrites[rewrites["variant"] == v], "text")
    for v, (rows, column) in views.items():
        front = end = moved = n = 0
        for sent, orig, phrase in zip(rows[column], rows["original"], rows["phrase"], strict=True):
            e = _edges(sent, phrase)
            if e is None:
                continue
            n += 1
            front += e[0]
            end += e[1]
            p, o = relative_position(sent, phrase), relative_position(orig, phrase)
            if p is None or o is None or v == "original":
                continue
            d = p - o
            moved += (d <= -MOVE) if v == "front" else (d >= MOVE) if v == "end" else abs(d) >= MOVE
        out[v] = {
            "phrases": n,
            "at_front": round(front / max(n, 1), 4),
            "at_end": round(end / max(n, 1), 4),
            **({} if v == "original" else {"moved": round(moved / max(n, 1), 4)}),
        }
    return out


def edit_distance(rewrites: pd.DataFrame, n_texts: int) -> dict[str, float]:
    """Mean word-level edit distance of a kept text from its original, per variant (the sum
    over its rewritten sentences, since sentences are replaced in place)."""
    out = {}
    for v, rows in rewrites.groupby("variant", sort=False):
        changed = rows[rows["status"] == "rewritten"]
        total = sum(
            word_edit_distance(a, b)
            for a, b in zip(changed["original"], changed["text"], strict=True)
        )
        out[str(v)] = round(total / max(n_texts, 1), 3)
    return out


def kind_counts(rewrites: pd.DataFrame) -> dict[str, dict[str, int]]:
    """How often each move kind fired in the rewritten sentences, per variant."""
    out: dict[str, dict[str, int]] = {}
    for v, rows in rewrites.groupby("variant", sort=False):
        counts: dict[str, int] = {}
        for kinds in rows.loc[rows["status"] == "rewritten", "kinds"]:
            for kind in filter(None, str(kinds).split("+")):
                counts[kind] = counts.get(kind, 0) + 1
        out[str(v)] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
    return out


def fluency_filter(rewrites: pd.DataFrame) -> dict[str, Any]:
    """The filter model's score differences (rewrite - original) of the accepted rewrites."""
    out = {}
    for v, rows in rewrites.groupby("variant", sort=False):
        vals = rows.loc[rows["status"] == "rewritten", "fluency"].dropna()
        out[str(v)] = summary(vals.astype(float))
    return out


def sample_rewrites(rewrites: pd.DataFrame, n: int, seed: int) -> dict[str, pd.DataFrame]:
    """Up to ``n`` random rewritten sentences per variant (seeded)."""
    out = {}
    for v, rows in rewrites.groupby("variant", sort=False):
        done = rows[rows["status"] == "rewritten"]
        out[str(v)] = done.sample(n=min(n, len(done)), random_state=seed) if len(done) else done
    return out


def examples(rewrites: pd.DataFrame, n: int, seed: int) -> dict[str, list[dict[str, str]]]:
    """``n`` random rewrites per variant for a person to read (phrase, original, rewrite)."""
    return {
        v: [
            {"phrase": r.phrase, "kinds": r.kinds, "original": r.original, "rewrite": r.text}
            for r in rows.itertuples()
        ]
        for v, rows in sample_rewrites(rewrites, n, seed).items()
    }


def audit(
    rewrites: pd.DataFrame,
    scorer: Any,
    n: int,
    seed: int,
    threshold: float,
    *,
    show_progress: bool = False,
) -> dict[str, Any]:
    """The audit model's score differences on up to ``n`` random rewrites per variant:
    their distribution, the share within ``threshold`` and whether the median is."""
    out: dict[str, Any] = {"model": getattr(scorer, "source", "custom"), "threshold": threshold}
    samples = sample_rewrites(rewrites, n, seed)
    with progress(transient=True) as bar:
        task = bar.add_task(
            "fluency audit", total=sum(len(r) for r in samples.values()), visible=show_progress
        )
        for v, rows in samples.items():
            if rows.empty:
                out[v] = summary([])
                continue
            d = scorer.delta(rows["text"].tolist(), rows["original"].tolist())
            s = summary(d)
            s["within_threshold"] = round(float(np.mean(d >= -threshold)), 4)
            s["median_within_threshold"] = bool(np.median(d) >= -threshold)
            out[v] = s
            bar.advance(task, len(rows))
    return out


def _mean(values: pd.Series) -> float | None:
    v = values.dropna()
    return round(float(v.mean()), 4) if len(v) else None


def make_report(
    variants: Variants, keep: pd.Series, counts: dict[str, Any], meta: dict[str, Any]
) -> dict[str, Any]:
    """The report.json dict (pure): counts, rewrite rates, mean F1 and positions."""
    table = variants.table
    kept = table[table["sample_id"].isin(keep[keep].index)]
    rate = {
        t: round(variants.status[t].get("rewritten", 0) / max(variants.keyed_sentences, 1), 4)
        for t in TARGETS
    }
    by_variant = {v: kept[kept["variant"] == v] for v in VARIANTS}
    all_by_variant = {v: table[table["variant"] == v] for v in VARIANTS}
    return {
        **meta,
        "texts_in": int(table["sample_id"].nunique()),
        "texts_kept": int(keep.sum()),
        "kept_per_variant": counts["pass_per_variant"],
        "dropped": {
            "no_keyphrase": counts["no_keyphrase"],
            "not_rewritten": counts["not_rewritten"],
            "below_threshold": counts["below_threshold"],
        },
        "unchanged_per_variant": counts["unchanged_per_variant"],
        "sentences": variants.sentences,
        "keyphrase_sentences": variants.keyed_sentences,
        "sentence_status": variants.status,
        "keyphrase_sources": variants.keyphrase_sources,
        "phrase_retries": variants.phrase_retries,
        "rewrite_rate": rate,
        "bertscore_f1": {v: _mean(by_variant[v]["bertscore_f1"]) for v in TARGETS},
        "bertscore_f1_all": {v: _mean(all_by_variant[v]["bertscore_f1"]) for v in TARGETS},
        "keyphrase_position": {v: _mean(by_variant[v]["position"]) for v in VARIANTS},
        **variant_measures(variants, keep),
    }


def variant_measures(variants: Variants, keep: pd.Series) -> dict[str, Any]:
    """The per-variant measures of kept texts (``homog.synth.report``): key phrases at the
    front/end and moved, texts changed, word edit distance, rewrite kinds, fluency (pure)."""
    table = variants.table
    kept_ids = set(keep[keep].index)
    kept = table[table["sample_id"].isin(kept_ids)]
    wide = kept.pivot(index="sample_id", columns="variant", values="text")
    changed = {
        v: round(float((wide[v] != wide["original"]).mean()), 4) if len(wide) else None
        for v in TARGETS
    }
    rw = variants.rewrites
    if rw is None:
        return {"texts_changed": changed}
    rw = rw[rw["sample_id"].isin(kept_ids)]
    return {
        "texts_changed": changed,
        "keyphrase_edges": position_measures(rw),
        "edit_distance": edit_distance(rw, len(kept_ids)),
        "rewrite_kinds": kind_counts(rw),
        "fluency": fluency_filter(rw),
    }


def dropped_reviews(
    selected: dict[Any, tuple[str, str]], over_budget: Any, family: Any = None, kept: Any = None
) -> list[dict[str, str]]:
    """Every review synth dropped, one entry each (sample_id, stage, reason, detail), sorted
    by sample_id (pure; the counts alone would name no review). ``selected``: ``select``'s
    reasons; ``over_budget``: sample_ids whose original does not fit the token budget;
    ``family``: the position family's build (its ``reasons``), or None. A review dropped at
    several stages is listed at the first. ``kept`` (a boolean Series by sample_id, or None):
    the reviews still in the texts table; each entry's ``kept_in`` says which variants a
    review dropped by one stage keeps (``position_family``: the paper's rewrites failed but
    the family holds it; ``paper_variants``: the reverse; ``none``)."""
    out: dict[str, dict[str, str]] = {}
    for sid, (reason, detail) in selected.items():
        out[str(sid)] = {"stage": "select", "reason": reason, "detail": detail}
    budget = "the original does not fit extract.max_tokens"
    for sid in over_budget:
        out.setdefault(
            str(sid), {"stage": "budget", "reason": "original_over_budget", "detail": budget}
        )
    for sid, (reason, detail) in (getattr(family, "reasons", None) or {}).items():
        out.setdefault(str(sid), {"stage": "position_family", "reason": reason, "detail": detail})
    in_family = {str(s) for s in getattr(family, "kept", set())}
    still = {str(s) for s in kept[kept].index} if kept is not None else set()
    for sid, entry in out.items():
        entry["kept_in"] = (
            "none"
            if sid not in still
            else "position_family"
            if sid in in_family
            else "paper_variants"
        )
    return [{"sample_id": sid, **out[sid]} for sid in sorted(out)]
