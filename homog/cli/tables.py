"""Printing rows: rich tables that fit the terminal, CSV and JSON.

- ``emit``: any rows as a rich table (cells fold to fit), CSV or JSON; what ``homog sql``
  prints.
- ``Column`` and ``print_fitted``: the tables of ``runs``, ``compare``, ``claims`` and
  ``diff``, sqlite-utils and DVC style. Every cell stays on one line: when the table is
  wider than the terminal (``COLUMNS``), its least needed columns are left out, in the order
  the command gives, and the caption names them; ``--wide`` keeps every column (the lines
  may then be longer than the terminal). A column with a ``legend`` prefix then shows codes
  (C1, C2, ...) for its long values, named in a legend under the table (``abbreviate``): a
  name is never cut. A column marked ``shrink`` is cut with "…" only when the columns that
  are never left out still do not fit.
- ``est``: a number with the CI that goes with it, rounded to the digits the CI supports.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import click

from homog.cli.options import pipe_safe, table_width


def cell(v: Any) -> Any:
    """A value as CSV/JSON write it: dates and times in ISO form."""
    if isinstance(v, datetime | date):
        return (
            v.isoformat(sep=" ", timespec="seconds") if isinstance(v, datetime) else v.isoformat()
        )
    return v


def fmt_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(cell(v))


def emit(columns: list[str], rows: Sequence[Sequence[Any]], fmt: str, title: str = "") -> None:
    """Print rows as a rich table, CSV or JSON (a list of objects) on stdout."""
    with pipe_safe():
        _emit(columns, rows, fmt, title)
        sys.stdout.flush()


def _emit(columns: list[str], rows: Sequence[Sequence[Any]], fmt: str, title: str) -> None:
    if fmt == "json":
        click.echo(
            json.dumps(
                [dict(zip(columns, map(cell, r), strict=True)) for r in rows],
                indent=2,
                default=str,
            )
        )
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        w.writerows([[cell(v) for v in r] for r in rows])
        click.echo(buf.getvalue(), nl=False)
    else:
        from rich.table import Table

        table = Table(title=title or None, header_style="bold", show_lines=False)
        for c in columns:
            table.add_column(c, overflow="fold")
        for r in rows:
            table.add_row(*[fmt_value(v) for v in r])
        _print(table)


def stdout_console(width: int | None = None):
    """A rich Console on stdout, ``width`` columns wide (None: ``table_width()``), that ends
    quietly on a closed pipe."""
    from rich.console import Console

    # A pipe gets a wide table instead of rich's 80-column default, unless COLUMNS says.
    console = Console(width=width or table_width())
    console.on_broken_pipe = _broken_pipe  # rich would exit 1; pipe_safe exits 0
    return console


def _print(table: Any, width: int | None = None) -> None:
    stdout_console(width).print(table)


def _broken_pipe() -> None:
    raise BrokenPipeError


# --- tables that fit ----------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of a fitted table. ``drop``: 0 = always shown; otherwise the column is left
    out when the table does not fit, highest ``drop`` first. ``shrink``: may be cut with "…"
    as a last resort. ``right``: right-justified (numbers). ``legend``: the prefix of the
    codes that stand for its long values when the table does not fit (:func:`abbreviate`)."""

    name: str
    drop: int = 0
    shrink: bool = False
    right: bool = False
    legend: str = ""


def _table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    title: str,
    caption: str,
    limits: dict[int, int] | None = None,
):
    """A rich table whose cells never wrap; ``limits``: column index -> the width it is cut
    to (with "…")."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=title or None,
        caption=caption or None,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        header_style="bold",
        caption_justify="left",
    )
    for i, c in enumerate(columns):
        table.add_column(
            c.name,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if c.right else "left",
            width=(limits or {}).get(i),
        )
    for r in rows:
        table.add_row(*r)
    return table


def measure(columns: Sequence[Column], rows: Sequence[Sequence[str]], kept: Sequence[int]) -> int:
    """The width of the table of the ``kept`` columns, every cell on one line."""
    from rich.console import Console

    table = _table([columns[k] for k in kept], [[r[k] for k in kept] for r in rows], "", "")
    return Console(width=10_000).measure(table).maximum


def fit_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Indices of the columns kept so that the table, every cell on one line, is at most
    ``width`` wide: columns are left out by falling ``drop`` (the rightmost first among
    equals) until it fits or only ``drop == 0`` columns remain."""
    kept = list(range(len(columns)))
    order = sorted(
        (i for i, c in enumerate(columns) if c.drop), key=lambda i: (-columns[i].drop, -i)
    )
    for i in [None, *order]:
        if i is not None:
            kept.remove(i)
        if measure(columns, rows, kept) <= width:
            break
    return kept


