"""The terminal tables of ``runs``, ``compare``, ``claims`` and ``diff``: which columns, in
which order, which are left out first when the terminal is narrow, and how the numbers are
rounded (to the CI's precision). CSV and JSON never come here: they keep every column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from homog.cli.tables import (
    Column,
    abbreviate,
    est,
    fit_columns,
    fmt_value,
    p_text,
    pm,
    print_fitted,
)

ALPHA_MARK = 0.05  # compare marks a Holm p below this with '*'


def show_runs(rows: list[dict[str, Any]], short: dict[str, str], *, wide: bool) -> None:
    """``homog runs``: one line per run; the run id at its unique prefix (full with --wide)."""
    spec = [  # (header, key, drop, right)
        ("run", "run_id", 0, False),
        ("model", "model", 0, False),
        ("intervention", "intervention", 0, False),
        ("layers", "n_layers", 0, True),
        ("texts", "n_texts", 0, True),
        ("used", "used", 0, False),
        ("created", "created_at", 1, False),
        ("dtype", "dtype", 2, False),
        ("device", "device", 3, False),
        ("d_model", "d_model", 4, True),
        ("heads", "n_heads", 4, True),
        ("source", "model_source", 6, False),
    ]
    known = set(rows[0])
    if all(r.get("used", "yes") == "yes" for r in rows):
        known.discard("used")  # every run is read: nothing to say
    spec = [s for s in spec if s[1] in known]
    spec += [(k, k, 7, False) for k in rows[0] if k in known and k not in {s[1] for s in spec}]
    cols = [Column(h, drop=d, right=r) for h, _, d, r in spec]
    out = []
    for r in rows:
        line = []
        for _, key, _, _ in spec:
            v = r[key]
            if key == "run_id" and not wide:
                v = short.get(v, v)
            elif key == "created_at" and v is not None and not wide:
                v = fmt_value(v)[:16]  # to the minute
            line.append(fmt_value(v))
        out.append(line)
    print_fitted(cols, out, title="runs", wide=wide)


def contrast_rows(con: Any, metric: str, run_ids: Sequence[str]) -> dict[tuple, dict]:
    """(run_id, variant, layer) -> the paired contrast against the original
    (:func:`homog.store.query.paired_layers`)."""
    from homog.store.query import paired_layers

    return paired_layers(con, metric, list(run_ids))


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def show_compare(
    con: Any,
    rows: list[dict[str, Any]],
    metric: str,
    short: dict[str, str],
    *,
    raw: bool,
    wide: bool,
) -> None:
    """``homog compare``: one table per run, one line per layer. By default the original's
    mean ± CI half-width, then each variant's paired difference from the original with its
    95 % CI; ``raw``: each variant's own mean ± half-width. Variants that do not fit are left
    out (rightmost first) and named; ``wide`` keeps them all."""
    order = compare_order(dict.fromkeys(r["variant"] for r in rows))
    runs: dict[str, dict] = {}
    for r in rows:
        runs.setdefault(r["run_id"], {"run": r, "layers": {}})["layers"].setdefault(r["layer"], {})[
            r["variant"]
        ] = r
    diffs = {} if raw else contrast_rows(con, metric, list(runs))
    cols = [Column("layer", right=True)] + [
        Column(v if raw or v == "original" else f"{v} - orig", drop=_drop(v)) for v in order
    ]
    tables, unpaired, marked = [], False, False
    for run_id, run in runs.items():
        lines = []
        for layer, by_v in run["layers"].items():
            line = [str(layer)]
            for v in order:
                r = by_v.get(v)
                if r is None:
                    line.append("")
                    continue
                if raw or v == "original":
                    text = pm(_num(r["mean"]), _num(r["ci_low"]), _num(r["ci_high"]))
                    p = r["p_holm_vs_original"]
                else:
                    c = diffs.get((run_id, v, layer))
                    if c is None:  # no paired contrast (the stats stage did not run)
                        o = by_v.get("original")
                        unpaired = True
                        text = "" if o is None else f"{r['mean'] - o['mean']:.4g} (no CI)"
                        p = None
                    else:
                        text = est(_num(c["mean_diff"]), _num(c["ci_low"]), _num(c["ci_high"]))
                        p = c["p_holm"]
                if p is not None and p < ALPHA_MARK:
                    text, marked = text + " *", True
                line.append(text)
            lines.append(line)
        first = run["run"]
        title = f"{first['model']} · {first['intervention']} · run {short.get(run_id, run_id)}"
        tables.append((title, lines))
    kept = None if wide else fit_columns(cols, [ln for _, t in tables for ln in t], _width())
    what = "mean ± 95 % CI half-width" if raw else "original: mean ± 95 % CI; others: paired "
    what += "" if raw else "difference from the original [95 % CI]"
    note = f"{metric} per layer, {what}"
    if marked:
        note += f"; * Holm p < {ALPHA_MARK} against the original"
    if unpaired:
        note += "; (no CI): no paired contrast in the database (difference of the means)"
    if not raw:
        note += "; --raw: each variant's mean"
    if kept is not None and len(kept) < len(cols):
        note += "; --variants picks the variants shown"
    for i, (title, lines) in enumerate(tables):
        last = i == len(tables) - 1
        print_fitted(
            cols,
            lines,
            title=title,
            note=note if last else "",
            wide=wide,
            kept=kept,
            name_hidden=last,
        )


def _is_family(variant: str) -> bool:
    """A variant of the position family (key_first ... key_control, a sweep's key_p25)."""
    from homog.variants import BY_NAME, POSITION

    known = BY_NAME.get(variant)
    return known.family == POSITION if known else variant.startswith("key_p")


def compare_order(variants: Sequence[str]) -> list[str]:
    """Compare's columns: the original, then the position family (the primary question:
    kept when the terminal is narrow), then the other variants, each group in the given
    order."""
    found = list(variants)
    family = [v for v in found if v != "original" and _is_family(v)]
    rest = [v for v in found if v != "original" and v not in family]
    return ["original"] * ("original" in found) + family + rest


def _drop(variant: str) -> int:
    """The original is always shown; the paper's rewrites are left out before the family."""
    return 0 if variant == "original" else 1 if _is_family(variant) else 2


def _width() -> int:
    from homog.cli.tables import stdout_console

    return stdout_console().width


def show_diff(rows: list[dict[str, Any]], title: str, *, by_layer: bool, wide: bool) -> None:
    """``homog diff``: one line per metric, variant and band (and layer): A - B [95 % CI], p
    and Holm p. A single variant moves into the title."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    one = len(variants) == 1
    spec: list[tuple[Column, Any]] = [(Column("metric"), lambda r: r["metric"])]
    if not one:
        spec.append((Column("variant"), lambda r: r["variant"]))
    spec.append((Column("band"), lambda r: r["band"] or ""))
    if by_layer:
        spec.append((Column("layer", right=True), lambda r: fmt_value(r["layer"])))
    spec += [
        (Column("n", drop=2, right=True), lambda r: fmt_value(r["n"])),
        (Column("A - B [95% CI]"), lambda r: est(r["mean_diff"], r["ci_low"], r["ci_high"])),
        (Column("p", drop=1, right=True), lambda r: p_text(r["p_value"])),
        (Column("p_holm", right=True), lambda r: p_text(r["p_holm"])),
    ]
    lines = [[get(r) for _, get in spec] for r in rows]
    if one:
        title += f", variant {variants[0]}"
    note = "A - B: mean of the paired differences over the shared texts"
    print_fitted([c for c, _ in spec], lines, title=title, note=note, wide=wide)


CLAIM_COLUMNS = (  # (header, frame column or None for effect [CI], drop, legend prefix)
    ("claim", "claim", 0, ""),
    ("comparison", "comparison", 0, "C"),
    ("metric", "metric", 0, "M"),
    ("scope", "scope", 0, "S"),
    ("effect [95% CI]", None, 0, ""),
    ("verdict", "verdict", 0, ""),
    ("family", "family", 4, ""),
    ("sesoi", "sesoi", 5, ""),
)


def show_claims(frame: Any, *, wide: bool) -> None:
    """``homog claims``: one table per model, one line per claim row: claim, comparison,
    metric, scope, effect [CI] and verdict (family and SESOI when the frame has them); names
    that do not fit become codes named in a legend under the tables, never cut; --wide prints
    every column of the frame."""
    from homog.cli.options import plain

    if wide:
        cols = [Column(str(c)) for c in frame.columns]
        lines = [[fmt_value(plain(v)) for v in r] for r in frame.itertuples(index=False)]
        print_fitted(cols, lines, title="claims", wide=True)
        return
    spec = [s for s in CLAIM_COLUMNS if s[1] is None or s[1] in frame.columns]
    cols = [Column(h, drop=d, legend=s) for h, _, d, s in spec]
    groups: dict[str, list[list[str]]] = {}
    for _, r in frame.iterrows():
        line = []
        for _, key, _, _ in spec:
            if key is None:
                line.append(
                    est(
                        _num(plain(r["effect"])),
                        _num(plain(r.get("ci_low"))),
                        _num(plain(r.get("ci_high"))),
                    )
                )
            else:
                line.append(fmt_value(plain(r[key])))
        groups.setdefault(str(r["model"]), []).append(line)
    every = [ln for g in groups.values() for ln in g]
    kept = fit_columns(cols, every, _width())
    coded, legend = abbreviate(cols, every, _width(), kept)
    at = 0
    for model, lines in groups.items():  # the coded rows back in their groups
        groups[model], at = coded[at : at + len(lines)], at + len(lines)
    note = "\n".join(
        [*legend, "effect in each row's unit; --wide or --format csv: unit, p, n and every column"]
    )
    for i, (model, lines) in enumerate(groups.items()):
        last = i == len(groups) - 1
        print_fitted(
            cols, lines, title=model, note=note if last else "", kept=kept, name_hidden=last
        )
