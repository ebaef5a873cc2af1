"""The package's shape: no import circle among homog's modules, counting imports inside
functions and under TYPE_CHECKING; no private name (one leading underscore) taken from
another module of homog or tui; no module over 400 lines and no function over 80; no import of
a homog module inside a function (outside homog/cli/) unless that module loads one of the
heavy or optional packages (torch, transformers, ...)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from conftest import ROOT

MAX_LINES = 400
MAX_FUNCTION_LINES = 80  # from the def line to the last (decorators not counted)


def module_files(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``root/package``."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def package_of(name: str, path: Path) -> str:
    """The package a relative import in module ``name`` (file ``path``) starts from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from <module> import ...``, a relative one resolved against
    ``package``."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - (node.level - 1)] + ([base] if base else []))
    return base


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``name`` imports anywhere in its body (top level,
    functions, TYPE_CHECKING blocks). ``from a import b`` counts ``a.b`` when that is a
    module, else ``a``; a relative import resolves against the module's package."""
    package = package_of(name, path)
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
            base = import_base(node, package)
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
    (tmp_path / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import f\n"
    )
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


def test_no_module_is_over_400_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("homog", "tui")
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def long_functions(path: Path) -> dict[str, int]:
    """'file:function' -> lines, for each function of ``path`` over MAX_FUNCTION_LINES."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        f"{path.name}:{node.name}": n
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    }


def test_long_function_finder_counts_from_def_to_last_line(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "m.py").write_text(
        f"@property\ndef ok():\n{body}\n\ndef long():\n{body}\n    return 1\n"
    )
    assert long_functions(tmp_path / "m.py") == {"m.py:long": MAX_FUNCTION_LINES + 1}


def test_no_function_is_over_80_lines():
    long = {
        k: n
        for package in ("homog", "tui")
        for path in sorted((ROOT / package).rglob("*.py"))
        for k, n in long_functions(path).items()
    }
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# Private names that may cross a module line, each (importer, owner, name): none.
ALLOWED_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()


def is_private(name: str) -> bool:
    """One leading underscore; dunder names (``__version__``) are not private."""
    return name.startswith("_") and not name.startswith("__")


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def private_imports(name: str, path: Path, modules: set[str]) -> set[tuple[str, str, str]]:
    """(name, owner, private) for each private name that module ``name`` takes from another
    module ``owner`` of ``modules``: ``from owner import _x`` (anywhere in the body, absolute
    or relative) and ``m._x`` where ``m`` is bound to ``owner`` by an import."""
    package = package_of(name, path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[tuple[str, str, str]] = set()
    bound: dict[str, str] = {}  # a local name -> the module an import binds to it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                target = alias.name if alias.asname else local
                if target in modules:
                    bound[local] = target
        elif isinstance(node, ast.ImportFrom):
            base = import_base(node, package)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                if is_private(alias.name) and base in modules and base != name:
                    found.add((name, base, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            chain = dotted(node.value)
            if chain is None:
                continue
            head, _, rest = chain.partition(".")
            owner = ".".join(filter(None, [bound.get(head, ""), rest]))
            if head in bound and owner in modules and owner != name:
                found.add((name, owner, node.attr))
    return found


def private_crossings(packages: tuple[str, ...], root: Path = ROOT) -> set[tuple[str, str, str]]:
    files = {
        name: path for package in packages for name, path in module_files(package, root).items()
    }
    modules = set(files)
    return {hit for name, path in files.items() for hit in private_imports(name, path, modules)}


def test_private_import_finder_sees_every_form(tmp_path):
    """A planted ``from p.a import _helper`` (and its other spellings) is reported; a module's
    own private names, public names and dunders are not."""
    pkg = tmp_path / "p"
    pkg.mkdir()
    files = {
        "__init__.py": "from p.a import helper\n",
        "a.py": "__version__ = '1'\ndef _helper(): ...\ndef helper(): return _helper()\n",
        "b.py": "def f():\n    from p.a import _helper\n    return _helper()\n",
        "c.py": "from .a import _helper as h\n",
        "d.py": "import p.a as m\nx = m._helper\n",
        "e.py": "from p import a\ndef g():\n    return a._helper()\n",
        "f.py": "import p.a\nx = p.a._helper\n",
        "ok.py": "from p.a import __version__, helper\nimport os\nos._exit\n",
        "own.py": "from p.own import _x\n_x = 1\n",
    }
    for file, text in files.items():
        (pkg / file).write_text(text)
    want = {(f"p.{m}", "p.a", "_helper") for m in "bcdef"}
    assert private_crossings(("p",), tmp_path) == want


def test_no_private_name_crosses_a_module_line():
    """Shared helpers are public names of the module that owns them (issue 43 item 3)."""
    found = private_crossings(("homog", "tui"))
    new = sorted(found - ALLOWED_PRIVATE_IMPORTS)
    stale = sorted(ALLOWED_PRIVATE_IMPORTS - found)
    assert not new, "private names imported across modules:\n" + "\n".join(
        f"{a} takes {n} from {b}" for a, b, n in new
    )
    assert not stale, f"fixed, so drop from ALLOWED_PRIVATE_IMPORTS: {stale}"


# the heavy or optional third-party packages a function may import lazily
LAZY_PACKAGES = ("torch", "transformers", "matplotlib", "ray", "sklearn", "statsmodels", "textual")


def top_level_imports(name: str, path: Path, modules: set[str]) -> tuple[set[str], set[str]]:
    """(the modules of ``modules``, the top-level packages outside them) that module ``name``
    imports when it is imported: its statements outside functions and classes' methods, not
    under TYPE_CHECKING."""
    package = package_of(name, path)
    inner: set[str] = set()
    outer: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = import_base(node, package)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            hit = target
            while hit and hit not in modules:
                hit = hit.rpartition(".")[0]
            if hit:
                inner.add(hit)
            else:
                outer.add(target.partition(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return inner - {name}, outer


def heavy_modules(files: dict[str, Path]) -> set[str]:
    """The modules that import a LAZY_PACKAGES package when they are imported, directly or
    through the modules their top level imports."""
    modules = set(files)
    tops = {name: top_level_imports(name, path, modules) for name, path in files.items()}
    heavy = {name for name, (_, outer) in tops.items() if outer & set(LAZY_PACKAGES)}
    grew = True
    while grew:
        more = {name for name, (inner, _) in tops.items() if inner & heavy} - heavy
        heavy |= more
        grew = bool(more)
    return heavy


# function-level imports kept on purpose, each (importer, imported): why
ALLOWED_FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
    ("homog.layout", "homog.config"): "default_db reads params.yaml; homog.store's connect "
    "(the TUI's first paint) must not load homog.config and YAML (test_store_import_is_lazy)",
    ("homog.store.query", "homog.extract"): "the homog.extract package loads homog.config, "
    "which homog.store's connect must not (test_store_import_is_lazy)",
}


def function_imports(
    package: str, root: Path = ROOT, allowed: Iterable[tuple[str, str]] = ()
) -> list[str]:
    """'module:line -> target' for each import of a module of ``package`` inside a function,
    outside ``<package>.cli`` (a command imports its stage lazily, so ``--help`` stays fast),
    unless the target imports one of LAZY_PACKAGES (then the import is one of those, deferred)
    or (importer, imported) is one of ``allowed``."""
    allowed = set(allowed)
    files = module_files(package, root)
    modules = set(files)
    heavy = heavy_modules(files)
    found = []
    for name, path in files.items():
        if name == f"{package}.cli" or name.startswith(f"{package}.cli."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = import_base(node, package_of(name, path))
                    subs = [f"{base}.{alias.name}" for alias in node.names]
                    targets = [t for t in subs if t in modules] or [base]
                else:
                    continue
                for target in targets:
                    hit = target
                    while hit and hit not in modules:
                        hit = hit.rpartition(".")[0]
                    if hit and hit not in heavy and (name, hit) not in allowed:
                        found.append(f"{name}:{node.lineno} -> {hit}")
    return sorted(set(found))


def test_function_import_finder_allows_only_the_heavy_and_the_commands(tmp_path):
    pkg = tmp_path / "p"
    (pkg / "cli").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "light.py": "X = 1\n",
        "heavy.py": "import torch\n",
        "via.py": "from p import heavy\n",
        "typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n",
        "user.py": "def f():\n    from p import light\n    import torch\n"
        "    from p.heavy import x\n    from p import via, typing_only\n",
        "cli/__init__.py": "",
        "cli/cmd.py": "def run():\n    from p.light import X\n",
    }
    for file, text in files.items():
        (pkg / file).write_text(text)
    assert function_imports("p", tmp_path) == ["p.user:2 -> p.light", "p.user:5 -> p.typing_only"]


def test_no_internal_import_inside_a_function():
    found = function_imports("homog", allowed=ALLOWED_FUNCTION_IMPORTS)
    assert not found, "imports of homog modules inside functions:\n" + "\n".join(found)


def test_no_line_is_kept_out_of_the_formatter():
    """A size limit marks where to cut a seam, and the formatter lays out every line: no
    suppression comment in the project's Python (homog, tui, tests, bench)."""
    marks = ("fmt" + ": skip", "fmt" + ": off")
    found = [
        f"{path.relative_to(ROOT)}:{i}"
        for package in ("homog", "tui", "tests", "bench")
        for path in sorted((ROOT / package).rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(m in line for m in marks)
    ]
    assert not found, f"formatter suppressed at {found}"
