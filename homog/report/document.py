"""Render the report's sections to one self-contained HTML file or to Markdown (pure strings)."""

from __future__ import annotations

import base64
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICT_CLASS = {
    "supported": "yes",
    "reversed": "rev",
    "nonzero": "nz",
    "negligible": "eq",
    "equivalent": "eq",
    "equivalent to no effect": "eq",
    "inconclusive": "no",
    "not supported": "no",
    "too few pairs": "no",
    "descriptive": "no",
}

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1280px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:2em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.85em}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.yes{background:#e3f4e1}td.no{background:#f4f4f4}td.rev{background:#fbe3e0}
td.eq{background:#e4ecf7}td.nz{background:#f3f0d8}td.text{min-width:16em}.wide{overflow-x:auto;max-width:100%}caption{text-align:left;
font-weight:600;padding:.2em 0}details>summary{cursor:pointer;font-weight:600}
figure{margin:1em 0;display:inline-block;vertical-align:top;width:100%}
figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}code,pre{background:#f6f6f6;padding:.1em .3em}
pre{padding:.6em;overflow-x:auto}.note{color:#555;font-size:.9em}
"""


@dataclass
class Table:
    """A table: column names, rows of cells (numbers are formatted here), optional caption."""

    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""
    verdict_column: str | None = None


@dataclass
class Section:
    """A titled block of paragraphs, tables and figures (PNG paths with captions)."""

    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[Path, str]] = field(default_factory=list)
    code: str = ""
    figure_width: int = 100  # percent of the page width per figure (48: two side by side)
    after: list[str] = field(default_factory=list)  # paragraphs after the tables
    collapsed: bool = False  # HTML: folded under its title (<details>); Markdown: as usual
    # HTML: the figures float right of the paragraphs (figure_width % wide), so the text and
    # the picture share the first screen; Markdown: as usual
    figures_beside: bool = False


def fmt(value: Any) -> str:
    """Numbers with 4 significant digits (p-values in scientific notation when small)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:.4g}"
    return str(value)


def _inline(text: str) -> str:
    """Escaped text with `code` spans as <code> and **bold** as <strong> elements."""
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def verdict_class(value: Any) -> str:
    """The CSS class of a verdict cell (a verdict word, possibly followed by a mark)."""
    text = str(value)
    return next((c for w, c in VERDICT_CLASS.items() if text.startswith(w)), "")


def to_html(title: str, intro: str, sections: list[Section]) -> str:
    """One HTML document; figures are embedded as base64 PNGs (no file beside it; html_png)."""
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1><p>{_inline(intro)}</p>",
        "<nav><p>Contents: "
        + " · ".join(
            f"<a href='#{_anchor(s.title)}'>{html.escape(s.title)}</a>"
            for s in sections
            if not s.collapsed
        )
        + "</p></nav>",
    ]
    for sec in sections:
        if sec.collapsed:
            out.append(f"<details><summary>{html.escape(sec.title)}</summary>")
        else:
            out.append(f"<h2 id='{_anchor(sec.title)}'>{html.escape(sec.title)}</h2>")
        figures = [_html_figure(path, caption, sec) for path, caption in sec.figures]
        if sec.figures_beside:
            out += figures
        out += [f"<p>{_inline(p)}</p>" for p in sec.paragraphs]
        for table in sec.tables:
            out.append(_html_table(table))
        out += [f"<p>{_inline(p)}</p>" for p in sec.after]
        out += ["<div style='clear:both'></div>"] if sec.figures_beside else figures
        if sec.code:
            out.append(f"<pre><code>{html.escape(sec.code)}</code></pre>")
        if sec.collapsed:
            out.append("</details>")
    out.append("</body></html>")
    return "\n".join(out)


def html_png(path: str | Path) -> bytes:
    """A figure's PNG as the HTML page embeds it: re-encoded with a 256-colour palette.

    The figures are flat colours, antialiased edges and colour maps; a median-cut palette
    keeps them to the eye (colour bars included) at about a third of the bytes of the
    matplotlib PNG, at its full resolution, so the demo report stays under 3 MB
    (tests/test_report.py). The file itself (Markdown's figures folder) is left as it is; the
    original bytes are kept when the image has transparency, cannot be read, or does not shrink.
    """
    raw = Path(path).read_bytes()
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            if im.mode == "RGBA" and im.getextrema()[3][0] < 255:
                return raw  # a transparent figure: a palette would flatten it
            small = im.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
            buf = io.BytesIO()
            small.save(buf, format="PNG", optimize=True)
    except Exception:  # noqa: BLE001 - an unreadable image is embedded as it is
        return raw
    return buf.getvalue() if buf.tell() < len(raw) else raw


def _html_figure(path: Path, caption: str, sec: Section) -> str:
    data = base64.b64encode(html_png(path)).decode()
    style = "" if sec.figure_width >= 100 else f"width:{sec.figure_width}%;"
    if sec.figures_beside:
        style += "float:right;margin:0 0 .5em 1.2em;"
    style = f" style='{style}'" if style else ""
    return (
        f"<figure{style}><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = []
    vi = table.columns.index(table.verdict_column) if table.verdict_column else -1
    for row in table.rows:
        cells = []
        for i, v in enumerate(row):
            cls = "num" if isinstance(v, int | float) and not isinstance(v, bool) else ""
            if isinstance(v, str) and len(v) > 30:
                cls = "text"  # a sentence: wide enough not to wrap into a column of words
            if i == vi:
                cls = verdict_class(v)
            cells.append(f"<td class='{cls}'>{html.escape(fmt(v))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    caption = f"<caption>{html.escape(table.caption)}</caption>" if table.caption else ""
    return (
        f"<div class='wide'><table>{caption}<thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def to_markdown(title: str, intro: str, sections: list[Section], figure_dir: str) -> str:
    """Markdown with the figures referenced as ``figure_dir/<name>.png`` beside the file."""
    out = [f"# {title}", "", intro, ""]
    for sec in sections:
        out += section_markdown(sec, figure_dir)
    return "\n".join(out)


def section_markdown(sec: Section, figure_dir: str, level: int = 2) -> list[str]:
    """One section's Markdown lines under a heading of ``level`` (##: a page's section)."""
    out = [f"{'#' * level} {sec.title}", ""]
    for p in sec.paragraphs:
        out += [p, ""]
    for table in sec.tables:
        if table.caption:
            out += [f"*{table.caption}*", ""]
        out.append("| " + " | ".join(table.columns) + " |")
        out.append("|" + "---|" * len(table.columns))
        for row in table.rows:
            cells = [fmt(v).replace("|", "\\|").replace("\n", " ") for v in row]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    for p in sec.after:
        out += [p, ""]
    for path, caption in sec.figures:
        out += [f"![{caption}]({figure_dir}/{Path(path).name})", "", f"*{caption}*", ""]
    if sec.code:
        out += ["```", sec.code, "```", ""]
    return out
