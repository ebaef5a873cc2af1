"""The corpus stage's sources (``corpus.source`` in params.yaml) read into raw rows
(``load_source``): the demo reviews, a HuggingFace dataset, or a CSV, TSV, JSONL/JSON or Parquet
file (optionally ``.gz``); ``dataset_name`` names a source. The stage itself is
``homog.corpus.stage``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from homog.config import CorpusConfig
from homog.errors import HomogError
from homog.layout import Layout

# The demo reviews ship with the project: found beside the package, whatever the cwd.
DEMO_PATH = Layout(Path(__file__).resolve().parents[2]).demo_corpus


def dataset_name(source: str) -> str:
    """A short dataset name for a source: demo, the last part of a HF id, or a file's stem."""
    kind, _, rest = source.partition(":")
    if kind == "demo":
        return "demo"
    if kind == "hf":
        return rest.rstrip("/").split("/")[-1]
    if kind == "file":
        name = Path(rest).name
        for suffix in (".gz", ".parquet", ".jsonl", ".json", ".csv", ".tsv"):
            name = name.removesuffix(suffix)
        return name
    raise HomogError(f"unknown corpus source {source!r}: use demo, hf:<dataset id> or file:<path>")


def _open_text(path: Path):
    import gzip

    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _check_utf8(path: Path) -> None:
    """HomogError naming the first line that is not UTF-8 (a latin-1 CSV, say)."""
    import gzip

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HomogError(
                    f"corpus file {path}, line {lineno}: not UTF-8 text ({exc.reason} at byte "
                    f"{exc.start} of the line); convert the file to UTF-8, e.g. "
                    f"`iconv -f latin1 -t utf-8 {path.name} > new.{path.name}`"
                ) from exc


def _read_jsonl(path: Path) -> pd.DataFrame:
    """One JSON object per line; HomogError naming the first bad line."""
    import json

    records = []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HomogError(
                    f"corpus file {path}, line {lineno}: not valid JSON ({exc.msg} at column "
                    f"{exc.colno}); fix or remove that line"
                ) from exc
            if not isinstance(obj, dict):
                raise HomogError(
                    f"corpus file {path}, line {lineno}: expected a JSON object per line, got "
                    f"{type(obj).__name__}"
                )
            records.append(obj)
    return pd.DataFrame.from_records(records)


def _read_file(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise HomogError(f"corpus file {path} not found (corpus.source file:{path})")
    if path.is_dir():
        raise HomogError(f"corpus file {path} is a directory; corpus.source file: takes a file")
    if path.stat().st_size == 0:
        raise HomogError(f"corpus file {path} is empty (0 bytes): nothing to draw texts from")
    name = path.name.lower().removesuffix(".gz")
    try:
        if name.endswith(".parquet"):
            df = pd.read_parquet(path)
        elif name.endswith(".jsonl"):
            _check_utf8(path)
            df = _read_jsonl(path)
        elif name.endswith(".json"):
            _check_utf8(path)
            df = pd.read_json(path, dtype=False)
        elif name.endswith((".csv", ".tsv")):
            _check_utf8(path)
            df = pd.read_csv(
                path, sep="\t" if name.endswith(".tsv") else ",", dtype=object, encoding="utf-8"
            )
        else:
            raise HomogError(
                f"corpus file {path}: unknown format; use .csv, .tsv, .jsonl, .json or .parquet "
                "(optionally .gz)"
            )
    except HomogError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise HomogError(f"corpus file {path} holds no rows or columns (empty)") from exc
    except Exception as exc:  # each reader raises its own exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HomogError(f"corpus file {path} could not be parsed: {first}") from exc
    if df.empty and len(df.columns) == 0:
        raise HomogError(f"corpus file {path} holds no rows or columns (empty)")
    return df


def _read_hf(dataset_id: str, split: str) -> pd.DataFrame:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a dependency
        raise HomogError("corpus.source hf:... needs the 'datasets' package") from exc
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as exc:  # offline, unknown id, unknown split: all end the same way
        raise HomogError(
            f"could not load HuggingFace dataset {dataset_id!r} (split {split!r}): {exc}. "
            "Without network access use corpus.source: file:<path> (CSV, JSONL or Parquet "
            "with a text column, e.g. file:../shared/data/imdb/imdb_sample.jsonl) or "
            "corpus.source: demo"
        ) from exc
    df = ds.to_pandas()
    # Integer ClassLabels (IMDB: 0/1) become their names (neg/pos).
    for name, feature in ds.features.items():
        if hasattr(feature, "int2str") and name in df.columns:
            df[name] = [feature.int2str(int(v)) if pd.notna(v) else v for v in df[name]]
    return df


def load_source(
    source: str, *, split: str = CorpusConfig.split, root: Path | None = None
) -> pd.DataFrame:
    """Read a source into a DataFrame of raw rows (columns as the source has them).

    ``file:`` paths are relative to ``root`` (default: the working directory). Raises
    HomogError for an unknown source kind, a missing or unparsable file, or a dataset that
    cannot be loaded (the message names ``file:`` and ``demo`` as offline alternatives).
    """
    kind, _, rest = source.partition(":")
    if kind == "demo":
        return _read_file(DEMO_PATH)
    if kind == "hf":
        if not rest:
            raise HomogError("corpus.source hf: needs a dataset id, e.g. hf:stanfordnlp/imdb")
        return _read_hf(rest, split)
    if kind == "file":
        try:
            path = Path(rest).expanduser()
        except RuntimeError as exc:  # file:~nouser/...: no such user, or no home directory
            raise HomogError(
                f"corpus.source {source!r}: cannot expand {rest.split('/')[0]!r} (no such user "
                "or home directory); give the file's full path"
            ) from exc
        if not path.is_absolute() and root is not None:
            path = root / path
        return _read_file(path)
    raise HomogError(f"unknown corpus source {source!r}: use demo, hf:<dataset id> or file:<path>")
