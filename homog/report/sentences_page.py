"""``python -m homog.report.sentences_page``: the sentence study's results into its page.

Writes the report's section "Where position acts" (homog.report.sentences_view) of a database,
with the followed / left-out sentence counts of its runs (run.json ``sentences``), between the
``<!-- sentence-results -->`` markers of a Markdown page (docs/sentences.md), and its figures
into a folder beside it (study/run.sh runs it).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from homog.config import Params, load_config
from homog.report.document import section_markdown
from homog.report.inputs import bundled, read_inputs
from homog.report.sentences_view import sentences_section
from homog.store.query import connect

START, END = "<!-- sentence-results -->", "<!-- /sentence-results -->"


def counts_line(runs: pd.DataFrame, sentences: pd.DataFrame | None) -> str:
    """Per model: reviews and sentences followed (the database's sentence_metrics rows)."""
    if sentences is None or sentences.empty:
        return "No sentence_metrics rows."
    parts = [
        f"{r.model}: {int(r.reviews)} reviews, {int(r.sentences)} key and other sentences "
        f"of {int(r.texts)} texts followed"
        for r in sentences.itertuples()
    ]
    return "Followed: " + "; ".join(parts) + "."


def render(db: Path, params_path: str | None, figdir: Path, link: str) -> list[str]:
    """The Markdown lines of the block (figures written into ``figdir``, linked as ``link``)."""
    params = load_config(params_path) if params_path else Params()
    con = connect(db)
    try:
        data = read_inputs(con)
        followed = bundled(con, "sentence_followed")
    finally:
        con.close()
    figdir.mkdir(parents=True, exist_ok=True)
    sec = sentences_section(
        data["sentences"],
        data["sentence_curve"],
        data["runs"],
        figdir,
        params.stats.alpha,
        dose=data["sentence_dose"],
    )
    sec.paragraphs.insert(0, counts_line(data["runs"], followed))
    return section_markdown(sec, link, level=3)  # one level down: the page's section holds it


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m homog.report.sentences_page")
    ap.add_argument("--db", required=True)
    ap.add_argument("--params")
    ap.add_argument("--page", required=True, help="the Markdown page with the markers")
    ap.add_argument("--figures", required=True, help="folder for the figures, beside the page")
    ap.add_argument("--source", default="", help="a line saying where the numbers come from")
    args = ap.parse_args(argv)
    page, figdir = Path(args.page), Path(args.figures)
    lines = render(Path(args.db), args.params, figdir, figdir.name)
    text = page.read_text()
    if START not in text:
        raise SystemExit(f"{page} has no {START} marker")
    block = (
        "\n".join([START, args.source, "", *lines, END])
        if args.source
        else "\n".join([START, *lines, END])
    )
    pattern = re.escape(START) + r".*?(" + re.escape(END) + r"|\Z)"
    page.write_text(re.sub(pattern, lambda _m: block, text, count=1, flags=re.S).rstrip() + "\n")
    print(f"wrote the sentence results into {page} ({json.dumps(len(lines))} lines)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
