"""Every variant of the corpus, built in memory (``build_variants``): each text split into
sentences, each sentence given a key phrase (``key_sentences``), every keyed sentence
rewritten per target, a second phrase tried where front or end read badly
(``retry_phrases``), and the variant texts assembled. The synth stage (``homog.synth.stage``)
validates and writes them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from homog.config.synth import KeyphraseConfig
from homog.progress import progress
from homog.synth.keyphrase import KeyphraseExtractor, edges
from homog.synth.rephrase import TARGETS, Rephraser, Rewrite
from homog.synth.salience import Salience
from homog.synth.selection import VARIANTS
from homog.synth.timing import Phases
from homog.synth.variants import Sentences, Variants, assemble, mean_position
from homog.text.sentences import split_sentences

PHRASE_SEP = " | "
# the columns of ``Variants.rewrites``: one row per (keyed sentence, target)
REWRITE_COLUMNS = [
    "sample_id",
    "variant",
    "sentence",
    "phrase",
    "original",
    "text",
    "status",
    "kinds",
    "fluency",
]
# sentences handed to the rephraser's parse at once (only so that the bar moves)
PARSE_CHUNK = 512


def key_sentences(
    text: str, extractor: KeyphraseExtractor, rephraser: Rephraser, candidates: int
) -> Sentences:
    """Split ``text`` and choose each sentence's key phrase (None where none is extracted)."""
    spans = split_sentences(text)
    phrases: list[str | None] = []
    extracted: list[list[str]] = []
    for a, b in spans:
        options = extractor.extract(text[a:b], candidates)
        extracted.append(options)
        phrases.append(rephraser.select_phrase(text[a:b], options, text) if options else None)
    return Sentences(text, spans, phrases, extracted)


def _at_edges(results: dict[str, list[Rewrite]], j: int, phrase: str) -> int:
    """How many of front/end put ``phrase`` within 2 words of their edge in item j's result."""
    reached = 0
    for target, side in (("front", 0), ("end", 1)):
        e = edges(results[target][j].text, phrase)
        reached += e is not None and e[side] <= 2
    return reached


def retry_phrases(
    items: list[tuple[Sentences, int]],
    per_target: dict[str, list[Rewrite]],
    rephraser: Rephraser,
    on_done: Any = None,
    on_start: Any = None,
) -> dict[str, int]:
    """A sentence whose front or end rewrite failed the fluency check gets one more try with
    the next phrase ``rephraser.alternative_phrase`` offers: its three rewrites replace the
    first ones (and it becomes the sentence's key phrase) when they put the phrase at more
    of the two edges. ``items`` and ``per_target`` are updated in place; returns
    {"tried": .., "changed": ..}. ``on_start(n)`` learns the number of rewrites to come,
    ``on_done(k)`` each k done (progress)."""
    failed = [
        j
        for j in range(len(items))
        if any(per_target[t][j].status == "not_fluent" for t in ("front", "end"))
    ]
    alternatives: dict[int, str] = {}
    for j in failed:
        doc, i = items[j]
        phrase = doc.phrases[i] or ""
        alt = rephraser.alternative_phrase(
            doc.sentence(i), doc.extracted(i), doc.text, frozenset({phrase.lower()})
        )
        if alt and alt.lower() != phrase.lower():
            alternatives[j] = alt
    keys = list(alternatives)
    requests = [
        (items[j][0].sentence(items[j][1]), alternatives[j], items[j][0].text) for j in keys
    ]
    if on_start is not None:
        on_start(len(TARGETS) * len(requests))
    second = {t: rephraser.rewrite_many(requests, t, on_done=on_done) for t in TARGETS}
    changed = 0
    for n, j in enumerate(keys):
        doc, i = items[j]
        new = {t: [second[t][n]] for t in TARGETS}
        if _at_edges(new, 0, alternatives[j]) > _at_edges(per_target, j, doc.phrases[i] or ""):
            doc.phrases[i] = alternatives[j]
            for t in TARGETS:
                per_target[t][j] = second[t][n]
            changed += 1
    return {"tried": len(keys), "changed": changed}


