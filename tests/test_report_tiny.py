"""The report on a corpus of a few kept reviews: every section renders, and the classifier's
line says there were too few reviews (its AUC needs 4 paired texts) instead of failing on an
all-NaN column."""

from __future__ import annotations

import pytest
from test_run_generations import PARAMS, write_generation


@pytest.mark.parametrize("n_texts", [1, 2, 3])
def test_report_renders_with_too_few_reviews(n_texts, tmp_path):
    from homog.report.build import build_report
    from homog.stats.stage import stats_stage
    from homog.store import load

    write_generation(tmp_path, "", "2026-01-01T00:00:00+00:00", seed=0, n_texts=n_texts)
    stats_stage(PARAMS, tmp_path)
    db = tmp_path / "homog.duckdb"
    load(PARAMS, db, tmp_path)
    page = build_report(db, tmp_path / "r.md", fmt="md").read_text()
    assert f"m1: no AUC, too few reviews ({n_texts} paired texts; the classifier needs at " in page
