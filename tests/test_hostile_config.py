"""Issue 32, item 4 and the params tracebacks: every number a user can set has a range,
checked before work starts; duplicate YAML keys, model keys that are paths and HOMOG_*
booleans that are neither true nor false are errors that name the value."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hostile_helpers import HOMOG, ROOT, clean_error, write_texts

from homog.cli import main
from homog.config import load_config, parse_params
from homog.errors import HomogError

# --- duplicate keys -------------------------------------------------------------------------


def test_duplicate_top_level_section_names_the_key_and_both_lines(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(
        "seed: 0\nextract:\n  max_tokens: 64\ncorpus:\n  n: 5\nextract:\n  center: true\n"
    )
    with pytest.raises(HomogError) as err:
        load_config(path)
    msg = str(err.value)
    assert str(path) in msg and "'extract'" in msg and "lines 2 and 6" in msg


def test_duplicate_nested_key_is_an_error_through_the_cli(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("corpus:\n  n: 5\n  min_words: 3\n  n: 50\n")
    res = CliRunner().invoke(main, ["corpus", "--params", str(path), "--out", str(tmp_path / "c")])
    clean_error(res, "repeats the key 'n'", "lines 2 and 4")


# --- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"mauve": {"scaling": -5}}, "mauve.scaling must be > 0"),
        ({"mauve": {"scaling": 0}}, "mauve.scaling must be > 0"),
        ({"mauve": {"scaling": float("inf")}}, "not a finite number"),
        ({"mauve": {"scaling": float("nan")}}, "not a finite number"),
        ({"mauve": {"kmeans_max_iter": 0}}, "mauve.kmeans_max_iter must be >= 1"),
        ({"posenc": {"train": {"epochs": -1}}}, "posenc.train.epochs must be an integer >= 1"),
        ({"posenc": {"train": {"epochs": 0}}}, "posenc.train.epochs"),
        ({"posenc": {"train": {"batch_size": 0}}}, "posenc.train.batch_size"),
        ({"posenc": {"train": {"lr": 0}}}, "posenc.train.lr must be a number > 0"),
        ({"posenc": {"train": {"seeds": [-1]}}}, "posenc.train.seeds[] must be an integer"),
        ({"posenc": {"train": {"seeds": []}}}, "posenc.train.seeds must be a non-empty list"),
        ({"posenc": {"train": {"train_fraction": 1.5}}}, "posenc.train.train_fraction"),
        ({"posenc": {"train": {"warmup": -0.1}}}, "posenc.train.warmup"),
        ({"posenc": {"model": {"n_layer": 0}}}, "posenc.model.n_layer"),
        ({"posenc": {"model": {"dropout": 1.0}}}, "posenc.model.dropout"),
        ({"posenc": {"distance": {"left": [5, 1]}}}, "posenc.distance.left"),
        ({"posenc": {"count": {"n_samples": 0}}}, "posenc.count.n_samples"),
        ({"seed": -1}, "seed must be an integer in [0, 2**32 - 1]"),
        ({"seed": 2**32}, "seed must be an integer in [0, 2**32 - 1]"),
        ({"seed": 2**128 + 1}, "out of range"),
        ({"corpus": {"n": 2**70}}, "out of range"),
        ({"synth": {"bertscore": {"threshold": 2.0}}}, "synth.bertscore.threshold"),
        ({"synth": {"fluency": {"threshold": float("inf")}}}, "not a finite number"),
        ({"corpus": {"text_column": "label"}}, "corpus.label_column must differ"),
        ({"corpus": {"text_column": "id", "label_column": None}}, "corpus.id_column must differ"),
    ],
)
def test_out_of_range_params_are_named(data, needle):
    with pytest.raises(HomogError) as err:
        parse_params(data)
    assert needle in str(err.value)


@pytest.mark.parametrize("seed", [-1, 2**128 + 1])
def test_bad_seed_is_a_message_not_a_traceback(tmp_path, seed):
    path = tmp_path / "params.yaml"
    path.write_text(f"seed: {seed}\n")
    res = CliRunner().invoke(main, ["corpus", "--params", str(path), "--out", str(tmp_path / "c")])
    clean_error(res, str(path), "seed")


def test_negative_epochs_never_overwrite_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "data" / "posenc" / "rope"
    out.mkdir(parents=True)
    (out / "results.parquet").write_bytes(b"good results")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"posenc": {"preset": "tiny", "train": {"epochs": -1}}}))
    res = CliRunner().invoke(main, ["posenc", "train", "--pe", "rope", "--params", str(path)])
    clean_error(res, "posenc.train.epochs must be an integer >= 1, got -1")
    assert (out / "results.parquet").read_bytes() == b"good results"


def test_text_column_equal_to_label_column_through_the_cli(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"corpus": {"text_column": "text", "label_column": "text"}}))
    res = CliRunner().invoke(main, ["corpus", "--params", str(path), "--out", str(tmp_path / "c")])
    clean_error(res, "corpus.label_column must differ from corpus.text_column ('text')")


def test_file_source_under_an_unknown_user(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"corpus": {"source": "file:~nouser-homog/r.jsonl"}}))
    res = CliRunner().invoke(main, ["corpus", "--params", str(path), "--out", str(tmp_path / "c")])
    clean_error(res, "file:~nouser-homog/r.jsonl", "'~nouser-homog'", "full path")


# --- model keys are names -------------------------------------------------------------------


@pytest.mark.parametrize("key", ["..", ".", "a/b", "/abs", "../x", ".hidden", "a..b", ""])
def test_model_keys_are_names_never_paths(key):
    with pytest.raises(HomogError, match="is not a name"):
        parse_params({"models": {key: "random:tiny-llama"}})


def test_model_key_dotdot_writes_nothing_outside_data_extract(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"models": {"..": "random:tiny-llama"}}))
    res = CliRunner().invoke(
        main, ["extract", "--model", "..", "--params", str(path), "--device", "cpu"]
    )
    clean_error(res, "'..' is not a name")
    assert not (tmp_path / "data").exists()
    from homog.layout import Layout

    for key in ("..", "."):
        with pytest.raises(HomogError, match="is not a name"):
            Layout().extract_dir(key)


# --- HOMOG_* booleans -----------------------------------------------------------------------


class _Vocab:
    def __len__(self) -> int:
        return 128256


@pytest.fixture
def no_build(monkeypatch):
    """Building the 8B model is replaced by a marker exception: nothing is allocated."""
    import transformers

    class Built(Exception):
        pass

    def refuse(*a, **k):
        raise Built

    import homog.model_presets

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_config", refuse)
    monkeypatch.setattr(homog.model_presets, "count_params", lambda config: 8_030_261_248)
    return Built


@pytest.mark.parametrize("value", ["0", "false", "FALSE", "no", "off", " ", ""])
def test_allow_big_cpu_false_spellings_refuse_the_big_model(monkeypatch, no_build, value):
    from homog.model_presets import build_random

    monkeypatch.setenv("HOMOG_ALLOW_BIG_CPU", value)
    with pytest.raises(HomogError, match="needs a GPU"):
        build_random("llama-8b", _Vocab(), "float32", "cpu", 0, "eager")


@pytest.mark.parametrize("value", ["1", "true", "Yes", "ON"])
def test_allow_big_cpu_true_spellings_build_it(monkeypatch, no_build, value):
    from homog.model_presets import build_random

    monkeypatch.setenv("HOMOG_ALLOW_BIG_CPU", value)
    with pytest.raises(no_build):
        build_random("llama-8b", _Vocab(), "float32", "cpu", 0, "eager")


@pytest.mark.parametrize("value", ["2", "maybe", "nein"])
def test_allow_big_cpu_other_values_are_an_error(monkeypatch, no_build, value):
    from homog.model_presets import build_random

    monkeypatch.setenv("HOMOG_ALLOW_BIG_CPU", value)
    with pytest.raises(HomogError, match=f"HOMOG_ALLOW_BIG_CPU='{value}' is not a boolean"):
        build_random("tiny-llama", _Vocab(), "float32", "cpu", 0, "eager")


def test_every_homog_environment_read_goes_through_a_checked_reader():
    """No module reads a HOMOG_* variable with a bare os.environ/getenv (env_flag, the
    eigensolver's _setting and models_gguf.cache_dir check theirs)."""
    allowed = {"homog/models_gguf.py": "HOMOG_CACHE", "homog/metrics/eigensolver.py": "variable"}
    for path in sorted((ROOT / "homog").rglob("*.py")) + sorted((ROOT / "tui").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line in path.read_text().splitlines():
            if ("os.environ" in line or "getenv" in line) and (
                "HOMOG_" in line or "variable" in line
            ):
                assert rel in allowed and allowed[rel] in line, (rel, line)


# --- HOMOG_CACHE ----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "unwritable"])
def test_homog_cache_a_file_or_unwritable(tmp_path, monkeypatch, where):
    if where == "file":
        cache = tmp_path / "cache"
        cache.write_text("x")
        needle = "HOMOG_CACHE"
    else:
        cache = Path("/proc/homog-cache")
        needle = "HOMOG_CACHE"
    monkeypatch.setenv("HOMOG_CACHE", str(cache))
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    texts = str(write_texts(tmp_path / "t.parquet", 2))
    res = CliRunner().invoke(
        main,
        [
            "extract",
            "--model",
            "random:tiny-llama",
            "--params",
            str(params),
            "--texts",
            texts,
            "--out",
            str(tmp_path / "x"),
            "--device",
            "cpu",
            "--no-progress",
        ],
    )
    clean_error(res, needle, str(cache))


# --- --layers -------------------------------------------------------------------------------


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))


def test_layers_range_is_bounded_by_the_models(tmp_path, demo_db_factory):
    db = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), db)
    t0 = time.monotonic()
    proc = subprocess.run(
        [*HOMOG, "compare", "--metric", "erank", "--layers", "0-999999999", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 1, proc.stderr
    assert "--layers 0-999999999" in proc.stderr and "layers 0-30" in proc.stderr
    assert "Traceback" not in proc.stderr and time.monotonic() - t0 < 60
    res = CliRunner().invoke(
        main,
        ["compare", "--metric", "erank", "--layers", "28-30,0", "--format", "csv", "--db", str(db)],
    )
    assert res.exit_code == 0, res.output
    layers = {int(line.split(",")[4]) for line in res.output.splitlines()[1:]}
    assert layers == {0, 28, 29, 30}
    for bad, says in (("31", "within 0-30"), ("5-2", "reversed"), ("29-31", "within 0-30")):
        res = CliRunner().invoke(
            main, ["compare", "--metric", "erank", "--layers", bad, "--db", str(db)]
        )
        clean_error(res, says)
