"""``homog tui``: the terminal UI, registered as a plugin command of the homog CLI.

Textual is imported only when the command runs, so ``homog --help`` stays fast.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

DEMO_RUNS, DEMO_TEXTS = 6, 40


@click.command("tui")
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
def tui(db_path: Path | None, params: Path, demo: bool) -> None:
    """Browse and compare runs, layers, variants and models in a terminal UI.

    \b
    Screens: 1 Runs, 2 Compare (metric over layers), 3 Attention, 4 PE lab, 5 SQL.
    Keys: ? help, q quit. The database is never written.

    \b
    Examples:
      homog tui
      homog tui --db data/homog.duckdb
      homog tui --demo
    """
    from tui.app import HomogApp

    if demo:
        from homog.store.demo import make_demo_db

        with tempfile.TemporaryDirectory(prefix="homog-demo-") as tmp:
            path = Path(tmp) / "demo.duckdb"
            make_demo_db(path, DEMO_RUNS, DEMO_TEXTS)
            HomogApp(path).run()
        return
    from homog.layout import default_db

    HomogApp(db_path or default_db(params)).run()
