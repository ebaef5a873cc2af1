"""A mention is not a mark: homog overwrites a file without --force only when homog's generator
mark sits in its format's fixed place (the report's HTML <head> meta, its Markdown first line,
a PNG's tEXt Software, a PDF's /Creator, an SVG's <metadata> creator, a Parquet file's
metadata). Files whose text merely names a homog command are the user's: the hostile probe
found `homog report -o` and `homog plot -o` overwriting them.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from conftest import ROOT

from homog.owned import HTML_MARK, MD_MARK, homog_wrote


def png_with_text(key: bytes, value: bytes) -> bytes:
    """A minimal PNG (1x1 grey) with one tEXt chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data).to_bytes(4, "big")
        return len(data).to_bytes(4, "big") + kind + data + crc

    ihdr = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"tEXt", key + b"\0" + value)
        + chunk(b"IDAT", zlib.compress(b"\0\x80"))
        + chunk(b"IEND", b"")
    )


USERS_FILES = {
    "notes.md": b"# Notes\n\nI ran homog plot and homog corpus yesterday.\n",
    "draft.html": (
        b"<!doctype html><html><head><title>draft</title></head><body>"
        b"<p>homog corpus, homog report</p><pre>" + HTML_MARK.encode() + b"</pre></body></html>"
    ),
    "params.yaml": b"# homog corpus reads this; homog plot too\nseed: 0\n",
    "mine.svg": (
        b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg">'
        b"<text>made after homog plot</text></svg>"
    ),
    "quoted.md": b"Pages begin with\n" + MD_MARK.encode() + b"\n",
    "comment.png": png_with_text(b"Comment", b"homog plot"),
    "body.pdf": b"%PDF-1.4\n1 0 obj (homog plot) endobj\n/Title (homog plot)\n%%EOF\n",
}


@pytest.mark.parametrize("name", sorted(USERS_FILES))
def test_a_users_file_that_mentions_homog_is_not_homogs(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(USERS_FILES[name])
    assert not homog_wrote(path)


@pytest.mark.parametrize("name", ["README.md", "CHANGELOG.md", "docs/report.md", "params.yaml"])
def test_the_projects_own_documents_are_not_homogs(name):
    """They mention every homog command; none carries a generator mark."""
    assert not homog_wrote(ROOT / name)


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg"])
def test_homog_plot_images_carry_the_mark(tmp_path, fmt):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from homog.plot import save_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    out = save_figure(fig, tmp_path / f"curve.{fmt}")
    plt.close(fig)
    assert homog_wrote(out)
    if fmt == "png":
        assert not homog_wrote(_write(tmp_path / "other.png", png_with_text(b"Software", b"x")))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
