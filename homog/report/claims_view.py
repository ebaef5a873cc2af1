"""The claims for a reader: an overall summary, one plain paragraph per claim generated from
its rows, and the detailed tables (pure: a claims frame in, sections out).

The claims frame is ``homog.report.claims.claims_table``'s. Columns that a database or an
older claims table lacks (``raw_effect``, ``dz``, ``p_tost``, ``layer0_effect``, ...) show as
"n/a"; nothing here requires them.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd

from homog.claims import Tag, group_of
from homog.metrics.registry import glossary_unit, token_set_of
from homog.report.document import Section, Table, fmt

NA = "n/a"
VERDICT_ORDER = (
    "supported",
    "reversed",
    "nonzero",
    "negligible",
    "equivalent",
    "inconclusive",
    "too few pairs",
    "descriptive",
    "equivalent to no effect",
    "not supported",
)
TITLES = {
    "1": "Front and End texts homogenize more than the original (lower effective rank, higher "
    "MEV), and the key sentence more at the edges than in the middle (1u, the U-shape)",
    "2": "Homogenization is progressive over depth and fastest in the middle layers",
    "3": "Attention concentrates on the first token, and the biased texts differ from the "
    "original there",
    "4": "A classifier on the per-layer metrics tells original from biased text (AUC; layer 0 "
    "alone is its control)",
    "5": "Open questions: the reordering effect (5a: paraphrase or moving a non-key sentence "
    "alone), the position effect (5b: position rather than rewriting or reordering), removing "
    "the positional signal (5c)",
    "P": "Position family: the metrics against the key sentence's position (key_* variants, "
    "no token added or removed)",
}
TEST_NAMES = {
    "sign_flip": "paired sign-flip permutation test of the mean",
    "wilcoxon": "Wilcoxon signed-rank",
}
# header -> column of the claims frame
COLUMNS = {
    "claim": "claim",
    "family": "family",
    "statement": "statement",
    "token set": "token_set",
    "scope": "scope",
    "verdict": "verdict",
    "claimed sign": "claimed",
    "effect": "effect",
    "CI low": "ci_low",
    "CI high": "ci_high",
    "raw effect": "raw_effect",
    "dz": "dz",
    "% of original": "pct_of_baseline",
    "p_holm": "p_holm",
    "SESOI": "sesoi",
    "eq. CI": "eq_ci",
    "layer-0 diff": "layer0_effect",
    "beyond layer 0": "rel_layer0_effect",
    "beyond layer 0, CI": "rel_layer0_ci",
    "n": "n",
    "note": "note",
}


def claim_group(row: Any) -> str:
    """The claim a row belongs to: its leading digit ("5a" -> "5"); "P" for the position
    family's rows (a claim tag without a digit that names key_* variants or key_position)."""
    tag = str(row["claim"])
    if tag[:1].isdigit():
        return tag[0]
    text = " ".join(str(row.get(c, "")) for c in ("claim", "statement", "comparison", "metric"))
    return "P" if "key" in text else tag


def _get(row: Any, column: str) -> Any:
    """A cell of the row, None when the column is absent (the caller shows n/a)."""
    return row[column] if column in row.index else None


