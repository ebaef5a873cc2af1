"""The intervention registry (homog.interventions): names, doses, errors, grids, and the
config, run ids and extraction passes that read it."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from click.testing import CliRunner

from homog.config import ExtractConfig, parse_params
from homog.errors import HomogError
from homog.extract.plan import RunSpec, extract_inputs
from homog.extract.run import intervention_groups
from homog.interventions import PLAIN, canonical, describe, grid, parse


@pytest.mark.parametrize(
    "name, want",
    [
        ("none", "none"),
        ("zero_pos", "zero_pos"),
        ("sink_bias:-2.0", "sink_bias:-2"),
        ("sink_bias:-inf", "sink_bias:-inf"),
        ("sink_bias: +4", "sink_bias:4"),
        ("sink_bias_control:-0", "sink_bias_control:0"),
        ("homogenize:0.20", "homogenize:0.2"),
        ("homogenize_control:1", "homogenize_control:1"),
    ],
)
def test_canonical_names(name, want):
    assert canonical(name) == want
    assert canonical(want) == want


@pytest.mark.parametrize(
    "name, words",
    [
        ("sink", "unknown intervention"),
        ("zero_pos:1", "takes no dose"),
        ("sink_bias", "needs a dose"),
        ("sink_bias:", "needs a dose"),
        ("sink_bias:abc", "not a number"),
        ("sink_bias:inf", "finite"),
        ("sink_bias:nan", "finite"),
        ("homogenize:1.5", "<= 1"),
        ("homogenize:-0.1", ">= 0"),
        ("", "empty"),
    ],
)
def test_bad_names_say_what_is_wrong(name, words):
    with pytest.raises(HomogError, match=words):
        parse(name)


def test_kinds_know_their_family_control_and_identity():
    iv = parse("sink_bias_control:-2")
    assert (iv.family, iv.is_control, iv.dose, iv.is_identity) == ("sink_bias", True, -2.0, False)
    assert parse("homogenize:0").is_identity and parse("none").is_identity
    assert parse("sink_bias:-inf").dose == -math.inf
    assert PLAIN == ("none", "zero_pos", "shuffle_pos")
    assert "beta = -2" in describe("sink_bias:-2")
    assert describe("other_kind:3") == "not described here"


def test_grid_adds_controls_except_at_zero():
    assert grid("sink_bias", ["-inf", -2, 0]) == [
        "sink_bias:-inf",
        "sink_bias:-2",
        "sink_bias:0",
        "sink_bias_control:-inf",
        "sink_bias_control:-2",
    ]


def test_config_expands_the_grids_and_checks_names():
    params = parse_params(
        {
            "extract": {
                "interventions": ["none", "sink_bias:-1.0"],
                "sink_bias_doses": ["-inf", -1, 0],
                "homogenize_doses": [0, 0.5],
                "homogenize_layer": 3,
            }
        }
    )
    assert params.extract.interventions == (
        "none",
        "sink_bias:-1",
        "sink_bias:-inf",
        "sink_bias:0",
        "sink_bias_control:-inf",
        "sink_bias_control:-1",
        "homogenize:0",
        "homogenize:0.5",
        "homogenize_control:0.5",
    )
    with pytest.raises(HomogError, match="extract.interventions.*unknown intervention 'bias:2'"):
        parse_params({"extract": {"interventions": ["none", "bias:2"]}})
    with pytest.raises(HomogError, match="homogenize:2"):
        parse_params({"extract": {"homogenize_doses": [2]}})
    with pytest.raises(HomogError, match="sink_bias_onset"):
        ExtractConfig(sink_bias_onset=0)


def test_run_ids_unchanged_for_plain_runs_and_keyed_by_onset_for_graded():
    base, other = ExtractConfig(), ExtractConfig(sink_bias_onset=2, sink_bias_doses=(0, -1))
    assert (
        RunSpec("m", "s", "none", base, "h").run_id == RunSpec("m", "s", "none", other, "h").run_id
    )
    a = RunSpec("m", "s", "sink_bias:-1", base, "h")
    b = RunSpec("m", "s", "sink_bias:-1", other, "h")
    assert a.run_id != b.run_id and a.pair_key == b.pair_key
    h = RunSpec("m", "s", "homogenize:0.5", base, "h").run_id
    assert h == RunSpec("m", "s", "homogenize:0.5", other, "h").run_id  # onset is not its key


def test_graded_runs_go_on_dose_variants_position_runs_on_theirs():
    df = pd.DataFrame(
        {
            "variant": ["original", "front"] * 2,
            "sample_id": ["a", "a", "b", "b"],
            "text": ["x y z"] * 4,
        }
    )
    cfg = ExtractConfig(interventions=("none", "zero_pos"), sink_bias_doses=(0, -2))
    df, ivs = extract_inputs(df, cfg.interventions)
    groups = intervention_groups(df, ivs, cfg)
    assert [g[1] for g in groups] == [
        ["none", "zero_pos"],
        ["sink_bias:0", "sink_bias:-2", "sink_bias_control:-2"],
    ]
    assert set(groups[1][0]["variant"]) == {"original"} and groups[1][2] is not None
    assert groups[0][2] is None
    bad = ExtractConfig(sink_bias_doses=(0,), dose_variants=("key_first",))
    with pytest.raises(HomogError, match="dose_variants"):
        intervention_groups(df, list(bad.interventions), bad)


def test_cli_takes_dose_names_and_refuses_bad_ones():
    from homog.cli import main

    result = CliRunner().invoke(main, ["extract", "--model", "m", "--intervention", "sink_bias:x"])
    assert result.exit_code != 0
    assert "--intervention: intervention 'sink_bias:x': the dose 'x' is not a number" in (
        result.output
    )


def test_graded_runs_on_the_originals_pair_with_the_full_none_run(tmp_path):
    from conftest import TINY, extract_config
    from test_extract import make_texts

    from homog.extract import extract_runner
    from homog.stats.runs import unchanged_run

    df = make_texts(2, variants=("original", "front"))
    cfg = extract_config(sink_bias_doses=(0, -2), sink_bias_onset=1)
    run = extract_runner(parse_params({"extract": {"device": "cpu"}}), "local")
    recs = run(
        "tiny", TINY, df, cfg, cfg.interventions, tmp_path, show_progress=False, log=lambda m: None
    )
    by_iv = {r["intervention"]: r for r in recs}
    assert list(by_iv) == [
        "none",
        "zero_pos",
        "sink_bias:0",
        "sink_bias:-2",
        "sink_bias_control:-2",
    ]
    assert by_iv["zero_pos"]["n_texts"] == 4 and by_iv["sink_bias:-2"]["n_texts"] == 2
    for iv in ("sink_bias:0", "sink_bias:-2", "sink_bias_control:-2"):
        assert unchanged_run(by_iv[iv], recs, log=lambda m: None) is by_iv["none"]
        assert (tmp_path / iv / "run.json").exists()


def test_cli_intervention_runs_only_what_it_names(tmp_path, write_params):
    """--intervention replaces the params' runs, dose grids included: the params here name a
    grid of 5 graded runs, and `--intervention none` runs `none` alone."""
    from hostile_helpers import write_texts

    from homog.cli import main

    params = write_params(extract={"sink_bias_doses": [-2, 0, 2], "dose_texts": None})
    out = tmp_path / "runs"
    args = ["extract", "--model", "random:tiny-llama", "--params", str(params), "--texts"]
    args += [str(write_texts(tmp_path / "texts.parquet")), "--out", str(out), "--device", "cpu"]
    result = CliRunner().invoke(main, [*args, "--intervention", "none", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["none"]
    result = CliRunner().invoke(main, [*args, "--intervention", "sink_bias:2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["none", "sink_bias:2"]
