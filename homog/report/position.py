"""The report's section on position and its negative control: each band contrast beside its
layer-0 difference (from the ``contrasts`` table), and the dose-response of the metrics on the
key sentence's position from the stats stage's ``dose_response`` table when the database
holds the key_* family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from homog.metrics.registry import glossary_unit
from homog.plot import dose_response_figure
from homog.report.claims_view import tally
from homog.report.document import Section, Table
from homog.report.figures_position import layer0_contrast_figure
from homog.stats.verdicts import verdict_of
from homog.store.query import summary_names

CONTROL_METRICS = ("erank", "erank__no_sink", "erank__standardized", "attn_first")


def is_family(variant: str) -> bool:
    return variant.startswith("key_")


def layer0_rows(contrasts: pd.DataFrame, runs: pd.DataFrame, metric: str) -> list[dict]:
    """Per unchanged run and variant pair: the layer-0 contrast and the band contrasts."""
    if contrasts.empty or runs.empty:
        return []
    unchanged = runs[runs["intervention"].fillna("none") == "none"]
    c = contrasts[
        (contrasts["metric"] == metric)
        & contrasts["baseline_run_id"].isna()
        & contrasts["run_id"].isin(unchanged["run_id"])
    ]
    model = dict(zip(unchanged["run_id"], unchanged["model"], strict=True))
    rows, seen = [], set()
    for r in c.itertuples():
        if isinstance(r.band, str):
            # newer stats stages report layer 0 and the final layer as bands of their own
            level = {"layer0": "layer 0"}.get(r.band, r.band)
        elif r.layer == 0:
            level = "layer 0"
        else:
            continue
        key = (model[r.run_id], r.variant_a, r.variant_b, level)
        if key in seen:
            continue
        seen.add(key)
        rows.append(
            {
                "model": model[r.run_id],
                "comparison": f"{r.variant_a} - {r.variant_b}",
                "level": level,
                "mean_diff": float(r.mean_diff),
                "ci_low": float(r.ci_low),
                "ci_high": float(r.ci_high),
            }
        )
    return rows


def position_section(
    con: Any,
    data: dict[str, pd.DataFrame],
    variants: list[str],
    figdir: Path,
    alpha: float = 0.05,
    dose_figures: Sequence[str] | None = None,
) -> Section:
    """The layer-0 control figures, and the stats stage's dose-response table and figures
    when the database holds them (else a paragraph saying why there are none); the
    dose-response figures of the metrics ``dose_figures`` (None: every metric's)."""
    sec = Section(
        "Position and its negative control",
        paragraphs=[
            "Layer 0 is the token embeddings: these models give it no position, so a contrast "
            "that already differs there differs by its words. Each figure puts every band "
            "contrast (a - b, mean over texts, 95% bootstrap CI) beside the same contrast at "
            "layer 0 (hollow square). Only what a band adds beyond layer 0 can be position."
        ],
    )
    contrasts, runs = data["contrasts"], data["runs"]
    present = set(contrasts["metric"]) if not contrasts.empty else set()
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "layer_metrics" in tables:  # the summary's names (a bundle has no raw rows)
        present |= set(summary_names(con)[0])
    for metric in CONTROL_METRICS:
        rows = layer0_rows(contrasts, runs, metric) if metric in present else []
        if rows:
            path = layer0_contrast_figure(rows, metric, figdir / f"layer0_{metric}.png")
            sec.figures.append((path, f"{metric}: band contrasts beside layer 0"))
    if not sec.figures:
        sec.paragraphs.append("No contrasts with a layer-0 row in the database.")
    family = [v for v in variants if is_family(v)]
    if (
        "dose_response" in tables
        and con.execute("SELECT count(*) FROM dose_response WHERE kind = 'slope'").fetchone()[0]
    ):
        return dose_table_section(sec, con, figdir, alpha, dose_figures)
    if family:
        sec.paragraphs.append(
            "Dose-response: the database holds the position family but no dose_response "
            "slopes (it was loaded before the stats stage wrote them): run `homog stats` and "
            "`homog load` again for the table and its figure."
        )
    else:
        sec.paragraphs.append(
            "Dose-response: the database has no position-family variants (key_first, key_mid, "
            "key_last, key_control), so there is no figure of the metrics against the key "
            "sentence's position."
        )
    return sec


DOSE_SQL = (
    "SELECT r.model, d.* FROM dose_response d JOIN runs r USING (run_id) "
    "WHERE coalesce(r.intervention, 'none') = 'none' ORDER BY r.model, d.metric, d.kind"
)


def dose_verdicts(rows: pd.DataFrame, alpha: float) -> pd.Series:
    """The four-outcome verdict of each slope / quadratic row (undirected: the paper names no
    sign for a dose), read from its Holm p and its equivalence CI against +-sesoi (columns
    absent in an older database: the margin is unknown, never inside)."""

    def get(r, c):
        v = getattr(r, c, math.nan)
        return float(v) if v is not None and pd.notna(v) else math.nan

    out = []
    cols = ("value", "ci_low", "ci_high", "eq_ci_low", "eq_ci_high", "sesoi", "p_holm")
    for r in rows.itertuples():
        out.append(verdict_of(*(get(r, c) for c in cols), alpha, n=get(r, "n")))
    return pd.Series(out, index=rows.index, dtype=object)


def dose_summary(slopes: pd.DataFrame, alpha: float) -> str:
    """One plain paragraph: per model, the slopes' verdicts above layer 0 (Holm at ``alpha``,
    margin +-sesoi) and which matter, the layer-0 slopes, and the erank / MEV answer (the
    paper's homogenization metrics)."""
    if slopes["p_holm"].isna().all():
        return (
            "Dose-response: this database's table has no Holm p (it predates the column); "
            "run `homog stats` and `homog load` again."
        )
    slopes = slopes.assign(verdict=dose_verdicts(slopes, alpha))
    parts = []
    for model, g in slopes.groupby("model", sort=True):
        inner = g[g["band"] != "layer0"]
        hit = inner[inner["verdict"].isin(["supported", "reversed"])]
        names = ", ".join(f"{r.metric} {r.band} {r.value:+.3g}" for r in hit.itertuples())
        core = inner[inner["metric"].isin(("erank", "mev"))]
        # no_sink drops the text's first token, which a reordering changes: not order-free
        l0 = g[(g["band"] == "layer0") & ~g["metric"].str.endswith("__no_sink")]
        l0_text = (
            f"its layer-0 slopes (the negative control; no_sink left out, its dropped first "
            f"token changes with the order) lie within [{l0['value'].min():.3g}, "
            f"{l0['value'].max():.3g}]"
            if len(l0)
            else "no layer-0 slope"
        )
        parts.append(
            f"{model}: slopes above layer 0: {tally(inner['verdict'])}"
            + (f"; beyond their margin: {names}" if names else "")
            + f"; erank and MEV: {tally(core['verdict'])}; {l0_text}."
        )
    return (
        f"Dose-response at alpha = {alpha:g} (Holm over each model's slopes; a slope's margin "
        "is its metric's SESOI, the change from the first word to the last): " + " ".join(parts)
    )


def dose_table_section(
    sec: Section,
    con: Any,
    figdir: Path,
    alpha: float = 0.05,
    figure_metrics: Sequence[str] | None = None,
) -> Section:
    """The stats stage's ``dose_response`` table: a summary paragraph (``dose_summary``), the
    within-text slopes as a table, and its figure (``homog.plot.dose_response_figure``) per
    metric of ``figure_metrics`` (None: every metric of the table; those it lacks are
    skipped), with a line that names the rest and the option that draws them."""
    frame = con.execute(DOSE_SQL).fetch_df()
    slopes = frame[frame["kind"].isin(["slope", "quadratic"])]
    order = {b: i for i, b in enumerate(("layer0", "early", "middle", "late", "final"))}
    slopes = slopes.assign(_o=slopes["band"].map(order)).sort_values(
        ["model", "metric", "kind", "_o"], ascending=[True, True, False, True]
    )
    if "p_holm" not in slopes:  # an older table without the column
        slopes = slopes.assign(p_holm=math.nan)
    sec.paragraphs.append(dose_summary(slopes[slopes["kind"] == "slope"], alpha))
    slopes = slopes.assign(verdict=dose_verdicts(slopes, alpha))
    sesoi = slopes["sesoi"] if "sesoi" in slopes else pd.Series(math.nan, index=slopes.index)
    rows = [
        [
            r.model,
            r.metric,
            r.kind,
            r.band,
            float(r.value),
            float(r.ci_low),
            float(r.ci_high),
            float(s),
            float(r.p_holm),
            int(r.n),
            r.verdict,
            f"{glossary_unit(r.metric)} per unit of position"
            + (" squared" if r.kind == "quadratic" else ""),
        ]
        for r, s in zip(slopes.itertuples(), sesoi, strict=True)
    ]
    sec.tables.append(
        Table(
            [
                "model",
                "metric",
                "kind",
                "band",
                "value",
                "CI low",
                "CI high",
                "SESOI",
                "p_holm",
                "n",
                "verdict",
                "unit",
            ],
            rows,
            "dose-response: within-text slope of each metric on the key sentence's "
            "position (0 = first, 1 = last), and the quadratic term (curvature about the "
            "middle; > 0: the edges higher than the middle); p_holm: Holm over every slope "
            "of the model",
            verdict_column="verdict",
        )
    )
    every = list(dict.fromkeys(frame["metric"]))
    drawn = every if figure_metrics is None else [m for m in every if m in set(figure_metrics)]
    if len(drawn) < len(every):
        sec.paragraphs.append(
            f"Figures: {', '.join(drawn) or 'none'} (the primary endpoints' metrics); the "
            f"table holds all {len(every)} metrics, and `homog report --dose-figures all` "
            "draws each one's figure."
        )
    for metric in drawn:
        rows_m = frame[frame["metric"] == metric].to_dict("records")
        path = dose_response_figure(rows_m, metric, figdir / f"dose_{metric}.png")
        sec.figures.append((path, f"{metric} against the key sentence's position, per band"))
    return sec
