"""The generated reference pages of the docs site: the CLI (from Click) and params.yaml.

Used two ways:

- as an MkDocs hook (``hooks:`` in mkdocs.yml): ``on_files`` adds ``reference/cli.md`` and
  ``reference/params.md`` to the site at build time, so they are never committed and never
  stale;
- as a script, ``python docs/gen_refs.py OUTDIR``, which writes the two pages to OUTDIR (to
  read them without building the site).

Where the params reference comes from, each part from one place:

- the keys, their types and defaults: the config dataclasses (``homog/config*.py``, the only
  place defaults live), walked by ``params_sections()``;
- each key's meaning: its comment in ``params.yaml``, the file a user reads and edits. A small
  line-based reader (``yaml_comments()``, no round-trip YAML library) takes a key's inline
  comment with its continuation lines and the comment lines right above it. A key the file
  does not set is written there as a comment, ``# key: default  # meaning``, and read the
  same way. The dataclasses' own field comments are notes for the code and are not read.

``tests/test_docs.py`` calls ``cli_reference()``, ``params_reference()`` and
``param_meanings()`` and fails when a command, an option or a params key is missing from them,
when a key of ``Params`` (nested sections too) has no comment in params.yaml, or when a key
written as a comment is not a key or not at its default.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from pathlib import Path
from typing import Any

PARAMS_YAML = Path(__file__).resolve().parents[1] / "params.yaml"
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


# params.yaml's comments are the meanings: a small line-based reader of the file (no
# round-trip YAML library needed), for its style: block mappings, one-line values, comments.

_KEY_LINE = re.compile(r"^( *)([A-Za-z_][\w.-]*|\"[^\"]*\"|'[^']*'): ?(.*)$")
# an optional key written as a comment: "# key: value  # meaning" (one space after the '#')
_COMMENTED_KEY = re.compile(r"^#\s([A-Za-z_][\w-]*): ?(.*?)\s+#\s?(.*)$")


class YamlKey(typing.NamedTuple):
    """One key of params.yaml as the reader sees it."""

    meaning: str  # its inline comment and continuations, then the comment lines above it
    value: str  # the value as written on its line ("" for a section)
    commented: bool  # written as a comment (optional, at its default): "# key: value  # ..."


def _split_comment(rest: str) -> tuple[str, str]:
    """(value, inline comment) of what follows ``key:``: a '#' after whitespace and outside
    quotes starts the comment."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] in " \t"):
            return rest[:i].strip(), rest[i + 1 :].strip()
    return rest.strip(), ""


def yaml_comments(text: str) -> dict[str, YamlKey]:
    """Dotted key -> :class:`YamlKey` of every key of a params.yaml text, in file order.

    A key's meaning is its inline comment, continued by the comment-only lines under it that
    are indented deeper than the key (and than the next key), then ("; ") the comment lines
    right above the key at its own indentation, with no blank line between (a note on it, or
    on it and the keys after it). A comment line ``# key: value  # meaning`` at a section's key
    indentation (after a key of that section) is an optional key of the section, written out
    at its default. Any other
    comment belongs to no key (the file's header, a models: example). Block mappings and
    one-line values only: the style of params.yaml.
    """
    lines = text.splitlines()
    out: dict[str, YamlKey] = {}
    stack: list[tuple[int, str]] = []  # (indent, dotted key) of the open sections
    above: list[str] = []  # comment lines waiting for the key below them
    last: tuple[int, str] | None = None  # (indent, key) whose inline comment may continue
    notes: dict[str, str] = {}  # key -> the comment lines above it

    def path(indent: int, key: str) -> str:
        while stack and stack[-1][0] >= indent:
            stack.pop()
        return f"{stack[-1][1]}.{key}" if stack else key

    def next_key_indent(i: int) -> int | None:
        """The indentation of the key line ending the comment block that holds line i."""
        for line in lines[i + 1 :]:
            if not line.strip():
                return None
            if not line.lstrip().startswith("#"):
                m = _KEY_LINE.match(line)
                return len(m.group(1)) if m else None
        return None

    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            above, last = [], None
            continue
        if stripped.startswith("#"):
            col = len(line) - len(line.lstrip())
            body = stripped[1:].strip()
            below = next_key_indent(i)
            opt = _COMMENTED_KEY.match(stripped)
            if opt and not above and stack and col == stack[-1][0]:  # beside the last key
                key = path(col, opt.group(1))
                out[key] = YamlKey(opt.group(3).strip(), opt.group(2).strip(), True)
                stack.append((col, key))
                last = (col, key)
            elif last and col > last[0] and not above and (below is None or col > below):
                prev = out[last[1]]
                out[last[1]] = prev._replace(meaning=f"{prev.meaning} {body}".strip())
            elif below is not None and col == below:
                above.append(body)
                last = None
            else:  # a comment of no key
                above, last = [], None
            continue
        m = _KEY_LINE.match(line)
        if m is None:  # a sequence item or a value's continuation: not a key
            above, last = [], None
            continue
        indent, key = len(m.group(1)), m.group(2).strip("\"'")
        value, inline = _split_comment(m.group(3))
        dotted = path(indent, key)
        out[dotted] = YamlKey(inline, value, False)
        notes[dotted] = " ".join(above)
        stack.append((indent, dotted))
        above, last = [], ((indent, dotted) if inline else None)
    return {
        key: k._replace(meaning="; ".join(p for p in (k.meaning, notes.get(key, "")) if p))
        for key, k in out.items()
    }


