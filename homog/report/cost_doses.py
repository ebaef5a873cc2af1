"""The homogenize doses' part of "Does homogenization cost anything?": it leads the section.

From the stats stage's ``intervention_cost`` table (homog.stats.intervention_cost): per model
the answer line from the primary endpoint (the per-text slope of the LM's zero-shot margin on
alpha, homogenize minus control), one dose-response figure per model (x the measured change of
final-layer erank against dose 0, y the mean margin, the homogenization and its control with
the margin's CI band), and the primary and per-dose rows as tables. Pure: a frame in, its
parts of the section out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from homog.report.answer_line import AnswerLine, endpoint_line
from homog.report.document import Table

COST_SQL = (
    "SELECT c.* FROM intervention_cost c JOIN runs r USING (run_id) "
    "ORDER BY c.model, c.kind, c.metric, c.arm, c.band, c.dose"
)
DIFF_ARM = "homogenize - control"
ARMS = {"homogenize": "#c0392b", "control": "#7f8c8d"}


def _g(x: float) -> str:
    return f"{float(x):.3g}" if pd.notna(x) else "n/a"


def _primary(cost: pd.DataFrame | None) -> pd.DataFrame:
    if cost is None or cost.empty:
        return pd.DataFrame()
    return cost[(cost["kind"] == "slope") & (cost["arm"] == DIFF_ARM)]


def primary_cost_line(cost: pd.DataFrame | None) -> AnswerLine | None:
    """The answer's cost line from the primary endpoint, per model: value [CI], SESOI,
    verdict; None when the table has no primary row."""
    sel = _primary(cost)
    if sel.empty:
        return None
    words = {"supported": "a cost", "reversed": "a gain"}
    parts = [
        f"{r.model}: {_g(r.value)} [{_g(r.ci_low)}, {_g(r.ci_high)}] nats per unit alpha, "
        f"SESOI {_g(r.sesoi)}, {r.verdict}"
        + (f" ({words[r.verdict]})" if r.verdict in words else "")
        + f" (n = {int(r.n)})"
        for r in sel.itertuples()
    ]
    return endpoint_line(
        "Cost",
        "does making the tokens alike cost the model its answer? The per-text slope of "
        "the zero-shot margin on the homogenize dose alpha, minus the slope under a "
        "perturbation of the same size; the primary endpoint",
        "; ".join(parts) + ".",
        sel["verdict"],
    )


def _points(cost: pd.DataFrame, model: str, arm: str) -> pd.DataFrame:
    """Per dose of ``arm``: x (final-layer erank change, 0 at dose 0) and the margin's level
    with its CI."""
    c = cost[(cost["model"] == model) & (cost["arm"] == arm)]
    y = c[(c["kind"] == "level") & (c["metric"] == "lm_margin")]
    x = c[(c["kind"] == "manipulation") & (c["band"] == "final")]
    out = y[["dose", "value", "ci_low", "ci_high"]].merge(
        x[["dose", "value"]].rename(columns={"value": "x"}), on="dose", how="left"
    )
    out.loc[out["dose"] == 0, "x"] = 0.0
    return out.sort_values("dose")


def cost_figure(cost: pd.DataFrame, model: str, path: Path) -> Path | None:
    """One model's dose-response: x the measured final-layer erank change, y the mean LM
    margin, one line per arm with the margin's CI band; None without level rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    drawn = False
    for arm, colour in ARMS.items():
        p = _points(cost, model, arm).dropna(subset=["x"])
        if p.empty:
            continue
        drawn = True
        order = p.sort_values("x")
        ax.fill_between(order["x"], order["ci_low"], order["ci_high"], color=colour, alpha=0.18)
        ax.plot(order["x"], order["value"], marker="o", color=colour, lw=1.4, label=arm)
        for r in p.itertuples():
            ax.annotate(
                f"{r.dose:g}",
                (r.x, r.value),
                textcoords="offset points",
                xytext=(3, 4),
                fontsize=7,
                color=colour,
            )
    if not drawn:
        plt.close(fig)
        return None
    ax.axhline(0, color="#999", lw=0.8, ls="--")
    ax.axvline(0, color="#ccc", lw=0.6)
    ax.set_title(f"{model}: the zero-shot answer under homogenize and its control", fontsize=9)
    ax.set_xlabel("measured change of final-layer erank against alpha = 0", fontsize=8)
    ax.set_ylabel("LM margin on the true label (log-odds)", fontsize=8)
    ax.legend(fontsize=8, title="arm (labels: alpha)", title_fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


SLOPE_COLUMNS = [
    "model",
    "arm",
    "value",
    "ci_low",
    "ci_high",
    "sesoi",
    "p_holm",
    "n",
    "family_holm",
    "verdict",
]
SLOPE_HEADERS = [
    "model",
    "arm",
    "slope (nats per alpha)",
    "CI low",
    "CI high",
    "SESOI",
    "p_holm",
    "n",
    "family",
    "verdict",
]


def primary_table(cost: pd.DataFrame) -> Table:
    """The slopes of the margin on alpha: each arm's and their difference (primary)."""
    sel = cost.loc[cost["kind"] == "slope", SLOPE_COLUMNS].astype(object)
    return Table(
        SLOPE_HEADERS,
        sel.to_numpy().tolist(),
        "per text, the least-squares slope of the zero-shot margin on alpha across the doses; "
        "homogenize - control (the primary endpoint, Holm over its one row per model) is the "
        "cost of the tokens growing alike at matched perturbation size. SESOI: "
        "stats.cost_margin per the range of alpha; the verdict claims a fall",
        verdict_column="verdict",
    )


DOSE_COLUMNS = [
    "model",
    "arm",
    "dose",
    "metric",
    "band",
    "value",
    "ci_low",
    "ci_high",
    "sesoi",
    "p_holm",
    "verdict",
]
DOSE_HEADERS = [
    "model",
    "arm",
    "dose",
    "metric",
    "band",
    "change",
    "CI low",
    "CI high",
    "SESOI",
    "p_holm",
    "verdict",
]


def dose_table(cost: pd.DataFrame) -> Table:
    """Each dose's change against dose 0, per arm: the zero-shot margin, accuracy and AUC,
    and the probe's accuracy and margin per band."""
    sel = cost.loc[cost["kind"] == "dose", DOSE_COLUMNS].astype(object)
    sel["band"] = sel["band"].where(sel["band"].notna(), "")
    return Table(
        DOSE_HEADERS,
        sel.to_numpy().tolist(),
        "each dose minus alpha = 0 (exploratory, Holm within): the zero-shot margin in nats "
        "(SESOI stats.cost_margin), its accuracy and AUC (SESOI stats.cost_accuracy_margin); "
        "the probe's (trained on the unchanged originals) accuracy and margin at the final "
        "layer and over the late band",
        verdict_column="verdict",
    )


def dose_parts(
    cost: pd.DataFrame | None, figdir: Path
) -> tuple[list[str], list[Table], list[tuple[Path, str]]]:
    """(paragraphs, tables, figures) that lead the cost section; empty without rows."""
    if cost is None or cost.empty:
        return [], [], []
    paragraphs = [
        "The homogenize doses move every token towards the mean of the tokens before it, at "
        "one layer, by alpha; the control moves each token as far in a direction that does "
        "not make the tokens alike (docs/interventions.md). The model's own answer to the "
        "review's question after each dose is the outcome."
    ]
    line = primary_cost_line(cost)
    if line is not None:
        paragraphs.append(line.markdown)
    figures = []
    for model in dict.fromkeys(cost["model"]):
        path = cost_figure(cost, model, figdir / f"cost_doses__{model}.png")
        if path is not None:
            figures.append(
                (
                    path,
                    f"{model}: the LM's margin (CI band over texts) against the "
                    "measured final-layer erank change, per dose (labels: alpha)",
                )
            )
    return paragraphs, [primary_table(cost), dose_table(cost)], figures
