"""The report's section "Does homogenization cost anything?" (the paper's Open Question 1).

From the probe stage's ``probe_metrics`` table (``homog probe``, :mod:`homog.probe.view`): how
well a linear probe reads the review's sentiment from each layer, per variant; the model's
own zero-shot answer per variant and intervention; and the within-text slope of both on the
change in erank, with its verdict. Pure: a frame in, a section (and one figure) out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from homog.plot import legend_below
from homog.probe.view import report_data
from homog.report.answer_line import AnswerLine, endpoint_line
from homog.report.cost_doses import dose_parts, primary_cost_line
from homog.report.cost_tables import (
    band_table,
    diff_table,
    lm_table,
    sig3,
    slope_table,
    verdict_tally,
)
from homog.report.document import Section
from homog.variants import colors_for, order_key

TITLE = "Does homogenization cost anything?"


def _zero_pos_effect(diffs: pd.DataFrame, model: str) -> str:
    """``"zero_pos changes the final band's probe accuracy by -0.127 [...] (supported); "``
    (train_original, original texts), or "" when the table has no such band row."""
    if diffs.empty or "band" not in diffs:
        return ""
    sel = diffs[
        (diffs["model"] == model)
        & (diffs["baseline"] == "none")
        & (diffs["intervention"] == "zero_pos")
        & (diffs["variant"] == "original")
        & (diffs["scheme"] == "train_original")
        & (diffs["metric"] == "accuracy")
        & (diffs["band"] == "final")
        & diffs["layer"].isna()
    ]
    if sel.empty:
        return ""
    r = sel.iloc[0]
    return (
        f"zero_pos changes the final layer's probe accuracy by {sig3(r['value'])} "
        f"[{sig3(r['ci_low'])}, {sig3(r['ci_high'])}] ({r['verdict']}); "
    )


SHARES = {
    0.05: "a twentieth of",
    0.1: "a tenth of",
    0.2: "a fifth of",
    0.25: "a quarter of",
    0.5: "half of",
}


def share_words(probe_metrics: pd.DataFrame) -> str:
    """stats.sesoi as the probe stage applied it, in words ("a tenth of", "0.3 x"), read from
    the rows' ``sesoi_basis`` ("0.3 x the baseline's ..."); "stats.sesoi x" when absent."""
    basis = probe_metrics.get("sesoi_basis", pd.Series(dtype=object)).dropna().astype(str)
    factors = {b.split(" x ", 1)[0] for b in basis if " x " in b}
    if len(factors) != 1:
        return "stats.sesoi x"
    text = factors.pop()
    try:
        value = float(text)
    except ValueError:
        return "stats.sesoi x"
    return next((w for f, w in SHARES.items() if abs(f - value) < 1e-12), f"{text} x")


def cost_line(probe_metrics: pd.DataFrame, data: dict | None = None) -> AnswerLine | None:
    """The answer's line: the slopes' verdicts per model (the cost question's primary family),
    and the best probe layer (``data``: ``report_data(probe_metrics)`` when the caller has
    it)."""
    if probe_metrics is None or probe_metrics.empty:
        return None

    data = data if data is not None else report_data(probe_metrics)
    slopes, best = data["slopes"], data["best"]
    parts = []
    for model in dict.fromkeys(probe_metrics["model"]):
        s = slopes[slopes["model"] == model]
        b = best[best["model"] == model]
        probe = (
            f"probe best at layer {int(b.iloc[0]['layer'])}"
            + (" (chosen on the other folds)" if bool(b.iloc[0].get("honest")) else "")
            + f", accuracy {sig3(b.iloc[0]['value'])} "
            f"[{sig3(b.iloc[0]['ci_low'])}, {sig3(b.iloc[0]['ci_high'])}]"
            if len(b)
            else "no probe"
        )
        zp = _zero_pos_effect(data["diffs"], model)
        parts.append(
            f"{model}: {probe}; {zp}slopes on erank: {verdict_tally(s['verdict']) or 'none'}"
        )
    return endpoint_line(
        "Cost",
        "does a lower erank go with a worse reading of the sentiment? Within-text slopes, "
        f"their own primary family; SESOI: {share_words(probe_metrics)} the margin per the "
        "early-to-late erank change",
        f"{'; '.join(parts)}.",
        slopes["verdict"],
    )


