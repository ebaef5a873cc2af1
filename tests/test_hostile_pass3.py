"""The third hostile pass over the CLI, the params and the store: each test is a case that
gave a traceback, a silent wrong output or a confusing message, checked to fail cleanly now."""

from __future__ import annotations

import shutil

import duckdb
import pytest
from click.testing import CliRunner

from homog.cli import main
from tests.hostile_helpers import clean_error


@pytest.fixture
def demo_copy(demo_db_factory, tmp_path):
    """A private copy of the small demo database (to change its schema)."""
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(4, 12), path)
    return path


def test_report_on_an_older_probe_table_names_the_missing_column(demo_copy, tmp_path):
    # probe_metrics without verdict (a database of before the probe's verdicts): the report
    # reads it for the cost line, and used to die with KeyError "['verdict'] not in index"
    con = duckdb.connect(str(demo_copy))
    con.execute("ALTER TABLE probe_metrics DROP COLUMN verdict")
    con.close()
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", "--db", str(demo_copy), "-o", str(out)])
    clean_error(res, "probe_metrics", "verdict", "homog load")
    assert not out.exists()


@pytest.mark.parametrize(
    ("fmt", "name"),
    [(None, "r.md"), ("html", "r.markdown"), ("md", "r.html"), ("md", "r.HTM")],
)
def test_report_refuses_a_page_name_of_the_other_format(demo_db_factory, tmp_path, fmt, name):
    # `homog report -o r.md` wrote an HTML page into r.md (and --format md -o r.html
    # Markdown into r.html) without a word
    out = tmp_path / name
    args = ["report", "--db", str(demo_db_factory(4, 12)), "-o", str(out)]
    res = CliRunner().invoke(main, args + (["--format", fmt] if fmt else []))
    clean_error(res, name, "--format")
    assert not out.exists()


@pytest.mark.parametrize(
    "contrast", ["key_first - key_first", "(key_first - key_mid) - (key_first - key_mid)"]
)
def test_a_primary_contrast_of_a_variant_with_itself_is_refused(contrast):
    # its difference is 0 for every text: an endpoint "equivalent" by construction that
    # also enlarges the primary Holm family
    from homog.config.primary import PrimaryConfig
    from homog.errors import HomogError
    from homog.stats.primary_names import check_primary

    with pytest.raises(HomogError, match="zero for every text"):
        check_primary(PrimaryConfig(contrasts=(contrast,)))


@pytest.mark.parametrize("place", ["key_p250", "key_p0", "key_p100", "key_p50", "key_p025"])
def test_a_sweep_place_the_position_family_cannot_make_is_refused(place):
    # key_p250 (250 % of the review) passed as "a sweep place" and matched no row
    from homog.config.primary import PrimaryConfig
    from homog.errors import HomogError
    from homog.stats.primary_names import check_primary

    with pytest.raises(HomogError, match=f"unknown variant '{place}'"):
        check_primary(PrimaryConfig(contrasts=(f"{place} - key_control",)))
    check_primary(PrimaryConfig(contrasts=("key_p25 - key_control",)))  # a real place


def _extract(**kw):
    import yaml

    from homog.config import parse_params
    from tests.conftest import project_params

    params = project_params()
    params["extract"].update(kw)
    return parse_params(yaml.safe_load(yaml.safe_dump(params))).extract


def test_yaml_minus_infinity_is_a_dose_and_nan_is_named():
    import yaml

    from homog.errors import HomogError

    # YAML's own -.inf is the masking dose, as the string "-inf" is; it was refused with
    # "expected a number or a string, got -inf (a number)"
    doses = yaml.safe_load("[-.inf, 2]")
    assert (
        _extract(sink_bias_doses=doses).interventions
        == _extract(sink_bias_doses=["-inf", 2]).interventions
    )
    for bad in ("[.nan]", "[.inf]"):
        with pytest.raises(HomogError, match=r"extract\.sink_bias_doses: .*must be finite"):
            _extract(sink_bias_doses=yaml.safe_load(bad))


@pytest.mark.parametrize(
    ("key", "doses", "needle"),
    [
        ("sink_bias_doses", ["abc"], "not a number"),
        ("sink_bias_doses", ["+inf"], "must be finite"),
        ("homogenize_doses", [-1], "alpha must be <= 1 and >= 0"),
    ],
)
def test_a_bad_dose_names_its_setting(key, doses, needle):
    # the message named only 'sink_bias:abc', not the params key holding it
    from homog.errors import HomogError

    with pytest.raises(HomogError) as err:
        _extract(**{key: doses})
    assert f"extract.{key}" in str(err.value) and needle in str(err.value)


@pytest.mark.parametrize("word", [" ", "\n", "\t "])
def test_a_blank_label_word_is_refused(word):
    # " " passed (only "" was refused): the zero-shot answer scored the space token
    import yaml

    from homog.config import parse_params
    from homog.errors import HomogError
    from tests.conftest import project_params

    params = project_params()
    params["probe"]["positive_word"] = word
    with pytest.raises(HomogError, match="probe.positive_word and probe.negative_word"):
        parse_params(yaml.safe_load(yaml.safe_dump(params)))


