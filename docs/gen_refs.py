"""The generated reference pages of the docs site: the CLI (from Click) and params.yaml (from
the config dataclasses).

Used two ways:

- as an MkDocs hook (``hooks:`` in mkdocs.yml): ``on_files`` adds ``reference/cli.md`` and
  ``reference/params.md`` to the site at build time, so they are never committed and never
  stale;
- as a script, ``python docs/gen_refs.py OUTDIR``, which writes the two pages to OUTDIR (to
  read them without building the site).

``tests/test_docs.py`` calls ``cli_reference()`` and ``params_reference()`` and fails when a
command, an option or a params key is missing from them.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import sys
import textwrap
import tokenize
import typing
from pathlib import Path
from typing import Any

PAGES = {
    "reference/cli.md": "cli_reference",
    "reference/params.md": "params_reference",
}

# ---------------------------------------------------------------------------------------------
# the CLI


def cli_commands() -> list[tuple[str, Any]]:
    """(``"homog NAME"``, click command) for every command `homog` lists, groups' subcommands
    as ``"homog GROUP SUB"``, in the order ``homog --help`` lists them."""
    import click

    from homog.cli import main

    out: list[tuple[str, Any]] = []

    def walk(prefix: str, group: click.Group) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is None:
                continue
            out.append((f"{prefix} {name}", cmd))
            if isinstance(cmd, click.Group):
                walk(f"{prefix} {name}", cmd)

    walk("homog", main)
    return out


def _help_text(path: str) -> str:
    from click.testing import CliRunner

    from homog.cli import main

    res = CliRunner().invoke(
        main, [*path.split()[1:], "--help"], prog_name="homog", terminal_width=100
    )
    if res.exit_code != 0:
        raise RuntimeError(f"{path} --help failed: {res.output}")
    return res.output.rstrip()


def cli_reference() -> str:
    """The CLI reference page: a table of the commands, then each command's ``--help``."""
    commands = cli_commands()
    lines = [
        "# CLI reference",
        "",
        "Generated from the `homog` Click commands when the site is built "
        "(`docs/gen_refs.py`): each section is the command's `--help`. Every command also "
        "prints it with `--help`.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for path, cmd in commands:
        summary = (cmd.get_short_help_str(limit=120) or "").replace("|", "\\|")
        lines.append(f"| [`{path}`](#{_anchor(path)}) | {summary} |")
    for path, _cmd in commands:
        lines += ["", f"## {path} {{#{_anchor(path)}}}", "", "```text", _help_text(path), "```"]
    return "\n".join(lines) + "\n"


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


# ---------------------------------------------------------------------------------------------
# params.yaml


def _field_comments(cls: type) -> dict[str, str]:
    """Field name -> its comments in the class source: the comment lines right above the
    field and the comment at the end of its line."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    out: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above = []
        n = node.lineno - 1
        while n >= 1 and lines[n - 1].strip().startswith("#"):
            above.insert(0, comments.get(n, ""))
            n -= 1
        parts = [*above, comments.get(node.lineno, "")]
        if node.end_lineno != node.lineno:
            parts.append(comments.get(node.end_lineno or node.lineno, ""))
        out[node.target.id] = " ".join(p for p in parts if p)
    return out


def _type_name(hint: Any) -> str:
    text = str(hint) if not isinstance(hint, type) else hint.__name__
    text = re.sub(r"\btyping\.", "", text)
    text = re.sub(r"homog\.[\w.]+\.(\w+)", r"\1", text)
    return text.replace("NoneType", "None")


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "(required)"
    if dataclasses.is_dataclass(value):
        return "(section)"
    if isinstance(value, tuple):
        value = list(value)
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if value != {} else "`{}`"


def params_sections() -> list[tuple[str, type]]:
    """(dotted section name, dataclass) of every section of ``Params``, nested sections
    (``synth.fluency``) after their parent; ``""`` for the top level."""
    from homog.config import Params

    out: list[tuple[str, type]] = [("", Params)]

    def walk(prefix: str, cls: type) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            args = typing.get_args(hint)
            if typing.get_origin(hint) is dict and args and dataclasses.is_dataclass(args[-1]):
                hint, name = args[-1], f"{prefix}{f.name}.<key>"  # models: key -> entry
            elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
                name = f"{prefix}{f.name}"
            else:
                continue
            out.append((name, hint))
            walk(f"{name}.", hint)

    walk("", Params)
    return out


def params_keys() -> list[str]:
    """Every key of params.yaml as a dotted path (``extract.max_tokens``), sections too."""
    from homog.typed import FROM_TOP

    keys = []
    for name, cls in params_sections():
        for f in dataclasses.fields(cls):
            if f.name in FROM_TOP and name:
                continue
            keys.append(f"{name}.{f.name}" if name else f.name)
    return keys


def params_reference() -> str:
    """The params.yaml reference page: one table per section, from the config dataclasses."""
    from homog.typed import FROM_TOP

    lines = [
        "# params.yaml reference",
        "",
        "Generated from the config dataclasses (`homog/config.py`, the only place defaults "
        "live) when the site is built (`docs/gen_refs.py`). Every stage reads its own "
        "section; `dvc exp run -S key=value` overrides any key. A misspelt key or a value of "
        "the wrong type stops the command before any work, naming the key and the valid ones.",
    ]
    for name, cls in params_sections():
        hints = typing.get_type_hints(cls)
        title = f"`{name}:`" if name else "top level"
        doc = inspect.getdoc(cls) or ""
        first = doc.split("\n\n")[0].replace("\n", " ").replace("``", "`")
        comments = _field_comments(cls)
        lines += ["", f"## {title}", "", first, "", "| key | type | default | meaning |"]
        lines.append("|---|---|---|---|")
        for f in dataclasses.fields(cls):
            if f.name in FROM_TOP and name:
                continue
            key = f"{name}.{f.name}" if name else f.name
            meaning = comments.get(f.name, "").replace("|", "\\|")
            if dataclasses.is_dataclass(hints[f.name]):
                meaning = meaning or f"a section: see `{key}:` below"
            type_name = _type_name(hints[f.name]).replace("|", "\\|")
            lines.append(f"| `{key}` | `{type_name}` | {_default(f)} | {meaning} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# MkDocs hook and script


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site."""
    from mkdocs.structure.files import File

    for uri, func in PAGES.items():
        files.append(File.generated(config, uri, content=globals()[func]()))
    return files


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python docs/gen_refs.py OUTDIR", file=sys.stderr)
        return 2
    for uri, func in PAGES.items():
        path = Path(argv[0]) / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(globals()[func]())
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
