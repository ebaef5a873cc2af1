"""The synth stage: positional variants of every corpus text, validated with BERTScore.

For each text: split it into sentences; give each sentence a key phrase (the extractor's
ranked candidates, the rephraser picks one); rewrite every such sentence three times:
``front`` (phrase first), ``end`` (phrase last), ``control`` (same kind of rewrite, phrase kept
at its relative position). A variant text is the original with those sentences replaced in
place. ``keyphrase`` = the sentences' key phrases in order, joined with " | ". The variants
are built in memory by ``homog.synth.variants_build``; this module validates and writes them.

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
from homog.corpus.cut import budget_check
from homog.corpus.stage import read_corpus
from homog.errors import HomogError
from homog.io import atomic_path, write_json
from homog.layout import Layout, writable_dir
from homog.progress import progress
from homog.synth import lengthmatch
from homog.synth import report as rep
from homog.synth.bertscore import make_scorer
from homog.synth.budget import fit_budget
from homog.synth.fluency import FluencyScorer, fluency_source
from homog.synth.keyphrase import KeyphraseExtractor, extractor_from_config
from homog.synth.position_report import manipulation
from homog.synth.position_stage import FAMILY_COLUMNS, FamilyBuild, build_family, with_family
from homog.synth.repair import revert_failing
from homog.synth.rephrase import rephraser_from_params
from homog.synth.report import dropped_reviews, make_report
from homog.synth.salience import Salience
from homog.synth.selection import (
    REQUIRE_REWRITE,  # noqa: F401 - homog.synth's lazy name
    VARIANTS,
    score_variants,
    select,
)
from homog.synth.timing import Phases
from homog.synth.variants import Variants, assemble, mean_position
from homog.synth.variants_build import build_variants
from homog.text.sentences import split_sentences
from homog.text.tokens import model_tokenizers, token_budgets
from homog.variants import family_names

TEXT_COLUMNS = [
    "dataset",
    "variant",
    "sample_id",
    "text",
    "label",
    "keyphrase",
    "bertscore_f1",
    *FAMILY_COLUMNS,
]
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
    corpus = read_texts(corpus_path)
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
    before = _scorer_counts(scorer)  # a scorer may be reused (tests)
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
        with phases.phase("position"):
            family = _position_family(variants, keep, too_long, salience, tokenizers, cfg)
        keep = paper | keep.index.isin(family.kept)
    meta = _meta(cfg, extractor, scorer)
    with phases.phase("report"):
        report = make_report(variants, paper, counts, meta)
        manip = lengthmatch.manipulation(params, variants, paper, lf, length_reverts)
        report.setdefault("manipulation", {}).update(manip)
    kept_counts(report, _scorer_counts(scorer), before, reverts, keep, family, too_long, counts)
    _fluency_report(report, params, variants, paper, rephraser, audit_scorer, phases, show_progress)
    _require_survivors(report)
    out = texts_table(table, paper, keep, family, cfg.position.positions)
    with phases.phase("report"):
        # beside the length-match measures (edges, length_match) written above
        manip = report.setdefault("manipulation", {})
        manip.update(manipulation(out, tokenizers, budgets, family, cfg.position))
        manip["budget"] = budget
    _write(out_dir, out, report, phases)
    return report


def _meta(cfg: Any, extractor: KeyphraseExtractor, scorer: Any) -> dict[str, Any]:
    """The report's description of the run: rephraser, extractor, backbone, threshold."""
    return {
        "rephraser": cfg.rephraser,
        "extractor": extractor.name,
        "backbone": getattr(scorer, "backbone", "custom"),
        "threshold": cfg.bertscore.threshold,
    }


def _require_survivors(report: dict[str, Any]) -> None:
    """HomogError, with the counts, when no text survived."""
    if report["texts_kept"] == 0:
        raise HomogError(
            f"no text survived synth: {report['texts_in']} in, dropped {report['dropped']}. "
            "Lower synth.bertscore.threshold, set synth.require_rewrite: none, or use the "
            "rule rephraser"
        )


def _write(out_dir: Path, out: pd.DataFrame, report: dict[str, Any], phases: Phases) -> None:
    """Write the texts table (timed as ``write``), then the report with the phases' timings."""
    with phases.phase("write"), atomic_path(out_dir / TEXTS_FILE) as tmp:
        out.to_parquet(tmp, index=False)
    report.update(phases.report())
    write_json(out_dir / REPORT_FILE, report)


def read_texts(corpus_path: Path) -> pd.DataFrame:
    """The corpus, each text's sentences joined by one space, as every variant text is
    (``homog.synth.position``); HomogError when it holds no texts."""
    corpus = read_corpus(corpus_path)
    if corpus.empty:
        raise HomogError(f"corpus {corpus_path} holds no texts: re-run `homog corpus`")
    corpus["text"] = [" ".join(t[a:b] for a, b in split_sentences(t)) for t in corpus["text"]]
    return corpus


