"""Click options shared by several commands."""

from __future__ import annotations

from pathlib import Path

import click

params_option = click.option(
    "--params",
    "params_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("params.yaml"),
    show_default=True,
    help="Pipeline parameters file (each command reads its own section).",
)


def db_option(f):
    """``--db PATH`` (db_path) of the commands that read the database, read-only."""
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="DuckDB file (default: params.yaml `db`, data/homog.duckdb); opened read-only.",
    )(f)
