"""Compare's lines, UI-free: which (run, variant) lines a view shows, their numbers, full
names and colours, the "differences to the original" rows, and the permutation floor of p.

A line is told apart by its number: the plot writes it on the line (each number at another
depth, so numbers of lines that end together do not overprint), the legend names it in full
(model · intervention · variant · run id) and the table's ``#`` column repeats it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]

# The views of Compare (key v): every line, one variant at a time, one model at a time, or one
# line per contrast (variant - original of the same run, from the stats stage's contrasts).
VIEWS = ("all", "variant", "model", "diff")
VIEW_NAMES = {
    "all": "all lines",
    "variant": "one variant",
    "model": "one model",
    "diff": "differences to the original",
}
# Colours that stay apart on dark and light backgrounds (Okabe-Ito, then Tableau), as RGB so
# plotext and rich draw the same colour.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 159, 0),
    (86, 180, 233),
    (0, 158, 115),
    (240, 228, 66),
    (0, 114, 178),
    (213, 94, 0),
    (204, 121, 167),
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
)


@dataclass
class Line:
    """One line of the plot."""

    number: int
    run_id: str
    variant: str
    name: str  # model · intervention · variant · run id (prefix)
    color: tuple[int, int, int]
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)

    @property
    def hex(self) -> str:
        return "#{:02x}{:02x}{:02x}".format(*self.color)


def line_name(run: Mapping[str, Any] | None, run_id: str, variant: str, short: str) -> str:
    """'smollm2-135m · zero_pos · front · cf240802' (the intervention 'none' included: it
    is what sets the unchanged run apart)."""
    model = str((run or {}).get("model") or "?")
    iv = str((run or {}).get("intervention") or "none")
    return f"{model} · {iv} · {variant} · {short}"


def groups(view: str, rows: Iterable[Row], runs: Mapping[str, Row]) -> list[str]:
    """The groups a 'variant' or 'model' view steps through (n / N), in the rows' order."""
    if view == "variant":
        return list(dict.fromkeys(r["variant"] for r in rows))
    if view == "model":
        return list(dict.fromkeys(str(runs.get(r["run_id"], {}).get("model")) for r in rows))
    return []


def in_view(view: str, group: str | None, r: Row, runs: Mapping[str, Row]) -> bool:
    if view == "variant" and group is not None:
        return r["variant"] == group
    if view == "model" and group is not None:
        return str(runs.get(r["run_id"], {}).get("model")) == group
    return True


def view_rows(
    view: str,
    group: str | None,
    rows: Iterable[Row],
    contrasts: Iterable[Row],
    runs: Mapping[str, Row],
    shown: set[str],
    order: Sequence[str] = (),
) -> list[Row]:
    """The rows a view draws of the variants ``shown``: the layer ``rows`` in the view's group,
    or in the 'diff' view the :func:`diff_rows` of ``contrasts`` (variants in ``order``)."""
    if view == "diff":
        depth = {rid: r.get("n_layers") or 1 for rid, r in runs.items()}
        return [
            r
            for r in diff_rows(contrasts, depth, order)
            if r["variant"].removesuffix("−original") in shown
        ]
    rows = [r for r in rows if r["variant"] in shown]
    return [r for r in rows if in_view(view, group, r, runs)]


def build_lines(
    rows: Iterable[Row], runs: Mapping[str, Row], short: Mapping[str, str], *, relative: bool
) -> tuple[list[Line], dict[tuple[str, str], int]]:
    """Group layer rows into numbered lines, one per (run, variant), in the order of
    (model, intervention, run, variant as the rows come, layer). Rows with a missing mean
    have no point (never drawn at zero). Returns (lines, (run_id, variant) -> number)."""
    order: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        order.setdefault((r["run_id"], r["variant"]), []).append(r)

    def sort_key(key: tuple[str, str]) -> tuple:
        run = runs.get(key[0], {})
        return (str(run.get("model")), str(run.get("intervention")), key[0])

    keys = sorted(order, key=sort_key)  # stable: variants keep the rows' order within a run
    lines, numbers = [], {}
    for i, key in enumerate(keys, start=1):
        run_id, variant = key
        line = Line(
            i,
            run_id,
            variant,
            line_name(runs.get(run_id), run_id, variant, short.get(run_id, run_id)),
            PALETTE[(i - 1) % len(PALETTE)],
        )
        for r in sorted(order[key], key=lambda r: r["layer"]):
            mean = r.get("mean")
            if mean is None or (isinstance(mean, float) and math.isnan(mean)):
                continue
            line.xs.append(float(r["rel_depth"]) if relative else float(r["layer"]))
            line.ys.append(float(mean))
        numbers[key] = i
        lines.append(line)
    return lines, numbers