def _figure(curves: pd.DataFrame, path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = curves[
        (curves["scheme"] == "train_original")
        & (curves["intervention"] == "none")
        & (curves["metric"] == "accuracy")
    ]
    if sel.empty:
        return None
    models = list(dict.fromkeys(sel["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.2), squeeze=False)
    # one colour per variant in every panel, the registry's (the models may hold different
    # variants), legend in the registry's order
    colour = colors_for(set(sel["variant"]))
    for ax, model in zip(axes[0], models, strict=True):
        for variant, g in sel[sel["model"] == model].groupby("variant", sort=True):
            g = g.sort_values("layer")
            ax.plot(g["layer"], g["value"], lw=1.2, label=variant, color=colour[variant])
        ax.axhline(0.5, color="#999", lw=0.8, ls="--")
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("layer", fontsize=8)
        ax.set_ylabel("probe accuracy (trained on originals)", fontsize=8)
    fig.tight_layout()
    seen: dict[str, object] = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    labels = sorted(seen, key=order_key)
    legend_below(fig, [seen[k] for k in labels], labels, ncol=min(len(labels), 8))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def slope_precision(slopes: pd.DataFrame) -> str | None:
    """How far the slopes' equivalence CIs are from fitting inside +-SESOI: the range over the
    inconclusive slopes of (CI width) / (2 SESOI), and the factor of reviews that would narrow
    the widest to fit (width shrinks as 1 / sqrt(n)). None when no slope is inconclusive or
    the table has no SESOI."""
    if slopes.empty or "sesoi" not in slopes or "eq_ci_low" not in slopes:
        return None
    sel = slopes[(slopes["verdict"] == "inconclusive") & (slopes["sesoi"] > 0)]
    ratio = ((sel["eq_ci_high"] - sel["eq_ci_low"]) / (2 * sel["sesoi"])).dropna()
    if ratio.empty:
        return None
    return (
        f"Precision: the {len(ratio)} inconclusive slopes' equivalence CIs are "
        f"{ratio.min():.2g} to {ratio.max():.2g} times as wide as +-SESOI. The within-text "
        "erank changes of these manipulations are small, so the slope is loosely pinned: "
        f"about {ratio.max() ** 2:.0f} times as many reviews would be needed before the widest "
        "could fit inside the margin."
    )


def cost_section(
    probe_metrics: pd.DataFrame,
    figdir: Path,
    doses: pd.DataFrame | None = None,
    checks: list[str] | None = None,
) -> Section:
    """The section: the homogenize doses' cost (``doses``: the intervention_cost table,
    homog.report.cost_doses) and their ``checks`` (lines: homogenize:0 against the unchanged
    run, erank falling with alpha) first, then the probe curves, the zero-shot answer per
    variant and the within-text slopes (exploratory where the doses give the primary
    endpoint)."""
    sec = Section(TITLE)
    sec.paragraphs, sec.tables, sec.figures = dose_parts(doses, figdir)
    if sec.paragraphs:  # the doses' checks after their primary line
        sec.paragraphs += [f"**Check.** {x}." for x in checks or []]
    if probe_metrics is None or probe_metrics.empty:
        sec.paragraphs.append(
            "No probe tables in the database: run `homog probe --model KEY` for each model "
            "(the `probe@<model>` stages of dvc.yaml) and `homog load`."
        )
        return sec
    data = report_data(probe_metrics)
    sec.paragraphs.append(
        "A logistic probe (folds grouped by review) reads the review's label from each "
        "layer's mean hidden state, trained on the originals and tested on every variant of "
        "the held-out reviews; the model's own answer is its zero-shot log-odds of ' positive' "
        "against ' negative' after the review (docs/probe.md). The slopes regress the change "
        "in margin on the change in erank within review (fixed effects), CI over reviews."
    )
    line = cost_line(probe_metrics, data)
    if line is not None:
        beside = primary_cost_line(doses) is not None
        prefix = "Exploratory beside the doses' primary endpoint: " if beside else ""
        sec.paragraphs.append(prefix + line.markdown)
    precision = slope_precision(data["slopes"])
    if precision:
        sec.paragraphs.append(precision)
    sec.tables.append(lm_table(data["lm"]))
    share = share_words(probe_metrics)
    sec.tables.append(slope_table(data["slopes"], share))
    for table in (band_table(data["diffs"], share), diff_table(data["diffs"])):
        if table is not None:
            sec.tables.append(table)
    l0 = data["layer0"]
    if len(l0):
        sec.paragraphs.append(
            "Layer-0 control: the position family's largest |difference| from the original at "
            f"layer 0 is {sig3(l0['abs_diff'].max())} (the same tokens, so 0 up to rounding)."
        )
    path = _figure(data["curves"], figdir / "cost_probe_accuracy.png")
    if path is not None:
        sec.figures.append((path, "probe accuracy against layer, per variant (dashed: chance)"))
    return sec
