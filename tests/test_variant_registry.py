"""One registry of variants (homog/variants.py, issue 43): synth writes, the glossary defines,
the figures colour, ``homog compare`` orders and docs/variants.md lists exactly its entries."""

from __future__ import annotations

import json
import re
import shutil

import duckdb
from click.testing import CliRunner
from conftest import ROOT

from homog.cli import main
from homog.config import load_config
from homog.plot import VARIANT_COLORS
from homog.report.glossary import VARIANTS as GLOSSARY
from homog.synth.selection import VARIANTS as SYNTH_PAPER
from homog.variants import (
    BY_NAME,
    DERIVED,
    EXTRA_COLORS,
    TEXT_VARIANTS,
    VARIANTS,
    definition,
    family_names,
    order_key,
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
                    "WHERE variant = 'original'", [name]
                )  # fmt: skip
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
