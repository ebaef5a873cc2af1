"""Every CLI command (and subcommand) is documented in README.md and has help text."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from homog.cli import COMMANDS, main

README = Path(__file__).resolve().parents[1] / "README.md"


def command_names() -> list[str]:
    """Every command `homog` lists (COMMANDS plus plugin commands such as tui), and for a
    group its subcommands as 'group sub'."""
    ctx = click.Context(main)
    names = []
    for name in main.list_commands(ctx):
        names.append(name)
        cmd = main.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            names += [f"{name} {sub}" for sub in cmd.list_commands(click.Context(cmd))]
    return names


def resolve(name: str) -> click.Command:
    cmd: click.Command = main
    for part in name.split():
        cmd = cmd.get_command(click.Context(cmd), part)  # type: ignore[union-attr]
        assert cmd is not None, name
    return cmd


@pytest.mark.parametrize("name", command_names())
def test_command_in_readme(name):
    assert README.exists(), "README.md is missing"
    # the README or a page of the user docs (docs/*.md)
    text = README.read_text() + "".join(p.read_text() for p in README.parent.glob("docs/*.md"))
    assert f"homog {name}" in text, f"`homog {name}` is not in README.md nor docs/*.md"


@pytest.mark.parametrize("name", command_names())
def test_command_has_help(name):
    cmd = resolve(name)
    assert (cmd.help or "").strip(), f"homog {name} has no help text"
    assert "unavailable" not in cmd.help, cmd.help
    res = CliRunner().invoke(main, [*name.split(), "--help"])
    assert res.exit_code == 0 and "Usage:" in res.output


def test_all_registered_commands_listed():
    assert set(COMMANDS) <= set(command_names())
