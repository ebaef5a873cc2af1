"""One registry of claims (homog/claims.py): the claims table builds, the report reads and
docs/statistics.md lists exactly its tags, each row's claimed sign is its tag's, and no module
writes a tag of its own."""

from __future__ import annotations

import ast
import json
import re

from click.testing import CliRunner
from conftest import ROOT

from homog.claims import (
    BY_METRIC,
    BY_TAG,
    CLAIMS,
    CONTROL_FAMILY,
    EXPLORATORY,
    FAMILIES,
    GROUPS,
    OWN_HOLM,
    PRIMARY,
    group_of,
    row_tag,
)
from homog.cli import main
from homog.metrics.registry import BY_NAME, split_metric
from homog.report.claims_view import TITLES

SIGNS = {"+": 1, "-": -1, "either": 0}
# tags too short to tell from other numbers: a literal "1" or "4" is found by its context
SHORT = {c.tag for c in CLAIMS if len(c.tag) == 1}


def test_the_registry_is_well_formed():
    assert len(BY_TAG) == len(CLAIMS) and GROUPS == ("1", "2", "3", "4", "5")
    assert all(c.family in FAMILIES and c.sign in (BY_METRIC, -1, 0, 1) for c in CLAIMS)
    assert OWN_HOLM == ("4", "4r") and (PRIMARY, EXPLORATORY, CONTROL_FAMILY) == FAMILIES
    assert row_tag("5b", "no_sink") == "5b (no_sink)" and row_tag("5b", "all") == "5b"
    assert group_of("1u (standardized)") == "1"


def test_the_report_lists_a_title_per_group():
    assert tuple(TITLES) == (*GROUPS, "P")  # P: the position family's rows


def test_docs_statistics_lists_every_tag():
    page = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    section = page.split("The claims:", 1)[1].split("###", 1)[0]
    assert re.findall(r"\*\*(\w+)\*\*", section) == [c.tag for c in CLAIMS]


def test_the_claims_table_uses_the_registry_tags_and_signs(demo_db_factory):
    res = CliRunner().invoke(
        main, ["claims", "--db", str(demo_db_factory(1, 12)), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert rows
    seen = set()
    for row in rows:
        tag = str(row["claim"]).partition(" (")[0]
        assert tag in BY_TAG, row["claim"]
        seen.add(tag)
        assert row["family"] in FAMILIES
        if str(row["comparison"]).startswith("steepest"):
            continue  # claim 2's second row: a layer index, undirected
        want = BY_TAG[tag].sign
        if want is BY_METRIC:
            want = BY_NAME[split_metric(str(row["metric"]))[0]].direction
        assert SIGNS[row["claimed"]] == want, (row["claim"], row["metric"], row["claimed"])
    assert {"1u", "2"} <= seen  # the demo database holds the U-shape and the progression


def tag_literals(source: str, path: str = "<planted>") -> list[str]:
    """'path:line tag' for each claim tag written as a literal outside a docstring: a long tag
    (``5a``) anywhere, a one-character one (``4``) as a ``claim=`` argument, a ``"claim"`` key
    or compared with a ``claim`` column."""
    tree = ast.parse(source)
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    found = []

    def tag(node: ast.AST) -> str | None:
        ok = isinstance(node, ast.Constant) and isinstance(node.value, str)
        return node.value if ok and node.value in BY_TAG else None  # type: ignore[union-attr]

    for node in ast.walk(tree):
        t = tag(node)
        if t and t not in SHORT and id(node) not in docs:
            found.append(f"{path}:{node.lineno} {t}")
        if isinstance(node, ast.keyword) and node.arg == "claim" and tag(node.value):
            found.append(f"{path}:{node.value.lineno} {tag(node.value)}")
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "claim" and tag(v):
                    found.append(f"{path}:{v.lineno} {tag(v)}")
        if isinstance(node, ast.Compare) and "claim" in ast.unparse(node.left):
            found += [f"{path}:{c.lineno} {tag(c)}" for c in node.comparators if tag(c)]
    return sorted(set(found))


def test_no_module_writes_a_claim_tag_of_its_own():
    found = []
    for path in sorted((ROOT / "homog").rglob("*.py")):
        if path == ROOT / "homog" / "claims.py":
            continue
        found += tag_literals(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "claim tags written outside homog/claims.py:\n" + "\n".join(found)


def test_a_planted_tag_is_found():
    planted = (
        'def f(rows):\n    """Claim 5a\'s rows."""\n    x = rows[rows["claim"] == "4"]\n'
        '    return Claim(claim="2", statement="5c"), {"claim": "3"}, x\n'
    )
    assert [f.split()[1] for f in tag_literals(planted)] == ["4", "2", "3", "5c"]
    assert tag_literals('TRUE = ("1", "true")\n') == []
