"""How many reviews would decide the primary endpoints: the plug-in size of a study
(docs/statistics.md, "How many reviews").

A primary row is decided when its equivalence CI (the 1 - 2 alpha interval) no longer holds a
margin, +SESOI or -SESOI: then it lies inside them (equivalent), or wholly on one side (beyond
the margin: supported or reversed when significant; between 0 and a margin: negligible). A
CI's half-width h shrinks as 1 / sqrt(n), so with its centre c where it is, the row is decided
at

    n_needed = n x (h / d)^2,   d = the distance from c to the nearer margin, min |c -+ SESOI|.

A plug-in estimate: it takes the effect as measured and the spread per text as this study's.
An effect that sits on a margin (d = 0) is never decided this way (n_needed infinite). Pure:
the claims frame in, a frame out.
"""

from __future__ import annotations

import math

import pandas as pd

from homog.claims import PRIMARY
from homog.report.document import Section, Table

KEYS = ("model", "claim", "comparison", "metric", "scope")
UNDECIDED = ("inconclusive",)


def reviews_needed(low: float, high: float, sesoi: float, n: float) -> float:
    """The n at which the interval [low, high] of n texts, its centre kept and its width
    shrinking as 1 / sqrt(n), holds neither +sesoi nor -sesoi (NaN without a margin)."""
    if not all(math.isfinite(x) for x in (low, high, sesoi, n)) or sesoi <= 0 or n <= 0:
        return math.nan
    centre, half = (low + high) / 2, (high - low) / 2
    distance = min(abs(centre - sesoi), abs(centre + sesoi))
    if distance == 0:
        return math.inf
    return n * (half / distance) ** 2


def power_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One row per primary endpoint: its keys, effect, SESOI, the half-width of its
    equivalence CI, n, ``n_needed`` (rounded up) and whether its verdict is decided now."""
    if claims.empty or "family" not in claims.columns:
        return pd.DataFrame()
    rows = []
    for _, r in claims[claims["family"] == PRIMARY].iterrows():
        low, high = float(r["eq_ci_low"]), float(r["eq_ci_high"])
        need = reviews_needed(low, high, float(r["sesoi"]), float(r["n"]))
        rows.append(
            {
                **{k: r[k] for k in KEYS},
                "effect": r["effect"],
                "sesoi": r["sesoi"],
                "eq_half_width": (high - low) / 2,
                "n": int(r["n"]),
                "n_needed": math.ceil(need) if math.isfinite(need) else need,
                "verdict": r["verdict"],
                "decided": r["verdict"] not in UNDECIDED,
            }
        )
    return pd.DataFrame(rows)


def power_line(table: pd.DataFrame) -> str:
    """One sentence: how many reviews decide every primary endpoint, and how many decide
    nine in ten of them (the undecided ones that a margin's edge holds named apart)."""
    if table.empty:
        return "No primary endpoints: nothing to size."
    finite = table["n_needed"][table["n_needed"].apply(lambda v: math.isfinite(float(v)))]
    stuck = int(len(table) - len(finite) - table["n_needed"].isna().sum())
    undecided = int((~table["decided"]).sum())
    text = (
        f"{len(table)} primary endpoints on {int(table['n'].max())} reviews, {undecided} "
        "undecided. "
    )
    if len(finite):
        text += (
            f"Every one is decided at about {int(finite.max())} reviews, nine in ten at "
            f"{int(math.ceil(finite.quantile(0.9)))} (plug-in: the effects as measured, the "
            "equivalence CI shrinking as 1 / sqrt(n))."
        )
    if stuck:
        text += f" {stuck} sit on a margin: no size decides them."
    return text


def power_section(claims: pd.DataFrame) -> Section:
    """The report's "How many reviews": :func:`power_line` and, per model, the primary
    endpoints not decided yet with the reviews each needs (``homog claims --power`` lists
    them all)."""
    sec = Section("How many reviews")
    table = power_table(claims)
    if table.empty:
        sec.paragraphs.append("No primary endpoints in the database: nothing to size.")
        return sec
    sec.paragraphs.append(
        power_line(table)
        + " A row is decided when its equivalence CI holds neither margin; n_needed = n x "
        "(h / d)^2, h the CI's half-width, d its centre's distance to the nearer margin "
        '(docs/statistics.md, "How many reviews"; every row: `homog claims --power`).'
    )
    open_rows = table[~table["decided"]]
    for model, g in open_rows.groupby("model", sort=False):
        cells = [
            [r["comparison"], r["metric"], r["scope"], r["effect"], r["sesoi"]]
            + [r["eq_half_width"], r["n"], r["n_needed"]]
            for _, r in g.iterrows()
        ]
        columns = ["comparison", "metric", "scope", "effect", "SESOI", "CI half-width", "n"]
        sec.tables.append(
            Table([*columns, "n needed"], cells, f"{model}: the undecided primary endpoints")
        )
    return sec
