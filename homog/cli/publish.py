"""``homog publish``: the summary tables of a database as a Parquet bundle that every reader
opens with ``--db FOLDER`` (homog.store.bundle)."""

from __future__ import annotations

from pathlib import Path

import click

from homog.cli.options import connect_db, db_option
from homog.errors import HomogError


@click.command()
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The bundle folder to write (replaced when it is a bundle).",
)
@click.option(
    "--max-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=25.0,
    show_default=True,
    help="Refuse (write nothing) when the files would be larger.",
)
@click.option("--force", is_flag=True, help="Replace OUT even when it is not a bundle.")
@db_option
def publish(out: Path, max_mb: float, force: bool, db_path: Path | None) -> None:
    """Write the summary tables of the database as a bundle of Parquet files.

    One run per model and intervention (the newest), every table that is not per text,
    layer_summary, the texts without their words, and of the per-text tables only what the
    claims and the report compute from. `homog report`, `claims`, `compare`, `runs`, `sql`,
    `export`, `plot` and `tui` open the folder with --db OUT, read-only, and give the same
    rows as the database (docs/database.md, "Published bundles").

    \b
    Example:
      homog publish --db study/data/homog.duckdb -o study/results
      homog claims --db study/results --format json
    """
    from homog.layout import default_db
    from homog.owned import check_owned_dir
    from homog.report.inputs import BUNDLE_FRAMES, BUNDLE_SLICES
    from homog.store.bundle import is_bundle, write_bundle
    from homog.store.current import use_runs
    from homog.store.query import check_schema

    if out.exists() and not out.is_dir():
        raise HomogError(f"{out} is a file; -o names the bundle folder to write")
    if out.is_dir() and not is_bundle(out):
        check_owned_dir(out, force=force, what="bundle folder")
    con = connect_db(db_path)
    try:
        check_schema(con)
        use_runs(con)
        manifest = write_bundle(
            con,
            out,
            slices=BUNDLE_SLICES,
            frames=BUNDLE_FRAMES,
            source=Path(db_path or default_db()).name,
            max_mb=max_mb,
            # where the numbers were made (git, corpus and synth reports), as `homog report`
            # reads it from the current directory
            provenance=published_provenance(),
        )
    finally:
        con.close()
    n = len(manifest["tables"])
    click.echo(f"wrote {out} ({n} tables, {manifest['bytes'] / 2**20:.2f} MB)", err=True)


def published_provenance() -> dict:
    """The current directory's project record and its synth report (as `homog report` reads
    them there), for the bundle's manifest."""
    from homog.layout import Layout
    from homog.report.provenance import project_record, synth_record

    record = project_record(Path.cwd())
    record["synth"], missing = synth_record(Layout(Path(".")).synth_report)
    record["missing"] += missing
    return record
