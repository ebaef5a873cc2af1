"""The floor plan (docs/design.md, "Code layout"): rooms in layers, every import going down.

A room is a folder or module directly under ``homog/`` (``homog.stats``, ``homog.io``); ``tui``
is one room above them all. Drawn from every import (top level, inside functions and under
TYPE_CHECKING, as tests/test_module_layout.py reads them):

- each room sits in one layer: foundations < library < stages < store < report < cli < tui;
  an import may stay in its layer or go down, never up;
- the rooms have no circle among themselves (a module-level circle is test_module_layout's).
"""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT
from test_module_layout import cycles, imported_modules, module_files

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundations",
        (
            "homog",
            "errors",
            "validate",
            "typed",
            "lazy",
            "interrupts",
            "owned",
            "progress",
            "io",
            "layout",
            "config",
            "variants",
            "claims",
            "interventions",
            "schema",
        ),
    ),
    ("library", ("metrics", "models", "models_gguf", "model_presets", "text")),
    ("stages", ("corpus", "synth", "extract", "mauve", "stats", "probe", "posenc")),
    ("store", ("store",)),
    ("report", ("report", "plot")),
    ("cli", ("cli",)),
    ("tui", ("tui",)),
)
LAYER_OF = {room: i for i, (_, rooms) in enumerate(LAYERS) for room in rooms}


def room_of(module: str) -> str:
    """``homog.stats.dose`` -> ``stats``; ``homog`` -> ``homog``; ``tui.core`` -> ``tui``."""
    parts = module.split(".")
    if parts[0] == "tui":
        return "tui"
    return parts[1] if len(parts) > 1 else "homog"


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every module of homog and tui -> the modules of both it imports (anywhere)."""
    files = {**module_files("homog", root), **module_files("tui", root)}
    names = set(files)
    return {name: imported_modules(name, path, names) for name, path in files.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b (layer x above layer y)' for each import into a higher layer."""
    out = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            la, lb = LAYER_OF[room_of(a)], LAYER_OF[room_of(b)]
            if lb > la:
                out.append(f"{a} -> {b} ({LAYERS[la][0]} imports {LAYERS[lb][0]})")
    return out


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for a, targets in graph.items():
        ra = room_of(a)
        rooms.setdefault(ra, set()).update(room_of(b) for b in targets if room_of(b) != ra)
    return rooms


def test_every_room_has_a_layer():
    rooms = {room_of(m) for m in module_graph()}
    assert rooms <= set(LAYER_OF), f"rooms without a layer: {sorted(rooms - set(LAYER_OF))}"


def test_no_import_runs_up_a_layer():
    up = upward_imports(module_graph())
    assert not up, "imports into a higher layer:\n" + "\n".join(up)


def test_the_rooms_have_no_circle():
    graph = module_graph()
    rooms = room_graph(graph)
    found = cycles(rooms)
    detail = [
        f"{a} -> {b} via "
        + ", ".join(
            sorted(m for m in graph if room_of(m) == a and any(room_of(t) == b for t in graph[m]))
        )
        for c in found
        for a in c
        for b in sorted(rooms[a] & set(c))
    ]
    assert not found, "circles between rooms:\n" + "\n".join(detail)


def test_a_planted_upward_import_is_found(tmp_path):
    """The check can fail: a config module that imports the report inside a function, and a
    stage that imports the CLI at top level, are both named."""
    for rel, body in {
        "homog/__init__.py": "",
        "homog/config/__init__.py": "def f():\n    from homog.report import build\n",
        "homog/report/__init__.py": "",
        "homog/report/build.py": "from homog.config import f\n",
        "homog/stats/__init__.py": "import homog.cli.main\n",
        "homog/cli/__init__.py": "",
        "homog/cli/main.py": "from homog.stats import x\n",
        "tui/__init__.py": "",
    }.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    up = upward_imports(module_graph(tmp_path))
    assert up == [
        "homog.config -> homog.report.build (foundations imports report)",
        "homog.stats -> homog.cli.main (stages imports cli)",
    ]
    assert sorted(cycles(room_graph(module_graph(tmp_path)))) == [
        ["cli", "stats"],
        ["config", "report"],
    ]


def test_the_cli_names_no_module_above_it():
    """The TUI joins the CLI through the ``homog.commands`` entry-point group (pyproject.toml),
    as any other package's command would: no string in homog/ names a tui module."""
    import tomllib

    from homog.cli import COMMANDS

    assert "tui" not in COMMANDS
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["homog.commands"]["tui"] == "tui.command:tui"
    named = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "homog").rglob("*.py")
        if "tui.command" in p.read_text(encoding="utf-8")
    ]
    assert not named, named
