"""homog.layout: the one place for data/ paths, the run finder and the default database."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import ROOT

from homog.errors import HomogError
from homog.layout import DEFAULT_DB, Layout, default_db, find_runs, safe_name


def test_paths_are_those_dvc_yaml_declares():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    layout = Layout()

    def outs(name: str) -> list[str]:
        entries = stages[name].get("do", stages[name])["outs"]
        return [e if isinstance(e, str) else next(iter(e)) for e in entries]

    assert outs("corpus") == [str(layout.corpus)]
    assert str(layout.texts) in outs("synth")
    assert outs("extract") == [str(layout.extract_dir("${key}"))]
    assert outs("mauve") == [str(layout.mauve("${key}"))]
    assert str(layout.contrasts) in outs("stats")
    assert outs("posenc_decompose") == [str(layout.pretrained_decomposition("${item}"))]
    assert outs("load") == [str(layout.db())]
    assert str(layout.posenc_dir("${item}") / "results.parquet") in outs("posenc_train")


# modules that shape no number of an extract output (paths, errors, progress bars, typing)
EXTRACT_INFRASTRUCTURE = {
    "homog",
    "homog.config",
    "homog.errors",
    "homog.lazy",
    "homog.progress",
    "homog.typed",
    "homog.posenc",
    "homog.validate",
    "homog.config.position",
    "homog.config.synth",
    "homog.config.posenc",
    "homog.config.posenc_presets",
    "homog.config.probe",
    "homog.config.primary",  # stats.primary: the claims' families, no extract number
    "homog.config.stats",  # the stats: section, no extract number
    "homog.config.mauve",  # the mauve: and ray: sections (the engine runs the same shards)
    "homog.owned",  # which output files homog wrote (the --force policy), no number
    "homog.interrupts",  # Ctrl-C handling (atomic writes check its flag), no number
    "homog.layout",  # data/ paths and the writable-folder check homog.io runs, no number
}


def test_extract_stage_declares_the_modules_its_numbers_come_from():
    """Every homog module the extraction imports is a dep of stage extract (or
    infrastructure above): a new metrics module left out would not re-run the stage after
    it changes (homog/metrics/eigensolver.py was missing until it was added here)."""
    import subprocess
    import sys

    code = (
        "import sys; import homog.extract.local, homog.extract.hooks, homog.extract.outputs, "
        "homog.metrics.sets, homog.metrics.attention; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('homog'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    modules = set(done.stdout.split()) - EXTRACT_INFRASTRUCTURE
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["extract"]["do"]["deps"]

    def declared(module: str) -> bool:
        path = module.replace(".", "/")
        return any(path + ".py" == d or path == d or path.startswith(d + "/") for d in deps)

    assert modules and not sorted(m for m in modules if not declared(m))


def test_corpus_stage_declares_the_modules_it_imports():
    """The corpus stage cuts reviews with every model's tokenizer (homog.corpus.cut): each
    homog module it imports is a dep of stage corpus, or infrastructure (package inits, paths,
    params), so a change to the cut re-runs the stage."""
    import subprocess
    import sys

    code = (
        "import sys; import homog.corpus.stage, homog.corpus.cut, homog.text.tokens, "
        "homog.models; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('homog'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    infrastructure = EXTRACT_INFRASTRUCTURE | {
        "homog.layout",
        "homog.synth",
        "homog.synth.rephrase",
        "homog.corpus",
        "homog.text",
        # the registries the params check names against (homog.config), no corpus number
        "homog.interventions",
        "homog.variants",
    }
    modules = set(done.stdout.split()) - infrastructure
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["corpus"]["deps"]

    def declared(module: str) -> bool:
        path = module.replace(".", "/")
        return any(path + ".py" == d or path.startswith(d + "/") for d in deps)

    missing = [m for m in sorted(modules) if not declared(m)]
    assert "homog.corpus.cut" in modules and not missing


def test_safe_name_and_root():
    assert safe_name("hf:org/model") == "hf_org_model"
    assert Layout("/p").run_dir("hf:a/b", "none").as_posix() == "/p/data/extract/hf_a_b/none"
    assert Layout("/p").db("x/y.duckdb").as_posix() == "/p/x/y.duckdb"


def test_find_runs_reads_finished_runs_only(tmp_path):
    layout = Layout(tmp_path)
    for iv in ("none", "zero_pos"):
        layout.run_dir("m", iv).mkdir(parents=True)
        (layout.run_dir("m", iv) / "run.json").write_text(json.dumps({"run_id": f"r-{iv}"}))
    layout.run_dir("m", "shuffle_pos").mkdir()  # no run.json: an unfinished run
    runs = find_runs(["m", "absent"], tmp_path)
    assert [(r["run_id"], r["model"], d.name) for r, d in runs] == [
        ("r-none", "m", "none"),
        ("r-zero_pos", "m", "zero_pos"),
    ]
    (layout.run_dir("m", "none") / "run.json").write_text("{broken")
    with pytest.raises(HomogError, match="cannot read .*run.json"):
        find_runs(["m"], tmp_path)
    (layout.run_dir("m", "none") / "run.json").write_text("{}")
    with pytest.raises(HomogError, match="has no run_id"):
        find_runs(["m"], tmp_path)


def test_default_db_falls_back_when_params_are_missing_or_broken(tmp_path):
    assert default_db(tmp_path / "missing.yaml") == DEFAULT_DB
    broken = tmp_path / "broken.yaml"
    broken.write_text("db: [\n")
    assert default_db(broken) == DEFAULT_DB
    good = tmp_path / "p.yaml"
    good.write_text("db: elsewhere.duckdb\nextract: {center: 'not checked here'}\n")
    assert str(default_db(good)) == "elsewhere.duckdb"


def _undeclared(imports: str, deps: list[str], infrastructure: set[str]) -> list[str]:
    """The homog modules that importing ``imports`` loads and no dep of ``deps`` names (a
    file, or a folder above it), infrastructure aside."""
    import subprocess
    import sys

    code = (
        f"import sys; import {imports}; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('homog'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    modules = set(done.stdout.split()) - infrastructure
    assert modules

    def declared(module: str) -> bool:
        path = module.replace(".", "/")
        return any(path + ".py" == d or path == d or path.startswith(d + "/") for d in deps)

    return sorted(m for m in modules if not declared(m))


# package inits whose own code holds no number of the stage's (their modules are checked)
PACKAGES = {
    "homog.extract",
    "homog.metrics",
    "homog.probe",
    "homog.stats",
    "homog.schema",
    "homog.text",
    "homog.extract.engines",  # the engines' registry, which homog.extract's init imports
}


def test_stats_stage_declares_the_modules_it_imports():
    """A change to any module the stats stage imports re-runs it (claim 4's solver in
    homog/stats/classifier.py was not a dep until this test)."""
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["stats"]["deps"]
    assert not _undeclared("homog.stats.stage", deps, EXTRACT_INFRASTRUCTURE | PACKAGES)


def test_probe_fit_stage_declares_the_modules_it_imports():
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["probe"]["do"]
    assert not _undeclared("homog.probe.stage", stage["deps"], EXTRACT_INFRASTRUCTURE | PACKAGES)
