"""The synth stage: positional variants of every corpus text, validated with BERTScore.

For each text: split it into sentences; give each sentence a key phrase (the extractor's
ranked candidates, the rephraser picks one); rewrite every such sentence three times:
``front`` (phrase first), ``end`` (phrase last), ``control`` (same kind of rewrite, phrase kept
at its relative position). A variant text is the original with those sentences replaced in
place. ``keyphrase`` = the sentences' key phrases in order, joined with " | ".

A text is kept when it has a key phrase, when front or end rewrote at least one of its
sentences (``synth.require_rewrite``, see ``select``) and when every variant's BERTScore F1
against the original is >= ``synth.bertscore.threshold``; a variant text below it first gets
its most damaging rewrites reverted until it passes (``homog.synth.repair``).

Each phase (load, parse, keyphrases, rewrite_<target>, retry, bertscore, revert, report, audit,
write) has a progress bar and is timed: ``timings`` / ``timings_cpu`` in the report
(``homog.synth.timing``).

Every variant's rewrites that make it overflow extraction's token budget are reverted first
(``homog.synth.budget``). With ``synth.position.enabled`` the kept texts also get the
token-preserving position family (key_first, key_mid, key_last, key_control:
``homog.synth.position``); a text the family cannot keep every token of is dropped. Every
written text starts with one space and joins its sentences with one space.

Output: ``texts.parquet`` (the ``texts`` table: dataset, variant, sample_id, text, label,
keyphrase, bertscore_f1, key_index, key_position; only texts kept in all variants) and
``report.json`` (counts, rewrite rates, mean F1 and mean key-phrase relative position per
variant; the position as in ``homog.synth.keyphrase``, averaged over a text's key-phrase
sentences, then over texts; ``manipulation``: ``homog.synth.position_report``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from homog.config import Params, as_params
from homog.config.synth import KeyphraseConfig
from homog.corpus.cut import budget_check
from homog.corpus.stage import read_corpus
from homog.errors import HomogError
from homog.io import atomic_path, write_json
from homog.layout import Layout, writable_dir
from homog.synth import lengthmatch
from homog.synth.bertscore import make_scorer
from homog.synth.budget import fit_budget
from homog.synth.keyphrase import KeyphraseExtractor, edges, extractor_from_config
from homog.synth.position_report import manipulation
from homog.synth.position_stage import FAMILY_COLUMNS, build_family, with_family
from homog.synth.rephrase import TARGETS, Rephraser, Rewrite, rephraser_from_params
from homog.synth.report import dropped_reviews, make_report
from homog.synth.salience import Salience
from homog.synth.selection import (
    REQUIRE_REWRITE,  # noqa: F401 - homog.synth's lazy name
    VARIANTS,
    score_variants,
    select,
)
from homog.synth.timing import Phases
from homog.synth.variants import Sentences, Variants, assemble, mean_position
from homog.text.sentences import split_sentences
from homog.text.tokens import model_tokenizers, token_budgets
from homog.variants import family_names

TEXT_COLUMNS = ["dataset", "variant", "sample_id", "text", "label", "keyphrase", "bertscore_f1",
                *FAMILY_COLUMNS]  # fmt: skip
PHRASE_SEP = " | "
LAYOUT = Layout()  # the paths of a project run from its root (the CLI's defaults)
# file names inside the synth directory (``Layout.texts`` / ``Layout.synth_report``)
TEXTS_FILE = LAYOUT.texts.name
REPORT_FILE = LAYOUT.synth_report.name


def rebuild(variants: Variants, variant: str, sample_id: Any) -> None:
    """Re-assemble one variant text of ``variants.table`` (text, position, n_rewritten) from
    ``variants.edits`` after they changed (``homog.synth.repair``)."""
    doc = variants.docs[sample_id]
    done = variants.edits[variant].get(sample_id, {})
    t = variants.table
    k = t.index[(t["variant"] == variant) & (t["sample_id"] == sample_id)][0]
    t.at[k, "text"] = assemble(doc, done)
    t.at[k, "position"] = mean_position(doc, done)
    t.at[k, "n_rewritten"] = len(done)


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
    from homog.progress import progress

    phases = phases or Phases()
    docs: list[Sentences] = []
    # one batched pass over every sentence (the parse rephraser parses them all at once);
    # handed over in chunks only so that the bar moves
    sentences = [text[a:b] for text in corpus["text"] for a, b in split_sentences(text)]
    chunk = 512
    with phases.phase("parse"), progress(transient=True) as bar:
        task = bar.add_task("parse", total=len(sentences), visible=show_progress)
        for a in range(0, len(sentences), chunk):
            rephraser.prepare(sentences[a : a + chunk])
            bar.advance(task, len(sentences[a : a + chunk]))
    with phases.phase("keyphrases"), progress(transient=True) as bar:
        if hasattr(rephraser, "salience"):  # the parse rephraser ranks phrases by salience
            rephraser.salience = salience or Salience.fit(corpus["text"].tolist())
        task = bar.add_task("key phrases", total=len(corpus), visible=show_progress)
        for text in corpus["text"]:
            docs.append(key_sentences(text, extractor, rephraser, candidates))
            bar.advance(task)
    items = [(d, i) for d in docs for i in d.keyed]
    requests = [(d.sentence(i), d.phrases[i] or "", d.text) for d, i in items]
    per_target: dict[str, list[Rewrite]] = {}
    with progress(transient=True) as bar:
        for target in TARGETS:
            task = bar.add_task(f"rewrite {target}", total=len(requests), visible=show_progress)
            with phases.phase(f"rewrite_{target}"):
                per_target[target] = rephraser.rewrite_many(
                    requests, target, on_done=lambda k, t=task: bar.advance(t, k)
                )
    with phases.phase("retry"), progress(transient=True) as bar:
        task = bar.add_task("retry not fluent", total=None, visible=show_progress)
        retries = retry_phrases(
            items,
            per_target,
            rephraser,
            on_done=lambda k: bar.advance(task, k),
            on_start=lambda n: bar.update(task, total=n),
        )
    sources = {"extractor": 0, "noun_chunk": 0}
    for d, i in items:
        extracted = {o.lower() for o in d.extracted(i)}
        sources["extractor" if (d.phrases[i] or "").lower() in extracted else "noun_chunk"] += 1
    status: dict[str, dict[str, int]] = {}
    rewrites: dict[str, dict[int, dict[int, str]]] = {t: {} for t in TARGETS}
    sample_of = {id(d): sid for d, sid in zip(docs, corpus["sample_id"], strict=True)}
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
    edits = {t: {sample_of[k]: v for k, v in rewrites[t].items()} for t in TARGETS}
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
    return Variants(
        table=pd.DataFrame(rows),
        sentences=sum(len(d.spans) for d in docs),
        keyed_sentences=len(items),
        status=status,
        rewrites=pd.DataFrame.from_records(
            records,
            columns=[
                "sample_id",
                "variant",
                "sentence",
                "phrase",
                "original",
                "text",
                "status",
                "kinds",
                "fluency",
            ],
        ),  # fmt: skip
        docs={sample_of[id(d)]: d for d in docs},
        edits=edits,
        keyphrase_sources=sources,
        phrase_retries=retries,
    )


def build_synth(
    params: Params | Mapping[str, Any],
    *,
    corpus_path: Path = LAYOUT.corpus,
    out_dir: Path = LAYOUT.synth_dir,
    scorer: Any = None,
    audit_scorer: Any = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run the synth stage; write ``out_dir/texts.parquet`` and ``out_dir/report.json``.

    Reads ``params.synth`` (keyphrase, rephraser, llm options, bertscore) and, for the llm
    rephraser, ``params.models`` and ``params.seed``; a mapping is checked first
    (``homog.config.as_params``). ``scorer`` overrides the BERTScore model (tests). Returns
    the report. ``audit_scorer`` overrides the fluency audit model (False: no audit; tests).
    Raises HomogError for bad params, a missing corpus, or when no text survives
    (the message gives the counts).
    """
    params = as_params(params)
    cfg = params.synth
    writable_dir(out_dir, what="synth output")  # before any work
    corpus = read_corpus(corpus_path)
    if corpus.empty:
        raise HomogError(f"corpus {corpus_path} holds no texts: re-run `homog corpus`")
    # sentences joined by one space, as every variant text is (homog.synth.position)
    corpus["text"] = [" ".join(t[a:b] for a, b in split_sentences(t)) for t in corpus["text"]]
    phases = Phases()
    with phases.phase("load"):
        extractor = extractor_from_config(cfg.keyphrase)
        rephraser = rephraser_from_params(params)
        tokenizers, budgets = model_tokenizers(params), token_budgets(params)
        # one fit for the parse rephraser's phrase ranking and the family's key sentence
        salience = Salience.fit(corpus["text"].tolist())
    variants = build_variants(
        corpus,
        extractor,
        rephraser,
        candidates=cfg.keyphrase.candidates,
        show_progress=show_progress,
        phases=phases,
        salience=salience,
    )
    with phases.phase("length_match"):
        lf, length_reverts = lengthmatch.prepare(params, rephraser, variants, rebuild)
    with phases.phase("budget"):
        budget, too_long = fit_budget(variants, budget_check(tokenizers, budgets), rebuild)
    with phases.phase("load"):
        scorer = scorer or make_scorer(cfg.bertscore)
    windowed_before = int(getattr(scorer, "windowed", 0))  # a scorer may be reused (tests)
    identical_before = int(getattr(scorer, "identical", 0))
    table = variants.table
    with phases.phase("bertscore"):
        table["bertscore_f1"] = score_variants(table, scorer, show_progress)
    threshold = cfg.bertscore.threshold
    with phases.phase("revert"):
        reverts = _revert(variants, scorer, cfg.bertscore, show_progress)
    keep, counts = select(table, threshold, require_rewrite=cfg.require_rewrite)
    keep &= ~keep.index.isin(too_long)
    paper = keep.copy()  # the reviews the paper's variants are kept for
    family = None
    if cfg.position.enabled:
        # the family needs no rewrite: every review whose original fits the budget may enter,
        # and is kept when its family is valid, whatever became of the paper's rewrites
        with phases.phase("position"):
            family = build_family(
                {s: variants.docs[s] for s in keep.index if s not in set(too_long)},
                salience,
                tokenizers,
                cfg.position.positions,
            )
        keep = paper | keep.index.isin(family.kept)
    meta = {
        "rephraser": cfg.rephraser,
        "extractor": extractor.name,
        "backbone": getattr(scorer, "backbone", "custom"),
        "threshold": threshold,
    }
    with phases.phase("report"):
        report = make_report(variants, paper, counts, meta)
        manip = lengthmatch.manipulation(params, variants, paper, lf, length_reverts)
        report.setdefault("manipulation", {}).update(manip)
    report["bertscore_windowed"] = int(getattr(scorer, "windowed", 0)) - windowed_before
    report["bertscore_identical"] = int(getattr(scorer, "identical", 0)) - identical_before
    report["reverted"] = reverts
    # texts_kept: every review in the texts table; the paper's variants cover texts_kept_paper
    # of them, the position family texts_kept_family (issue 40: it no longer needs a rewrite)
    report["texts_kept_paper"] = report["texts_kept"]
    report["texts_kept"] = int(keep.sum())
    if family is not None:
        report["texts_kept_family"] = len(family.kept)
    report["dropped"]["original_over_budget"] = len(too_long)
    if family is not None:
        report["dropped"]["position_family"] = family.dropped
    report["dropped_reviews"] = dropped_reviews(counts["reasons"], too_long, family, keep)
    lm = getattr(rephraser, "fluency", None)
    if lm is not None and hasattr(lm, "usage"):
        report["fluency_lm"] = lm.usage()
    fcfg = cfg.fluency
    if variants.rewrites is not None and report["texts_kept_paper"]:
        from homog.synth import report as rep

        kept_rw = variants.rewrites[variants.rewrites["sample_id"].isin(paper[paper].index)]
        report["fluency_threshold"] = fcfg.threshold
        report["examples"] = rep.examples(kept_rw, fcfg.examples, params.seed)
        if fcfg.audit_model and fcfg.audit_sentences and audit_scorer is not False:
            with phases.phase("audit"):
                if audit_scorer is None:
                    from homog.synth.fluency import FluencyScorer, fluency_source

                    source = fluency_source(fcfg.audit_model, params.model_sources())
                    if getattr(lm, "source", None) == source:  # loaded once for the stage
                        audit_scorer = lm
                    else:
                        audit_scorer = FluencyScorer.from_config(
                            source, fcfg, params.model_sources(), params.seed
                        )
                report["fluency_audit"] = rep.audit(
                    kept_rw, audit_scorer, fcfg.audit_sentences, params.seed, fcfg.threshold,
                    show_progress=show_progress,
                )  # fmt: skip
    if report["texts_kept"] == 0:
        raise HomogError(
            f"no text survived synth: {report['texts_in']} in, dropped {report['dropped']}. "
            "Lower synth.bertscore.threshold, set synth.require_rewrite: none, or use the "
            "rule rephraser"
        )
    names = [*VARIANTS, *(family_names(cfg.position.positions) if family else [])]
    rows = table["sample_id"].isin(paper[paper].index) | (
        (table["variant"] == "original") & table["sample_id"].isin(keep[keep].index)
    )
    own = [c for c in TEXT_COLUMNS if c not in FAMILY_COLUMNS]
    out = with_family(table[rows][own], family, names)[TEXT_COLUMNS]
    with phases.phase("report"):
        # beside the length-match measures (edges, length_match) written above
        manip = report.setdefault("manipulation", {})
        manip.update(manipulation(out, tokenizers, budgets, family, cfg.position))
        manip["budget"] = budget
    with phases.phase("write"), atomic_path(out_dir / TEXTS_FILE) as tmp:
        out.to_parquet(tmp, index=False)
    report.update(phases.report())
    write_json(out_dir / REPORT_FILE, report)
    return report


def _revert(variants: Variants, scorer: Any, cfg: Any, show_progress: bool) -> dict[str, Any]:
    """``homog.synth.repair.revert_failing`` with a progress bar over the failing texts."""
    from homog.progress import progress
    from homog.synth.repair import revert_failing

    table = variants.table
    n = int(((table["variant"] != "original") & (table["bertscore_f1"] < cfg.threshold)).sum())
    with progress(transient=True) as bar:
        task = bar.add_task("revert rewrites", total=None, visible=show_progress and n > 0)
        return revert_failing(
            variants, scorer, cfg.threshold, cfg.max_reverts, rebuild=rebuild,
            on_round=lambda k: bar.advance(task, k),
        )  # fmt: skip
