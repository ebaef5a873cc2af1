"""study/stages.sh: a study stopped midway goes on where it stopped when run again; a stage runs
again when what it reads (its code as dvc.yaml lists it, its input data, the resolved params)
changes, and only then."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_stages(study: Path, script: str) -> subprocess.CompletedProcess:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; P=params.yaml; . ./stages.sh; {script}"],
        cwd=study,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_study(tmp_path: Path) -> Path:
    """A study folder in a repository of its own: stages.sh, stage_key.py, a dvc.yaml whose
    stage ``one`` reads homog/one.py and the study's data/in.txt, and those files."""
    study = tmp_path / "study"
    study.mkdir()
    for name in ("stages.sh", "stage_key.py"):
        shutil.copy(ROOT / "study" / name, study)
    shutil.copy(ROOT / "study" / "quick.yaml", study / "params.yaml")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  one:\n    cmd: x\n    deps:\n      - homog/one.py\n      - data/in.txt\n"
    )
    (tmp_path / "homog").mkdir()
    (tmp_path / "homog" / "one.py").write_text("ONE = 1\n")
    (tmp_path / "homog" / "other.py").write_text("OTHER = 1\n")
    (study / "data").mkdir()
    (study / "data" / "in.txt").write_text("in\n")
    return study


ONE = "stage one bash -c 'echo x >> log'"


def test_a_finished_stage_is_skipped_until_params_change(tmp_path: Path) -> None:
    study = make_study(tmp_path)
    first = run_stages(study, f"{ONE}; stage two false || true")
    assert first.returncode == 0, first.stderr
    assert (study / "log").read_text() == "x\n"
    assert (study / "data" / ".stages" / "one").exists()
    assert not (study / "data" / ".stages" / "two").exists()  # a failed stage is not done
    again = run_stages(study, f"{ONE}; stage two bash -c 'echo y >> log'")
    assert again.returncode == 0, again.stderr
    assert "one: done with what it reads now (params, code, inputs), skipped" in again.stderr
    assert (study / "log").read_text() == "x\ny\n"  # one skipped, two ran
    with (study / "params.yaml").open("a") as fh:
        fh.write("# a comment changes no setting\n")
    assert run_stages(study, ONE).returncode == 0
    assert (study / "log").read_text() == "x\ny\n"
    text = (study / "params.yaml").read_text()
    (study / "params.yaml").write_text(text.replace("seed: 0", "seed: 1"))
    changed = run_stages(study, ONE)
    assert changed.returncode == 0 and (study / "log").read_text() == "x\ny\nx\n"
    models = run_stages(study, 'echo "$models"')
    assert models.stdout.split() == ["smollm2-135m", "gemma3-270m"]


def test_a_stage_runs_again_when_its_code_or_input_changes_and_only_then(
    tmp_path: Path,
) -> None:
    study = make_study(tmp_path)
    assert run_stages(study, ONE).returncode == 0
    (tmp_path / "homog" / "other.py").write_text("OTHER = 2\n")  # code it does not read
    assert run_stages(study, ONE).returncode == 0
    assert (study / "log").read_text() == "x\n"
    (tmp_path / "homog" / "one.py").write_text("ONE = 2\n")  # its own code, uncommitted
    assert run_stages(study, ONE).returncode == 0
    assert (study / "log").read_text() == "x\nx\n"
    (study / "data" / "in.txt").write_text("other input\n")
    assert run_stages(study, ONE).returncode == 0
    assert (study / "log").read_text() == "x\nx\nx\n"
