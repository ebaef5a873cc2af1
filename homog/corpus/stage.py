"""The corpus stage: read movie reviews from a source, clean them, draw a balanced sample.

Sources (``corpus.source`` in params.yaml):
- ``demo``: the project's own offline corpus ``data/demo/reviews.jsonl`` (100 reviews; the
  copy beside this package, ``homog.layout.Layout.demo_corpus``);
- ``hf:<dataset id>``: ``datasets.load_dataset(id, split=...)`` (e.g. ``hf:stanfordnlp/imdb``);
- ``file:<path>``: a CSV, JSONL/JSON or Parquet file (optionally ``.gz``) with a text column.

Pipeline: ``load_source`` (I/O, in ``homog.corpus.sources``) -> ``prepare_corpus`` (pure:
clean, filter, de-duplicate, sample) -> Parquet with columns ``dataset, sample_id, text,
label``. Every row that is dropped is counted in the returned report; a stage that cannot
produce ``n`` texts fails with a HomogError that gives the counts.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from homog.config import CorpusConfig, Params, as_params
from homog.corpus.cut import cut_texts, params_check
from homog.corpus.sources import dataset_name, load_source
from homog.errors import HomogError
from homog.io import atomic_path, check_target, content_hash, write_json
from homog.layout import Layout, writable_dir
from homog.owned import check_owned_file, write_parquet

LAYOUT = Layout()  # the paths of a project run from its root (the CLI's defaults)
CORPUS_COLUMNS = ["dataset", "sample_id", "text", "label"]

_TAG = re.compile(r"<\s*/?\s*[a-zA-Z][^<>]{0,200}>")
_BREAK_TAG = re.compile(r"<\s*(br|p|/p|div|/div|li)\s*/?\s*>", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """Remove HTML markup and entities and normalise whitespace.

    Line-break tags (``<br />``, ``<p>``) become spaces, other tags are removed, entities such
    as ``&amp;`` are unescaped, and runs of whitespace become one space. Pure; never raises.
    """
    text = _BREAK_TAG.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    text = text.replace("\u00a0", " ")
    return _SPACE.sub(" ", text).strip()


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


@dataclass
class CorpusReport:
    """Counts of what happened to the rows of a source (all ints; ``to_dict`` for JSON)."""

    rows_in: int = 0
    not_text: int = 0
    empty: int = 0
    duplicates: int = 0
    too_short: int = 0
    too_long: int = 0
    eligible: int = 0
    eligible_by_label: dict[str, int] = field(default_factory=dict)
    drawn: int = 0
    drawn_by_label: dict[str, int] = field(default_factory=dict)
    # the cut to extraction's token budget (``homog.corpus.cut``): rows whose first sentence
    # alone does not fit; drawn reviews that were cut, and the words that dropped
    no_fit: int = 0
    cut: int = 0
    cut_words_dropped: int = 0
    cut_words_share: float = 0.0
    token_budget: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _sample_ids(df: pd.DataFrame, id_column: str | None) -> list[str]:
    """Stable ids: the source's own id column when it is present and unique, else a hash."""
    if id_column and id_column in df.columns:
        ids = df[id_column].astype(str)
        if ids.notna().all() and ids.is_unique:
            return list(ids)
    return ["t" + content_hash(t) for t in df["text"]]


def prepare_corpus(
    raw: pd.DataFrame,
    *,
    dataset: str,
    n: int,
    seed: int,
    text_column: str = CorpusConfig.text_column,
    label_column: str | None = CorpusConfig.label_column,
    id_column: str | None = CorpusConfig.id_column,
    min_words: int = CorpusConfig.min_words,
    max_words: int | None = CorpusConfig.max_words,
    fits: Any = None,
) -> tuple[pd.DataFrame, CorpusReport]:
    """Clean, filter, de-duplicate and draw ``n`` texts balanced by label (pure).

    Returns (corpus with CORPUS_COLUMNS sorted by sample_id, report of counts). Labels are
    strings; without a label column every text has label ``"none"``. The draw is a fixed-seed
    permutation of each label's texts ordered by sample_id, so it does not depend on the row
    order of the source. ``fits`` (optional, ``homog.corpus.cut.FitCheck``): every text is
    cut at a sentence boundary to fit (``homog.corpus.cut.cut_texts``) before the word
    filters; texts that cannot fit are dropped (``no_fit``). ``n`` is split as evenly as
    possible over the labels (the first labels in sorted order take the remainder). Raises
    HomogError for a missing text or label column and when fewer eligible texts than needed
    exist (message gives the counts).
    """
    report = CorpusReport(rows_in=len(raw))
    df = _columns(raw, text_column, label_column, id_column)
    df = _clean(df, report, fits)
    df = _eligible(
        df,
        report,
        dataset=dataset,
        text_column=text_column,
        label_column=label_column,
        id_column=id_column,
        min_words=min_words,
        max_words=max_words,
    )
    return _draw(df, n, seed, report), report


