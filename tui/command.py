"""``homog tui``: the terminal UI, registered as a plugin command of the homog CLI.

Textual is imported only when the command runs, so ``homog --help`` stays fast.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from tui.app import HomogApp

DEMO_RUNS, DEMO_TEXTS = 6, 40


def make_app(db_path: Path, **kwargs: object) -> HomogApp:
    """The app for ``db_path``, its catalog read by a child process started before Textual
    is imported (the two cost about as much CPU each; see :mod:`tui.preview`)."""
    from tui.preview import CatalogPreview

    preview = CatalogPreview(db_path)
    from tui.app import HomogApp

    return HomogApp(db_path, preview=preview, **kwargs)


@click.command("tui")
@click.argument("path", required=False, type=click.Path(path_type=Path), metavar="[DB]")
@click.option(
    "--db",
    "db_path",
    type=click.Path(path_type=Path),
    default=None,
    help="DuckDB file to open read-only (default: `db:` of params.yaml, else data/homog.duckdb).",
)
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    default=Path("params.yaml"),
    show_default=True,
    help="Where to read the default database path.",
)
@click.option(
    "--demo", is_flag=True, help="Open a small synthetic database built in a temporary directory."
)
def tui(path: Path | None, db_path: Path | None, params: Path, demo: bool) -> None:
    """Browse and compare runs, layers, variants and models in a terminal UI.

    \b
    Screens: 1 Runs, 2 Compare (metric over layers), 3 Attention, 4 PE lab, 5 SQL.
    Keys: ? help, q quit.

    The database is never written. DB (the older spelling) is the same as --db.

    \b
    Examples:
      homog tui
      homog tui --db data/homog.duckdb
      homog tui --demo
    """
    if demo:
        from homog.store.demo import make_demo_db

        with tempfile.TemporaryDirectory(prefix="homog-demo-") as tmp:
            path = Path(tmp) / "demo.duckdb"
            make_demo_db(path, DEMO_RUNS, DEMO_TEXTS)
            make_app(path).run()
        return
    from homog.layout import default_db

    if path is not None and db_path is not None and path != db_path:
        raise click.UsageError(f"two databases given ({path} and --db {db_path}): give one")
    make_app(db_path or path or default_db(params)).run()
