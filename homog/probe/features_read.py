"""The probe's features folder read back (``homog.probe.features`` writes it), each file
checked against ``features.json``: a missing, damaged or foreign file is a HomogError naming
it and the step that writes it again, never a traceback, and never a silent mix of two runs
(a pooled file of another dtype, shape or size than the record says).

The checks read the .npy headers (memory-mapped), the two small tables and the record, so
``features_damage`` is cheap enough to run before every reuse (``homog probe --step all``
recomputes damaged features instead of failing in the fit).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from homog.errors import HomogError
from homog.io import read_output
from homog.probe.pooled import VECTOR_DTYPES

INDEX_COLUMNS = ["intervention", "row", "variant", "sample_id", "label", "n_tokens", "truncated"]
ZERO_SHOT_COLUMNS = ["intervention", "variant", "sample_id", "label", "log_odds"]
ZERO_SHOT_COLUMNS += ["n_prompt_tokens", "truncated"]
_RECORD_KEYS = ("interventions", "vector_dtype", "n_layers", "d_model", "n_texts")


def rerun(model: str) -> str:
    """What to do about damaged features: the command that writes them again."""
    return (
        f"rerun `homog probe --model {model} --step features` (or `--step all`, which "
        "recomputes damaged features)"
    )


def _record(out: Path, model: str) -> dict[str, Any]:
    path = out / "features.json"
    if not path.exists():
        raise HomogError(
            f"{path} not found: run `homog probe --model {model} --step features` first"
        )

    def read(p: Path) -> dict[str, Any]:
        record = json.loads(p.read_text())
        if not isinstance(record, dict) or any(k not in record for k in _RECORD_KEYS):
            raise ValueError(f"not a features record (needs {', '.join(_RECORD_KEYS)})")
        return record

    return read_output(path, read, rerun(model))


def _table(path: Path, columns: list[str], model: str) -> Any:
    if not path.exists():
        raise HomogError(f"{path} not found: the features folder is incomplete; {rerun(model)}")

    def read(p: Path) -> Any:
        frame = pd.read_parquet(p)
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"no column {', '.join(missing)}")
        return frame

    return read_output(path, read, rerun(model))


def _same_size(path: Path, expected: Any, model: str) -> None:
    """HomogError when ``path`` is not the size the record gave it (another run's file)."""
    size = path.stat().st_size
    if expected is not None and size != expected:
        raise HomogError(
            f"{path} is {size} bytes where its features.json says {expected}: the folder mixes "
            f"files of two runs (an interrupted write?); {rerun(model)}"
        )


def _mapped(path: Path) -> Any:
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _vectors(out: Path, iv: str, record: dict[str, Any], n_rows: int, model: str) -> Any:
    """The memory-mapped pooled vectors of ``iv``, checked against the record and index."""
    path = out / f"pooled_{iv}.npy"
    if not path.exists():
        raise HomogError(f"{path} not found: the features folder is incomplete; {rerun(model)}")
    vectors = read_output(path, _mapped, rerun(model))
    want_dtype = VECTOR_DTYPES.get(record["vector_dtype"])
    shape = (record["n_texts"].get(iv), record["n_layers"] + 1, record["d_model"])
    if vectors.dtype != want_dtype or vectors.shape != shape or len(vectors) != n_rows:
        raise HomogError(
            f"{path} holds {vectors.dtype} vectors of shape {vectors.shape} where its "
            f"features.json says {record['vector_dtype']} {shape} and index.parquet {n_rows} "
            f"texts: the folder mixes files of two runs (an interrupted write?); {rerun(model)}"
        )
    _same_size(path, record.get("pooled_bytes", {}).get(iv), model)
    return vectors


def read_features(out_dir: str | Path, model: str = "KEY", *, load: bool = True) -> dict[str, Any]:
    """What ``run_features`` wrote: ``record`` (features.json), ``pooled`` (intervention ->
    vectors, variant, sample_id, label, n_tokens, truncated, in the record's order) and
    ``zero_shot`` (the frame, or None when the features have none). ``load=False`` checks
    every file but leaves the vectors memory-mapped. HomogError naming the file for anything
    missing, damaged or not of the record's run; ``model`` goes into its advice."""
    out = Path(out_dir)
    record = _record(out, model)
    sizes = record.get("table_bytes", {})
    index = _table(out / "index.parquet", INDEX_COLUMNS, model)
    _same_size(out / "index.parquet", sizes.get("index"), model)
    pooled = {}
    for iv in record["interventions"]:
        rows = index[index["intervention"] == iv].sort_values("row")
        vectors = _vectors(out, iv, record, len(rows), model)
        columns = {c: rows[c].to_numpy() for c in INDEX_COLUMNS[2:]}
        pooled[iv] = {"vectors": np.array(vectors) if load else vectors, **columns}
    zero = None
    if "zero_shot" in sizes:
        zero = _table(out / "zero_shot.parquet", ZERO_SHOT_COLUMNS, model)
        _same_size(out / "zero_shot.parquet", sizes["zero_shot"], model)
    return {"record": record, "pooled": pooled, "zero_shot": zero}


def features_damage(out_dir: str | Path) -> str | None:
    """Why the features in ``out_dir`` cannot be used (the HomogError's message), or None
    when they read back whole (or there are none: nothing to reuse)."""
    if not (Path(out_dir) / "features.json").exists():
        return None
    try:
        read_features(out_dir, load=False)
    except HomogError as exc:
        return str(exc)
    return None