def _columns(
    raw: pd.DataFrame, text_column: str, label_column: str | None, id_column: str | None
) -> pd.DataFrame:
    """The source's text (renamed ``text``), label and id columns; HomogError for a missing
    text or label column."""
    if text_column not in raw.columns:
        raise HomogError(
            f"the corpus has no text column {text_column!r}; columns: {list(raw.columns)}. "
            "Set corpus.text_column in params.yaml"
        )
    if label_column and label_column not in raw.columns:
        raise HomogError(
            f"the corpus has no label column {label_column!r}; columns: {list(raw.columns)}. "
            "Set corpus.label_column (or null for unlabelled texts)"
        )
    keep = [text_column] + ([label_column] if label_column else [])
    if id_column and id_column in raw.columns and id_column not in keep:
        keep.append(id_column)
    df = raw[keep].copy()
    return df.rename(columns={text_column: "text"})


def _clean(df: pd.DataFrame, report: CorpusReport, fits: Any) -> pd.DataFrame:
    """The rows holding text, cleaned, non-empty, de-duplicated and cut to fit ``fits`` (if
    given), with their ``uncut_words``; the drops counted in ``report``."""
    is_text = df["text"].map(lambda v: isinstance(v, str))
    report.not_text = int((~is_text).sum())
    df = df[is_text].copy()
    df["text"] = df["text"].map(clean_text)
    empty = df["text"].str.len() == 0
    report.empty = int(empty.sum())
    df = df[~empty]
    before = len(df)
    df = df.drop_duplicates(subset="text", keep="first")
    report.duplicates = before - len(df)
    uncut = df["text"].map(word_count)
    if fits is not None:
        cut = pd.Series(cut_texts(df["text"].tolist(), fits), index=df.index, dtype=object)
        report.no_fit = int(cut.isna().sum())
        df = df[cut.notna()].assign(text=cut[cut.notna()])
    df["uncut_words"] = uncut.reindex(df.index)  # not a frame left empty by the cut
    return df


def _eligible(
    df: pd.DataFrame,
    report: CorpusReport,
    *,
    dataset: str,
    text_column: str,
    label_column: str | None,
    id_column: str | None,
    min_words: int,
    max_words: int | None,
) -> pd.DataFrame:
    """The texts within the word limits, with CORPUS_COLUMNS and ``uncut_words``, sorted by
    sample_id; the drops and the eligible count in ``report``."""
    words = df["text"].map(word_count)
    short = words < min_words
    long = words > max_words if max_words else pd.Series(False, index=df.index)
    report.too_short = int(short.sum())
    report.too_long = int(long.sum())
    df = df[~short & ~long].copy()
    df["label"] = df[label_column].map(str) if label_column else "none"
    df["sample_id"] = _sample_ids(df, id_column if id_column != text_column else None)
    df["dataset"] = dataset
    df = df[[*CORPUS_COLUMNS, "uncut_words"]].sort_values("sample_id", kind="stable")
    df = df.reset_index(drop=True)
    report.eligible = len(df)
    return df


def _draw(df: pd.DataFrame, n: int, seed: int, report: CorpusReport) -> pd.DataFrame:
    """``n`` of the eligible texts ``df`` balanced by label (a fixed-seed permutation per
    label), with CORPUS_COLUMNS, sorted by sample_id; the counts and the cut in ``report``."""
    counts = df["label"].value_counts()
    labels = sorted(counts.index)
    report.eligible_by_label = {str(k): int(counts[k]) for k in labels}
    if n <= 0:
        raise HomogError(f"corpus.n must be positive (got {n})")
    if not labels:
        raise HomogError(f"no texts left to draw from: {_describe(report)}; {_widen(report)}")
    want = {
        lab: n // len(labels) + (1 if i < n % len(labels) else 0) for i, lab in enumerate(labels)
    }
    short_of = {lab: (int(counts[lab]), k) for lab, k in want.items() if counts[lab] < k}
    if short_of:
        detail = ", ".join(
            f"label {lab!r}: {have} eligible < {k} needed" for lab, (have, k) in short_of.items()
        )
        raise HomogError(
            f"fewer texts than corpus.n={n} balanced by label ({detail}); {_describe(report)}. "
            f"Lower corpus.n, or {_widen(report)}"
        )
    rng = np.random.default_rng(seed)
    parts = []
    for lab in labels:
        group = df[df["label"] == lab]
        idx = rng.permutation(len(group))[: want[lab]]
        parts.append(group.iloc[np.sort(idx)])
    out = pd.concat(parts).sort_values("sample_id", kind="stable").reset_index(drop=True)
    report.drawn = len(out)
    words = out["text"].map(word_count)
    report.cut = int((words < out["uncut_words"]).sum())
    report.cut_words_dropped = int((out["uncut_words"] - words).sum())
    report.cut_words_share = round(
        report.cut_words_dropped / max(int(out["uncut_words"].sum()), 1), 4
    )
    out = out[CORPUS_COLUMNS]
    report.drawn_by_label = {lab: want[lab] for lab in labels}
    return out


