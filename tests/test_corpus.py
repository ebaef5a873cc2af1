"""The corpus stage: every source, cleaning, filtering, balanced draws and bad input."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import IMDB_SAMPLE

from homog.cli import main
from homog.corpus.sources import DEMO_PATH, dataset_name, load_source
from homog.corpus.stage import (
    CORPUS_COLUMNS,
    build_corpus,
    clean_text,
    prepare_corpus,
)
from homog.errors import HomogError


def rows(n_pos: int, n_neg: int, words: int = 30) -> pd.DataFrame:
    texts = [" ".join(f"w{i}x{j}" for j in range(words)) for i in range(n_pos + n_neg)]
    labels = ["pos"] * n_pos + ["neg"] * n_neg
    return pd.DataFrame({"id": range(len(texts)), "text": texts, "label": labels})


def test_clean_text_removes_markup_and_normalises_space():
    raw = "Great film.<br /><br />Really &amp; truly  <i>great</i>.\n\tEnd &quot;x&quot;"
    assert clean_text(raw) == 'Great film. Really & truly great . End "x"'
    assert clean_text("   ") == ""


def test_demo_corpus_is_balanced_and_original():
    demo = [json.loads(line) for line in DEMO_PATH.read_text().splitlines()]
    assert len(demo) == 100
    assert sum(r["label"] == "pos" for r in demo) == 50
    assert {r["id"] for r in demo} == {f"demo-{i:03d}" for i in range(100)}
    lengths = [len(r["text"].split()) for r in demo]
    assert min(lengths) >= 40 and max(lengths) <= 120
    corpus, report = prepare_corpus(load_source("demo"), dataset="demo", n=100, seed=0)
    assert report.duplicates == 0 and len(corpus) == 100
    assert list(corpus.columns) == CORPUS_COLUMNS
    assert corpus["sample_id"].str.startswith("demo-").all()


def test_filters_count_every_dropped_row():
    raw = pd.concat(
        [
            rows(3, 3),
            pd.DataFrame(
                {
                    "id": [100, 101, 102, 103, 104, 105],
                    "text": [None, 42, "<br />  ", "too short", "long " * 500, None],
                    "label": ["pos"] * 6,
                }
            ),
        ],
        ignore_index=True,
    )
    raw.loc[len(raw)] = [106, raw.loc[0, "text"] + " <br />", "pos"]  # duplicate after cleaning
    corpus, rep = prepare_corpus(raw, dataset="x", n=6, seed=0, min_words=5, max_words=100)
    assert (rep.rows_in, rep.not_text, rep.empty, rep.duplicates) == (13, 3, 1, 1)
    assert (rep.too_short, rep.too_long, rep.eligible, rep.drawn) == (1, 1, 6, 6)
    assert rep.rows_in == (
        rep.not_text + rep.empty + rep.duplicates + rep.too_short + rep.too_long + rep.eligible
    )


def test_draw_is_balanced_seeded_and_order_independent():
    raw = rows(30, 20)
    a, rep = prepare_corpus(raw, dataset="x", n=11, seed=3)
    assert rep.drawn_by_label == {"neg": 6, "pos": 5}
    assert a["label"].value_counts().to_dict() == {"neg": 6, "pos": 5}
    b, _ = prepare_corpus(raw.sample(frac=1, random_state=1), dataset="x", n=11, seed=3)
    assert a["sample_id"].tolist() == b["sample_id"].tolist()
    c, _ = prepare_corpus(raw, dataset="x", n=11, seed=4)
    assert a["sample_id"].tolist() != c["sample_id"].tolist()


def test_sample_id_falls_back_to_text_hash_and_labels_optional():
    raw = rows(4, 4).drop(columns=["id"])
    corpus, _ = prepare_corpus(raw, dataset="x", n=4, seed=0, label_column=None)
    assert corpus["sample_id"].str.match(r"^t[0-9a-f]{12}$").all()
    assert set(corpus["label"]) == {"none"}


def test_fewer_texts_than_n_fails_with_counts():
    with pytest.raises(HomogError, match=r"fewer texts than corpus.n=10.*'pos': 3 eligible < 5"):
        prepare_corpus(rows(3, 20), dataset="x", n=10, seed=0)


def test_missing_columns_fail_clearly():
    with pytest.raises(HomogError, match="no text column 'review'.*corpus.text_column"):
        prepare_corpus(rows(2, 2), dataset="x", n=2, seed=0, text_column="review")
    with pytest.raises(HomogError, match="no label column 'sentiment'"):
        prepare_corpus(rows(2, 2), dataset="x", n=2, seed=0, label_column="sentiment")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "csv.gz"])
def test_file_sources(tmp_path, fmt):
    df = rows(5, 5).rename(columns={"text": "review"})
    df.loc[0, "review"] = "Fine.<br /><br />" + df.loc[0, "review"]
    path = tmp_path / f"reviews.{fmt}"
    if fmt.startswith("csv"):
        df.to_csv(path, index=False)
    elif fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path)
    raw = load_source(f"file:reviews.{fmt}", root=tmp_path)
    corpus, _ = prepare_corpus(
        raw, dataset=dataset_name(f"file:{path}"), n=10, seed=0, text_column="review"
    )
    assert len(corpus) == 10 and (corpus["dataset"] == "reviews").all()
    assert not corpus["text"].str.contains("<br").any()


def test_bad_files_fail_clearly(tmp_path):
    with pytest.raises(HomogError, match="not found"):
        load_source("file:nope.csv", root=tmp_path)
    (tmp_path / "bad.parquet").write_text("this is not parquet")
    with pytest.raises(HomogError, match="could not be parsed"):
        load_source("file:bad.parquet", root=tmp_path)
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n{oops')
    with pytest.raises(HomogError, match="bad.jsonl, line 2: not valid JSON"):
        load_source("file:bad.jsonl", root=tmp_path)
    (tmp_path / "x.xlsx").write_text("x")
    with pytest.raises(HomogError, match="unknown format"):
        load_source("file:x.xlsx", root=tmp_path)
    with pytest.raises(HomogError, match="unknown corpus source"):
        load_source("s3:bucket/x")


def test_hf_source_maps_class_labels(monkeypatch):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {"text": ["good film " * 12, "bad film " * 12], "label": [1, 0]},
        features=datasets.Features(
            {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
        ),
    )
    seen = {}

    def fake_load(name, split):
        seen.update(name=name, split=split)
        return ds

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    raw = load_source("hf:stanfordnlp/imdb", split="test")
    assert seen == {"name": "stanfordnlp/imdb", "split": "test"}
    assert raw["label"].tolist() == ["pos", "neg"]
    assert dataset_name("hf:stanfordnlp/imdb") == "imdb"


def test_hf_source_offline_names_alternatives(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def offline(name, split):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(HomogError, match=r"could not load .*file:.*demo"):
        load_source("hf:stanfordnlp/imdb")


def test_params_typos_and_wrong_types_are_refused(tmp_path):
    out = tmp_path / "corpus.parquet"
    with pytest.raises(HomogError, match="unknown key.*min_word"):
        build_corpus({"corpus": {"min_word": 5}}, out=out)
    with pytest.raises(HomogError, match="corpus.n: expected"):
        build_corpus({"corpus": {"n": "20"}}, out=out)
    assert not out.exists()


def test_cli_corpus_writes_parquet_and_fails_cleanly(tmp_path, write_params):
    out = tmp_path / "corpus.parquet"
    params = write_params(corpus={"n": 20})
    res = CliRunner().invoke(main, ["corpus", "--params", str(params), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "drew 20" in res.output
    corpus = pd.read_parquet(out)
    assert len(corpus) == 20 and corpus["label"].value_counts().to_dict() == {"neg": 10, "pos": 10}
    assert json.loads(out.with_suffix(".report.json").read_text())["drawn"] == 20
    params = write_params(corpus={"n": 1000})
    res = CliRunner().invoke(main, ["corpus", "--params", str(params), "--out", str(out)])
    assert res.exit_code == 1 and "fewer texts than corpus.n=1000" in res.output
    assert len(pd.read_parquet(out)) == 20  # the old output is untouched


@pytest.mark.skipif(not IMDB_SAMPLE.exists(), reason="no shared IMDB sample")
def test_imdb_sample_file_source():
    params = {
        "seed": 0,
        "corpus": {
            "source": f"file:{IMDB_SAMPLE}",
            "n": 40,
            "min_words": 20,
            "max_words": 400,
        },
    }
    raw = load_source(params["corpus"]["source"])
    corpus, rep = prepare_corpus(
        raw, dataset="imdb_sample", n=40, seed=0, min_words=20, max_words=400
    )
    assert rep.rows_in == 2000 and rep.too_long > 0
    assert corpus["label"].value_counts().to_dict() == {"neg": 20, "pos": 20}
    assert not corpus["text"].str.contains("<br").any()
    assert corpus["text"].map(lambda t: 20 <= len(t.split()) <= 400).all()


def test_empty_latin1_and_bad_line_files_are_named(tmp_path):
    """Issue 16: a 0-byte file says it is empty (not "no text column; columns: []"), a
    latin-1 CSV and a bad JSONL line name the line."""
    for name in ("empty.csv", "empty.jsonl", "empty.parquet"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(HomogError, match=rf"{name} is empty \(0 bytes\)"):
            load_source(f"file:{name}", root=tmp_path)
    (tmp_path / "header.csv").write_text("text,label\n")
    assert load_source("file:header.csv", root=tmp_path).empty
    (tmp_path / "latin.csv").write_bytes(
        "text,label\nfine,pos\ncaf\u00e9 au lait,neg\n".encode("latin-1")
    )
    with pytest.raises(HomogError, match=r"latin.csv, line 3: not UTF-8.*iconv"):
        load_source("file:latin.csv", root=tmp_path)
    (tmp_path / "lines.jsonl").write_text('{"text": "a"}\n\n{"text": "b"}\n{"text": "c",}\n')
    with pytest.raises(HomogError, match=r"lines.jsonl, line 4: not valid JSON"):
        load_source("file:lines.jsonl", root=tmp_path)
    (tmp_path / "list.jsonl").write_text('{"text": "a"}\n[1, 2]\n')
    with pytest.raises(HomogError, match=r"list.jsonl, line 2: expected a JSON object"):
        load_source("file:list.jsonl", root=tmp_path)


def test_cli_corpus_to_unwritable_path_is_a_clear_error(tmp_path, write_params):
    afile = tmp_path / "afile"
    afile.write_text("x")
    params = write_params(corpus={"n": 20})
    for out, needle in (
        (afile / "c.parquet", "is a file"),
        ("/proc/homog/c.parquet", "cannot write"),
    ):
        res = CliRunner().invoke(main, ["corpus", "--params", str(params), "--out", str(out)])
        assert res.exit_code == 1 and res.output.startswith("Error:"), res.output
        assert needle in res.output and "Traceback" not in res.output
