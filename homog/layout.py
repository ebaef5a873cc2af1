"""Where every stage reads and writes under ``data/``: the one place for pipeline paths.

``Layout(root)`` names each stage's outputs relative to the project directory ``root``;
``find_runs`` lists the extracted runs (``run.json`` + the run's directory) of the models a
params file names; ``default_db`` is the database readers open when none is given.
dvc.yaml names the same paths (``tests/test_layout.py`` checks that they agree).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homog.errors import HomogError

DEFAULT_DB = Path("data/homog.duckdb")


def safe_name(key: str) -> str:
    """A model key or source as one directory name (``hf:org/x`` -> ``hf_org_x``); HomogError
    for a key that would name no folder or the one above (``""``, ``.``, ``..``)."""
    name = key.replace(":", "_").replace("/", "_").replace("\\", "_")
    if name in ("", ".", ".."):
        raise HomogError(f"model key {key!r} is not a name: use a key of params.yaml `models:`")
    return name


@dataclass(frozen=True)
class Layout:
    """The ``data/`` tree of a project rooted at ``root``."""

    root: Path = Path(".")

    @property
    def data(self) -> Path:
        return Path(self.root) / "data"

    # corpus and synth
    @property
    def demo_corpus(self) -> Path:
        return self.data / "demo" / "reviews.jsonl"

    @property
    def corpus(self) -> Path:
        return self.data / "corpus" / "corpus.parquet"

    @property
    def synth_dir(self) -> Path:
        return self.data / "synth"

    @property
    def texts(self) -> Path:
        return self.synth_dir / "texts.parquet"

    @property
    def synth_report(self) -> Path:
        return self.synth_dir / "report.json"

    # per model
    def extract_dir(self, model: str) -> Path:
        """``data/extract/<model>``: one subdirectory per intervention."""
        return self.data / "extract" / safe_name(model)

    def run_dir(self, model: str, intervention: str) -> Path:
        return self.extract_dir(model) / intervention

    def run_pooled(self, model: str, intervention: str) -> Path:
        """The run's mean-pooled vectors of every text (``pooled_mean.npy``), which the probe's
        features step reuses (homog.probe.pooled.from_extraction)."""
        return self.run_dir(model, intervention) / "pooled_mean.npy"

    def mauve(self, model: str) -> Path:
        return self.data / "mauve" / f"{safe_name(model)}.parquet"

    # stats
    @property
    def stats_dir(self) -> Path:
        return self.data / "stats"

    @property
    def contrasts(self) -> Path:
        return self.stats_dir / "contrasts.parquet"

    @property
    def dose_response(self) -> Path:
        return self.stats_dir / "dose_response.parquet"

    @property
    def separability(self) -> Path:
        return self.stats_dir / "separability.parquet"

    @property
    def intervention_doses(self) -> Path:
        return self.stats_dir / "intervention_doses.parquet"

    @property
    def intervention_cost(self) -> Path:
        return self.stats_dir / "intervention_cost.parquet"

    @property
    def sentence_contrasts(self) -> Path:
        return self.stats_dir / "sentence_contrasts.parquet"

    # the positional-encoding lab
    def posenc_dir(self, pe: str) -> Path:
        return self.data / "posenc" / pe

    def pretrained_decomposition(self, model: str) -> Path:
        """``homog posenc decompose --model KEY``'s output."""
        return (
            self.data / "posenc" / "pretrained" / safe_name(model) / "logit_decomposition.parquet"
        )

    # the probe stage (homog probe --model KEY: homog.probe)
    def probe_dir(self, model: str) -> Path:
        """``data/probe/<model>``: the probe and zero-shot outputs of one model (the fit step),
        the pooled vectors and zero-shot log-odds in its ``features`` folder."""
        return self.data / "probe" / safe_name(model)

    def probe_features(self, model: str) -> Path:
        """``data/probe/<model>/features``: the forward passes' outputs (probe_features@)."""
        return self.probe_dir(model) / "features"

    def pooled_vectors(self, model: str, intervention: str) -> Path:
        return self.probe_features(model) / f"pooled_{intervention}.npy"

    def probe_metrics(self, model: str) -> Path:
        return self.probe_dir(model) / "probe_metrics.parquet"

    def probe_texts(self, model: str) -> Path:
        return self.probe_dir(model) / "probe_texts.parquet"

    def lm_sentiment(self, model: str) -> Path:
        return self.probe_dir(model) / "lm_sentiment.parquet"

    def db(self, name: str | os.PathLike[str] | None = None) -> Path:
        """The DuckDB file: ``name`` (params ``db:``) relative to the root, else the default."""
        return Path(self.root) / Path(name or DEFAULT_DB)


def default_db(params_path: str | os.PathLike[str] = "params.yaml") -> Path:
    """The database readers open by default: ``db:`` of the params file, else DEFAULT_DB.

    Only that one key is read, and a missing or unreadable params file falls back to
    DEFAULT_DB: a viewer must still open when params.yaml is broken or absent.
    """
    # lazy: homog.config (and YAML) stay out of `from homog.store import connect`, the
    # terminal UI's first paint (tests/test_store.py)
    from homog.config import read_yaml

    try:
        db = read_yaml(params_path).get("db")
    except HomogError:
        return DEFAULT_DB
    return Path(db) if isinstance(db, str) and db else DEFAULT_DB


def writable_dir(directory: str | os.PathLike[str], what: str = "output") -> Path:
    """``directory``, created when missing, after checking that a file can be made in it.

    Raises HomogError naming the directory (and the file in the way, when a parent is a file)
    instead of a FileNotFoundError/FileExistsError/PermissionError traceback, and before any
    work or any wait on a lock.
    """
    d = Path(directory)
    for parent in (d, *d.parents):
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise HomogError(
                    f"cannot write the {what} under {d}: {parent} is a file, not a directory"
                )
            break
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".homog-write-check.", dir=d)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise HomogError(
            f"cannot write the {what} in {d}: {exc.strerror or exc}; choose a writable path"
        ) from exc
    return d


def read_run_json(path: Path) -> dict[str, Any]:
    """A run.json dict; HomogError when unreadable or without a run_id."""
    try:
        run = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HomogError(f"cannot read {path}: {exc}; rerun `dvc repro`") from exc
    if not isinstance(run, dict) or "run_id" not in run:
        raise HomogError(f"{path} has no run_id; rerun `homog extract` for its model")
    return run


def find_runs(
    models: Iterable[str],
    root: str | os.PathLike[str] = ".",
    *,
    interventions: Iterable[str] | None = None,
) -> list[tuple[dict[str, Any], Path]]:
    """(run.json dict, run directory) of every finished run of the given model keys.

    A run is finished when its directory holds a run.json (written last, after every other
    output). ``interventions`` (params ``extract.interventions``) keeps only those
    intervention directories: an old directory of an intervention the params no longer name
    is not read (None: all). Runs are ordered by model (as given), then intervention
    directory name. Each dict gets ``model`` set to its key when run.json lacks it. Raises
    HomogError for an unreadable run.json.
    """
    layout = Layout(Path(root))
    wanted = None if interventions is None else {str(i) for i in interventions}
    runs = []
    for key in models:
        for run_json in sorted(layout.extract_dir(str(key)).glob("*/run.json")):
            if wanted is not None and run_json.parent.name not in wanted:
                continue
            run = read_run_json(run_json)
            run.setdefault("model", str(key))
            runs.append((run, run_json.parent))
    return runs