def test_sensitivity_without_primary_rows_says_what_is_missing(demo_db_factory, write_params):
    # "no primary endpoints among the claim rows (stats.primary)": nothing on which
    # contrasts were looked for, or what to do
    params = write_params(stats={"primary": {"contrasts": ["key_p25 - key_mid"]}})
    args = ["claims", "--db", str(demo_db_factory(4, 12)), "--params", str(params)]
    res = CliRunner().invoke(main, [*args, "--sensitivity"])
    clean_error(res, "key_p25 - key_mid", "--params", "rerun synth and stats")


@pytest.mark.parametrize("place", [0.004, 0.497, 0.996])
def test_a_position_named_like_an_edge_or_the_middle_is_refused(place):
    # 0.004 made a variant key_p0: neither key_first nor a place stats.primary can name
    from homog.config.position import PositionConfig
    from homog.errors import HomogError

    with pytest.raises(HomogError, match="round to 0, 50 or 100"):
        PositionConfig(positions=(0.0, place, 1.0))
    PositionConfig(positions=(0.0, 0.25, 0.5, 1.0))


@pytest.mark.parametrize(
    ("position", "needle"),
    [({"positions": (0.0, 1.0)}, "key_mid, ctrl_mid"), ({"enabled": False}, "disabled")],
)
def test_primary_contrasts_synth_does_not_make_are_named(position, needle, capsys):
    # synth.position without the middle (or disabled) left the default primary family empty
    # at stats without a word
    from homog.config.position import PositionConfig
    from homog.config.primary import PrimaryConfig
    from homog.stats.primary_names import check_primary

    check_primary(PrimaryConfig(), PositionConfig(**position))
    err = capsys.readouterr().err
    assert "warning: stats.primary.contrasts need" in err and needle in err
    check_primary(PrimaryConfig(), PositionConfig())
    assert capsys.readouterr().err == ""


def _claim(claim, comparison, effect, *, metric="erank", band="final", family="exploratory"):
    return {
        "model": "tiny",
        "claim": claim,
        "comparison": comparison,
        "metric": metric,
        "band": band,
        "family": family,
        "effect": effect,
        "ci_low": effect - 1,
        "ci_high": effect + 1,
        "pct_of_baseline": 100 * effect / 30,
        "baseline_mean": 30.0,
        "verdict": "inconclusive",
    }


def test_removing_positions_reads_only_zero_pos():
    # with the dose grids every sink_bias:d - none row is claim 5c too, and the answer's
    # "Removing positions (zero_pos - none)" listed each as "tiny final ..." unlabelled
    import pandas as pd

    from homog.report.answer import exploratory_lines

    rows = [
        _claim("5c", "zero_pos - none (original)", -3.0),
        _claim("5c", "sink_bias:2 - none (original)", -9.0),
        _claim("5c", "homogenize:0.5 - none (original)", -6.0),
    ]
    line = next(
        x.markdown for x in exploratory_lines(pd.DataFrame(rows)) if "Removing" in x.question
    )
    assert line.count("tiny final") == 1 and "-10 %" in line


def test_order_invariance_ignores_rounding_of_a_difference_of_differences():
    # (key_first - key_mid) - (ctrl_first - ctrl_mid) at layer 0 came out -1.3e-14 on an
    # erank of ~30, and the answer said "12 rows differ from 0: read the effects with care"
    import pandas as pd

    from homog.report.answer import control_line

    comp = "(key_first - key_mid) - (ctrl_first - ctrl_mid)"
    rows = [_claim("1k", comp, e, band="layer0", family="control") for e in (-1.3e-14, 4e-17)]
    assert "every one is exactly 0" in control_line(pd.DataFrame(rows)).finding
    rows.append(_claim("1k", comp, 0.02, band="layer0", family="control"))
    assert "1 rows differ from 0" in control_line(pd.DataFrame(rows)).finding


def test_compare_of_a_variant_without_paired_contrasts_shows_its_difference(demo_copy):
    # `compare --variants ctrl_first` (no ctrl_first - original contrast in the store) printed
    # a table of blank cells: the original, the difference's reference, was filtered out
    con = duckdb.connect(str(demo_copy))
    con.execute("DELETE FROM contrasts WHERE variant_a = 'front'")
    con.close()
    args = ["compare", "--db", str(demo_copy), "--metric", "erank", "--variants", "front"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert res.output.count("(no CI)") >= 3, res.output


def test_export_refuses_a_format_the_file_name_contradicts(demo_db_factory, tmp_path):
    # --format parquet -o x.csv wrote Parquet bytes into x.csv
    out = tmp_path / "x.csv"
    args = ["export", "--db", str(demo_db_factory(4, 12)), "runs", "-o", str(out)]
    res = CliRunner().invoke(main, [*args, "--format", "parquet"])
    clean_error(res, "x.csv", "--format")
    assert not out.exists()
    assert CliRunner().invoke(main, [*args, "--format", "csv"]).exit_code == 0
