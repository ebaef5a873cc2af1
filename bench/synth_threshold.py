"""Calibrate the BERTScore threshold of `homog synth` for a backbone on real reviews.

Scores three kinds of pairs against the original review, on N reviews drawn like the corpus
stage draws them (balanced, seed 0, 20-400 words):
  rewrite    the rule rephraser's front / end / control variants (what synth must keep)
  half       the review with its second half of sentences replaced by another review's
             (a rewrite that lost half its content: what a bad LLM rewrite looks like)
  unrelated  a different review (what synth must reject)
and prints quantiles as JSON. Usage (from the repo root):
  python bench/synth_threshold.py ../shared/data/imdb/imdb_sample.jsonl --n 200
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from homog.corpus.sources import load_source
from homog.corpus.stage import prepare_corpus
from homog.synth import build_variants
from homog.synth.bertscore import Scorer, separation
from homog.synth.keyphrase import YakeExtractor
from homog.synth.rephrase.rule import RuleRephraser
from homog.text.sentences import split_sentences


def half_swap(a: str, b: str) -> str:
    """``a``'s first half of sentences followed by ``b``'s second half."""
    sa, sb = split_sentences(a), split_sentences(b)
    ka, kb = max(1, len(sa) // 2), len(sb) // 2
    return " ".join([a[x:y] for x, y in sa[:ka]] + [b[x:y] for x, y in sb[kb:]])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", type=Path)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--backbone", default="embedded:all-minilm-l6-v2")
    ap.add_argument("--num-layers", type=int, default=None)
    args = ap.parse_args()
    raw = load_source(f"file:{args.path}")
    corpus, _ = prepare_corpus(raw, dataset="imdb", n=args.n, seed=0, min_words=20, max_words=400)
    variants = build_variants(corpus, YakeExtractor(3), RuleRephraser(), show_progress=False)
    table = variants.table
    changed = table[(table["variant"] != "original") & (table["n_rewritten"] > 0)]
    originals = corpus.set_index("sample_id")["text"]
    texts = corpus["text"].tolist()
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(texts))
    perm = np.where(perm == np.arange(len(texts)), (perm + 1) % len(texts), perm)
    scorer = Scorer(args.backbone, num_layers=args.num_layers)
    t0 = time.perf_counter()
    rewrite = scorer.f1(changed["text"].tolist(), originals.loc[changed["sample_id"]].tolist())
    unrelated = scorer.f1([texts[j] for j in perm], texts)
    half = scorer.f1([half_swap(texts[i], texts[j]) for i, j in enumerate(perm)], texts)
    seconds = time.perf_counter() - t0
    summary = separation(rewrite, unrelated)
    summary.update(
        backbone=args.backbone,
        n_texts=len(texts),
        n_rewrites=len(rewrite),
        half_median=float(np.median(half)),
        half_p95=float(np.quantile(half, 0.95)),
        half_max=float(half.max()),
        rewrite_share_ge={str(t): float((rewrite >= t).mean()) for t in (0.85, 0.9, 0.95)},
        half_share_ge={str(t): float((half >= t).mean()) for t in (0.85, 0.9, 0.95)},
        seconds_scoring=round(seconds, 1),
    )
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
