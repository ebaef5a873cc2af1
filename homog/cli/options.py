"""Click options and helpers shared by several commands.

- ``params_option``, ``db_option``: the two file options every reading command has.
- ``AliasOption``: an option whose older spellings still work but are left out of ``--help``
  (one name per option across commands; ``--models`` is a hidden alias of ``--model``).
- ``connect_db``, ``split_values``: the database of ``--db`` opened read-only, and repeated or
  comma-separated option values as one list.
- ``resolve_runs``: run ids or unique prefixes of them (what ``homog compare`` prints) to full
  ids, with a message listing the candidates when a prefix is ambiguous or unknown.
- ``table_width`` and ``pipe_safe``: how wide a table is off a terminal (``COLUMNS``), and a
  closed pipe (``homog runs | head -1``) ending the command quietly with status 0.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from homog.errors import HomogError

params_option = click.option(
    "--params",
    "params_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("params.yaml"),
    show_default=True,
    help="Pipeline parameters file (each command reads its own section).",
)


def texts_option(columns: str):
    """``--texts``: the synth stage's texts table (default data/synth/texts.parquet)."""
    from homog.layout import Layout

    return click.option(
        "--texts",
        "texts_path",
        default=str(Layout().texts),
        show_default=True,
        type=click.Path(dir_okay=False),
        help=f"Texts table ({columns}).",
    )


def stage_out_option(default: str):
    """``--out``: a model stage's output directory (``default`` names it in --help)."""
    return click.option(
        "--out",
        "out_dir",
        default=None,
        type=click.Path(file_okay=False),
        help=f"Output directory [default: {default}].",
    )


device_option = click.option(
    "--device", default=None, help="Override extract.device (cpu | cuda | auto)."
)


def db_option(f):
    """``--db PATH`` (db_path) of the commands that read the database, read-only."""
    return click.option(
        "--db",
        "db_path",
        type=click.Path(path_type=Path),
        default=None,
        help="DuckDB file (default: params.yaml `db`, data/homog.duckdb), or a folder "
        "`homog publish` wrote; opened read-only.",
    )(f)


class AliasOption(click.Option):
    """A Click option with hidden spellings: ``hidden_aliases`` parse like the others but are
    not shown in ``--help`` (``@click.option("--model", "--models", "models",
    cls=AliasOption, hidden_aliases=("--models",))``)."""

    def __init__(self, *args: Any, hidden_aliases: Sequence[str] = (), **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.hidden_aliases = tuple(hidden_aliases)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown, self.opts = self.opts, [o for o in self.opts if o not in self.hidden_aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def model_option(help: str = "Model keys (repeat or comma-separate)."):  # noqa: A002
    """``--model`` (repeatable, comma-separated) with the older ``--models`` hidden."""
    return click.option(
        "--model",
        "--models",
        "models",
        multiple=True,
        cls=AliasOption,
        hidden_aliases=("--models",),
        help=help,
    )


def resolve_runs(all_ids: Sequence[str], given: Sequence[str]) -> list[str]:
    """Full run ids for ``given`` ids or prefixes of them (in order, duplicates dropped).

    An exact id wins; otherwise a prefix must match exactly one run. Raises HomogError naming
    the candidates of an ambiguous prefix, or the known runs for one that matches nothing.
    """
    out: list[str] = []
    for g in given:
        if g in all_ids:
            hit = g
        else:
            matches = [r for r in all_ids if r.startswith(g)]
            if len(matches) > 1:
                raise HomogError(
                    f"run id prefix {g!r} matches {len(matches)} runs: {', '.join(matches)}; "
                    "give more characters"
                )
            if not matches:
                known = ", ".join(all_ids) if all_ids else "none"
                raise HomogError(f"unknown run {g!r}; runs in the database: {known}")
            hit = matches[0]
        if hit not in out:
            out.append(hit)
    return out


def table_width() -> int | None:
    """Width for a rich table on stdout: the terminal's (or ``COLUMNS`` when set: rich reads
    it), and 200 columns off a terminal without ``COLUMNS``."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return None
    return 200


@contextlib.contextmanager
def pipe_safe() -> Iterator[None]:
    """Writing to stdout inside: a reader that went away (``| head -1``) ends the command
    with status 0 and no traceback. Python's own flush at exit would fail again, so stdout
    is pointed at /dev/null first."""
    try:
        yield
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None


def connect_db(db_path: Path | None):
    """A read-only connection to ``--db`` (None: ``homog.layout.default_db``). Raises
    HomogError when the default path is relative and there is no project here to read it in,
    and what ``homog.store.connect`` raises for a missing, locked or damaged file."""
    from homog.layout import default_db
    from homog.store import connect

    path = db_path or default_db()
    outside = not Path("dvc.yaml").exists() and not Path("params.yaml").exists()
    if db_path is None and outside and not path.exists() and not path.is_absolute():
        # The default is relative: outside a project it names a file that is not there.
        raise HomogError(
            f"no database at {path}: the default path (params.yaml `db`, else "
            f"data/homog.duckdb) is relative to the current directory {Path.cwd()}; run homog "
            "in the project directory (where `dvc repro` makes it), or give --db PATH"
        )
    return connect(path)


def split_values(values: Sequence[str]) -> list[str]:
    """Accept repeated options and comma-separated lists alike."""
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def short_ids(all_ids: Sequence[str], min_len: int = 8) -> dict[str, str]:
    """Each run id cut to the shortest prefix of at least ``min_len`` characters that no other
    id shares: what a table prints, and what ``resolve_runs`` takes back."""
    out = {}
    for rid in all_ids:
        n = min(min_len, len(rid))
        while n < len(rid) and any(o != rid and o.startswith(rid[:n]) for o in all_ids):
            n += 1
        out[rid] = rid[:n]
    return out


def plain(v: Any) -> Any:
    """A pandas/numpy scalar as a Python value; NaN and NA as None (JSON has no NaN)."""
    import math

    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def format_option(f: Callable) -> Callable:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "csv", "json"]),
        default="table",
        show_default=True,
        help="Output format.",
    )(f)


def wide_option(f: Callable) -> Callable:
    return click.option(
        "--wide",
        is_flag=True,
        help="Table: every column, full run ids (lines may be wider than the terminal).",
    )(f)