def abbreviate(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, kept: Sequence[int]
) -> tuple[list[list[str]], list[str]]:
    """``rows`` with codes in place of long values, and the legend naming them.

    While the ``kept`` columns are wider than ``width``, the ``legend`` column with the
    widest cell turns each of its values longer than a code into one (its prefix and a
    number, in the order the values first appear: C1, C2, ...); the legend has a line per
    such column ("comparison: C1 = key_first - key_control; C2 = ..."). Rows that fit come
    back as they are, with no legend."""
    from rich.cells import cell_len

    out = [list(r) for r in rows]
    legend: list[str] = []
    todo = [k for k in kept if columns[k].legend]
    while todo and out and measure(columns, out, kept) > width:
        i = max(todo, key=lambda k: max(cell_len(r[k]) for r in out))
        todo.remove(i)
        prefix = columns[i].legend
        long = [v for v in dict.fromkeys(r[i] for r in out) if cell_len(v) > len(prefix) + 2]
        codes = {v: f"{prefix}{n}" for n, v in enumerate(long, 1)}
        for r in out:
            r[i] = codes.get(r[i], r[i])
        if codes:
            pairs = "; ".join(f"{c} = {v}" for v, c in codes.items())
            legend.append(f"{columns[i].name}: {pairs}")
    return out, legend


def print_fitted(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str = "",
    note: str = "",
    wide: bool = False,
    kept: Sequence[int] | None = None,
    name_hidden: bool = True,
) -> None:
    """Print string ``rows`` as a table that fits the terminal (see the module docstring).
    ``note``: a line under the table (a legend); the columns left out are named after it
    (unless ``name_hidden`` is false). ``kept``: the columns to show, when the caller fitted
    several tables at once."""
    width = stdout_console().width
    if wide:
        kept = list(range(len(columns)))
    elif kept is None:
        kept = fit_columns(columns, rows, width)
    hidden = [c.name for i, c in enumerate(columns) if i not in kept]
    lines = [note] if note else []
    if hidden and name_hidden:
        lines.append(f"not shown: {', '.join(hidden)} (--wide: every column)")
    shown = [columns[k] for k in kept]
    cells = [[r[k] for k in kept] for r in rows]
    table = _table(shown, cells, "", "")
    from rich.console import Console

    need = Console(width=10_000).measure(table).maximum
    if wide:
        width = max(width, need)
    elif need > width:
        table = _table(shown, cells, "", "", _shrink(shown, cells, need - width))
    console = stdout_console(width)
    plain = {"markup": False, "highlight": False}
    with pipe_safe():
        if title:  # a line of its own, cut rather than wrapped
            console.print(title, style="bold", no_wrap=True, overflow="ellipsis", **plain)
        console.print(table)
        for line in lines:  # notes wrap at words
            console.print(line, style="dim", **plain)
        sys.stdout.flush()


def _shrink(columns: Sequence[Column], rows: Sequence[Sequence[str]], excess: int) -> dict:
    """Widths for the ``shrink`` columns that take ``excess`` characters off the table: the
    widest is narrowed first, none below its header or 8 characters."""
    from rich.cells import cell_len

    widths = {
        i: max([cell_len(c.name), *(cell_len(r[i]) for r in rows)])
        for i, c in enumerate(columns)
        if c.shrink
    }
    floor = {i: max(cell_len(columns[i].name), 8) for i in widths}
    while excess > 0 and widths:
        i = max(widths, key=lambda k: widths[k] - floor[k])
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
        excess -= 1
    return widths


def decimals(half_width: float | None, default: int = 3) -> int:
    """Decimal places that show a CI of this half-width to two significant digits (what the
    CI supports: more digits of the estimate would be noise)."""
    if half_width is None or not math.isfinite(half_width) or half_width <= 0:
        return default
    return max(0, 1 - math.floor(math.log10(half_width)))


def est(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """``value [low, high]`` rounded to the CI's precision; ``value`` alone (4 significant
    digits) without a CI."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{value:.4g}"
    d = decimals((high - low) / 2)
    return f"{_fixed(value, d)} [{_fixed(low, d)}, {_fixed(high, d)}]"


def _fixed(v: float, d: int) -> str:
    """``v`` to ``d`` decimals, without the sign of a value that rounds to zero ("-0.0")."""
    text = f"{v:.{d}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def pm(value: float | None, low: float | None, high: float | None) -> str:
    """``value ± half-width`` of a symmetric CI, rounded to its precision."""
    if value is None:
        return ""
    if low is None or high is None:
        return f"{value:.4g}"
    half = (high - low) / 2
    d = decimals(half)
    return f"{_fixed(value, d)} ± {half:.{d}f}"


def p_text(p: float | None) -> str:
    """A p-value to two significant digits (small ones in e-notation)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    return f"{p:.2g}"