def _scorer_counts(scorer: Any) -> tuple[int, int]:
    """The scorer's running counts of windowed and identical pairs (0 where it keeps none)."""
    return int(getattr(scorer, "windowed", 0)), int(getattr(scorer, "identical", 0))


def _position_family(
    variants: Variants,
    keep: pd.Series,
    too_long: Any,
    salience: Salience,
    tokenizers: Any,
    cfg: Any,
) -> FamilyBuild:
    """The position family of every review in ``keep`` whose original fits the budget."""
    # the family needs no rewrite: every review whose original fits the budget may enter,
    # and is kept when its family is valid, whatever became of the paper's rewrites
    return build_family(
        {s: variants.docs[s] for s in keep.index if s not in set(too_long)},
        salience,
        tokenizers,
        cfg.position.positions,
    )


def kept_counts(
    report: dict[str, Any],
    scorer_after: tuple[int, int],
    scorer_before: tuple[int, int],
    reverts: dict[str, Any],
    keep: pd.Series,
    family: FamilyBuild | None,
    too_long: Any,
    counts: dict[str, Any],
) -> None:
    """Add to ``report`` (in place) the scorer's windowed/identical pairs of this run, the
    reverts, the texts kept (in all, for the paper, for the family) and the dropped ones."""
    report["bertscore_windowed"] = scorer_after[0] - scorer_before[0]
    report["bertscore_identical"] = scorer_after[1] - scorer_before[1]
    report["reverted"] = reverts
    # texts_kept: every review in the texts table; the paper's variants cover texts_kept_paper
    # of them, the position family texts_kept_family (it needs no rewrite)
    report["texts_kept_paper"] = report["texts_kept"]
    report["texts_kept"] = int(keep.sum())
    if family is not None:
        report["texts_kept_family"] = len(family.kept)
    report["dropped"]["original_over_budget"] = len(too_long)
    if family is not None:
        report["dropped"]["position_family"] = family.dropped
    report["dropped_reviews"] = dropped_reviews(counts["reasons"], too_long, family, keep)


def _fluency_report(
    report: dict[str, Any],
    params: Params,
    variants: Variants,
    paper: pd.Series,
    rephraser: Any,
    audit_scorer: Any,
    phases: Phases,
    show_progress: bool,
) -> None:
    """Add to ``report`` (in place) the fluency LM's usage, the threshold, examples of the
    kept rewrites and, with an audit model, the audit of a sample of them."""
    cfg = params.synth
    lm = getattr(rephraser, "fluency", None)
    if lm is not None and hasattr(lm, "usage"):
        report["fluency_lm"] = lm.usage()
    fcfg = cfg.fluency
    if variants.rewrites is not None and report["texts_kept_paper"]:
        kept_rw = variants.rewrites[variants.rewrites["sample_id"].isin(paper[paper].index)]
        report["fluency_threshold"] = fcfg.threshold
        report["examples"] = rep.examples(kept_rw, fcfg.examples, params.seed)
        if fcfg.audit_model and fcfg.audit_sentences and audit_scorer is not False:
            with phases.phase("audit"):
                if audit_scorer is None:
                    source = fluency_source(fcfg.audit_model, params.model_sources())
                    if getattr(lm, "source", None) == source:  # loaded once for the stage
                        audit_scorer = lm
                    else:
                        audit_scorer = FluencyScorer.from_config(
                            source, fcfg, params.model_sources(), params.seed
                        )
                report["fluency_audit"] = rep.audit(
                    kept_rw,
                    audit_scorer,
                    fcfg.audit_sentences,
                    params.seed,
                    fcfg.threshold,
                    show_progress=show_progress,
                )


def texts_table(
    table: pd.DataFrame,
    paper: pd.Series,
    keep: pd.Series,
    family: FamilyBuild | None,
    positions: Any,
) -> pd.DataFrame:
    """The ``texts`` table (``TEXT_COLUMNS``; pure): every variant of the reviews kept for the
    paper, the original of every kept review, and the position family's texts."""
    names = [*VARIANTS, *(family_names(positions) if family else [])]
    rows = table["sample_id"].isin(paper[paper].index) | (
        (table["variant"] == "original") & table["sample_id"].isin(keep[keep].index)
    )
    own = [c for c in TEXT_COLUMNS if c not in FAMILY_COLUMNS]
    return with_family(table[rows][own], family, names)[TEXT_COLUMNS]


def _revert(variants: Variants, scorer: Any, cfg: Any, show_progress: bool) -> dict[str, Any]:
    """``homog.synth.repair.revert_failing`` with a progress bar over the failing texts."""
    table = variants.table
    n = int(((table["variant"] != "original") & (table["bertscore_f1"] < cfg.threshold)).sum())
    with progress(transient=True) as bar:
        task = bar.add_task("revert rewrites", total=None, visible=show_progress and n > 0)
        return revert_failing(
            variants,
            scorer,
            cfg.threshold,
            cfg.max_reverts,
            rebuild=rebuild,
            on_round=lambda k: bar.advance(task, k),
        )
