"""The probe's features folder is whole or refused: a damaged file (corrupt features.json,
missing index.parquet, truncated .npy, garbage zero_shot.parquet) is a HomogError naming it
for `--step fit` and is recomputed by `--step all`; an interrupted features step leaves the
previous folder as it was; a folder that mixes two runs' files is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY
from test_probe import labelled_texts

from homog.config import parse_params
from homog.errors import HomogError
from homog.probe import features as probe_features
from homog.probe.features import read_features, run_features
from homog.probe.stage import run_fit, run_probe

RAW = {
    "models": {"tiny": {"source": TINY}},
    "extract": {"device": "cpu", "max_tokens": 32},
    "stats": {"n_boot": 50, "n_perm": 100},
    "probe": {"folds": 2},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A probe output folder whose features the tiny model wrote (copy it before damage)."""
    out = tmp_path_factory.mktemp("probe") / "tiny"
    params = parse_params(RAW)
    run_features(params, "tiny", TINY, labelled_texts(), out / "features", show_progress=False)
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGES = {
    "features.json": lambda p: p.write_text('{"interventions": ["none", '),
    "index.parquet": lambda p: p.unlink(),
    "pooled_none.npy": truncate,
    "zero_shot.parquet": lambda p: p.write_bytes(b"PAR1 this is not parquet " * 40),
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_fit_names_a_damaged_file_and_all_recomputes_it(tmp_path, built, name, capsys):
    out = tmp_path / "tiny"
    shutil.copytree(built, out)
    DAMAGES[name](out / "features" / name)
    params, df = parse_params(RAW), labelled_texts()
    with pytest.raises(HomogError) as err:
        run_probe(params, "tiny", TINY, df, out, root=tmp_path, step="fit")
    msg = str(err.value)
    assert name in msg and "--model tiny --step features" in msg and "--step all" in msg, msg
    record = run_probe(params, "tiny", TINY, df, out, root=tmp_path, show_progress=True)
    assert "recomputing the features" in capsys.readouterr().err
    assert record["forward_passes"] == 96 and (out / "probe_metrics.parquet").is_file()
    assert snapshot(out / "features").keys() == snapshot(built / "features").keys()
    again, first = read_features(out / "features"), read_features(built / "features")
    assert np.array_equal(again["pooled"]["none"]["vectors"], first["pooled"]["none"]["vectors"])


def test_an_interrupted_features_step_leaves_the_previous_folder(tmp_path, built, monkeypatch):
    out = tmp_path / "tiny"
    shutil.copytree(built, out)
    before = snapshot(out / "features")
    other = parse_params({**RAW, "probe": {"folds": 2, "vector_dtype": "float32"}})

    def interrupt(*args, **kwargs):  # Ctrl-C after the first new pooled file is written
        raise KeyboardInterrupt

    monkeypatch.setattr(probe_features, "_write_tables", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_probe(other, "tiny", TINY, labelled_texts(), out, step="features", show_progress=False)
    assert snapshot(out / "features") == before
    assert sorted(p.name for p in out.iterdir()) == ["features"]  # no temporary folder left
    record, _ = run_fit(parse_params(RAW), "tiny", out, root=tmp_path)
    assert record["vector_dtype"] == "float16"


def test_a_folder_mixing_two_runs_is_refused(tmp_path, built):
    """New float32 pooled_none.npy beside the old float16 zero_pos and features.json: what
    an interrupted in-place rewrite left."""
    out = tmp_path / "tiny"
    shutil.copytree(built, out)
    path = out / "features" / "pooled_none.npy"
    np.save(path, np.load(path).astype(np.float32))
    with pytest.raises(HomogError, match=r"pooled_none.npy holds float32 .* mixes files of two"):
        run_probe(parse_params(RAW), "tiny", TINY, None, out, root=tmp_path, step="fit")


def test_slopes_come_only_from_an_extraction_of_the_features_texts(tmp_path, capsys):
    """`homog probe --texts OTHER --out DIR` beside the project's extraction: the same sample
    ids, other texts; the project's erank must not give OTHER's slopes."""
    import pandas as pd

    from homog.extract import run_extract
    from homog.layout import Layout

    params, df = parse_params(RAW), labelled_texts()
    ivs, where = params.extract.interventions, Layout(tmp_path).extract_dir("tiny")
    run_extract("tiny", TINY, df, params.extract, ivs, where, show_progress=False, log=print)
    other = df.assign(text=df["text"].str.replace("Film", "Movie"))
    slopes, skipped = {}, {}
    for name, texts in (("other", other), ("own", df)):
        out = tmp_path / name
        record = run_probe(params, "tiny", TINY, texts, out, root=tmp_path, show_progress=False)
        metrics = pd.read_parquet(out / "probe_metrics.parquet")
        slopes[name] = (metrics["kind"] == "slope").sum()
        skipped[name] = record.get("slopes_skipped")
    assert slopes["other"] == 0 and set(skipped["other"]) == {"none", "zero_pos"}
    assert slopes["own"] > 0 and skipped["own"] == {}
    err = capsys.readouterr().err
    assert "no cost slopes from tiny/none" in err and "other texts" in err