def _num(x: Any) -> float:
    """A cell as a float (NaN for None, NA or text)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _finite(x: Any) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _flag(value: Any) -> bool:
    """True only for a set flag: None, NA and NaN (a row without the column's value) are not."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return False
    return bool(value)


def row_unit(row: Any) -> str:
    """The unit of a row's effect: its ``unit`` column, else derived from claim and metric."""
    unit = _get(row, "unit")
    if isinstance(unit, str) and unit:
        return unit
    if group_of(str(row["claim"])) == Tag.SEPARATION:
        return "layers (count)"
    return glossary_unit(str(row["metric"]))


def verdict_text(row: Any) -> str:
    """The verdict word, with the lexical-confound mark when the row carries it."""
    verdict = str(row["verdict"]) if _get(row, "verdict") is not None else NA
    if _flag(_get(row, "lexical_confound")):
        verdict += " (lexical confound)"
    return verdict


def table_cells(row: Any) -> list[Any]:
    """The detailed table's cells of one claim row (columns of COLUMNS; n/a when absent)."""
    cells: list[Any] = []
    for column in COLUMNS.values():
        if column == "token_set":
            value = _get(row, "token_set")
            value = value if isinstance(value, str) and value else token_set_of(str(row["metric"]))
        elif column == "raw_effect":
            # a database without the length adjustment: effect *is* the raw mean difference
            value = (
                _get(row, "raw_effect")
                if "raw_effect" in row.index
                else (row["effect"] if "adjusted" not in row.index else None)
            )
        elif column == "rel_layer0_ci":
            lo, hi = _get(row, "rel_layer0_ci_low"), _get(row, "rel_layer0_ci_high")
            if _finite(lo) and _finite(hi):
                value = f"[{fmt(float(lo))}, {fmt(float(hi))}]"
            else:  # n/a: no such columns; a dash: the columns, without a value in this row
                value = None if "rel_layer0_ci_low" not in row.index else math.nan
        elif column == "eq_ci":
            lo, hi = _get(row, "eq_ci_low"), _get(row, "eq_ci_high")
            if _finite(lo) and _finite(hi):
                value = f"[{fmt(float(lo))}, {fmt(float(hi))}]"
            else:
                value = None if "eq_ci_low" not in row.index else math.nan
        elif column == "verdict":
            value = verdict_text(row)
        else:
            value = _get(row, column)
        if value is None or value is pd.NA:
            value = NA
        cells.append(value.item() if hasattr(value, "item") else value)
    return cells


def units_text(rows: pd.DataFrame) -> str:
    """'erank: effective dimensions; mev: share of variance (0-1)': each metric's unit once."""
    pairs = dict.fromkeys((str(r["metric"]), row_unit(r)) for _, r in rows.iterrows())
    if len({u for _, u in pairs}) == 1:  # one unit for all (claim 4: layers)
        return next(iter(pairs))[1]
    return "; ".join(f"{m}: {u}" for m, u in pairs)


def tally(verdicts: pd.Series) -> str:
    """'3 supported, 1 reversed' in VERDICT_ORDER (other words after them), zeros left out."""
    counts = Counter(str(v) for v in verdicts)
    words = [*VERDICT_ORDER, *sorted(set(counts) - set(VERDICT_ORDER))]
    return ", ".join(f"{counts[w]} {w}" for w in words if counts.get(w)) or "no rows"


def _span(values: pd.Series) -> str:
    vals = sorted({int(v) for v in values.dropna()})
    if not vals:
        return "an unknown number of"
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"


def clearest_row(rows: pd.DataFrame) -> Any:
    """The row a paragraph quotes: a claim row, not a layer-0 control (family ``control``:
    the order-invariance check, whose exact zeros leave a rounding residue with a
    meaningless dz), where there is one; then a row without the lexical-confound mark (its
    contrast does not already differ at layer 0) where there is one; among those the
    smallest p_holm, then (many rows tie at the permutation floor) the largest standardized
    effect |dz|, which compares metrics of different units, then the largest |effect|."""

    def column(name: str) -> pd.Series:
        values = rows[name] if name in rows.columns else pd.Series(math.nan, index=rows.index)
        return pd.to_numeric(values, errors="coerce")

    marked = rows.get("lexical_confound")
    family = rows["family"] if "family" in rows.columns else pd.Series("", index=rows.index)
    key = rows.assign(
        _ctl=(family == "control").to_numpy(),
        _lex=[_flag(v) for v in marked] if marked is not None else False,
        _p=column("p_holm").fillna(2.0),
        _dz=-column("dz").abs().fillna(0.0),
        _e=-column("effect").abs().fillna(0.0),
    )
    return key.sort_values(["_ctl", "_lex", "_p", "_dz", "_e"], kind="stable").iloc[0]


def effect_phrase(row: Any) -> str:
    """'-3.012 effective dimensions (95% CI -3.2 to -2.8; dz -1.9; -8.1% of the original's
    mean)': the effect with its unit and whatever size measures the row has."""
    parts = []
    if _finite(row.get("ci_low")) and _finite(row.get("ci_high")):
        parts.append(f"CI {fmt(float(row['ci_low']))} to {fmt(float(row['ci_high']))}")
    if _finite(_get(row, "dz")):
        parts.append(f"dz {fmt(float(row['dz']))}")
    if _finite(_get(row, "pct_of_baseline")):
        parts.append(f"{fmt(float(row['pct_of_baseline']))}% of the original's mean")
    if _finite(_get(row, "layer0_effect")):
        parts.append(f"layer 0: {fmt(float(row['layer0_effect']))}")
    effect = row["effect"]
    head = f"{fmt(float(effect))} {row_unit(row)}" if _finite(effect) else "no effect measured"
    return head + (f" ({'; '.join(parts)})" if parts else "")


def claim_paragraph(group: str, rows: pd.DataFrame) -> str:
    """One plain paragraph for one claim, generated from its rows (all models)."""
    title = TITLES.get(group, f"claim {group}")
    label = "Position family" if group == "P" else f"Claim {group}"
    models = list(dict.fromkeys(rows["model"]))
    metrics = list(dict.fromkeys(rows["metric"]))
    sets = list(
        dict.fromkeys(
            rows["token_set"] if "token_set" in rows.columns else rows["metric"].map(token_set_of)
        )
    )
    answers = "; ".join(
        f"{model}: {tally(rows.loc[rows['model'] == model, 'verdict'])}" for model in models
    )
    best = clearest_row(rows)
    text = [
        f"**{label}: {title}.** Answer: {answers}.",
        f"Clearest row ({best['model']}): {best['statement']}, {best['scope']}: "
        f"{effect_phrase(best)}; p_holm {fmt(_num(best['p_holm']))}; {verdict_text(best)}.",
    ]
    if "lexical_confound" in rows.columns:
        k = int(rows["lexical_confound"].map(_flag).sum())
        if k:
            text.append(
                f"Caveat: {k} row(s) carry the lexical-confound mark (the contrast already "
                "differs at layer 0, where the model has seen no position)."
            )
    k = int(rows["verdict"].isin(["inconclusive", "not supported", "too few pairs"]).sum())
    if "family" in rows.columns:
        fam = Counter(str(f) for f in rows["family"])
        text.append(
            "Families: "
            + ", ".join(
                f"{fam[f]} {f}" for f in ("primary", "exploratory", "control") if fam.get(f)
            )
            + "."
        )
    if k:
        text.append(f"{k} row(s) cannot tell an effect from noise.")
    if "adjusted" in rows.columns and rows["adjusted"].map(_flag).any():
        k = int(rows["adjusted"].map(_flag).sum())
        text.append(f"Adjusted to zero added tokens: {k} of {len(rows)} row(s).")
    tags = list(dict.fromkeys(rows["claim"].astype(str)))
    if len(tags) > 1:
        # claim 3's two readings, 5a/5b/5c, claim 1 per token set: each gets its own answer
        parts = []
        for tag in tags:
            sub = rows[rows["claim"].astype(str) == tag]
            what = f" ({sub['statement'].iloc[0]})" if group == "3" else ""
            parts.append(f"{tag}{what}: {tally(sub['verdict'])}")
        text.append(
            ("Per reading: " if group == "3" else "Per row type: ") + "; ".join(parts) + "."
        )
    notes = [str(n) for n in rows["note"].dropna().unique() if str(n)] if "note" in rows else []
    if group == "2" and notes:
        text.append("Notes: " + "; ".join(notes[:2]) + ".")
    text.append(
        f"Tested with {len(rows)} rows on {len(models)} model(s) ({', '.join(models)}), "
        f"{_span(rows['n'])} texts per row; metrics {', '.join(metrics)}; token sets "
        f"{', '.join(map(str, sets))}. Units: {units_text(rows)}."
    )
    return " ".join(text)


def summary_section(claims: pd.DataFrame, alpha: float) -> Section:
    """The top of the report: the overall verdict tally, then one paragraph per claim."""
    sec = Section("Per claim")
    if claims.empty:
        sec.paragraphs.append(
            "No claim rows: the database has no contrasts. Run `homog stats` and `homog load`."
        )
        return sec
    groups = claims.apply(claim_group, axis=1)
    models = list(dict.fromkeys(claims["model"]))
    claim_rows = claims[claims["family"] != "control"] if "family" in claims else claims
    sec.paragraphs.append(
        f"{len(claim_rows)} claim rows (layer-0 controls aside) on {len(models)} model(s) at "
        f"alpha = {alpha:g}: {tally(claim_rows['verdict'])}. One paragraph per claim; the "
        "glossary defines the words, the detailed tables give every row."
    )
    rows = []
    for group in dict.fromkeys(groups):
        cg = claims[groups == group]
        label = "position family" if group == "P" else group
        rows.append([label, *(tally(cg.loc[cg["model"] == m, "verdict"]) for m in models)])
    sec.tables.append(Table(["claim", *models], rows, "verdicts per claim and model"))
    for group in dict.fromkeys(groups):
        sec.paragraphs.append(claim_paragraph(group, claims[groups == group]))
    return sec


def claims_section(
    claims: pd.DataFrame, alpha: float, *, ci: float = 0.95, test: str = "sign_flip"
) -> Section:
    """Every claim row, one table per claim and model (columns of COLUMNS; n/a when absent)."""
    sec = Section(
        "Claims of arXiv 2508.17126 in detail",
        paragraphs=[
            "One row per claim, model and scope. effect: the mean paired difference over texts "
            "(a - b), adjusted to zero added tokens where the row says so (raw effect: the "
            "plain difference); for claim 4 the number of layers where the metric separates "
            f"the variants in the claimed direction. CI: {ci:.0%} percentile bootstrap. "
            f"p_holm: {TEST_NAMES.get(test, test)}, Holm-corrected within its family. "
            "dz: the mean difference over its SD; % of original: the effect as a share of the "
            "original's mean. SESOI: the smallest effect of "
            "interest and eq. CI the effect's (1 - 2 alpha) CI that is read against it. "
            "family: primary (pre-registered, stats.primary; its own Holm), exploratory (Holm "
            "apart) or control (layer 0: no correction). "
            "layer-0 diff: the same contrast at layer 0 (the negative control); "
            "beyond layer 0: the band's change minus layer 0's, paired within text. "
            f"Verdict words at alpha = {alpha:g}: see the glossary. n/a: this database's claims "
            "table has no such column.",
        ],
    )
    if claims.empty:
        sec.paragraphs.append("No contrasts in the database: run `homog stats` and `homog load`.")
        return sec
    groups = claims.apply(claim_group, axis=1)
    for group in dict.fromkeys(groups):
        cg = claims[groups == group]
        for model, cm in cg.groupby("model", sort=False):
            label = "position family" if group == "P" else f"claim {group}"
            sec.tables.append(
                Table(
                    list(COLUMNS),
                    [table_cells(r) for _, r in cm.iterrows()],
                    f"{label}, {model}",
                    verdict_column="verdict",
                )
            )
    return sec
