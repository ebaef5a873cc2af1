"""The study's published pages against its published tables (study/run.sh, #55).

`make study` publishes the study's summary tables to study/results/ and then writes
docs/results.md, docs/sentences.md's results block and the README's answer from that bundle.
Here each page is written again from the committed bundle, with the commands and relative
paths study/run.sh uses, in a copy of the layout, and must equal the committed file byte for
byte; then the numbers the pages share are checked against each other.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from homog.cli import main
from homog.report import readme, sentences_page
from homog.report.answer import README_END, README_START

ROOT = Path(__file__).resolve().parents[1]
REBUILD = "the committed page is not what study/results/ gives now: run `make study-pages`"
BUNDLE = ROOT / "study" / "results"
RESULTS, SENTENCES, README = (
    ROOT / "docs" / "results.md",
    ROOT / "docs" / "sentences.md",
    (ROOT / "README.md"),
)


def study_command(stage: str) -> list[str]:
    """The arguments study/run.sh gives the stage ``stage`` (its `stage NAME CMD...` line,
    continuation lines joined), without the command itself."""
    text = (ROOT / "study" / "run.sh").read_text().replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith(f"stage {stage} ")]
    words = re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', line.split(" ", 2)[2])
    args = [(quoted.replace("\\`", "`") if quoted else bare) for quoted, bare in words]
    return [a.replace("$P", "params.yaml") for a in args]


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the study's layout: study/results/ and study/params.yaml, docs/ with the
    two pages, the README; pages as committed, to be rewritten in place."""
    assert (BUNDLE / "bundle.json").is_file(), "the study's bundle study/results/ is committed"
    top = tmp_path_factory.mktemp("layout")
    (top / "study").mkdir()
    (top / "docs").mkdir()
    shutil.copytree(BUNDLE, top / "study" / "results")
    shutil.copy(ROOT / "study" / "params.yaml", top / "study" / "params.yaml")
    for page in (RESULTS, SENTENCES):
        shutil.copy(page, top / "docs" / page.name)
    shutil.copy(README, top / "README.md")
    return top


def test_the_bundle_is_small_and_its_claims_are_the_pages(layout: Path) -> None:
    manifest = json.loads((BUNDLE / "bundle.json").read_text())
    files = sum(p.stat().st_size for p in BUNDLE.iterdir())
    assert files <= 25 * 2**20 and manifest["bytes"] <= files
    assert manifest["provenance"]["git_commit"], "published from a git checkout"


def test_the_results_page_is_rebuilt_from_the_bundle(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(layout / "study")
    args = study_command("results")
    assert args[:3] == ["homog", "report", "--db"] and "results" in args
    res = CliRunner().invoke(main, args[1:])
    assert res.exit_code == 0, res.output
    assert (layout / "docs" / "results.md").read_text() == RESULTS.read_text(), REBUILD
    figures = sorted(p.name for p in (layout / "docs" / "results").glob("*.png"))
    assert figures == sorted(p.name for p in (ROOT / "docs" / "results").glob("*.png"))


def test_the_sentences_block_and_the_readme_are_rebuilt_from_the_bundle(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(layout / "study")
    args = study_command("sentences")
    assert args[:3] == ["python", "-m", "homog.report.sentences_page"]
    assert sentences_page.main(args[3:]) in (None, 0)
    assert (layout / "docs" / "sentences.md").read_text() == SENTENCES.read_text(), REBUILD
    args = study_command("readme")
    assert args[:3] == ["python", "-m", "homog.report.readme"]
    assert readme.main(args[3:]) == 0
    assert (layout / "README.md").read_text() == README.read_text(), REBUILD


def answer_bullets() -> list[str]:
    block = README.read_text().split(README_START)[1].split(README_END)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("- **")]


def test_the_readme_answer_is_the_results_pages_answer() -> None:
    page = RESULTS.read_text()
    answer = page.split("## The answer")[1].split("\n## ")[0]
    bullets = answer_bullets()
    assert len(bullets) >= 5
    for line in bullets:
        assert line in answer.splitlines(), line[:80]
    n = re.search(r"On (\d+) reviews", README.read_text().split(README_START)[1])
    assert n and f"texts in the database (original variant) {n.group(1)}" in page


def test_the_sentences_page_shows_the_results_pages_sentence_tables() -> None:
    block = SENTENCES.read_text().split(sentences_page.START)[1].split(sentences_page.END)[0]
    rows = [x for x in block.splitlines() if x.startswith("| ") and re.search(r"\d", x)]
    assert len(rows) >= 10
    page = set(RESULTS.read_text().splitlines())
    missing = [r for r in rows if r not in page]
    assert not missing, missing[:3]
    where = [b for b in answer_bullets() if b.startswith("**Where position acts**")]
    assert len(where) == 1
    for count in re.findall(r"\((\d+) reviews\)", where[0]):
        assert f"{count} reviews" in block
