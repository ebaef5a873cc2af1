"""`homog claims`: the report's claims table on the command line (rich table, CSV or JSON).

The rows come from :func:`homog.report.claims.claims_table` over the frames the report reads
(:func:`homog.report.inputs.read_inputs`), so the command and the report never disagree; every
column it returns is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from homog.cli.options import (
    connect_db,
    db_option,
    format_option,
    model_option,
    params_option,
    plain,
    split_values,
    wide_option,
)
from homog.cli.tables import emit
from homog.errors import HomogError


def stats_settings(params_path: Path) -> dict[str, Any]:
    """The stats stage's settings (alpha, n_boot, ci, seed, test, n_perm) from the ``stats:``
    section of params.yaml, or their defaults when there is no such file."""
    params = _params(params_path)
    st, seed = params.stats, params.seed
    return {
        "alpha": st.alpha,
        "n_boot": st.n_boot,
        "ci": st.ci,
        "seed": seed,
        "test": st.test,
        "n_perm": st.n_perm,
    }


def _params(params_path: Path):
    """The params of --params, or the defaults when there is no such file."""
    from homog.config import Params, load_config

    return load_config(params_path) if params_path.exists() else Params()


def _sensitivity(frame: Any, params: Any, fmt: str) -> None:
    """Print the sensitivity table of the claims rows ``frame`` (homog.report.sensitivity)."""
    from homog.report.sensitivity import label, sensitivity_table

    st = params.stats
    table = sensitivity_table(frame, st.alpha, (st.sesoi_basis, st.sesoi))
    if table.empty:
        pr = st.primary
        raise HomogError(
            "no primary endpoints among the claim rows: the database has no row of "
            f"stats.primary's contrasts ({'; '.join(pr.contrasts)}) for its metrics "
            f"({', '.join(pr.metrics)}) and scopes ({', '.join(pr.scopes)}). Name contrasts "
            "the database holds in --params (`homog claims` lists them), or rerun synth and "
            "stats with the variants they need"
        )
    if fmt == "table":  # the verdicts only: effect and CI are in `homog claims`
        own = label(st.sesoi_basis, st.sesoi)
        table = table.drop(columns=["effect", "ci_low", "ci_high", "default", "holds"])
        table = table.rename(columns={own: f"{own} (own)"})
    columns = [str(c) for c in table.columns]
    rows = [[plain(v) for v in r] for r in table.itertuples(index=False, name=None)]
    emit(columns, rows, fmt, "primary verdicts per margin")


def _power(frame: Any, fmt: str) -> None:
    """Print the reviews each primary endpoint needs (homog.report.power), then one line."""
    from homog.report.power import power_line, power_table

    table = power_table(frame)
    if table.empty:
        raise HomogError("no primary endpoints among the claim rows (stats.primary)")
    full = table
    if fmt == "table":  # what fits 80 columns; csv and json carry every column
        table = table[["model", "comparison", "metric", "scope", "n", "n_needed", "verdict"]]
    columns = [str(c) for c in table.columns]
    rows = [[plain(v) for v in r] for r in table.itertuples(index=False, name=None)]
    emit(columns, rows, fmt, "reviews that would decide each primary endpoint")
    if fmt == "table":
        click.echo(power_line(full))


def _matches(value: Any, wanted: list[str], *, prefix: bool = False) -> bool:
    text = str(value)
    return any(text == w or (prefix and text.startswith(w)) for w in wanted)


@click.command()
@db_option
@params_option
@model_option("Only these models (repeat or comma-separate).")
@click.option(
    "--claim",
    "claims",
    multiple=True,
    help="Only these claims: 1 .. 5, or 5a, 5b, 5c (a prefix: 5 takes all three).",
)
@click.option(
    "--verdict",
    "verdicts",
    multiple=True,
    help="Only these verdicts, e.g. supported, reversed, inconclusive (repeat or comma-separate).",
)
@click.option(
    "--sensitivity",
    is_flag=True,
    help="Instead of the claims: every primary endpoint's verdict under the margin bases sd "
    "and depth x 0.05, 0.1, 0.2 (the column of the params' own setting equals the claims').",
)
@click.option(
    "--power",
    is_flag=True,
    help="Instead of the claims: per primary endpoint, the reviews that would decide it (its "
    "equivalence CI clear of +-SESOI; plug-in, docs/statistics.md).",
)
@format_option
@wide_option
def claims(
    db_path: Path | None,
    params_path: Path,
    models: tuple[str, ...],
    claims: tuple[str, ...],
    verdicts: tuple[str, ...],
    sensitivity: bool,
    power: bool,
    fmt: str,
    wide: bool,
) -> None:
    """The paper's claims checked on the database: effect, CI, Holm p and verdict per model.

    The same rows as the claims table of `homog report` (alpha, bootstrap and test from the
    `stats:` section of --params when the file exists, else their defaults). Filters narrow
    the rows; each names what it did not find. The table shows one line per row, grouped
    by model: claim, comparison, scope, effect [95 % CI] (rounded to the CI's precision) and
    verdict, with what fits the terminal; --wide, --format csv or json show every column.

    \b
    Examples:
      homog claims
      homog claims --format json > claims.json
      homog claims --model smollm2-135m --claim 1 --format csv
      homog claims --claim 5b --wide
      homog claims --verdict supported,reversed
      homog claims --sensitivity --format json
      homog claims --power
    """
    from homog.report.build import REPORT_TABLES
    from homog.report.inputs import claims_of, read_inputs
    from homog.stats.primary_names import check_primary
    from homog.store.current import left_out
    from homog.store.query import check_schema

    params = _params(params_path)
    check_primary(params.stats.primary)  # a params typo first, before any reading
    con = connect_db(db_path)
    check_schema(con, (*REPORT_TABLES, "separability"))
    data = read_inputs(con)
    note = left_out(data["older_runs"].to_dict("records"))
    if note:
        click.echo(f"note: {note}", err=True)
    if data["contrasts"].empty or data["runs"].empty:
        raise HomogError(
            "the database has no contrasts: run the stats stage and load (`dvc repro`)"
        )
    frame = claims_of(data, params)
    for column, wanted, prefix in (
        ("model", split_values(models), False),
        ("claim", split_values(claims), True),
        ("verdict", split_values(verdicts), False),
    ):
        if not wanted:
            continue
        known = sorted({str(v) for v in frame[column]})
        unknown = [w for w in wanted if not any(_matches(k, [w], prefix=prefix) for k in known)]
        if unknown:
            raise HomogError(
                f"no claim rows with {column} {', '.join(map(repr, unknown))}; "
                f"valid: {', '.join(known)}"
            )
        frame = frame[[_matches(v, wanted, prefix=prefix) for v in frame[column]]]
    if sensitivity:
        _sensitivity(frame, params, fmt)
        return
    if power:
        _power(frame, fmt)
        return
    if fmt == "table":
        from homog.cli.views import show_claims

        if frame.empty:
            raise HomogError("no claim rows")
        show_claims(frame, wide=wide)
        return
    columns = [str(c) for c in frame.columns]
    rows = [[plain(v) for v in r] for r in frame.itertuples(index=False, name=None)]
    emit(columns, rows, fmt, "claims")
