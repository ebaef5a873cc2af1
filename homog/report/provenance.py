"""Where the report's numbers come from: corpus, synth params, models, code (git commit and
dirty flag), dvc.lock hashes, package versions. What cannot be found is named, not guessed.

``gather`` does the I/O (git, dvc.lock, the corpus report, the runs' config_json); the
section builders are pure.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from homog import __version__
from homog.report.document import Section, Table

# synth report keys that quote the corpus's sentences (a bundle publishes no words of it)
SYNTH_WORDS = ("examples",)

RUN_COLUMNS = [
    "model",
    "model_source",
    "intervention",
    "run_id",
    "n_texts",
    "n_truncated",
    "dtype",
    "device",
    "n_layers",
    "homog_version",
    "created_at",
]


@dataclass
class Provenance:
    """What the report could find about its inputs (None: not found; see ``missing``)."""

    db: Path
    command: str
    git_commit: str | None = None
    git_dirty: bool | None = None
    dvc_lock: list[list[str]] = field(default_factory=list)  # stage, path, md5
    corpus: dict[str, Any] = field(default_factory=dict)
    synth_params: dict[str, Any] = field(default_factory=dict)
    extract_params: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    margins: str = ""  # the margin setting and every pinned SESOI (stats.sesoi_pin)


def shown(path: Path | str) -> str:
    """A path as the report shows it: relative to the current directory when inside it (a
    page committed to a repository must not carry one machine's absolute paths)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix() or "."
    except ValueError:
        return str(path)


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def dvc_lock_hashes(path: Path) -> list[list[str]]:
    """(stage, output path, md5) of every output in a dvc.lock file."""
    lock = yaml.safe_load(path.read_text()) or {}
    rows = []
    for stage, spec in (lock.get("stages") or {}).items():
        for out in (spec or {}).get("outs") or []:
            rows.append([str(stage), str(out.get("path")), str(out.get("md5", "n/a"))])
    return rows


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys ({"a": {"b": 1}} -> {"a.b": 1}); lists stay values."""
    if is_dataclass(obj) and not isinstance(obj, type):
        obj = asdict(obj)
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list | tuple):
        return {prefix: ", ".join(map(str, obj))}
    return {prefix: obj}


def project_record(root: Path) -> dict[str, Any]:
    """What the project at ``root`` says of where its numbers come from: the git commit and
    dirty flag, the dvc.lock hashes, the corpus report's scalars, and what was not found
    (``missing``). JSON-ready: ``homog publish`` keeps it in the bundle, with
    :func:`synth_record`'s synth report, so a report from the bundle shows the study's
    provenance, not the reader's."""
    record: dict[str, Any] = {"git_commit": None, "git_dirty": None, "dvc_lock": [], "corpus": {}}
    missing: list[str] = []
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        missing.append(f"git commit ({shown(root)} is not a git checkout, or git is absent)")
    else:
        record["git_commit"] = commit
        record["git_dirty"] = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    lock = root / "dvc.lock"
    if lock.exists():
        try:
            record["dvc_lock"] = dvc_lock_hashes(lock)
        except (yaml.YAMLError, AttributeError) as exc:
            missing.append(f"dvc.lock hashes ({shown(lock)} unreadable: {exc})")
    else:
        missing.append(f"dvc.lock ({shown(lock)} not found: the pipeline was not run with dvc)")
    corpus_report = root / "data" / "corpus" / "corpus.report.json"
    if corpus_report.exists():
        try:
            cr = json.loads(corpus_report.read_text())
            record["corpus"] = {k: v for k, v in cr.items() if not isinstance(v, dict | list)}
        except json.JSONDecodeError:
            missing.append(f"corpus report ({shown(corpus_report)} is not valid JSON)")
    record["missing"] = missing
    return record


def synth_not_found(synth_path: Path | None) -> str:
    where = shown(synth_path) if synth_path is not None else "data/synth/report.json"
    return f"synth report ({where} not found)"


def synth_record(synth_path: Path | None) -> tuple[dict[str, Any] | None, list[str]]:
    """(the synth report at ``synth_path`` without the keys that quote the corpus, or None;
    what was not found): what a bundle publishes of it."""
    if synth_path is None or not synth_path.exists():
        return None, [synth_not_found(synth_path)]
    try:
        synth = json.loads(synth_path.read_text())
    except json.JSONDecodeError:
        return None, [f"synth report ({shown(synth_path)} is not valid JSON)"]
    # the rewrite examples quote the corpus: its words are not ours to publish
    return {k: v for k, v in synth.items() if k not in SYNTH_WORDS}, []


def gather(
    runs: pd.DataFrame,
    db: Path,
    command: str,
    *,
    root: Path,
    params: Any | None,
    params_name: str,
    synth: dict[str, Any] | None,
    synth_path: Path | None,
    n_original_texts: int | None,
    recorded: dict[str, Any] | None = None,
) -> Provenance:
    """Collect the provenance; every input not found is named in ``missing``. ``recorded``
    (a bundle's :func:`project_record` with its synth report) stands for the project at
    ``root`` and ``synth``: the provenance of the numbers is where they were made."""
    prov = Provenance(db=db, command=command)
    if recorded is None:
        recorded = project_record(root)
        recorded["missing"] += [] if synth is not None else [synth_not_found(synth_path)]
    else:
        synth = recorded.get("synth")
    prov.git_commit, prov.git_dirty = recorded.get("git_commit"), recorded.get("git_dirty")
    prov.dvc_lock = [list(r) for r in recorded.get("dvc_lock") or []]
    missing = list(recorded.get("missing") or [])
    prov.missing += [m for m in missing if not m.startswith(("corpus report", "synth report"))]
    if params is None:
        prov.missing.append(
            f"params ({params_name} not found: alpha, bootstrap and test settings are the "
            "defaults of homog/config; corpus and synth params unknown)"
        )
    else:
        prov.corpus.update(
            {
                "source": params.corpus.source,
                "n (requested)": params.corpus.n,
                "max_words": params.corpus.max_words,
            }
        )
        prov.synth_params = flatten(params.synth)
        prov.margins = margin_words(params.stats)
    prov.corpus.update(recorded.get("corpus") or {})
    prov.missing += [m for m in missing if m.startswith(("corpus report", "synth report"))]
    if n_original_texts is not None:
        prov.corpus["texts in the database (original variant)"] = n_original_texts
    if synth is not None:
        for k in ("rephraser", "extractor", "backbone", "threshold", "fluency_threshold"):
            if k in synth:
                prov.synth_params.setdefault(f"report: {k}", synth[k])
        prov.timings = {k: v for k, v in (synth.get("timings") or {}).items()}
    for cj in runs.get("config_json", pd.Series(dtype=str)).dropna():
        try:
            conf = json.loads(cj)
        except json.JSONDecodeError:
            continue
        prov.versions.update(conf.get("versions") or {})
        prov.extract_params = prov.extract_params or conf.get("extract") or {}
    return prov


def margin_words(stats: Any) -> str:
    """'stats.sesoi 0.1 x sd; pinned: mev late 0.005, ...' (the margins every verdict reads)."""
    pins = [
        f"{m} {scope} {v:g}"
        for m, scopes in sorted(stats.sesoi_pin.items())
        for scope, v in scopes.items()
    ]
    return (
        f"stats.sesoi {stats.sesoi:g} x basis {stats.sesoi_basis}; pinned margins "
        f"(stats.sesoi_pin): {', '.join(pins) if pins else 'none'}"
    )


def provenance_sections(prov: Provenance, runs: pd.DataFrame) -> list[Section]:
    """A visible summary (code, corpus, models, what is missing) and a collapsed detail
    section (synth and extract params, versions, dvc.lock hashes, synth timings)."""
    commit = (
        f"{prov.git_commit}{' (uncommitted changes)' if prov.git_dirty else ' (clean)'}"
        if prov.git_commit
        else "n/a"
    )
    sec = Section("Provenance")
    sec.paragraphs.append(
        f"Database: {shown(prov.db)}. homog {__version__}. Git commit: {commit}. "
        f"Corpus: {', '.join(f'{k} {v}' for k, v in prov.corpus.items()) or 'n/a'}."
    )
    if prov.margins:
        sec.paragraphs.append(f"Margins (SESOI): {prov.margins}.")
    sec.paragraphs.append(f"Rebuild this report with `{prov.command}`.")
    if prov.missing:
        sec.paragraphs.append("Not found, so not reported: " + "; ".join(prov.missing) + ".")
    if not runs.empty:
        have = [c for c in RUN_COLUMNS if c in runs.columns]
        sec.tables.append(Table(have, runs[have].astype(str).values.tolist(), "runs (models)"))
    details = Section("Provenance details", collapsed=True)
    if prov.synth_params:
        details.tables.append(
            Table(
                ["synth param", "value"],
                [[k, str(v)] for k, v in prov.synth_params.items()],
                "synth params",
            )
        )
    if prov.extract_params:
        rows = [[k, str(v)] for k, v in sorted(flatten(prov.extract_params).items())]
        details.tables.append(Table(["extract param", "value"], rows, "extraction params"))
    if prov.versions:
        rows = [[k, str(v)] for k, v in sorted(prov.versions.items())]
        details.tables.append(Table(["package", "version"], rows, "versions"))
    if prov.dvc_lock:
        details.tables.append(Table(["stage", "output", "md5"], prov.dvc_lock, "dvc.lock"))
    if prov.timings:
        rows = [[k, v] for k, v in prov.timings.items()]
        details.tables.append(Table(["synth phase", "wall s"], rows, "synth timings"))
    return [sec, details] if details.tables else [sec]