def param_meanings(text: str | None = None) -> dict[str, str]:
    """Every key of ``params_keys()`` -> its meaning from params.yaml's comments (``text``:
    the file's text, the project's params.yaml by default); "" where it has none. A key with
    ``<key>`` (``models.<key>.source``) takes the first entry's comment that has one."""
    if text is None:
        text = PARAMS_YAML.read_text()
    found = yaml_comments(text)
    out = {}
    for key in params_keys():
        pattern = re.compile(re.escape(key).replace(re.escape("<key>"), r"[^.]+") + "$")
        meanings = [k.meaning for name, k in found.items() if pattern.match(name) and k.meaning]
        out[key] = meanings[0] if meanings else ""
    return out


def _markdown(text: str) -> str:
    """A meaning for a table cell: '|' escaped, '<' and '>' outside code spans as entities (an
    ``hf:<id>`` is not an HTML tag)."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


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
    if isinstance(value, str):  # one table row: a newline shown as \n (probe.prompt)
        value = value.replace("\n", "\\n")
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
    """The params.yaml reference page: one table per section, types and defaults from the
    config dataclasses, meanings from params.yaml's comments (:func:`param_meanings`)."""
    from homog.typed import FROM_TOP

    meanings = param_meanings()
    lines = [
        "# params.yaml reference",
        "",
        "Generated when the site is built (`docs/gen_refs.py`): each key's type and default "
        "from the config dataclasses (`homog/config/`, the only place defaults live), its "
        "meaning from its comment in `params.yaml`. Every stage reads its own section; "
        "`dvc exp run -S key=value` overrides any key. A misspelt key or a value of the wrong "
        "type stops the command before any work, naming the key and the valid ones. A key that "
        "`params.yaml` writes as a comment (`# key: value  # meaning`) is optional: it is at its "
        "default until set.",
    ]
    for name, cls in params_sections():
        hints = typing.get_type_hints(cls)
        title = f"`{name}:`" if name else "top level"
        doc = inspect.getdoc(cls) or ""
        first = doc.split("\n\n")[0].replace("\n", " ").replace("``", "`")
        lines += ["", f"## {title}", "", first, "", "| key | type | default | meaning |"]
        lines.append("|---|---|---|---|")
        for f in dataclasses.fields(cls):
            if f.name in FROM_TOP and name:
                continue
            key = f"{name}.{f.name}" if name else f.name
            meaning = _markdown(meanings[key])
            if _default(f) == "(section)" or key == "models":
                meaning += f" (see `{key if key != 'models' else 'models.<key>'}:` below)"
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
