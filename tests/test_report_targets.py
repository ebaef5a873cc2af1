"""Where `homog report` writes: --figures-dir is refused for HTML (it embeds its figures),
the page's own path as --figures-dir is refused before any work, a Markdown page whose names
hold spaces still links its images, and the provenance's rebuild command is shell-quoted."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from hostile_helpers import clean_error

from homog.cli import main


@pytest.fixture
def db(tmp_path, demo_db_factory):
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), path)
    return path


def report(db: Path, *args: str):
    return CliRunner().invoke(main, ["report", "--db", str(db), *args])


def test_figures_dir_with_html_is_an_error_that_says_why(tmp_path, db):
    figs = tmp_path / "figs"
    res = report(db, "-o", str(tmp_path / "r.html"), "--figures-dir", str(figs))
    clean_error(res, "--figures-dir", "embeds", "--format md")
    assert not figs.exists() and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("where", ["same", "inside"])
def test_the_page_as_its_figures_folder_is_refused_before_any_work(tmp_path, db, where):
    page = tmp_path / "r.md"
    figs = page if where == "same" else page / "figs"
    res = report(db, "--format", "md", "-o", str(page), "--figures-dir", str(figs))
    clean_error(res, str(figs), "is the report page", "r_files")
    assert not page.exists() and list(tmp_path.iterdir()) == [db]


def test_a_page_named_with_spaces_links_its_images_and_quotes_its_rebuild(
    tmp_path, db, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "my docs"
    folder.mkdir()
    page = folder / "Ann's report.md"
    res = report(db, "--format", "md", "-o", str(page))
    assert res.exit_code == 0, res.output
    text = page.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]*)\)", text)
    assert links and not [link for link in links if " " in link or "'" in link]
    for link in links:  # what a renderer resolves: the decoded path beside the page
        assert (folder / unquote(link)).is_file(), link
    assert "Ann%27s%20report_files/" in links[0]
    command = re.search(r"Rebuild this report with `([^`]*)`", text).group(1)
    args = shlex.split(command)
    assert args[:3] == ["homog", "report", "--db"] and Path(args[3]) == Path("homog.duckdb")
    assert Path(args[args.index("-o") + 1]).resolve() == page.resolve()
    figs = Path(args[args.index("--figures-dir") + 1])
    assert figs.resolve() == (folder / "Ann's report_files").resolve() and figs.is_dir()
