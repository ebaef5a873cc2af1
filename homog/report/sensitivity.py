"""How the primary verdicts move with the margin: every primary endpoint's verdict under the
bases {sd, depth} x the multipliers {0.05, 0.1, 0.2} (docs/statistics.md, "Sensitivity").

Pure: the claims frame in, frames and a section out. A setting's SESOI is recomputed from the
row's stored ``baseline_sd`` and ``depth_change`` (homog.stats.margins.sesoi_at); a pinned
row keeps its pin at every setting. The column of the run's own setting (``stats.sesoi_basis``
x ``stats.sesoi``) is the claims table's verdict, so that it equals ``homog claims``.
"""

from __future__ import annotations

import math

import pandas as pd

from homog.claims import PRIMARY
from homog.report.document import Section, Table
from homog.stats.margins import sesoi_at
from homog.stats.verdicts import judge

BASES = ("sd", "depth")
FACTORS = (0.05, 0.1, 0.2)
SETTINGS = tuple((b, f) for b in BASES for f in FACTORS)
HOLDS = "holds at every margin"
KEYS = ("model", "comparison", "metric", "scope")
SIGN = {"+": 1, "-": -1}


def label(basis: str, factor: float) -> str:
    return f"{basis} x {factor:g}"


def _num(row: pd.Series, col: str) -> float:
    v = row.get(col, math.nan)
    return float(v) if v is not None and pd.notna(v) else math.nan


def verdict_at(row: pd.Series, basis: str, factor: float, alpha: float) -> str:
    """The verdict of primary claim row ``row`` with the margin of ``basis`` x ``factor``."""
    if str(row.get("sesoi_basis", "")).startswith("pinned"):
        sesoi = _num(row, "sesoi")
    else:
        sesoi = sesoi_at(_num(row, "depth_change"), _num(row, "baseline_sd"), factor, basis)

    def g(col: str) -> float:
        return _num(row, col)

    return judge(
        g("effect"),
        (g("ci_low"), g("ci_high")),
        (g("eq_ci_low"), g("eq_ci_high")),
        sesoi,
        g("p_holm"),
        alpha,
        SIGN.get(str(row.get("claimed"))),
        g("n"),
        g("p_tost"),
    )


def sensitivity_table(
    claims: pd.DataFrame, alpha: float, default: tuple[str, float]
) -> pd.DataFrame:
    """One row per primary endpoint: its keys, effect and CI, its verdict per setting (columns
    ``sd x 0.05`` ... ``depth x 0.2``), ``default`` (the label of the run's own setting) and
    ``holds`` (HOLDS, or the settings where the verdict differs from the default's)."""
    if claims.empty or "family" not in claims.columns:
        return pd.DataFrame()
    prim = claims[claims["family"] == PRIMARY]
    own = label(*default)
    rows = []
    for _, r in prim.iterrows():
        out = {k: r[k] for k in KEYS}
        out.update(effect=r["effect"], ci_low=r["ci_low"], ci_high=r["ci_high"])
        for basis, factor in SETTINGS:
            name = label(basis, factor)
            out[name] = r["verdict"] if name == own else verdict_at(r, basis, factor, alpha)
        if own not in out:  # a run's own setting outside the grid: its column beside them
            out[own] = r["verdict"]
        changed = [f"{n} ({out[n]})" for n in _labels(own) if n != own and out[n] != r["verdict"]]
        out["default"] = own
        out["holds"] = HOLDS if not changed else "changes at " + ", ".join(changed)
        rows.append(out)
    return pd.DataFrame(rows)


def _labels(own: str) -> list[str]:
    return [*(label(b, f) for b, f in SETTINGS), own]


def with_sensitivity(
    claims: pd.DataFrame, alpha: float, default: tuple[str, float]
) -> pd.DataFrame:
    """``claims`` with the column ``margin_sensitivity``: for a primary row HOLDS or the
    settings where its verdict changes; empty for every other row."""
    table = sensitivity_table(claims, alpha, default)
    claims = claims.copy()
    claims["margin_sensitivity"] = ""
    if not table.empty:
        prim = claims.index[claims["family"] == PRIMARY]
        claims.loc[prim, "margin_sensitivity"] = table["holds"].to_numpy()
    return claims


def holds_phrase(rows: pd.DataFrame) -> str:
    """The answer's words for a primary question's rows: HOLDS, or which settings change how
    many of its verdicts."""
    if "margin_sensitivity" not in rows.columns or rows.empty:
        return ""
    changes = rows["margin_sensitivity"].astype(str)
    moved = changes[changes != HOLDS]
    if moved.empty:
        return f"every verdict {HOLDS} (sd and depth x 0.05, 0.1, 0.2)"
    count: dict[str, int] = {}
    for text in moved:
        for part in text.removeprefix("changes at ").split(", "):
            name = part.split(" (")[0]
            count[name] = count.get(name, 0) + 1
    where = ", ".join(f"{name} ({k})" for name, k in count.items())
    return f"{len(moved)} of {len(rows)} verdicts change with the margin: at {where}"


def sensitivity_section(claims: pd.DataFrame, alpha: float, default: tuple[str, float]) -> Section:
    """The report's table of every primary verdict under every margin setting."""
    sec = Section("Margin sensitivity")
    table = sensitivity_table(claims, alpha, default)
    if table.empty:
        sec.paragraphs.append("No primary endpoints in the database.")
        return sec
    own = label(*default)
    names = list(dict.fromkeys(_labels(own)))
    k = int((table["holds"] != HOLDS).sum())
    sec.paragraphs.append(
        "Every primary endpoint's verdict with the margin (SESOI) of each basis (sd: the "
        "original's between-text SD at the row's scope; depth: its early-to-late change where "
        "the metric homogenizes monotonically, never below the SD) times each multiplier. "
        f"The run's own setting is {own} (stats.sesoi_basis x stats.sesoi): its column is the "
        f"claims table's verdict. {k} of {len(table)} verdicts change with the margin."
    )
    for model, g in table.groupby("model", sort=False):
        cells = [
            [
                r["comparison"],
                r["metric"],
                r["scope"],
                r["effect"],
                r["ci_low"],
                r["ci_high"],
                *(r[n] for n in names),
            ]
            for _, r in g.iterrows()
        ]
        sec.tables.append(
            Table(
                ["comparison", "metric", "scope", "effect", "CI low", "CI high", *names],
                cells,
                f"{model}: primary verdicts per margin",
            )
        )
    return sec
