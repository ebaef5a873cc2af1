"""One registry of variants (homog/variants.py): synth writes, the glossary defines,
the figures colour, ``homog compare`` orders and docs/variants.md lists exactly its entries."""

from __future__ import annotations

import ast
import json
import re
import shutil

import duckdb
from click.testing import CliRunner
from conftest import ROOT

import homog.stats.verdicts
import homog.variants
from homog.claims import CONTROL_FAMILY, FAMILIES
from homog.cli import main
from homog.config import load_config
from homog.config.primary import PrimaryConfig
from homog.plot import VARIANT_COLORS
from homog.report import claims_plan, claims_separability
from homog.report.glossary import VARIANTS as GLOSSARY
from homog.stats import sentences
from homog.stats.contrasts import VARIANT_PAIRS
from homog.stats.separability import SEP_VARIANTS
from homog.synth.selection import VARIANTS as SYNTH_PAPER
from homog.variants import (
    BIASED,
    BY_NAME,
    CONTRAST_PLAN,
    CONTROL_OF,
    CTRL_NAMED,
    DERIVED,
    DERIVED_OF,
    EXTRA_COLORS,
    KEY_CONTROL,
    KEY_SPECIFIC,
    NOT_KEY_MOVES,
    PAPER,
    PAPER_CONTROL,
    POSITION,
    SEPARABLE,
    TEXT_VARIANTS,
    U_SHAPE,
    VARIANTS,
    contrast_name,
    contrast_terms,
    definition,
    family_names,
    order_key,
    parse_contrast,
    side_terms,
    variant_name,
)


def test_synth_writes_the_registry_text_variants_in_order():
    """The default params' variants are registry entries, in the registry's order (a named
    place that params.yaml does not ask for, e.g. a registered key_p25, is simply not written)."""
    position = load_config(ROOT / "params.yaml").synth.position
    written = [*SYNTH_PAPER, *family_names(position.positions)]
    assert written == [v for v in TEXT_VARIANTS if v in written]
    assert len(written) == 11 and set(written) <= set(TEXT_VARIANTS)


def test_glossary_and_colours_come_from_the_registry():
    assert list(GLOSSARY) == [v.name for v in VARIANTS]
    assert all(GLOSSARY[v.name] == v.definition for v in VARIANTS)
    assert list(VARIANT_COLORS) == list(TEXT_VARIANTS)
    colours = [v.color for v in VARIANTS if v.family != DERIVED]
    assert len(set(colours)) == len(colours) and not set(colours) & set(EXTRA_COLORS)


def test_a_sweep_place_is_named_defined_and_sorted_after_the_registry():
    assert variant_name(0.35) == "key_p35" and variant_name(1.0) == "key_last"
    assert "35 %" in definition("key_p35") and definition("key_p3x") is None
    names = ["key_p35", "key_last", "original", "key_p75", "front"]
    assert sorted(names, key=order_key) == ["original", "front", "key_last", "key_p35", "key_p75"]


def test_docs_variants_table_lists_the_registry(tmp_path):
    page = (ROOT / "docs" / "variants.md").read_text(encoding="utf-8")
    table = page.split("| variant | what changes | tokens |", 1)[1].split("\n\n", 1)[0]
    listed = [
        n for row in table.splitlines()[2:] for n in re.findall(r"`(\w+)`", row.split("|")[1])
    ]
    assert listed == list(TEXT_VARIANTS)


