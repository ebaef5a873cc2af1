"""One registry of metrics (homog/metrics/registry.py, issue 43): the spectra compute, the
calibration checks the direction of, the glossary defines, the figures label, the demo database
holds and docs/metrics.md lists exactly its entries."""

from __future__ import annotations

import re

import duckdb
import torch
from conftest import ROOT

from homog.metrics.calibrate import COLLAPSE_DIRECTION
from homog.metrics.registry import ATTENTION, HIDDEN, HIDDEN_METRICS, METRICS
from homog.metrics.spectra import layer_metrics
from homog.plot import METRIC_LABELS
from homog.report.glossary import METRICS as GLOSSARY

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
