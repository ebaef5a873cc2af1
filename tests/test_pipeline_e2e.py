"""The whole pipeline through `dvc repro` in a temporary copy: tiny random model, a few texts.

Checks the DuckDB tables and the query commands after the first run, that a second `dvc repro`
runs nothing, and that changing one param reruns only the stages that depend on it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from homog import store as q

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    shutil.which("dvc", path=str(Path(sys.executable).parent)) is None,
    reason="needs dvc (make setup installs it)",
)


def tiny_params() -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["corpus"]["n"] = 6
    params["models"] = {"tiny": {"source": "random:tiny-llama"}}
    params["extract"].update(
        device="cpu",
        dtype="float32",
        interventions=["none", "zero_pos"],
        # zero_pos on every variant (the demo runs it on the originals): the counts below
        # cover each variant under both interventions
        intervention_variants=[],
        # the graded dose series have their own tests (test_intervention_doses and the
        # hook tests); here the counts below stay those of the two position interventions
        sink_bias_doses=[],
        homogenize_doses=[],
        sample_tokens=48,
        max_tokens=64,
    )
    params["mauve"].update(max_points=48, path="torch")
    params["stats"]["n_boot"] = 200
    params["posenc"].update(
        preset="tiny", encodings=["rope"], decompose_models=["tiny"], decompose_texts=2
    )
    # the parse rephraser's LM fluency check and audit on the tiny model too (fast)
    params["synth"]["fluency"].update(model="random:tiny-llama", audit_model="random:tiny-llama")
    return params


def run(cmd: list[str], cwd: Path) -> str:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-4000:]}"
    return out


def ran_stages(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pipeline")
    # the project's .gitignore too: DVC refuses to run when it ignores dvc.lock (a fresh
    # clone's `make demo` failed so, while this test without it passed)
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, root / name)
    # Stage deps name homog/*.py and data/demo; the commands run the installed homog.
    shutil.copytree(ROOT / "homog", root / "homog", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "data" / "demo", root / "data" / "demo")
    shutil.copytree(ROOT / "requirements", root / "requirements")  # a dep of the synth stage
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    root.joinpath("first_repro.log").write_text(run(["dvc", "repro"], root))
    return root


def test_first_repro_fills_every_table(project):
    assert ran_stages((project / "first_repro.log").read_text()) >= {
        "corpus",
        "synth",
        "extract@tiny",
        "mauve@tiny",
        "stats",
        "posenc_train@rope",
        "posenc_decompose@tiny",
        "probe_features@tiny",
        "probe@tiny",
        "load",
    }
    con = q.connect(project / "data" / "homog.duckdb")
    runs = q.list_runs(con)
    assert sorted(r["intervention"] for r in runs) == ["none", "zero_pos"]
    assert {r["model"] for r in runs} == {"tiny"}
    # the paper's variants and the position family (on by default)
    variants = [
        "original",
        "front",
        "end",
        "control",
        "key_first",
        "key_mid",
        "key_last",
        "key_control",
        "ctrl_first",
        "ctrl_mid",
        "ctrl_last",
    ]
    assert q.variants(con) == variants
    nv = len(variants)
    n_layers = runs[0]["n_layers"]
    count = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    n_texts = count("SELECT count(DISTINCT sample_id) FROM layer_metrics")
    assert n_texts >= 2
    # Every (run, variant, text, layer) has the 7 hidden-state metrics.
    assert count(
        "SELECT count(*) FROM layer_metrics WHERE metric = 'erank'"
    ) == 2 * nv * n_texts * (n_layers + 1)
    assert count("SELECT count(*) FROM mauve_scores") == 2 * nv * n_layers
    # the tiny model's 3 layers leave 2 between layer 0 and L: too few for depth bands, so its
    # band rows are layer 0 and the final layer (issue 29), with the length adjustment's columns
    assert count("SELECT count(*) FROM contrasts WHERE band = 'final'") > 0
    assert count("SELECT count(*) FROM contrasts WHERE band = 'layer0'") > 0
    assert count("SELECT count(*) FROM contrasts WHERE band = 'late'") == 0
    assert count("SELECT count(*) FROM contrasts WHERE p_tost IS NOT NULL") > 0
    assert count("SELECT count(*) FROM layer_metrics WHERE metric = 'n_tokens'") == 2 * nv * n_texts
    assert count("SELECT count(*) FROM contrasts WHERE baseline_run_id IS NOT NULL") > 0
    assert count("SELECT count(*) FROM texts") == nv * n_texts
    # the original and the seven members of the position family carry the key sentence's index
    family = count("SELECT count(*) FROM texts WHERE key_index IS NOT NULL")
    assert family == (nv - 3) * n_texts
    assert count("SELECT count(*) FROM posenc_results WHERE pe = 'rope'") > 0
    assert count("SELECT count(*) FROM attention_profile") > 0
    # The two labs meet in one table: the toy encoders and the pipeline's model.
    sources = {
        r[0] for r in con.execute("SELECT DISTINCT source FROM logit_decomposition").fetchall()
    }
    assert "tiny" in sources and any(s.startswith("posenc:rope:") for s in sources)
    # the probe's two steps: the fit's tables, with the zero-shot AUC beside the accuracy
    assert count("SELECT count(*) FROM lm_sentiment") == 2 * nv * n_texts
    assert count("SELECT count(*) FROM probe_metrics WHERE metric = 'lm_auc'") > 0
    curves = q.layer_curves(con, "erank")
    assert len(curves) == 2 * nv * (n_layers + 1)
    assert all(r["mean"] > 0 for r in curves)


def test_cli_shows_real_numbers(project):
    report = (project / "data" / "report" / "report.html").read_text()  # the last stage
    assert "Claims of arXiv 2508.17126" in report and "tiny" in report
    db = str(project / "data" / "homog.duckdb")
    out = run(["homog", "runs", "--db", db], project)
    assert "tiny" in out and "zero_pos" in out
    # eight variants are too wide for one 80-column table: ask for some
    out = run(
        [
            "homog",
            "compare",
            "--metric",
            "erank",
            "--db",
            db,
            "--variants",
            "original,front,control",
        ],
        project,
    )
    assert "control - orig" in out  # the paired difference from the original, with its CI
    out = run(
        ["homog", "compare", "--metric", "erank", "--db", db, "--variants", "original,key_last"],
        project,
    )
    assert "key_last - orig" in out
    out = run(
        ["homog", "sql", "SELECT count(*) AS n FROM layer_metrics", "--db", db, "--format", "csv"],
        project,
    )
    assert int(out.split()[-1]) > 0


def test_second_repro_does_nothing_and_params_rerun_dependents(project):
    db = project / "data" / "homog.duckdb"
    con = q.connect(db)
    before = con.execute("SELECT count(*) FROM layer_metrics").fetchone()[0]
    con.close()
    assert ran_stages(run(["dvc", "repro"], project)) == set()
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["stats"]["n_boot"] = 150
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # the probe's fit reads the stats settings for its CIs and slopes; its forward passes
    # (probe_features@tiny) do not, so they do not rerun
    assert ran_stages(run(["dvc", "repro"], project)) == {"probe@tiny", "stats", "load", "report"}
    con = q.connect(db)
    # The reload replaced the same runs: no duplicated rows.
    assert con.execute("SELECT count(*) FROM layer_metrics").fetchone()[0] == before
    assert "Data and pipelines are up to date" in run(["dvc", "status"], project)