def test_compare_orders_the_variants_as_the_registry(demo_db_factory, tmp_path):
    db = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(1, 12), db)
    extra = [n for n in TEXT_VARIANTS if n not in ("original", "front", "end", "control")]
    with duckdb.connect(str(db)) as con:
        for name in ["key_p35", *reversed(extra)]:  # inserted out of order on purpose
            for table in ("layer_metrics", "layer_summary"):  # compare reads the summary
                con.execute(
                    f"INSERT INTO {table} SELECT * REPLACE (? AS variant) FROM {table} "
                    "WHERE variant = 'original'",
                    [name],
                )
    out = CliRunner().invoke(
        main, ["compare", "--db", str(db), "--metric", "erank", "--layers", "1", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    order = list(dict.fromkeys(r["variant"] for r in json.loads(out.output)))
    assert order == [*TEXT_VARIANTS, "key_p35"]
    assert set(BY_NAME) - set(order) == {"key_ends", "ctrl_ends"}  # not texts


def test_colors_for_gives_registry_colours_and_extras_in_order():
    from homog.variants import COLORS, colors_for

    got = colors_for({"key_p35", "original", "key_p75", "end"})
    assert list(got) == ["original", "end", "key_p35", "key_p75"]
    assert got["original"] == COLORS["original"] and got["end"] == COLORS["end"]
    assert [got["key_p35"], got["key_p75"]] == list(EXTRA_COLORS[:2])


def test_the_relations_are_the_registry_entries():
    """Each reader of a relation between variants reads it from the registry."""
    assert VARIANT_PAIRS is CONTRAST_PLAN and SEP_VARIANTS is SEPARABLE
    assert claims_separability.SEPARABLE is SEPARABLE and claims_plan.CONTROL_OF is CONTROL_OF
    assert PrimaryConfig().contrasts == KEY_SPECIFIC
    assert sentences.MOVES == ("key_first", "key_mid", "key_last")
    assert sentences.CTRL_MOVES == tuple(CTRL_NAMED.values())
    assert set(DERIVED_OF) == {v.name for v in VARIANTS if v.family == DERIVED}
    assert NOT_KEY_MOVES == (KEY_CONTROL, *CTRL_NAMED.values())


def test_the_contrast_plan_names_only_registry_variants():
    planned = {contrast_name(a, b) for a, b in CONTRAST_PLAN}
    assert len(planned) == len(CONTRAST_PLAN)
    assert set(KEY_SPECIFIC) | {U_SHAPE} <= planned
    for a, b in CONTRAST_PLAN:
        assert parse_contrast(contrast_name(a, b)) == (a, b)
        assert set(contrast_terms(a, b)) <= set(TEXT_VARIANTS), (a, b)
    for biased, control in CONTROL_OF.items():
        assert {(biased, "original"), (biased, control), (control, "original")} <= set(
            CONTRAST_PLAN
        )
    assert set(SEPARABLE) == {*BIASED, KEY_CONTROL} and set(BIASED) == set(CONTROL_OF)


def test_the_three_controls_have_three_names():
    """The paper's control rewrite, the position family's control and the claims' control
    family each have a name of their own; none is called plain CONTROL."""
    assert BY_NAME[PAPER_CONTROL].family == PAPER and BY_NAME[KEY_CONTROL].family == POSITION
    assert CONTROL_FAMILY in FAMILIES
    assert not hasattr(homog.variants, "CONTROL") and not hasattr(homog.stats.verdicts, "CONTROL")


def plans_outside(source: str, path: str = "<planted>") -> list[str]:
    """'path:line' for each literal list of variant pairs (two or more (a, b) of variant names
    or contrast sides): a contrast plan written outside the registry."""
    names = set(BY_NAME)

    def is_pair(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Tuple)
            and len(node.elts) == 2
            and all(
                isinstance(e, ast.Constant)
                and isinstance(e.value, str)
                and set(side_terms(e.value)) <= names
                for e in node.elts
            )
        )

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            if sum(is_pair(e) for e in node.elts) >= 2:
                found.append(f"{path}:{node.lineno}")
    return found


def test_no_module_but_the_registry_writes_a_contrast_plan():
    found = []
    for package in ("homog", "tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != ROOT / "homog" / "variants.py":
                text = path.read_text(encoding="utf-8")
                found += plans_outside(text, str(path.relative_to(ROOT)))
    assert not found, "variant pairs listed outside homog/variants.py:\n" + "\n".join(found)


def test_a_planted_plan_is_found():
    planted = 'PAIRS = (("front", "original"), ("key_ends - key_mid", "key_mid"))\nX = ("a", "b")\n'
    assert plans_outside(planted) == ["<planted>:1"]
    assert plans_outside('X = (("front", "original"), ("a", "b"))\n') == []
