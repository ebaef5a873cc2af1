"""The key of one study stage (study/stages.sh): what the stage reads, hashed.

    python stage_key.py STAGE PARAMS     (run in study/; prints 16 hex digits)

STAGE is a stages.sh name: a dvc.yaml stage (``corpus``, ``synth``, ``stats``, ``load``,
``report``) or a per-model one (``extract@KEY``, ``mauve@KEY``, ``probe@KEY``: the
``probe_features`` and ``probe`` stages of KEY). Its key hashes, as ``dvc repro`` would
decide whether to run it again:

- the stage's ``deps`` in dvc.yaml: a path under homog/ or tui/ is the repository's code (its
  files' bytes, committed or not), any other path is the study's own data (under study/);
- the study's params, resolved with homog's defaults, all of them (a superset of the
  stage's ``params``: a change anywhere runs the stage again, never too seldom).

A stage that is not in dvc.yaml (the results page, the README, the bundle) reads all of
homog/ and the study's database. So a commit that changes the report leaves the study's
extraction finished, and one that changes the extraction runs it again (``homog extract``
then keeps every intervention whose run id is unchanged: homog.extract.run.finished_runs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CODE = ("homog", "tui")
# stages.sh names that run more than one dvc.yaml stage
COMBINED = {"probe": ("probe_features", "probe")}
OTHERS = ["homog", "data/homog.duckdb"]  # what a stage outside dvc.yaml reads


def stage_deps(stage: str, dvc_file: Path = ROOT / "dvc.yaml") -> list[str]:
    """The dvc.yaml deps of a stages.sh stage name, ``${key}`` filled in with its model."""
    name, _, model = stage.partition("@")
    stages = yaml.safe_load(dvc_file.read_text(encoding="utf-8"))["stages"]
    deps: list[str] = []
    for part in COMBINED.get(name, (name,)):
        if part not in stages:
            return list(OTHERS)
        spec = stages[part].get("do", stages[part])
        for dep in spec.get("deps", []):
            deps.append(str(dep).replace("${key}", model))
    return deps


def files_of(path: Path) -> list[Path]:
    """The files of ``path`` (itself, or those under it, sorted; caches left out)."""
    if path.is_file():
        return [path]
    if not path.exists():
        return []
    return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def deps_digest(deps: list[str], study: Path) -> str:
    """sha256 over every dep's files: relative name and bytes."""
    h = hashlib.sha256()
    for dep in deps:
        base = ROOT if dep.split("/", 1)[0] in CODE else study
        h.update(f"dep {dep}\n".encode())
        for f in files_of(base / dep):
            h.update(f"{f.relative_to(base)}\n".encode())
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()


def params_digest(params_file: Path) -> str:
    """sha256 of the study's params as homog resolves them (its defaults included)."""
    sys.path.insert(0, str(ROOT))
    from homog.config import load_config

    params = dataclasses.asdict(load_config(params_file))
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


def stage_key(stage: str, params_file: Path, study: Path) -> str:
    both = f"{deps_digest(stage_deps(stage), study)} {params_digest(params_file)}"
    return hashlib.sha256(both.encode()).hexdigest()[:16]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python stage_key.py STAGE PARAMS (in study/)")
    print(stage_key(sys.argv[1], Path(sys.argv[2]), Path.cwd()))
