"""`homog report`: the paper's claims, the manipulation and the figures in one document."""

from __future__ import annotations

from pathlib import Path

import click

from homog.cli.options import db_option, params_option

REPORT_DIR = Path("data/report")


@click.command()
@params_option
@db_option
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=None,
    help="Output file [default: data/report/report.html, or report.md with --format md]; "
    "- writes the HTML page to stdout.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default="html",
    show_default=True,
    help="html: one self-contained file (figures embedded); md: Markdown + <name>_files/*.png.",
)
@click.option(
    "--figures-dir",
    "figures_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --format md: where the PNGs go (linked relative to the page) "
    "[default: <name>_files beside it]. An error with HTML, which embeds its figures.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Overwrite a page and replace a figures folder that homog did not write (everything "
    "in the folder is deleted).",
)
@click.option(
    "--dose-figures",
    "dose_figures",
    type=click.Choice(["primary", "all"]),
    default="primary",
    show_default=True,
    help="The position dose-response figures: of the primary endpoints' metrics "
    "(stats.primary), or one per metric (the table lists every metric either way).",
)
def report(
    params_path: Path,
    db_path: Path | None,
    out: Path | None,
    fmt: str,
    figures_dir: Path | None,
    force: bool,
    dose_figures: str,
) -> None:
    """Check the paper's claims on the database and write one readable document.

    A summary with one paragraph per claim, a glossary, the manipulation strength, the claims
    tables per model (effect, 95% CI, Holm p, verdict), the layer-0 control, layer curves,
    attention heatmaps, MAUVE, the positional-encoding lab beside the paper's numbers, and the
    provenance. How to read it: docs/report.md. Without a params file it uses the stats
    defaults and names what it could not find.

    Only homog's own outputs are replaced: an existing page without homog's generator mark,
    or a figures folder without its `.homog-figures` marker (and not empty), is refused
    unless --force. `-o -` writes the HTML page to stdout (Markdown needs files).

    \b
    Examples:
      homog report                          # data/report/report.html
      homog report --format md -o paper/report.md
      homog report --db other.duckdb -o other.html   # no params.yaml needed
      homog report --format md -o docs/results.md --figures-dir docs/results
      homog report --dose-figures all       # a dose figure for every metric
    """
    from homog.config import load_config
    from homog.layout import Layout, default_db
    from homog.report.build import build_report

    params, synth = None, None
    if db_path is not None and not params_path.exists():
        # The database is all a report needs: stats settings default, and it says so.
        click.echo(
            f"note: no {params_path}: stats settings (alpha, bootstrap, test) at their "
            "defaults; no synth report",
            err=True,
        )
    else:
        params = load_config(params_path)
        # the synth report of the project this params file belongs to, not of the cwd
        synth = Layout(params_path.parent).synth_report
        if not synth.exists():
            click.echo(f"note: no synth report at {synth}: the report has no synth table", err=True)
    db = db_path or default_db(params_path)
    # data/report/ is homog's own output folder (a dvc output): its default page is replaced
    force = force or (out is None and figures_dir is None)
    out = out or REPORT_DIR / f"report.{fmt}"
    path = build_report(
        db,
        out,
        fmt=fmt,
        params=params,
        synth_report=synth,
        figures_dir=figures_dir,
        params_name=str(params_path),
        force=force,
        dose_figures=dose_figures,
    )
    click.echo("wrote the report to stdout" if str(path) == "-" else f"wrote {path}", err=True)
