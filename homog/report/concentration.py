"""The report's section "Does attention concentration drive homogenization?" (sink_bias).

From the stats stage's ``intervention_doses`` table (homog.stats.intervention_doses): per
model, the answer line from the primary endpoint (the sink arm's within-text slope of erank on
``attn_first`` minus the control's on ``attn_ctrl_token``, at the final layer and the late
band), the slopes and the doses as tables, and one dose-response figure per model: x the
measured change of the arm's x (``attn_first``; the control's ``attn_ctrl_token``), y the
change of erank, both against dose 0, sink and control with the erank
change's CI band. Pure: a frame in, a section (and its figures) out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from homog.report.answer_line import AnswerLine, endpoint_line
from homog.report.document import Section, Table
from homog.stats.dose_checks import CHECK, family_check_lines

TITLE = "Does attention concentration drive homogenization?"
FAMILY = "sink_bias"
DOSES_SQL = (
    "SELECT d.*, r.model FROM intervention_doses d "
    "JOIN runs r USING (run_id) ORDER BY r.model, d.arm, d.band, d.dose"
)


def _g(x: float) -> str:
    return f"{float(x):.3g}" if pd.notna(x) else "n/a"


BANDS = ["late", "final"]  # the primary endpoint's scopes, in the order shown


def answer_line(doses: pd.DataFrame) -> AnswerLine | None:
    """Per model the primary endpoint in the late band and at the final layer: value [CI],
    SESOI, verdict."""
    sel = doses[
        (doses["family"] == FAMILY)
        & (doses["kind"] == "slope")
        & (doses["arm"] == f"{FAMILY} - control")
        & doses["band"].isin(BANDS)
    ]
    if sel.empty:
        return None
    parts = []
    for model, g in sel.groupby("model", sort=False):
        g = g.sort_values("band", key=lambda b: b.map(BANDS.index))
        bands = [
            f"{r.band} {_g(r.value)} [{_g(r.ci_low)}, {_g(r.ci_high)}], SESOI {_g(r.sesoi)}, "
            f"{r.verdict}"
            for r in g.itertuples()
        ]
        parts.append(f"{model}: " + "; ".join(bands) + f" (n = {int(g['n'].max())})")
    return endpoint_line(
        "Attention concentration",
        f"{FAMILY}; the sink's within-text slope of erank on attn_first minus the control's "
        "on attn_ctrl_token, in erank per unit of attention, late band and final layer; the "
        "primary endpoint",
        " | ".join(parts) + ".",
        sel["verdict"],
    )


def _figure(doses: pd.DataFrame, model: str, path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = doses[
        (doses["model"] == model)
        & (doses["family"] == FAMILY)
        & (doses["kind"] == "dose")
        & (doses["band"] == "final")
    ]
    if sel.empty:
        return None
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    for arm, colour in ((FAMILY, "#D55E00"), ("control", "#0072B2")):
        a = sel[sel["arm"] == arm]
        x = a[a["metric"] == a["x_metric"]].set_index("dose")["value"]  # the arm's own x
        y = a[a["metric"] == "erank"].set_index("dose")
        doses_ = sorted(set(x.index) & set(y.index) | {0.0})
        xs = [0.0 if d == 0 else x[d] for d in doses_]
        ys = [0.0 if d == 0 else y.loc[d, "value"] for d in doses_]
        lo = [0.0 if d == 0 else y.loc[d, "ci_low"] for d in doses_]
        hi = [0.0 if d == 0 else y.loc[d, "ci_high"] for d in doses_]
        xs, ys, lo, hi = zip(*sorted(zip(xs, ys, lo, hi, strict=True)), strict=True)
        label = "sink: attn_first" if arm == FAMILY else "control: attn_ctrl_token"
        ax.plot(xs, ys, "o-", color=colour, lw=1.2, ms=3, label=label)
        ax.fill_between(xs, lo, hi, color=colour, alpha=0.15, lw=0)
    ax.axhline(0, color="#999", lw=0.6)
    ax.axvline(0, color="#999", lw=0.6)
    ax.set_title(f"{model}: final layer, change against beta = 0", fontsize=9)
    ax.set_xlabel("measured change of the biased token's attention", fontsize=8)
    ax.set_ylabel("change of erank (95 % CI over texts)", fontsize=8)
    ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _tables(doses: pd.DataFrame) -> list[Table]:
    """The slope table and the per-dose table."""
    tables = []
    slopes = doses[doses["kind"] == "slope"]
    tables.append(
        Table(
            [
                "model",
                "arm",
                "x",
                "band",
                "slope",
                "CI low",
                "CI high",
                "SESOI",
                "p_holm",
                "n",
                "verdict",
            ],
            [
                [
                    r.model,
                    r.arm,
                    r.x_metric,
                    r.band,
                    r.value,
                    r.ci_low,
                    r.ci_high,
                    r.sesoi,
                    r.p_holm,
                    int(r.n),
                    r.verdict,
                ]
                for r in slopes.itertuples()
            ],
            "within-text slope of erank on the arm's x across the doses (per unit of x: "
            "attn_first for the sink, attn_ctrl_token, its own token's attention, for the "
            "control)",
            verdict_column="verdict",
        )
    )
    pts = doses[doses["kind"] == "dose"]
    tables.append(
        Table(
            [
                "model",
                "arm",
                "band",
                "metric",
                "beta",
                "change vs beta = 0",
                "CI low",
                "CI high",
                "verdict",
            ],
            [
                [
                    r.model,
                    r.arm,
                    r.band,
                    r.metric,
                    r.dose,
                    r.value,
                    r.ci_low,
                    r.ci_high,
                    r.verdict if r.metric != r.x_metric else "(manipulation)",
                ]
                for r in pts.itertuples()
            ],
            "each dose against beta = 0 (the arm's x: the manipulation check)",
            verdict_column="verdict",
        )
    )
    return tables


def concentration_section(doses: pd.DataFrame, figdir: Path) -> Section | None:
    """The section, or None when the database has no sink_bias dose series."""
    if doses is None or doses.empty or not (doses["family"] == FAMILY).any():
        return None
    doses = doses[doses["family"] == FAMILY]
    sec = Section(TITLE)
    sec.paragraphs.append(
        "The attention logit of every query towards the sink (the first token) is shifted by "
        "beta in every head of the layers from extract.sink_bias_onset on; the control shifts "
        "it towards one interior token per text instead (docs/interventions.md). Within each "
        "text, erank is regressed across the doses on the attention the biased token "
        "receives as measured (attn_first for the sink, attn_ctrl_token for the control's "
        "token); the primary endpoint is the sink's slope minus the control's (CI over "
        "texts)."
    )
    line = answer_line(doses)
    if line is not None:
        sec.paragraphs.append(line.markdown)
    # the identity and the monotonicity of the dose series: one line per model each
    sec.paragraphs += [f"**Check.** {x}." for x in family_check_lines(doses, "sink_bias")]
    sec.tables += _tables(doses[doses["family_holm"] != CHECK])
    for model in dict.fromkeys(doses["model"]):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(model))
        path = _figure(doses, model, figdir / f"concentration_{safe}.png")
        if path is not None:
            sec.figures.append(
                (path, f"{model}: dose-response of erank on the biased token's attention")
            )
    return sec
