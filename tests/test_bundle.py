"""`homog publish`: a database's summary tables as a Parquet bundle that every reader opens with
--db FOLDER, read-only, giving the same claims and report as the database."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from homog.cli import main

N_RUNS, N_TEXTS = 4, 12


@pytest.fixture(scope="module")
def source(demo_db_factory) -> Path:
    return demo_db_factory(N_RUNS, N_TEXTS)


@pytest.fixture(scope="module")
def bundle(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pub") / "results"
    res = CliRunner().invoke(main, ["publish", "--db", str(source), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def invoke(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.iterdir())}


def test_claims_from_the_bundle_equal_the_databases(source: Path, bundle: Path) -> None:
    a = json.loads(invoke("claims", "--db", str(source), "--format", "json"))
    b = json.loads(invoke("claims", "--db", str(bundle), "--format", "json"))
    assert a and a == b


def test_the_report_from_the_bundle_equals_the_databases(
    source: Path, bundle: Path, tmp_path: Path
) -> None:
    """Every section and figure: the per-text slices and the stored aggregates give what the
    database's own rows give (the sentence views, claim 1's bootstrap over texts)."""
    pages = {}
    for name, db in (("a", source), ("b", bundle)):
        page, figs = tmp_path / f"{name}.md", tmp_path / "figs" / name
        invoke(
            "report", "--db", str(db), "--format", "md", "-o", str(page), "--figures-dir", str(figs)
        )
        pages[name] = [
            line.replace(str(db), "DB").replace(f"{name}.md", "X.md").replace(f"figs/{name}", "F")
            for line in (tmp_path / f"{name}.md").read_text().splitlines()
            if not line.startswith(("Rebuild this report", "Database:"))
        ]
    assert len(pages["a"]) > 100 and pages["a"] == pages["b"]
    figs = sorted(p.name for p in (tmp_path / "figs" / "a").iterdir())
    assert figs == sorted(p.name for p in (tmp_path / "figs" / "b").iterdir()) and figs
    for name in figs:
        a, b = (tmp_path / "figs" / s / name for s in ("a", "b"))
        assert a.read_bytes() == b.read_bytes(), name


def test_the_bundle_holds_no_words_and_only_slices_of_the_per_text_tables(
    source: Path, bundle: Path
) -> None:
    manifest = json.loads((bundle / "bundle.json").read_text())
    texts = duckdb.sql(f"SELECT * FROM read_parquet('{bundle / 'texts.parquet'}')").df()
    assert len(texts) and texts["text"].isna().all() and texts["keyphrase"].isna().all()
    assert texts["bertscore_f1"].notna().any()
    con = duckdb.connect(str(source), read_only=True)
    full = con.execute("SELECT count(*) FROM layer_metrics").fetchone()[0]
    erank = con.execute(
        "SELECT count(*) FROM layer_metrics WHERE variant = 'original' AND metric IN "
        "('erank', 'erank__no_sink', 'erank__standardized')"
    ).fetchone()[0]
    con.close()
    assert manifest["tables"]["layer_metrics"]["rows"] <= erank < full
    assert "sentence_metrics" not in manifest["tables"]
    assert {"bundle_sentence_curve", "bundle_sentence_dose"} <= set(manifest["tables"])
    assert manifest["bytes"] == sum(
        (bundle / t["file"]).stat().st_size for t in manifest["tables"].values()
    )


def test_readers_never_change_the_bundle(bundle: Path, tmp_path: Path) -> None:
    before = snapshot(bundle)
    writes = (
        "CREATE TABLE x AS SELECT 1",
        "DELETE FROM runs",
        f"COPY runs TO '{tmp_path / 'x.csv'}'",
    )
    for sql in writes:
        res = CliRunner().invoke(main, ["sql", "--db", str(bundle), sql])
        assert res.exit_code != 0 and "read-only" in res.output + str(res.exception), sql
    res = CliRunner().invoke(
        main, ["sql", "--db", str(bundle), f"SELECT * FROM read_csv('{bundle / 'bundle.json'}')"]
    )
    assert res.exit_code != 0  # no file access from SQL
    invoke("runs", "--db", str(bundle))
    assert snapshot(bundle) == before and not (tmp_path / "x.csv").exists()


def test_publish_refuses_what_it_did_not_write_and_leaves_nothing_half_written(
    source: Path, bundle: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep me")
    res = CliRunner().invoke(main, ["publish", "--db", str(source), "-o", str(mine)])
    assert res.exit_code != 0 and "refusing to replace" in res.output
    assert (mine / "notes.md").read_text() == "keep me"
    file = tmp_path / "f.parquet"
    file.write_text("x")
    res = CliRunner().invoke(main, ["publish", "--db", str(source), "-o", str(file)])
    assert res.exit_code != 0 and "is a file" in res.output and file.read_text() == "x"
    small = tmp_path / "small"
    res = CliRunner().invoke(
        main, ["publish", "--db", str(source), "-o", str(small), "--max-mb", "0.01"]
    )
    assert res.exit_code != 0 and "over --max-mb 0.01" in res.output
    assert (
        not small.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    )
    again = tmp_path / "again"
    shutil.copytree(bundle, again)
    invoke("publish", "--db", str(source), "-o", str(again))  # a bundle is replaced
    assert json.loads((again / "bundle.json").read_text())["format"] == "homog-bundle"


def test_a_folder_that_is_no_bundle_or_lacks_a_file_is_named(bundle: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    res = CliRunner().invoke(main, ["claims", "--db", str(plain)])
    assert res.exit_code != 0 and "not a bundle that `homog publish` wrote" in res.output
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    os.remove(broken / "contrasts.parquet")
    res = CliRunner().invoke(main, ["claims", "--db", str(broken)])
    assert res.exit_code != 0 and "lacks contrasts.parquet" in res.output


def test_a_report_from_the_bundle_shows_where_its_numbers_were_made(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """publish keeps the publishing project's corpus and synth reports and git state; a
    report from the bundle elsewhere (no git, no reports beside it) shows them, and the same
    page from the same relative paths anywhere: what the committed study pages rely on."""
    made = tmp_path / "made"
    (made / "data" / "synth").mkdir(parents=True)
    (made / "data" / "corpus").mkdir(parents=True)
    synth = {"timings": {"parse_s": 12.5}, "rephraser": "parse", "kept": 7}
    quoted = {"examples": {"front": [{"original": "A review's own sentence."}]}}
    (made / "data" / "synth" / "report.json").write_text(json.dumps({**synth, **quoted}))
    (made / "data" / "corpus" / "corpus.report.json").write_text(json.dumps({"drawn": 12}))
    monkeypatch.chdir(made)
    invoke("publish", "--db", str(source), "-o", "results")
    record = json.loads((made / "results" / "bundle.json").read_text())["provenance"]
    # every synth figure, none of the corpus's words (the rewrite examples)
    assert record["synth"] == synth and record["corpus"] == {"drawn": 12}
    assert "review's own sentence" not in (made / "results" / "bundle.json").read_text()
    assert record["git_commit"] is None and any("git commit" in m for m in record["missing"])
    pages = []
    for where in ("made", "elsewhere"):
        if where == "elsewhere":
            shutil.copytree(made / "results", tmp_path / where / "results")
            (made / "data" / "synth" / "report.json").unlink()  # the reader has none
        monkeypatch.chdir(tmp_path / where)
        invoke("report", "--db", "results", "--format", "md", "-o", "r.md")
        pages.append((tmp_path / where / "r.md").read_text())
    assert pages[0] == pages[1]
    assert "parse_s" in pages[1] and "drawn" in pages[1] and "synth report (" not in pages[1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_tui_opens_a_bundle(bundle: Path) -> None:
    pytest.importorskip("textual")
    from tui.app import HomogApp

    app = HomogApp(bundle, watch_interval=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(4):
            await pilot.pause()
            await app.workers.wait_for_complete()
        assert app.catalog is not None and len(app.catalog.runs) >= 1
