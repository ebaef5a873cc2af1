"""``homog corpus`` and ``homog synth``: thin Click wrappers over their stage functions."""

from __future__ import annotations

from pathlib import Path

import click

from homog.cli.options import params_option
from homog.config import load_config
from homog.layout import Layout

LAYOUT = Layout()
force_option = click.option(
    "--force",
    is_flag=True,
    help="With --out: replace outputs there that homog did not write (by default refused).",
)


@click.command()
@params_option
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=LAYOUT.corpus,
    show_default=True,
    help="Parquet file to write",
)
@force_option
def corpus(params_path: Path, out: Path, force: bool) -> None:
    """Draw a balanced, cleaned sample of reviews from corpus.source.

    \b
    Sources (params.yaml corpus.source):
      demo                 the project's 100 offline reviews (data/demo/)
      hf:stanfordnlp/imdb  datasets.load_dataset (needs the hub or its cache)
      file:PATH            CSV, JSONL or Parquet; text: corpus.text_column
    Example: homog corpus && homog synth

    Writes data/corpus/corpus.parquet (dataset, sample_id, text, label) and a .report.json
    with the counts of rows dropped (not text, empty, duplicates, too short, too long). Every
    review is cut at a sentence boundary to fit extract.max_tokens under every model in
    models: (no_fit: not even its first sentence fits). An existing --out file that homog
    did not write is refused unless --force.
    """
    from homog.corpus.stage import build_corpus

    # the default path is homog's own (data/); elsewhere only homog's files are replaced
    force = force or out == LAYOUT.corpus
    report = build_corpus(load_config(params_path), out=out, force=force)
    click.echo(
        f"corpus: {report.rows_in} rows in; dropped {report.not_text} not text, {report.empty} "
        f"empty, {report.duplicates} duplicates, {report.too_short} too short, "
        f"{report.too_long} too long, {report.no_fit} not fitting extract.max_tokens; "
        f"{report.eligible} eligible; drew {report.drawn} {report.drawn_by_label}; cut "
        f"{report.cut} to fit {report.token_budget} tokens ({report.cut_words_share:.1%} of "
        f"their words) -> {out}"
    )


def _synth_help() -> str:
    """synth's help, naming the variants it writes from the registry (homog.variants)."""
    from homog.variants import ORIGINAL, PAPER, POSITION, VARIANTS

    paper = ", ".join(v.name for v in VARIANTS if v.family in (ORIGINAL, PAPER))
    family = ", ".join(v.name for v in VARIANTS if v.family == POSITION)
    return "\n".join(
        [
            f"Build every review's variants: {paper} (rewrites validated with BERTScore), "
            f"and the position family {family} (every token kept; other "
            "synth.position.positions add key_p25 ...).",
            "",
            "\b",
            "Key phrases: synth.keyphrase (yake)",
            "rephraser: synth.rephraser (parse | rule | llm)",
            "validation: synth.bertscore (backbone, num_layers, threshold)",
            "position family: synth.position (enabled, positions; docs/variants.md)",
            "Example: homog synth --params params.yaml",
            "",
            "Writes data/synth/texts.parquet (the texts kept in every variant) and "
            "data/synth/report.json. In another --out folder, existing files of those names "
            "that homog did not write are refused unless --force.",
        ]
    )


@click.command(help=_synth_help())
@params_option
@click.option(
    "--corpus",
    "corpus_path",
    type=click.Path(path_type=Path),
    default=LAYOUT.corpus,
    show_default=True,
    help="corpus Parquet to read",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=LAYOUT.synth_dir,
    show_default=True,
    help="directory for texts.parquet and report.json",
)
@force_option
def synth(params_path: Path, corpus_path: Path, out: Path, force: bool) -> None:
    """The synth stage (its help, naming the registry's variants: _synth_help)."""
    from homog.owned import check_stage_out, mark_stage_out
    from homog.synth import build_synth

    params = load_config(params_path)
    mine = out == LAYOUT.synth_dir  # homog's own folder (data/)
    names = [LAYOUT.texts.name, LAYOUT.synth_report.name]
    check_stage_out(out, names, force=force or mine, what="synth outputs")
    report = build_synth(params, corpus_path=corpus_path, out_dir=out)
    if not mine:
        mark_stage_out(out, "synth")
    pos = report["keyphrase_position"]
    f1 = report["bertscore_f1"]
    click.echo(
        f"synth: {report['texts_in']} texts in, {report['texts_kept']} kept; dropped "
        f"{report['dropped']}\n"
        f"  rewrite rate {report['rewrite_rate']}\n  mean BERTScore F1 {f1}\n"
        f"  mean key-phrase position {pos}"
    )
    fam = report.get("manipulation", {}).get("position_family")
    if fam and fam.get("control"):
        travel, ratio = fam["first_last_distance_mean"], fam["control"]["ratio_of_means"]
        click.echo(
            f"  position family: {fam['texts']} texts, dropped {fam['dropped']}; key sentence "
            f"travels {travel} of the tokens; key_control's shift {ratio} x the family's largest"
        )
    click.echo(f"-> {out}/texts.parquet, {out}/report.json")
