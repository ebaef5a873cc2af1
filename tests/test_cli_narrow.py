"""The 80-column tables of `homog claims` and `homog compare`: what tells rows apart stays.

`homog claims` shows the metric and never cuts a comparison or scope: a name that does not
fit becomes a code (C1, S2, ...) named in a legend under the tables. `homog compare` shows
the position family, the primary question, before the paper's rewrites when not every
variant fits.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from click.testing import CliRunner

from homog.cli import main

LEGENDS = ("comparison", "metric", "scope")


@pytest.fixture(scope="module")
def db(demo_db_factory) -> str:
    return str(demo_db_factory(4, 12))


def invoke(*args: str, width: int = 80):
    res = CliRunner().invoke(main, list(args), env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    return res.stdout


def legend(text: str) -> dict[str, dict[str, str]]:
    """column -> code -> value, from the legend lines under the claims tables."""
    notes = " ".join(ln.strip() for ln in text.split("\n") if ln.strip())
    out: dict[str, dict[str, str]] = {}
    marks = "|".join(f" {c}: " for c in LEGENDS)
    for column in LEGENDS:
        found = re.search(rf" {column}: (.*?)(?={marks}| effect in each)", f" {notes}")
        if found:
            pairs = (p.split(" = ", 1) for p in found.group(1).split("; "))
            out[column] = {code: value for code, value in pairs}
    return out


@pytest.mark.parametrize("width", [80, 100])
def test_claims_rows_stay_apart_at_narrow_widths(db, width):
    text = invoke("claims", "--db", db, width=width)
    lines = text.splitlines()
    assert max(map(len, lines)) <= width and "…" not in text
    header = next(ln for ln in lines if ln.startswith("claim"))
    assert re.split(r"\s{2,}", header.strip())[:4] == ["claim", "comparison", "metric", "scope"]
    codes = legend(text)
    shown = []
    for ln in lines:
        cells = re.split(r"\s{2,}", ln.strip())
        if re.match(r"^\d[a-z]?\s", ln) and len(cells) >= 6:
            claim, comparison, metric, scope = cells[:4]
            shown.append(
                (
                    claim,
                    codes.get("comparison", {}).get(comparison, comparison),
                    codes.get("metric", {}).get(metric, metric),
                    codes.get("scope", {}).get(scope, scope),
                    cells[5],
                )
            )
    rows = list(csv.DictReader(io.StringIO(invoke("claims", "--db", db, "--format", "csv"))))
    want = [(r["claim"], r["comparison"], r["metric"], r["scope"], r["verdict"]) for r in rows]
    assert shown == want


@pytest.fixture(scope="module")
def family_db(demo_db_factory, tmp_path_factory) -> str:
    """The demo database with the position family's rows (the original's, shifted)."""
    import shutil

    import duckdb

    from homog.schema.summary import materialize_layer_summary

    db = tmp_path_factory.mktemp("family") / "homog.duckdb"
    shutil.copy(demo_db_factory(1, 6), db)
    with duckdb.connect(str(db)) as con:
        con.execute(
            "INSERT INTO layer_metrics (run_id, variant, sample_id, layer, metric, value) "
            "SELECT run_id, f.variant, sample_id, layer, metric, value + f.shift "
            "FROM layer_metrics, (VALUES ('key_first', -1.0), ('key_mid', 0.5), "
            "('key_last', -0.8), ('key_control', 0.1)) f(variant, shift) "
            "WHERE layer_metrics.variant = 'original'"
        )
        materialize_layer_summary(con)
    return str(db)


def test_compare_shows_the_position_family_first(family_db):
    text = invoke("compare", "--metric", "erank", "--layers", "0-3", "--db", family_db)
    header = next(ln for ln in text.splitlines() if ln.startswith("layer"))
    columns = re.split(r"\s{2,}", header.strip())
    assert columns[:3] == ["layer", "original", "key_first - orig"], text
    assert "front - orig" not in header  # the paper's rewrites are left out first
    assert "--variants picks the variants shown" in " ".join(text.split())
    wide = invoke("compare", "--metric", "erank", "--layers", "0", "--db", family_db, width=250)
    header = next(ln for ln in wide.splitlines() if ln.startswith("layer"))
    family = ["key_first", "key_mid", "key_last", "key_control"]
    want = ["original", *(f"{v} - orig" for v in [*family, "front", "end", "control"])]
    assert re.split(r"\s{2,}", header.strip())[1:] == want
