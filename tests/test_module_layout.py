"""The package's shape: no import circle among homog's modules, counting imports inside
functions and under TYPE_CHECKING, and no module over 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

MAX_LINES = 500


def module_files(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``ROOT/package``."""
    files = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``name`` imports anywhere in its body (top level,
    functions, TYPE_CHECKING blocks). ``from a import b`` counts ``a.b`` when that is a
    module, else ``a``; a relative import resolves against the module's package."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def nearest(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            # ``from a import b``: b a submodule counts a.b; otherwise the module a itself
            subs = [t for t in targets[:-1] if t in modules]
            if len(subs) == len(targets) - 1:
                targets = subs
        for target in targets:
            hit = nearest(target)
            if hit and hit != name:
                found.add(hit)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    files = module_files(package)
    names = set(files)
    return {name: imported_modules(name, path, names) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_sees_a_circle_through_a_function_level_import(tmp_path):
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    (tmp_path / "x.py").write_text("def f():\n    from p import y\n")
    (tmp_path / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from .x import f\n")  # fmt: skip
    names = {"p", "p.x", "p.y"}
    assert imported_modules("p.x", tmp_path / "x.py", names) == {"p.y"}
    assert imported_modules("p.y", tmp_path / "y.py", names) == {"p.x"}


def circle_report(package: str) -> list[str]:
    graph = import_graph(package)
    out = []
    for component in cycles(graph):
        inside = set(component)
        edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & inside)]
        out.append("; ".join(edges))
    return out


def test_homog_has_no_import_circle():
    circles = circle_report("homog")
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_tui_has_no_import_circle():
    circles = circle_report("tui")
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_module_is_over_500_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("homog", "tui")
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"
