"""``homog texts``: what the synth stage kept, per variant, and the reviews it dropped (read-only).

Reads the synth stage's outputs, ``texts.parquet`` (``--texts``, default data/synth/) and the
``report.json`` beside it; nothing else (no params.yaml, no database). ``--dropped`` lists
report.json's ``dropped_reviews``: each dropped review with its stage and reason, not only counts.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import click

from homog.cli.options import format_option, texts_option, wide_option
from homog.errors import HomogError

RERUN = "rerun `homog synth` (or `dvc repro synth`)"


def _missing(path: Path, what: str) -> HomogError:
    return HomogError(
        f"no {what} at {path}: run `homog synth` (or `dvc repro synth`) first, in the project "
        "directory, or give --texts PATH (the synth output's texts.parquet; its report.json "
        "beside it)"
    )


def read_report(path: Path) -> dict[str, Any]:
    """synth's report.json (HomogError naming `homog synth` when missing or damaged)."""
    from homog.io import unreadable

    if not path.is_file():
        raise _missing(path, "synth report")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise unreadable(path, exc, RERUN) from exc
    if not isinstance(report, dict):
        raise unreadable(path, ValueError("not a JSON object"), RERUN)
    return report


def dropped_rows(report: dict[str, Any], path: Path) -> list[dict[str, str]]:
    """report.json's ``dropped_reviews`` (sample_id, stage, reason, detail)."""
    rows = report.get("dropped_reviews")
    if rows is None:
        raise HomogError(
            f"{path} has no per-review drop reasons (`dropped_reviews`): it was written by a "
            f"homog synth older than them; {RERUN} to list them. Its counts: "
            f"{json.dumps(report.get('dropped', {}), sort_keys=True)}"
        )
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise HomogError(f"{path}: `dropped_reviews` is not a list of objects; {RERUN}")
    keys = ("sample_id", "stage", "reason", "kept_in", "detail")
    # kept_in: the variants that still hold a review left out of others (an older report has
    # no kept_in: such a review was dropped from every variant)
    return [
        {k: ("none" if k == "kept_in" else "") if r.get(k) is None else str(r.get(k)) for k in keys}
        for r in rows
    ]


def variant_counts(path: Path) -> tuple[list[str], list[list[Any]]]:
    """Per variant of texts.parquet: texts, texts per label, mean words, mean BERTScore F1."""
    import pandas as pd
    import pyarrow.parquet as pq

    from homog.io import READ_ERRORS, unreadable
    from homog.store.query import VARIANT_ORDER

    if not path.is_file():
        raise _missing(path, "synth texts")
    try:
        names = set(pq.read_schema(path).names)
        if not {"variant", "sample_id"} <= names:
            raise ValueError("no variant / sample_id column")
        wanted = ["variant", "sample_id", "label", "text", "bertscore_f1"]
        frame = pd.read_parquet(path, columns=[c for c in wanted if c in names])
    except READ_ERRORS as exc:
        raise unreadable(path, exc, RERUN) from exc
    labels = sorted(frame["label"].dropna().astype(str).unique()) if "label" in frame else []
    columns = ["variant", "texts", *labels, "words", "bertscore_f1"]
    if "text" in frame:
        frame["words"] = frame["text"].fillna("").astype(str).str.split().str.len()
    found = [str(v) for v in frame["variant"].dropna().unique()]
    order = [v for v in VARIANT_ORDER if v in found]
    order += sorted(v for v in found if v not in VARIANT_ORDER)  # intervention variants
    rows = []
    for variant in order:
        part = frame[frame["variant"].astype(str) == variant]
        by_label = part["label"].astype(str).value_counts() if labels else {}
        words = float(part["words"].mean()) if "words" in part and len(part) else None
        f1 = part["bertscore_f1"].dropna() if "bertscore_f1" in part else ()
        rows.append(
            [
                variant,
                int(part["sample_id"].nunique()),
                *(int(by_label.get(lab, 0)) for lab in labels),
                words,
                float(f1.mean()) if len(f1) else None,
            ]
        )
    return columns, rows


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return ""
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


@click.command()
@texts_option("the synth stage's output; its report.json is read beside it")
@click.option(
    "--dropped",
    is_flag=True,
    help="List the reviews synth dropped, one line each: sample_id, stage (select, budget, "
    "position_family), reason, kept_in (what the review still has: position_family, "
    "paper_variants or none) and detail, from report.json's dropped_reviews.",
)
@format_option
@wide_option
def texts(texts_path: str, dropped: bool, fmt: str, wide: bool) -> None:
    """The synth stage's texts: how many were kept per variant, or (--dropped) every review it
    dropped and why.

    Without --dropped: one line per variant of texts.parquet (texts, texts per label, mean
    words, mean BERTScore F1; the originals' F1 is 1 and the position family has none) and,
    from report.json, how many reviews came in and were dropped. With --dropped: report.json's
    dropped_reviews (sample_id, stage, reason, detail; docs/synth.md). Reads only the synth
    output (no database, no params.yaml).

    \b
    Example:
      homog texts
      homog texts --dropped
      homog texts --dropped --format csv > dropped.csv
      homog texts --texts runs/a/synth/texts.parquet --dropped --wide
    """
    from homog.cli.tables import Column, emit, print_fitted

    path = Path(texts_path)
    report_path = path.with_name("report.json")
    if dropped:
        report = read_report(report_path)
        rows = dropped_rows(report, report_path)
        cols = ["sample_id", "stage", "reason", "kept_in", "detail"]
        if fmt != "table":
            emit(cols, [[r[c] for c in cols] for r in rows], fmt)
            return
        n_in = report.get("texts_in")
        of = f" of {n_in} reviews in" if isinstance(n_in, int) else ""
        if not rows:
            click.echo(f"synth dropped no review{of} ({report_path})")
            return
        tally = Counter(r["reason"] for r in rows)
        kept = sum(r["kept_in"] != "none" for r in rows)
        note = (
            f"{len(rows)} reviews dropped{of}: "
            + ", ".join(f"{reason} {n}" for reason, n in tally.most_common())
            + (f"; {kept} of them kept in part (kept_in)" if kept else "")
        )
        # kept_in says what of the review is left: the column that tells the rows apart
        shown = [Column("sample_id"), Column("stage", drop=1), Column("reason"), Column("kept_in")]
        print_fitted(
            [*shown, Column("detail", shrink=True)],
            [[r[c] for c in cols] for r in rows],
            title=f"reviews dropped by synth ({report_path})",
            note=note,
            wide=wide,
        )
        return
    cols, rows = variant_counts(path)
    if fmt != "table":
        emit(cols, rows, fmt)
        return
    report = read_report(report_path) if report_path.is_file() else {}
    note = ""
    n_in, n_kept = report.get("texts_in"), report.get("texts_kept")
    if isinstance(n_in, int) and isinstance(n_kept, int):
        note = f"{n_in} reviews in, {n_kept} kept"
        if n_in > n_kept:
            listed = isinstance(report.get("dropped_reviews"), list)
            why = (
                "homog texts --dropped lists them"
                if listed
                else "report.json predates per-review reasons: rerun `homog synth` to list them"
            )
            note += f"; {n_in - n_kept} dropped ({why})"
    right = {c: Column(c, right=True) for c in cols[1:]}
    print_fitted(
        [Column("variant"), *(right[c] for c in cols[1:])],
        [[*map(_num, r[:-2]), _num(r[-2], 1), _num(r[-1])] for r in rows],
        title=f"texts per variant ({path})",
        note=note,
        wide=wide,
    )
