"""Take the README's two pictures from a real database and report.

    python docs/images/shoot.py --db data/homog.duckdb --report data/report/report.html

- ``tui.png``: `homog tui`'s Compare screen (the first two runs chosen, as a user would with
  space, down, space, enter), saved by Textual as SVG and converted with ``rsvg-convert``;
- ``report.png``: the top of the report, rendered by headless Chromium
  (``chromium-headless-shell`` or ``chromium``);
- ``pictures.json``: what the pictures show that the tool could change (the report's first
  heading, the TUI's screen bar and the screen shown): tests/test_docs.py fails when today's
  tool no longer matches it, so the pictures are taken again.

Both converters are Debian packages (``librsvg2-bin``, ``chromium-headless-shell``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


async def tui_svg(db: Path, svg: Path, size: tuple[int, int]) -> str:
    """Save the Compare screen as ``svg``; returns the screen's mode."""
    from tui.app import HomogApp

    app = HomogApp(str(db), watch_interval=3600)
    async with app.run_test(size=size) as pilot:

        async def settle() -> None:
            for _ in range(4):
                await pilot.pause()
                await app.workers.wait_for_complete()
            await pilot.pause(0.2)

        await settle()
        for key in ("space", "down", "space", "enter"):
            await pilot.press(key)
            await settle()
        app.save_screenshot(filename=svg.name, path=str(svg.parent))
        return str(app.current_mode)


def report_png(report: Path, png: Path, width: int, height: int) -> None:
    browser = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if browser is None:
        raise SystemExit("no headless Chromium: apt-get install chromium-headless-shell")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},{height}", f"--screenshot={png}", report.resolve().as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, default=Path("data/homog.duckdb"))
    ap.add_argument("--report", type=Path, default=Path("data/report/report.html"))
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        svg = Path(tmp) / "tui.svg"
        mode = asyncio.run(tui_svg(args.db, svg, (120, 34)))  # as given: the TUI shows it
        subprocess.run(
            ["rsvg-convert", "--zoom", "1", "-o", str(args.out / "tui.png"), str(svg)], check=True
        )
    report_png(args.report, args.out / "report.png", 1100, 900)
    for name in ("tui.png", "report.png"):
        small(args.out / name)
        print(args.out / name, os.path.getsize(args.out / name), "bytes")
    (args.out / "pictures.json").write_text(json.dumps(shown(args.report, mode), indent=2) + "\n")


def shown(report: Path, mode: str) -> dict[str, object]:
    """pictures.json: the report's first heading, the TUI's screen bar and its screen."""
    from tui.components.nav_bar import SCREENS

    first = re.search(r"<h2[^>]*>([^<]+)", report.read_text())
    return {
        "report_first_heading": first.group(1).strip() if first else None,
        "tui_screens": [title for _, title in SCREENS],
        "tui_screen": mode,
    }


def small(png: Path) -> None:
    """Rewrite ``png`` with a 256-colour palette (a few times smaller, colours kept)."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)


if __name__ == "__main__":
    main()
