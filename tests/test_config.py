"""homog.config: every params key is type-checked before any work, with messages that name it."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from conftest import ROOT, project_params

from homog.config import (
    ExtractConfig,
    Params,
    as_params,
    load_config,
    parse_params,
    read_yaml,
    section,
)
from homog.errors import HomogError


def test_project_params_parse_to_the_defaults_they_document():
    params = load_config(ROOT / "params.yaml")
    assert isinstance(params, Params)
    # the demo's dose grids add their runs (docs/interventions.md)
    assert params.extract.interventions[:2] == ("none", "zero_pos")
    assert len(params.extract.interventions) == 2 + 7 + 7
    assert params.corpus.min_words == 20 and params.corpus.max_words == 400
    assert params.model_sources()["smollm2-135m"] == "embedded:smollm2-135m"
    # the file sets every default the dataclasses hold (one place for defaults: no drift),
    # except the demo's dose grids (code that names no grid runs no graded intervention) and
    # the demo's cuts to fit a coffee break (docs/benchmarks.md): the interventions on the
    # originals, the graded runs on all 10 reviews (fewer than 10 texts read no verdict)
    grids = {k: getattr(params.extract, k) for k in ("sink_bias_doses", "homogenize_doses")}
    assert ExtractConfig().sink_bias_doses == () == ExtractConfig().homogenize_doses
    assert params.extract.intervention_variants == ("original",)
    assert params.extract.dose_texts is None and params.corpus.n == 10
    grids.update(intervention_variants=("original",))
    assert params.extract == dataclasses.replace(
        ExtractConfig(),
        seed=params.seed,
        interventions=params.extract.interventions,
        zero_shot=params.probe.extraction_prompt(),
        **grids,
    )


def test_missing_sections_get_defaults_and_the_top_level_seed():
    params = parse_params({"seed": 7})
    assert params.extract.seed == 7 and params.mauve.seed == 7
    assert params.stats.n_boot == 2000 and params.models == {}


def test_read_errors_name_the_file(tmp_path):
    with pytest.raises(HomogError, match="not found"):
        read_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(HomogError, match="mapping"):
        load_config(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1,\n")
    with pytest.raises(HomogError, match="not valid YAML"):
        load_config(broken)
    # a section's own range check names the file it came from, not "params.yaml"
    other = tmp_path / "other.yaml"
    other.write_text("synth:\n  parser:\n    min_shift: 1.5\n")
    with pytest.raises(HomogError) as info:
        load_config(other)
    assert str(info.value).startswith(f"params file {other} synth.parser.min_shift must be")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # a quoted "false" used to turn centring on while run.json recorded "false"
        (("extract", "center"), "false", r"center: expected a boolean .* got 'false' \(a string\)"),
        (("extract", "attention"), "no", r"extract.attention: expected a boolean"),
        (("synth", "keyphrase", "noun_chunks"), "yes", r"noun_chunks: expected a boolean"),
        (("synth", "parser", "min_shift"), 1.0, r"synth.parser.min_shift must be in \[0, 1\)"),
        # a scalar used to be iterated letter by letter ("unknown intervention 'n'")
        (("extract", "interventions"), "none", r"extract.interventions: expected a list"),
        (
            ("extract", "interventions"),
            ["none", "nope"],
            r"extract.interventions: unknown intervention 'nope': use one of none, zero_pos",
        ),
        (("extract", "max_tokens"), "abc", r"extract.max_tokens: expected an integer, got 'abc'"),
        (("extract", "max_tokens"), 32.7, r"extract.max_tokens: expected an integer, got 32.7"),
        (("extract", "max_tokens"), 0, r"extract.max_tokens must be >= 1"),
        (("extract", "dtype"), "fp8", r"extract.dtype: expected one of 'float32'"),
        (("stats", "ci"), 1.5, r"stats.ci must lie in \(0, 1\)"),
        (("stats", "n_boot"), True, r"stats.n_boot: expected an integer, got True"),
        (("corpus", "max_words"), "400", r"corpus.max_words: expected an integer or null"),
        (("synth", "rephraser"), "gpt", r"synth.rephraser: expected one of .*'rule'.*got 'gpt'"),
        (("synth", "bertscore", "threshold"), "high", r"bertscore.threshold: expected a"),
        (("synth", "fluency", "dtype"), "float16", r"synth.fluency.dtype: expected one of 'auto'"),
        (("posenc", "preset"), "huge", r"posenc.preset: unknown preset 'huge'"),
        (("posenc", "encodings"), ["rope", "rope2"], r"posenc.encodings: unknown \['rope2'\]"),
        (("seed",), "0", r"seed: expected an integer"),
        # issue 13: epsilon is a share of attention
        (("extract", "sink_epsilon"), 1.5, r"extract.sink_epsilon must lie in \(0, 1\)"),
        (("extract", "sink_epsilon"), 0, r"extract.sink_epsilon must lie in \(0, 1\) .*got 0"),
        (("extract", "sink_norm_ratio"), 0.5, r"extract.sink_norm_ratio must be > 1"),
        (("extract", "renyi_alpha"), 0, r"extract.renyi_alpha must be > 0"),
        (("extract", "token_sets"), ["no_sink", "rogue"], r"token_sets\[1\]: expected one of"),
    ],
)
def test_wrong_types_and_ranges_name_key_value_and_expected_type(key, value, expected):
    params = project_params()
    target = params
    for part in key[:-1]:
        target = target[part]
    target[key[-1]] = value
    with pytest.raises(HomogError, match=expected):
        parse_params(params)


@pytest.mark.parametrize(
    ("where", "typo"),
    [
        ("extract", "max_token"),
        ("corpus", "min_word"),
        ("synth", "rephraser_name"),
        ("stats", "nboot"),
        ("mauve", "pca"),
        ("ray", "gpus"),
        ("posenc", "epochs"),
    ],
)
def test_an_unknown_key_in_any_section_names_the_valid_keys(where, typo):
    params = project_params()
    params[where][typo] = 1
    with pytest.raises(HomogError, match=rf"'{where}:' has unknown key\(s\) {typo}; valid"):
        parse_params(params)


def test_unknown_nested_and_top_level_keys():
    params = project_params()
    params["synth"]["bertscore"]["treshold"] = 0.8
    with pytest.raises(HomogError, match=r"'synth.bertscore:' has unknown key\(s\) treshold"):
        parse_params(params)
    with pytest.raises(HomogError, match="unknown top-level key.*extrct"):
        parse_params({"extrct": {}})
    with pytest.raises(HomogError, match=r"'models.m:' needs 'source'"):
        parse_params({"models": {"m": {}}})


def test_ints_widen_to_floats_and_lists_become_tuples():
    params = as_params({"stats": {"ci": 1 - 0.05, "n_boot": 100}, "ray": {"num_cpus_per_actor": 2}})
    assert params.ray.num_cpus_per_actor == 2.0 and isinstance(params.ray.num_cpus_per_actor, float)
    cfg = ExtractConfig(interventions=["none"])
    assert cfg.interventions == ("none",) and hash(cfg)  # stays hashable
    assert as_params(params) is params


def test_section_values_override_and_seed_is_not_a_section_key():
    cfg = section(ExtractConfig, {"max_tokens": 64}, "extract", seed=3, device=None)
    assert (cfg.max_tokens, cfg.seed, cfg.device) == (64, 3, "auto")
    with pytest.raises(HomogError, match="unknown key.*seed"):
        section(ExtractConfig, {"seed": 1}, "extract")


def test_result_keys_leave_engine_and_batching_out_of_the_run_id():
    a = ExtractConfig()
    b = dataclasses.replace(a, engine="ray", interventions=("none",), batch_tokens=7, device="cpu")
    assert a.result_keys() == b.result_keys()
    assert "engine" not in a.run_options() and "max_tokens" in a.run_options()


def test_params_yaml_round_trips_through_yaml(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(project_params()))
    assert load_config(path) == load_config(ROOT / "params.yaml")


def test_new_extract_keys_keep_earlier_run_ids():
    """The issue-13 keys enter the run id only when they differ from their defaults."""
    a = ExtractConfig()
    assert not {"token_sets", "peer_metrics", "sink_epsilon"} & set(a.result_keys())
    b = dataclasses.replace(a, sink_epsilon=0.5)
    assert b.result_keys()["sink_epsilon"] == 0.5
    c = dataclasses.replace(a, token_sets=[])
    assert c.token_sets == () and c.result_keys()["token_sets"] == ()


@pytest.mark.parametrize("preset", ["params.yaml", "quick.yaml"])
def test_the_study_presets_run_the_graded_interventions(preset):
    # homog's defaults name no dose grid (code that names none runs no graded intervention),
    # so a study preset must name its own: without them the study answered the dose questions
    # (docs/interventions.md) with no run at all
    from homog.interventions import parse

    params = load_config(ROOT / "study" / preset)
    kinds = [parse(iv).kind.name for iv in params.extract.interventions]
    for kind in ("sink_bias", "sink_bias_control", "homogenize", "homogenize_control"):
        assert kinds.count(kind) >= 3, (preset, kind)
    assert params.extract.dose_texts is None or params.extract.dose_texts >= 10