def label_points(
    lines: Sequence[Line], width: int = 80, height: int = 20
) -> list[tuple[float, float]]:
    """Where each line's number is written on a ``width`` x ``height`` character canvas: line
    i of N first tries the point nearest the fraction (i + 0.5) / N of its length (the numbers
    spread along x), then the points ever further from it, until the number's cells (and one
    on either side) are free of numbers placed before; if none is free, the first try."""
    pts = [(x, y) for ln in lines for x, y in zip(ln.xs, ln.ys, strict=True)]
    if not pts:
        return [(math.nan, math.nan)] * len(lines)
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    w, h = max(1, width - 1), max(1, height - 1)

    def cell(x: float, y: float) -> tuple[int, int]:
        col = round((x - x0) / (x1 - x0) * w) if x1 > x0 else 0
        row = round((y1 - y) / (y1 - y0) * h) if y1 > y0 else 0
        return col, row

    taken: set[tuple[int, int]] = set()
    out = []
    n = len(lines)
    for i, line in enumerate(lines):
        if not line.xs:
            out.append((math.nan, math.nan))
            continue
        m = len(line.xs)
        start = min(m - 1, int((i + 0.5) / n * m))
        order = sorted(range(m), key=lambda j: abs(j - start))
        text = len(str(line.number))
        chosen = start
        for j in order:
            col, row = cell(line.xs[j], line.ys[j])
            cells = {(col + k, row) for k in range(-1 - text // 2, text - text // 2 + 1)}
            if not cells & taken:
                chosen = j
                break
        col, row = cell(line.xs[chosen], line.ys[chosen])
        taken |= {(col + k, row) for k in range(-(text // 2), text - text // 2)}
        out.append((line.xs[chosen], line.ys[chosen]))
    return out


def diff_rows(
    contrasts: Iterable[Row], n_layers: Mapping[str, int], order: Sequence[str] = ()
) -> list[Row]:
    """Contrast rows (variant - original of one run, per layer) in the shape of layer-curve
    rows: mean = mean_diff with its CI, p_holm_vs_original = its Holm p. Variants come in
    ``order`` (the others after it, by name)."""
    rank = {v: i for i, v in enumerate(order)}
    out = []
    for c in sorted(contrasts, key=lambda c: (rank.get(c["variant_a"], len(rank)), c["variant_a"])):
        if c.get("band") is not None or c.get("baseline_run_id") is not None:
            continue
        if c.get("variant_b") != "original" or c.get("layer") is None:
            continue
        depth = n_layers.get(c["run_id"]) or 1
        out.append(
            {
                "run_id": c["run_id"],
                "variant": f"{c['variant_a']}−original",
                "layer": int(c["layer"]),
                "rel_depth": int(c["layer"]) / depth,
                "n": c.get("n"),
                "mean": c.get("mean_diff"),
                "ci_low": c.get("ci_low"),
                "ci_high": c.get("ci_high"),
                "p_holm_vs_original": c.get("p_holm"),
                "p_value": c.get("p_value"),
            }
        )
    return out


@dataclass(frozen=True)
class Floor:
    """A family (run, variant vs original, metric) whose smallest p is the permutation floor:
    ``ties`` layers share the raw p ``raw`` (1 / (n_perm + 1), or 2 / 2^n when exact) and
    Holm over ``layers`` layers turns it into ``holm``."""

    raw: float
    holm: float
    layers: int
    ties: int


def p_floors(contrasts: Iterable[Row]) -> dict[tuple[str, str], Floor]:
    """(run_id, variant_a) -> Floor, for the families of per-layer contrasts against the
    original whose smallest raw p is shared by two or more layers: a permutation test cannot
    go lower, so those p-values are bounds, not estimates."""
    fam: dict[tuple[str, str], list[Row]] = {}
    for c in contrasts:
        if (
            c.get("band") is None
            and c.get("baseline_run_id") is None
            and c.get("variant_b") == "original"
            and c.get("p_value") is not None
        ):
            fam.setdefault((c["run_id"], c["variant_a"]), []).append(c)
    out = {}
    for key, rows in fam.items():
        ps = [float(r["p_value"]) for r in rows if not math.isnan(float(r["p_value"]))]
        if not ps:
            continue
        low = min(ps)
        ties = sum(1 for p in ps if p == low)
        if ties >= 2 and low < 0.01:
            holm = min(float(r["p_holm"]) for r in rows if float(r["p_value"]) == low)
            out[key] = Floor(low, holm, len(ps), ties)
    return out


def at_floor(row: Row, floors: Mapping[tuple[str, str], Floor]) -> bool:
    """True when the row's Holm p is its family's floor (compared to 1e-12 relative)."""
    variant = str(row["variant"]).removesuffix("−original")
    floor = floors.get((row["run_id"], variant))
    p = row.get("p_holm_vs_original")
    return floor is not None and p is not None and math.isclose(float(p), floor.holm, rel_tol=1e-9)


def line_floors(lines: Iterable[Line], floors: Mapping[tuple[str, str], Floor]) -> list[Floor]:
    """The floors of the families ``lines`` draw (a 'diff' line named by its variant)."""
    return [
        floors[(ln.run_id, ln.variant.removesuffix("−original"))]
        for ln in lines
        if (ln.run_id, ln.variant.removesuffix("−original")) in floors
    ]


def floor_note(floors: Iterable[Floor]) -> str:
    """The footnote for the floors among the rows shown ('' when none)."""
    fl = sorted(set(floors), key=lambda f: (f.holm, f.layers))
    if not fl:
        return ""
    f = fl[0]
    more = f" (and {len(fl) - 1} more)" if len(fl) > 1 else ""
    return (
        f"‡ p at the permutation test's floor: raw p = 1/{round(1 / f.raw)}, the smallest its "
        f"sign flips can give, × {f.layers} layers (Holm) = {f.holm:.2g}{more}; the true p may "
        "be smaller"
    )


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 line", "3 lines"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
