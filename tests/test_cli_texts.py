"""Issue 39 Deliver 9: `homog texts --dropped` lists every review synth dropped (sample_id,
stage, reason, detail from report.json's dropped_reviews) in a table that fits the terminal,
or as CSV / JSON; `homog texts` counts the kept texts per variant. Missing or old synth
outputs are one message naming `homog synth`."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner
from hostile_helpers import clean_error, write_texts

from homog.cli import main
from homog.synth.report import dropped_reviews

LONG = "front 0.81 < 0.89, end 0.85 < 0.89, control 0.80 < 0.89 " + "and more words " * 6
SELECTED = {
    "r007": ("no_keyphrase", "yake found no key phrase"),
    "r012": ("below_threshold", LONG.strip()),
    "r003": ("not_rewritten", "no sentence holds the key phrase in a movable place"),
}


@pytest.fixture
def synth_out(tmp_path):
    """A synth output folder: texts.parquet (4 texts per variant) and a report.json whose
    dropped_reviews come from synth's own function."""
    texts = write_texts(tmp_path / "texts.parquet", 4)
    family = type("Family", (), {"reasons": {"r020": ("no_control", "no control move")}})()
    report = {
        "texts_in": 8,
        "texts_kept": 4,
        "dropped": {"no_keyphrase": 1},
        "dropped_reviews": dropped_reviews(SELECTED, ["r015"], family),
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    return texts


def run(*args: str, width: int = 80):
    return CliRunner().invoke(main, ["texts", *args], env={"COLUMNS": str(width)})


@pytest.mark.parametrize("width", [60, 80, 120])
def test_dropped_table_fits_and_names_every_review(synth_out, width):
    res = run("--texts", str(synth_out), "--dropped", width=width)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(ln) for ln in lines) <= width, res.output
    for sid, (reason, _) in SELECTED.items():
        row = next(ln for ln in lines if ln.startswith(sid))
        assert reason in row, row  # one line per review, the reason beside its id
    assert any(ln.startswith("r015") and "original_over_budget" in ln for ln in lines)
    assert any(ln.startswith("r020") and "no_control" in ln for ln in lines)
    assert "5 reviews dropped of 8 reviews in" in " ".join(lines)


def test_dropped_wide_shows_the_whole_detail(synth_out):
    res = run("--texts", str(synth_out), "--dropped", "--wide", width=60)
    assert res.exit_code == 0 and LONG.strip() in res.output
    assert "stage" in res.output and "position_family" in res.output


def test_dropped_csv_and_json_carry_every_field(synth_out):
    res = run("--texts", str(synth_out), "--dropped", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(res.output)))
    assert [r["sample_id"] for r in rows] == ["r003", "r007", "r012", "r015", "r020"]
    # kept_in: "none" for a report entry without it (written before issue 40)
    assert rows[2] == {
        "sample_id": "r012",
        "stage": "select",
        "reason": "below_threshold",
        "kept_in": "none",
        "detail": LONG.strip(),
    }
    res = run("--texts", str(synth_out), "--dropped", "--format", "json")
    data = json.loads(res.output)
    assert data[4] == {
        "sample_id": "r020",
        "stage": "position_family",
        "reason": "no_control",
        "kept_in": "none",
        "detail": "no control move",
    }


def test_no_review_dropped_says_so(synth_out):
    report = synth_out.with_name("report.json")
    report.write_text(json.dumps({"texts_in": 4, "texts_kept": 4, "dropped_reviews": []}))
    res = run("--texts", str(synth_out), "--dropped")
    assert res.exit_code == 0 and "synth dropped no review of 4 reviews in" in res.output
    res = run("--texts", str(synth_out), "--dropped", "--format", "json")
    assert json.loads(res.output) == []


def test_kept_texts_per_variant(synth_out):
    res = run("--texts", str(synth_out))
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for variant in ("original", "front", "end", "control"):
        assert any(ln.split()[:3] == [variant, "4", "4"] for ln in lines), res.output
    assert "8 reviews in, 4 kept; 4 dropped (homog texts --dropped lists them)" in res.output
    data = json.loads(run("--texts", str(synth_out), "--format", "json").output)
    assert [r["variant"] for r in data] == ["original", "front", "end", "control"]
    assert data[0]["texts"] == 4 and data[0]["pos"] == 4 and data[0]["words"] == 10


def test_missing_outputs_name_homog_synth(tmp_path):
    missing = tmp_path / "texts.parquet"
    clean_error(run("--texts", str(missing)), str(missing), "`homog synth`")
    write_texts(missing)
    report = str(tmp_path / "report.json")
    clean_error(run("--texts", str(missing), "--dropped"), report, "`homog synth`")
    assert run("--texts", str(missing)).exit_code == 0  # the counts need no report


def test_old_or_damaged_report_is_one_message(synth_out):
    report = synth_out.with_name("report.json")
    report.write_text(json.dumps({"texts_in": 8, "texts_kept": 4, "dropped": {"x": 4}}))
    res = run("--texts", str(synth_out), "--dropped")
    clean_error(res, "dropped_reviews", "rerun `homog synth`", '{"x": 4}')
    assert "predates per-review reasons" in run("--texts", str(synth_out)).output
    report.write_text("{not json")
    clean_error(run("--texts", str(synth_out), "--dropped"), "cannot read", "`homog synth`")
    synth_out.write_bytes(b"not parquet")
    clean_error(run("--texts", str(synth_out)), "cannot read", "`homog synth`")


@pytest.mark.parametrize("width", [60, 80])
def test_dropped_table_keeps_kept_in_at_narrow_widths(synth_out, width):
    """kept_in (what of a review is left) is what tells its rows apart: never left out."""
    res = run("--texts", str(synth_out), "--dropped", width=width)
    assert res.exit_code == 0, res.output
    header = next(ln for ln in res.output.splitlines() if ln.startswith("sample_id"))
    assert "kept_in" in header, res.output
    rows = csv.DictReader(
        io.StringIO(run("--texts", str(synth_out), "--dropped", "--format", "csv").output)
    )
    lines = res.output.splitlines()
    for r in rows:
        line = next(ln for ln in lines if ln.startswith(r["sample_id"]))
        assert f" {r['kept_in']} " in f"{line} ", (r, line)
