"""One registry of metrics (homog/metrics/registry.py): the spectra compute, the
calibration checks the direction of, the glossary defines, the figures label, the demo database
holds and docs/metrics.md lists exactly its entries."""

from __future__ import annotations

import ast
import re

import duckdb
import torch
from conftest import ROOT

from homog.metrics.calibrate import COLLAPSE_DIRECTION, check_averaging
from homog.metrics.registry import (
    ALL_METRICS,
    ALL_TOKENS,
    ATTENTION,
    BY_NAME,
    HIDDEN,
    HIDDEN_METRICS,
    METRICS,
    SET_SEPARATOR,
    SPECTRAL_METRICS,
    SUFFIX_SETS,
    TOKEN_SETS,
    base_metric,
    difference_unit,
    glossary_unit,
    metric_name,
    split_metric,
    token_set_of,
)
from homog.metrics.sets import hidden_metric_names
from homog.metrics.spectra import layer_metrics
from homog.plot import METRIC_LABELS
from homog.report.glossary import METRICS as GLOSSARY
from homog.report.glossary import TOKEN_SETS as GLOSSARY_SETS

WORD = {"down": -1, "up": +1}


def test_spectra_compute_the_hidden_metrics():
    torch.manual_seed(0)
    out = layer_metrics(
        torch.randn(2, 6, 5, dtype=torch.float64), torch.ones(2, 6, dtype=torch.bool)
    )
    assert list(out) == list(HIDDEN_METRICS)
    assert HIDDEN_METRICS == tuple(m.name for m in METRICS if m.kind == HIDDEN)


def test_glossary_labels_and_directions_come_from_the_registry():
    assert list(GLOSSARY) == [m.name for m in METRICS]
    assert all(GLOSSARY[m.name] == (m.definition, m.glossary_unit) for m in METRICS)
    assert METRIC_LABELS == {m.name: m.label for m in METRICS if m.label}
    assert COLLAPSE_DIRECTION == {m.name: m.direction for m in METRICS if m.direction}
    assert {m.kind for m in METRICS} == {HIDDEN, ATTENTION}


def test_docs_metrics_page_lists_the_registry_with_its_directions():
    page = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    listed: dict[str, int | None] = {}
    for row in re.findall(r"^\| (`[a-z_0-9]+`(?:, `[a-z_0-9]+`)*) \|(.*)$", page, re.M):
        cells = [c.strip() for c in row[1].replace("\\|", "").split("|")]
        direction = WORD.get(cells[1]) if len(cells) > 1 else None
        for name in re.findall(r"`(\w+)`", row[0]):
            listed[name] = direction
    registry = {m.name: m.direction for m in METRICS}
    assert set(registry) <= set(listed), sorted(set(registry) - set(listed))
    assert {n: listed[n] for n in registry} == registry


def test_demo_database_holds_the_registry_demo_metrics(demo_db_factory):
    with duckdb.connect(str(demo_db_factory(1, 12)), read_only=True) as con:
        names = {r[0] for r in con.execute("SELECT DISTINCT metric FROM layer_metrics").fetchall()}
    assert {n.split("__")[0] for n in names} == {m.name for m in METRICS if m.demo}


def test_a_metric_name_is_composed_and_split_in_one_place():
    assert metric_name("erank", "no_sink") == "erank__no_sink" and metric_name("erank") == "erank"
    for base in ("erank", "twonn_id", "n_removed"):
        for token_set in TOKEN_SETS:
            assert split_metric(metric_name(base, token_set)) == (base, token_set)
    assert (base_metric("mev__standardized"), token_set_of("mev")) == ("mev", ALL_TOKENS)
    # the readers: the stored names, the glossary's token sets, the claims' tags
    for name in hidden_metric_names(SUFFIX_SETS, peers=True):
        base, token_set = split_metric(name)
        assert base in (*ALL_METRICS, "n_removed") and token_set in TOKEN_SETS, name
    assert tuple(GLOSSARY_SETS) == TOKEN_SETS


def test_the_two_units_are_the_registry_entries():
    """The claims give a difference in the long unit (the set named), the glossary the short."""
    assert difference_unit("erank__no_sink") == "effective rank (dimensions), no_sink tokens"
    assert difference_unit("schatten_1") == "schatten_1"  # no long unit: the name
    assert glossary_unit("erank__standardized") == BY_NAME["erank"].glossary_unit
    assert glossary_unit("twonn_id") == "n/a"


def test_calibration_checks_the_spectral_metrics_on_centred_matrices():
    assert SPECTRAL_METRICS == ("erank", "mev", "schatten_1", "schatten_4")
    centred = {c.metric for c in check_averaging(center=True)}
    assert centred == set(SPECTRAL_METRICS) & set(COLLAPSE_DIRECTION)


def grammar_outside(source: str, path: str = "<planted>") -> list[str]:
    """'path:line what' for each piece of the metric-name grammar a module writes itself: a
    TOKEN_SETS, a unit_of or a split of a name on '__'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "TOKEN_SETS" for t in targets):
                found.append(f"{path}:{node.lineno} TOKEN_SETS")
        if isinstance(node, ast.FunctionDef) and node.name in ("unit_of", "token_set_of"):
            found.append(f"{path}:{node.lineno} def {node.name}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("split", "rsplit", "partition", "rpartition")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == SET_SEPARATOR
        ):
            found.append(f"{path}:{node.lineno} {node.func.attr}('__')")
    return sorted(found, key=lambda hit: int(hit.rpartition(":")[2].split()[0]))


def test_no_module_but_the_registry_writes_the_metric_name_grammar():
    found = []
    for package in ("homog", "tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != ROOT / "homog" / "metrics" / "registry.py":
                text = path.read_text(encoding="utf-8")
                found += grammar_outside(text, str(path.relative_to(ROOT)))
    assert not found, "the metric-name grammar outside its registry:\n" + "\n".join(found)


def test_a_planted_parser_is_found():
    planted = (
        "TOKEN_SETS = ('all',)\n"
        "def unit_of(m):\n    return m.split('__', 1)[0]\n"
        "x = 'a'.partition('__')\n"
    )
    assert [f.split(" ", 1)[1] for f in grammar_outside(planted)] == [
        "TOKEN_SETS",
        "def unit_of",
        "split('__')",
        "partition('__')",
    ]
