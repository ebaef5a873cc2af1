"""The demo report stays small (issue 42: the HTML report was 12.6 MB for the demo).

The page embeds its figures as 256-colour PNGs (``homog.report.document.html_png``). With the
matplotlib PNGs the page was 2.43 MB on the database of ``homog tui --demo`` (6 runs, 40 texts)
and 2.49 MB on ``make_demo_db``'s default (10 runs, 200 texts); with the palette ones 0.85 and
0.89 MB. The test builds the report on 3 runs (one per demo model, every figure) of 12 texts:
0.81 MB.
"""

from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner

from homog.cli import main
from homog.report.document import html_png

LIMIT = 3_000_000


def test_demo_report_stays_under_3_mb(demo_db_factory, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", "--db", str(demo_db_factory(3, 12)), "-o", str(out)])
    assert res.exit_code == 0, res.output
    size = out.stat().st_size
    assert size < LIMIT, f"the demo report is {size / 1e6:.2f} MB, over {LIMIT / 1e6:.0f} MB"
    assert out.read_text().count("data:image/png;base64,") >= 10  # the figures are in it


def test_html_png_keeps_the_picture_at_a_fraction_of_the_bytes(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 2.5), dpi=200)
    x = np.linspace(0, 1, 200)
    for k in range(6):
        a.plot(x, np.sin(6 * x + k), label=str(k))
    a.legend()
    fig.colorbar(b.imshow(np.random.default_rng(0).random((20, 20)), cmap="magma"), ax=b)
    path = tmp_path / "f.png"
    fig.savefig(path)
    plt.close(fig)
    small = html_png(path)
    assert len(small) < 0.6 * path.stat().st_size
    with Image.open(path) as before, Image.open(io.BytesIO(small)) as after:
        assert after.size == before.size  # full resolution
        diff = np.abs(
            np.asarray(before.convert("RGB"), dtype=int) - np.asarray(after.convert("RGB"))
        )
    assert diff.mean() < 2 and np.percentile(diff, 99.9) < 40
    # not a PNG: embedded as it is
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not a png")
    assert html_png(junk) == b"not a png"