def _parse_all(
    corpus: pd.DataFrame, rephraser: Rephraser, show_progress: bool, phases: Phases
) -> None:
    """The parse phase: one batched pass of ``rephraser.prepare`` over every sentence."""
    # one batched pass over every sentence (the parse rephraser parses them all at once);
    # handed over in chunks only so that the bar moves
    sentences = [text[a:b] for text in corpus["text"] for a, b in split_sentences(text)]
    with phases.phase("parse"), progress(transient=True) as bar:
        task = bar.add_task("parse", total=len(sentences), visible=show_progress)
        for a in range(0, len(sentences), PARSE_CHUNK):
            rephraser.prepare(sentences[a : a + PARSE_CHUNK])
            bar.advance(task, len(sentences[a : a + PARSE_CHUNK]))


def _choose_phrases(
    corpus: pd.DataFrame,
    extractor: KeyphraseExtractor,
    rephraser: Rephraser,
    candidates: int,
    salience: Salience | None,
    show_progress: bool,
    phases: Phases,
) -> list[Sentences]:
    """The keyphrases phase: every corpus text's sentences with their key phrases."""
    docs: list[Sentences] = []
    with phases.phase("keyphrases"), progress(transient=True) as bar:
        if hasattr(rephraser, "salience"):  # the parse rephraser ranks phrases by salience
            rephraser.salience = salience or Salience.fit(corpus["text"].tolist())
        task = bar.add_task("key phrases", total=len(corpus), visible=show_progress)
        for text in corpus["text"]:
            docs.append(key_sentences(text, extractor, rephraser, candidates))
            bar.advance(task)
    return docs


def _rewrite_all(
    items: list[tuple[Sentences, int]],
    rephraser: Rephraser,
    show_progress: bool,
    phases: Phases,
) -> dict[str, list[Rewrite]]:
    """The rewrite_<target> phases: target -> one rewrite per item, in order."""
    requests = [(d.sentence(i), d.phrases[i] or "", d.text) for d, i in items]
    per_target: dict[str, list[Rewrite]] = {}
    with progress(transient=True) as bar:
        for target in TARGETS:
            task = bar.add_task(f"rewrite {target}", total=len(requests), visible=show_progress)
            with phases.phase(f"rewrite_{target}"):
                per_target[target] = rephraser.rewrite_many(
                    requests, target, on_done=lambda k, t=task: bar.advance(t, k)
                )
    return per_target


def _retry(
    items: list[tuple[Sentences, int]],
    per_target: dict[str, list[Rewrite]],
    rephraser: Rephraser,
    show_progress: bool,
    phases: Phases,
) -> dict[str, int]:
    """The retry phase: ``retry_phrases`` with a progress bar."""
    with phases.phase("retry"), progress(transient=True) as bar:
        task = bar.add_task("retry not fluent", total=None, visible=show_progress)
        return retry_phrases(
            items,
            per_target,
            rephraser,
            on_done=lambda k: bar.advance(task, k),
            on_start=lambda n: bar.update(task, total=n),
        )


def keyphrase_sources(items: list[tuple[Sentences, int]]) -> dict[str, int]:
    """How many chosen key phrases the extractor offered, how many are noun chunks (pure)."""
    sources = {"extractor": 0, "noun_chunk": 0}
    for d, i in items:
        extracted = {o.lower() for o in d.extracted(i)}
        sources["extractor" if (d.phrases[i] or "").lower() in extracted else "noun_chunk"] += 1
    return sources


