"""``python -m homog.report.readme``: write the answer of a database into the README's block.

The lines are :func:`homog.report.answer.full_answer`'s, the report's first section's, each
written as its one rendering (AnswerLine.markdown), so the README's "answer so far" and the
results page cannot disagree (study/run.sh runs it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from homog.config import Params, load_config
from homog.report.answer import full_answer, replace_block
from homog.report.inputs import claims_of, read_inputs
from homog.report.sentences_view import sentence_line, verdict_rows
from homog.store.query import connect


def main(argv: list[str] | None = None) -> int:
    """``python -m homog.report.readme --db DB --params P --readme README.md --source TEXT``:
    write the answer lines of the database's claims into the README's answer block."""
    ap = argparse.ArgumentParser(prog="python -m homog.report.readme")
    ap.add_argument("--db", required=True)
    ap.add_argument("--params")
    ap.add_argument("--readme", required=True)
    ap.add_argument("--source", default="")
    args = ap.parse_args(argv)
    params = load_config(args.params) if args.params else Params()
    con = connect(Path(args.db))
    try:
        data = read_inputs(con)
    finally:
        con.close()
    claims = claims_of(data, params)
    texts = data["texts"]
    n = int(texts.loc[texts["variant"] == "original", "n_texts"].sum()) if len(texts) else 0
    models = ", ".join(dict.fromkeys(data["runs"]["model"])) if len(data["runs"]) else "no model"
    source = args.source or (
        f"On {n} reviews with {models} (`make study`; [results](docs/results.md)), from the "
        "study's published tables (`study/results/`, or its database) by `python -m "
        "homog.report.readme`:"
    )
    readme = Path(args.readme)
    # where position acts: the same database's moved sentences, as the report words it
    sentence = sentence_line(verdict_rows(data["sentences"], data["runs"], params.stats.alpha))
    lines = full_answer(claims, data["probe"], sentence, data.get("cost"), data["doses"])
    readme.write_text(replace_block(readme.read_text(), lines, source))
    print(f"wrote the answer ({len(lines)} lines) into {readme}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