def _describe(report: CorpusReport) -> str:
    return (
        f"{report.rows_in} rows in, {report.not_text} not text, {report.empty} empty, "
        f"{report.duplicates} duplicates, {report.no_fit} not fitting extract.max_tokens, "
        f"{report.too_short} too short, {report.too_long} too "
        f"long, {report.eligible} eligible"
    )


def _widen(report: CorpusReport) -> str:
    """What lets more texts through: the filters that dropped some, extract.max_tokens first
    when texts did not fit the token budget (not even their first sentence)."""
    hints = []
    if report.no_fit:
        hints.append(
            f"raise extract.max_tokens ({report.no_fit} texts do not fit even their first "
            "sentence in it)"
        )
    if report.too_short or report.too_long or not hints:
        hints.append("widen corpus.min_words/max_words")
    return "; or ".join(hints)


def _check_owned(out: Path, force: bool) -> None:
    """The corpus and its ``.report.json`` replace only homog's files (or --force)."""
    check_owned_file(out, force=force, what="corpus")
    side = out.with_suffix(".report.json")
    try:
        ours = force or not side.exists() or "rows_in" in dict(json.loads(side.read_text()))
    except (OSError, ValueError, TypeError):  # not JSON, not an object
        ours = False
    if not ours:
        raise HomogError(
            f"refusing to overwrite {side} (the corpus report beside {out}): homog did not "
            "write it; pass --force to overwrite it, or choose another --out"
        )


def build_corpus(
    params: Params | Mapping[str, Any],
    *,
    out: Path = LAYOUT.corpus,
    root: Path | None = None,
    force: bool = False,
) -> CorpusReport:
    """Run the corpus stage; write ``out`` and ``<out>.report.json``.

    Reads ``params.corpus`` (source, split, text_column, label_column, id_column, n,
    min_words, max_words, name), ``params.seed``, and ``params.models`` with
    ``params.extract.max_tokens``: every review is cut at a sentence boundary to fit every
    model's budget (``homog.corpus.cut``); a mapping is checked first
    (``homog.config.as_params``). Raises HomogError on bad params or bad input.
    """
    params = as_params(params)
    cfg = params.corpus
    dataset = cfg.name or dataset_name(cfg.source)
    out = check_target(out, what="corpus")  # before reading: fail fast
    _check_owned(out, force)
    writable_dir(out.parent, what="corpus")
    raw = load_source(cfg.source, split=cfg.split, root=root)

    fits, budgets = params_check(params)
    corpus, report = prepare_corpus(
        raw,
        dataset=dataset,
        n=cfg.n,
        seed=params.seed,
        text_column=cfg.text_column,
        label_column=cfg.label_column,
        id_column=cfg.id_column,
        min_words=cfg.min_words,
        max_words=cfg.max_words,
        fits=fits,
    )
    report.token_budget = budgets
    try:
        with atomic_path(out) as tmp:
            write_parquet(corpus, tmp, "corpus")  # with homog's mark: a rerun may replace it
        write_json(out.with_suffix(".report.json"), {"source": cfg.source, **report.to_dict()})
    except OSError as exc:
        raise HomogError(f"cannot write the corpus {out}: {exc.strerror or exc}") from exc
    return report


def read_corpus(path: Path) -> pd.DataFrame:
    """Read a corpus Parquet written by ``build_corpus``; HomogError if missing or malformed."""
    if not path.exists():
        raise HomogError(f"corpus file {path} not found: run `homog corpus` first")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:
        raise HomogError(f"corpus file {path} could not be read: {exc}") from exc
    missing = [c for c in CORPUS_COLUMNS if c not in df.columns]
    if missing:
        raise HomogError(f"corpus file {path} lacks columns {missing}: re-run `homog corpus`")
    return df
