"""`homog calibrate`: the metric calibration suite as a table."""

from __future__ import annotations

import json

import click


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def calibrate(fmt: str) -> None:
    """Check the metrics on matrices whose answer is known.

    Orthonormal rows, identical rows, progressive averaging toward the mean, rotation and
    scale invariance, low-rank-but-diverse vs collapsed data, one token with a 100x norm
    (erank reads collapse, erank__no_sink and mean_cosine do not), and float32/bfloat16
    against float64. Exits 1 if any check fails.

    \b
    Example:
      homog calibrate
      homog calibrate --format json | jq '.[] | select(.ok == false)'
    """
    from rich.console import Console
    from rich.table import Table

    from homog.metrics.calibrate import run_checks

    checks = run_checks()
    if fmt == "json":
        click.echo(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        table = Table(title="homog metric calibration")
        for col in ("case", "metric", "value", "expected", "ok"):
            table.add_column(col, justify="right" if col == "value" else "left")
        for c in checks:
            mark = "[yellow]info[/]" if c.info else "[green]ok[/]" if c.ok else "[bold red]FAIL[/]"
            table.add_row(c.case, c.metric, f"{c.value:.6g}", c.expected, mark)
        Console().print(table)
    failed = [c for c in checks if not c.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(checks)} calibration checks failed")
