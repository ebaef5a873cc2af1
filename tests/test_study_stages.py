"""study/stages.sh: a study stopped midway goes on where it stopped when run again; a change of
params or code runs every stage again."""

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


def test_a_finished_stage_is_skipped_until_params_change(tmp_path: Path) -> None:
    # the study folder sits inside a repository (stages.sh keys on its commit): this one's
    study = tmp_path / "study"
    study.mkdir()
    shutil.copy(ROOT / "study" / "stages.sh", study)
    shutil.copy(ROOT / "study" / "quick.yaml", study / "params.yaml")
    first = run_stages(study, "stage one bash -c 'echo x >> log'; stage two false || true")
    assert first.returncode == 0, first.stderr
    assert (study / "log").read_text() == "x\n"
    assert (study / "data" / ".stages" / "one").exists()
    assert not (study / "data" / ".stages" / "two").exists()  # a failed stage is not done
    again = run_stages(
        study, "stage one bash -c 'echo x >> log'; stage two bash -c 'echo y >> log'"
    )
    assert again.returncode == 0, again.stderr
    assert "one: done with this study's params and code, skipped" in again.stderr
    assert (study / "log").read_text() == "x\ny\n"  # one skipped, two ran
    with (study / "params.yaml").open("a") as fh:
        fh.write("# another study\n")
    changed = run_stages(study, "stage one bash -c 'echo x >> log'")
    assert changed.returncode == 0 and (study / "log").read_text() == "x\ny\nx\n"
    models = run_stages(study, 'echo "$models"')
    assert models.stdout.split() == ["smollm2-135m", "gemma3-270m"]
