"""Where ``homog report`` writes: the page, the Markdown figures folder, the links between
them and the command that rebuilds them, all checked before any work."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from urllib.parse import quote

from homog.errors import HomogError
from homog.io import check_target
from homog.layout import writable_dir
from homog.owned import check_owned_dir, check_owned_file
from homog.report.provenance import shown

FORMATS = ("html", "md")
# the names that say a format: a page named so in the other format is refused
SUFFIXES = {"html": (".html", ".htm"), "md": (".md", ".markdown")}


def check_format(
    fmt: str, out: str | os.PathLike[str], figures_dir: str | os.PathLike[str] | None = None
) -> bool:
    """Whether ``out`` is stdout (``-``); HomogError for an unknown format, Markdown there,
    or a figures folder given for HTML (its figures are embedded: the folder would stay
    empty)."""
    if fmt not in FORMATS:
        raise HomogError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
    if figures_dir is not None and fmt == "html":
        raise HomogError(
            f"--figures-dir {figures_dir} is for --format md: an HTML report embeds its "
            "figures in the page and writes no figure files. Drop --figures-dir, or add "
            "--format md"
        )
    stdout = str(out) == "-"
    other = {"html": "md", "md": "html"}[fmt]
    if not stdout and Path(out).suffix.lower() in SUFFIXES[other]:
        raise HomogError(
            f"{out} is named as a {other} page but the format is {fmt}: pass --format {other}, "
            f"or name the page {Path(out).stem}{SUFFIXES[fmt][0]}"
        )
    if stdout and fmt == "md":
        raise HomogError(
            "-o - streams one self-contained file, and a Markdown report has its figures in "
            "files beside it: give the page a file name (e.g. -o report.md), or use the HTML "
            "format for stdout"
        )
    return stdout


def figures_dir_for(out: Path, figures_dir: str | os.PathLike[str] | None) -> Path:
    """Where Markdown figures go: ``figures_dir``, else ``<out stem>_files`` beside ``out``.

    The directory is replaced as a whole, so it must be the report's own: neither the page's
    directory nor one above it, nor the page itself or a folder under it (HomogError).
    """
    files = Path(figures_dir) if figures_dir is not None else out.with_name(f"{out.stem}_files")
    page_dir = out.parent.resolve()
    target = files.resolve()
    if target == page_dir or target in page_dir.parents:
        raise HomogError(
            f"figures directory {files} would replace the directory of the report {out}: "
            f"name a directory of its own, e.g. {out.with_name(out.stem)}"
        )
    page = out.resolve()
    if target == page or page in target.parents:
        raise HomogError(
            f"--figures-dir {files} is the report page {out} (or inside it): the page is a "
            f"file and the figures a folder beside it; name another folder, e.g. "
            f"{out.with_name(out.stem + '_files')}"
        )
    return files


def check_out(out: Path, files: Path | None, *, force: bool, db: Path) -> Path:
    """The report's path (a symlink followed), checked before any work: a device, FIFO or
    directory there, a file in the way or an unwritable directory is a HomogError, and so is
    a page or figures folder homog did not write (without ``force``; :mod:`homog.owned`) and
    a figures folder that holds the database (even with ``force``)."""
    out = check_target(out, what="report")
    check_owned_file(out, force=force, what="report")
    if files is not None:
        check_target(files, directory=True, what="report figures")
        real = files.resolve()
        if real == db.resolve() or real in db.resolve().parents:
            raise HomogError(
                f"the figures folder {files} holds the database {db} being reported on, and "
                "the report replaces that folder as a whole: choose another --figures-dir"
            )
        check_owned_dir(files, force=force, what="report figures folder")
    writable_dir(out.parent, what="report")
    return out


def figure_link(out: Path, files: Path) -> str:
    """The figures folder as a link from the page: relative, '/'-separated and
    percent-encoded, so a name with spaces or '(' still renders its images in every
    Markdown renderer (a bare space ends a link destination)."""
    rel = Path(os.path.relpath(files.resolve(), out.parent.resolve())).as_posix()
    return quote(rel, safe="/")


def rebuild_command(db: Path, out: Path, files: Path | None, *, stdout: bool) -> str:
    """The command that writes this report again, each path shell-quoted (a name with a
    space or an apostrophe pastes as one argument)."""
    words = ["homog", "report", "--db", shown(db), "-o", "-" if stdout else shown(out)]
    if files is not None:
        words += ["--format", "md", "--figures-dir", shown(files)]
    return shlex.join(words)
