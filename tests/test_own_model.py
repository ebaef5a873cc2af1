"""Your own model on the command line (issue 30, item 5): it reaches the database or the
command says how to add it.

`homog extract --model SOURCE` with a source that is not a key of params.yaml `models:` used to
write data/extract/<source>/, which stats, load and the report never read. It now stops with
the `models:` entry to add; following that message takes the model to the database and the
report.
"""

from __future__ import annotations

import re

import duckdb
import pytest
import yaml
from click.testing import CliRunner
from test_docs import ROOT, sql_queries
from test_extract import make_texts

from homog import store as q
from homog.cli import main
from homog.layout import Layout


@pytest.fixture
def project(tmp_path, monkeypatch, write_params):
    """A project directory (the cwd) with params.yaml and a small texts table."""
    monkeypatch.chdir(tmp_path)
    write_params(
        extract={
            "device": "cpu",
            "interventions": ["none"],
            "max_tokens": 32,
            "sample_tokens": 16,
            "pooled_texts": 4,
        },
        stats={"n_boot": 50, "n_perm": 50},
    )
    texts = Layout().texts
    texts.parent.mkdir(parents=True)
    make_texts(4, variants=("original", "front", "end", "control")).to_parquet(texts)
    return tmp_path


def homog(*args: str):
    return CliRunner().invoke(main, list(args))


def test_source_not_a_key_stops_and_says_how_to_add_it(project):
    res = homog("extract", "--model", "random:tiny-llama", "--no-progress")
    assert res.exit_code == 1, res.output
    assert "random:tiny-llama is not a key of params.yaml `models:`" in res.output
    assert "tiny-llama: {source: random:tiny-llama}" in res.output
    assert "homog extract --model tiny-llama" in res.output and "--out DIR" in res.output
    assert not (project / "data" / "extract").exists()  # nothing written that no one reads


def test_source_of_a_key_names_the_key(project):
    res = homog("extract", "--model", "embedded:smollm2-135m", "--no-progress")
    assert res.exit_code == 1
    assert "use --model smollm2-135m" in res.output


def test_hf_source_gets_a_key_from_its_name(project):
    res = homog("extract", "--model", "hf:EleutherAI/pythia-160m@step1000")
    assert res.exit_code == 1
    assert "pythia-160m-step1000: {source: hf:EleutherAI/pythia-160m@step1000}" in res.output


def test_following_the_message_reaches_database_and_report(project, demo_db_factory):
    msg = homog("extract", "--model", "random:tiny-llama", "--no-progress").output
    entry = re.search(r"models:\n(.*)\n", msg).group(1)  # "    tiny-llama: {source: ...}"
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["models"] = yaml.safe_load(entry.strip())
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    for args in (
        ("extract", "--model", "tiny-llama", "--no-progress"),
        ("mauve", "--model", "tiny-llama"),
        ("stats",),
        ("load",),
        ("report",),
    ):
        res = homog(*args)
        assert res.exit_code == 0, f"homog {' '.join(args)}: {res.output}"
    con = q.connect(project / "data" / "homog.duckdb")
    assert {r["model"] for r in q.list_runs(con)} == {"tiny-llama"}
    n = con.execute("SELECT count(*) FROM layer_metrics l JOIN runs r USING (run_id)").fetchone()
    assert n[0] > 0
    assert "tiny-llama" in (project / "data" / "report" / "report.html").read_text()

    # docs/database.md's example queries return rows on a database that homog load built
    # (or, for the tables this small project has no rows in, e.g. posenc_results, on the
    # test database)
    demo = duckdb.connect(str(demo_db_factory(2, 8)), read_only=True)
    for query in sql_queries(ROOT / "docs" / "database.md"):
        rows = con.execute(query).fetchall() or demo.execute(query).fetchall()
        assert rows, query