def collect_rewrites(
    items: list[tuple[Sentences, int]],
    per_target: dict[str, list[Rewrite]],
    sample_of: dict[int, Any],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[int, dict[int, str]]], list[dict]]:
    """The rewrites sorted out (pure): status counts per target; target -> id(doc) ->
    {sentence: rewritten text} for the rewritten ones; one record per (item, target)
    (``REWRITE_COLUMNS``). ``sample_of``: id(doc) -> sample_id."""
    status: dict[str, dict[str, int]] = {}
    rewrites: dict[str, dict[int, dict[int, str]]] = {t: {} for t in TARGETS}
    records = []
    for target, results in per_target.items():
        counts: dict[str, int] = {}
        for (doc, i), r in zip(items, results, strict=True):
            counts[r.status] = counts.get(r.status, 0) + 1
            if r.status == "rewritten":
                rewrites[target].setdefault(id(doc), {})[i] = r.text
            records.append(
                {
                    "sample_id": sample_of[id(doc)],
                    "variant": target,
                    "sentence": i,
                    "phrase": doc.phrases[i],
                    "original": doc.sentence(i),
                    "text": r.text,
                    "status": r.status,
                    "kinds": "+".join(r.kinds),
                    "fluency": r.fluency,
                }
            )
        status[target] = counts
    return status, rewrites, records


def variant_rows(
    corpus: pd.DataFrame,
    docs: list[Sentences],
    rewrites: dict[str, dict[int, dict[int, str]]],
) -> list[dict[str, Any]]:
    """One row per corpus text and variant (``build_variants``'s table), assembled from each
    text's rewritten sentences (``rewrites``: target -> id(doc) -> {sentence: text}; pure)."""
    rows = []
    for doc, row in zip(docs, corpus.itertuples(index=False), strict=True):
        keyphrase = PHRASE_SEP.join(p for p in doc.phrases if p)
        for variant in VARIANTS:
            done = {} if variant == "original" else rewrites[variant].get(id(doc), {})
            rows.append(
                {
                    "dataset": row.dataset,
                    "variant": variant,
                    "sample_id": row.sample_id,
                    "text": assemble(doc, done),
                    "label": row.label,
                    "keyphrase": keyphrase,
                    "position": mean_position(doc, done),
                    "n_keyed": len(doc.keyed),
                    "n_rewritten": len(done),
                }
            )
    return rows


def build_variants(
    corpus: pd.DataFrame,
    extractor: KeyphraseExtractor,
    rephraser: Rephraser,
    *,
    candidates: int = KeyphraseConfig.candidates,
    show_progress: bool = True,
    phases: Phases | None = None,
    salience: Salience | None = None,
) -> Variants:
    """All four variants of every corpus text (texts without a key phrase included, marked).

    Returns a long table: dataset, variant, sample_id, text, label, keyphrase, position
    (mean relative position), n_keyed (sentences with a key phrase), n_rewritten. ``phases``
    (optional) times parse, keyphrases, rewrite_<target> and retry. ``salience``: the
    corpus's fitted ``Salience`` for the parse rephraser's phrase ranking (else fitted here).
    """
    phases = phases or Phases()
    _parse_all(corpus, rephraser, show_progress, phases)
    docs = _choose_phrases(
        corpus, extractor, rephraser, candidates, salience, show_progress, phases
    )
    items = [(d, i) for d in docs for i in d.keyed]
    per_target = _rewrite_all(items, rephraser, show_progress, phases)
    retries = _retry(items, per_target, rephraser, show_progress, phases)
    sources = keyphrase_sources(items)
    sample_of = {id(d): sid for d, sid in zip(docs, corpus["sample_id"], strict=True)}
    status, rewrites, records = collect_rewrites(items, per_target, sample_of)
    edits = {t: {sample_of[k]: v for k, v in rewrites[t].items()} for t in TARGETS}
    return Variants(
        table=pd.DataFrame(variant_rows(corpus, docs, rewrites)),
        sentences=sum(len(d.spans) for d in docs),
        keyed_sentences=len(items),
        status=status,
        rewrites=pd.DataFrame.from_records(records, columns=REWRITE_COLUMNS),
        docs={sample_of[id(d)]: d for d in docs},
        edits=edits,
        keyphrase_sources=sources,
        phrase_retries=retries,
    )
