"""The report's section "Does homogenization cost anything?" (the paper's Open Question 1).

From the probe stage's ``probe_metrics`` table (``homog probe``, :mod:`homog.probe.view`): how
well a linear probe reads the review's sentiment from each layer, per variant; the model's
own zero-shot answer per variant and intervention; and the within-text slope of both on the
change in erank, with its verdict. Pure: a frame in, a section (and one figure) out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from homog.report.document import Section, Table

TITLE = "Does homogenization cost anything?"


def _g(x) -> str:
    return f"{float(x):.3g}" if pd.notna(x) else "n/a"


def _tally(verdicts: pd.Series) -> str:
    """``"6 equivalent, 2 inconclusive"`` in the verdicts' order (homog.stats.verdicts)."""
    from homog.stats.verdicts import VERDICTS

    counts = verdicts.value_counts()
    order = [v for v in VERDICTS if v in counts] + [v for v in counts.index if v not in VERDICTS]
    return ", ".join(f"{int(counts[v])} {v}" for v in order)


def _zero_pos_effect(diffs: pd.DataFrame, model: str) -> str:
    """``"zero_pos changes the final band's probe accuracy by -0.127 [...] (supported); "``
    (train_original, original texts), or "" when the table has no such band row."""
    if diffs.empty or "band" not in diffs:
        return ""
    sel = diffs[(diffs["model"] == model) & (diffs["baseline"] == "none")
                & (diffs["intervention"] == "zero_pos") & (diffs["variant"] == "original")
                & (diffs["scheme"] == "train_original") & (diffs["metric"] == "accuracy")
                & (diffs["band"] == "final") & diffs["layer"].isna()]  # fmt: skip
    if sel.empty:
        return ""
    r = sel.iloc[0]
    return (f"zero_pos changes the final layer's probe accuracy by {_g(r['value'])} "
            f"[{_g(r['ci_low'])}, {_g(r['ci_high'])}] ({r['verdict']}); ")  # fmt: skip


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


def cost_line(probe_metrics: pd.DataFrame, data: dict | None = None) -> str | None:
    """The answer's line: the slopes' verdicts per model (the cost question's primary family),
    and the best probe layer (``data``: ``report_data(probe_metrics)`` when the caller has
    it)."""
    if probe_metrics is None or probe_metrics.empty:
        return None
    from homog.probe.view import report_data

    data = data if data is not None else report_data(probe_metrics)
    slopes, best = data["slopes"], data["best"]
    parts = []
    for model in dict.fromkeys(probe_metrics["model"]):
        s = slopes[slopes["model"] == model]
        b = best[best["model"] == model]
        probe = (
            f"probe best at layer {int(b.iloc[0]['layer'])}"
            + (" (chosen on the other folds)" if bool(b.iloc[0].get("honest")) else "")
            + f", accuracy {_g(b.iloc[0]['value'])} "
            f"[{_g(b.iloc[0]['ci_low'])}, {_g(b.iloc[0]['ci_high'])}]"
            if len(b)
            else "no probe"
        )
        zp = _zero_pos_effect(data["diffs"], model)
        parts.append(f"{model}: {probe}; {zp}slopes on erank: {_tally(s['verdict']) or 'none'}")
    return (
        "**Cost** (does a lower erank go with a worse reading of the sentiment? Within-text "
        f"slopes, their own primary family; SESOI: {share_words(probe_metrics)} the margin per "
        f"the early-to-late erank change): {'; '.join(parts)}."
    )


def _grain(diffs: pd.DataFrame) -> pd.Series:
    """Each diff row's grain: ``layer``, ``band`` (the band means) or ``zero-shot``."""
    band = diffs["band"] if "band" in diffs else pd.Series(None, index=diffs.index)
    return pd.Series(
        [
            "zero-shot" if s == "zero_shot" else "layer" if pd.notna(la) else "band"
            for s, la, _ in zip(diffs["scheme"], diffs["layer"], band, strict=True)
        ],
        index=diffs.index,
    )


def diff_table(diffs: pd.DataFrame) -> Table | None:
    """The paired differences' verdicts, tallied per model, baseline, scheme, grain (per
    layer, per band, zero-shot), metric and family (controls: layer 0, raw p)."""
    if diffs.empty or "family" not in diffs:
        return None
    keys = ["model", "baseline", "scheme", "grain", "metric", "family"]
    diffs = diffs.assign(grain=_grain(diffs))
    rows = [[*key, int(len(g)), _tally(g["verdict"]),
             _g(g["sesoi"].median()) if g["sesoi"].notna().any() else "n/a"]
            for key, g in diffs.groupby(keys, sort=True, dropna=False)]  # fmt: skip
    return Table(
        [*keys, "rows", "verdicts", "median SESOI"], rows,
        "every paired difference against the original (baseline original) and against the "
        "unchanged model (baseline none): the verdicts' tally. Holm runs per metric over the "
        "per-layer rows, and apart over the band and zero-shot rows; a per-layer family holds "
        "hundreds of rows, so it needs far smaller p-values than a band's (docs/probe.md)",
    )  # fmt: skip


def band_table(diffs: pd.DataFrame, share: str = "a tenth of") -> Table | None:
    """The probe's accuracy change per band (train_original; layer 0 is the control line),
    per variant against the original and per intervention against ``none`` (``share``: the
    SESOI's share in words, :func:`share_words`)."""
    if diffs.empty or "family" not in diffs or "band" not in diffs:
        return None
    sel = diffs[
        (diffs["scheme"] == "train_original")
        & (diffs["metric"] == "accuracy")
        & diffs["layer"].isna()
        & diffs["band"].notna()
        & (diffs["band"] != "layer0")
    ]
    if sel.empty:
        return None
    order = {b: i for i, b in enumerate(("early", "middle", "late", "final"))}
    sel = sel.assign(_o=sel["band"].map(order)).sort_values(
        ["model", "baseline", "intervention", "variant", "_o"],
        ascending=[True, False, True, True, True],
    )
    return Table(
        ["model", "intervention", "variant", "against", "band", "accuracy change", "CI low",
         "CI high", "SESOI", "p_holm", "verdict"],
        [[r.model, r.intervention, r.variant, r.baseline, r.band, r.value, r.ci_low, r.ci_high,
          r.sesoi, r.p_holm, r.verdict] for r in sel.itertuples()],
        "the probe's accuracy (trained on the originals of its intervention; the share of the "
        "band's layers read right, per review) against the original, and under zero_pos "
        f"against the unchanged model; SESOI: {share} the baseline's accuracy above chance",
    )  # fmt: skip


def _figure(curves: pd.DataFrame, path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from homog.plot import legend_below
    from homog.variants import colors_for, order_key

    sel = curves[(curves["scheme"] == "train_original") & (curves["intervention"] == "none")
                 & (curves["metric"] == "accuracy")]  # fmt: skip
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


def lm_table(lm: pd.DataFrame) -> Table:
    """The zero-shot answer per model, intervention and variant: accuracy, AUC and the mean
    margin on the true label (log-odds), each with its CI over reviews."""
    keys = ["model", "intervention", "variant"]
    acc = lm[lm["metric"] == "accuracy"]
    cols = [*keys, "value", "ci_low", "ci_high"]
    auc = lm[lm["metric"] == "lm_auc"][cols]
    margin = lm[lm["metric"] == "margin"][cols]
    both = acc.merge(auc, on=keys, how="left", suffixes=("", "_auc"))
    both = both.merge(margin, on=keys, how="left", suffixes=("", "_m"))
    return Table(
        ["model", "intervention", "variant", "zero-shot accuracy", "CI low", "CI high", "AUC",
         "AUC CI low", "AUC CI high", "margin", "margin CI low", "margin CI high", "n"],
        [[r.model, r.intervention, r.variant, r.value, r.ci_low, r.ci_high, float(r.value_auc),
          float(r.ci_low_auc), float(r.ci_high_auc), float(r.value_m), float(r.ci_low_m),
          float(r.ci_high_m), int(r.n)] for r in both.itertuples()],
        "the model's own answer per variant and intervention: the share correct, the ROC AUC "
        "of its log-odds against the label and its mean margin on the true label (log-odds; "
        "CIs over reviews)",
    )  # fmt: skip


def cost_section(
    probe_metrics: pd.DataFrame, figdir: Path, doses: pd.DataFrame | None = None
) -> Section:
    """The section: the homogenize doses' cost (``doses``: the intervention_cost table,
    homog.report.cost_doses) first, then the probe curves, the zero-shot answer per variant
    and the within-text slopes (exploratory where the doses give the primary endpoint)."""
    from homog.report.cost_doses import dose_parts, primary_cost_line

    sec = Section(TITLE)
    sec.paragraphs, sec.tables, sec.figures = dose_parts(doses, figdir)
    if probe_metrics is None or probe_metrics.empty:
        sec.paragraphs.append(
            "No probe tables in the database: run `homog probe --model KEY` for each model "
            "(the `probe@<model>` stages of dvc.yaml) and `homog load`."
        )
        return sec
    from homog.probe.view import report_data

    data = report_data(probe_metrics)
    sec.paragraphs.append(
        "A logistic probe (folds grouped by review) reads the review's label from each "
        "layer's mean hidden state, trained on the originals and tested on every variant of "
        "the held-out reviews; the model's own answer is its zero-shot log-odds of ' positive' "
        "against ' negative' after the review (docs/probe.md). The slopes regress the change "
        "in margin on the change in erank within review (fixed effects), CI over reviews."
    )
    line = cost_line(probe_metrics, data)
    if line and primary_cost_line(doses) is not None:
        line = "Exploratory beside the doses' primary endpoint: " + line
    if line:
        sec.paragraphs.append(line)
    precision = slope_precision(data["slopes"])
    if precision:
        sec.paragraphs.append(precision)
    sec.tables.append(lm_table(data["lm"]))
    sl = data["slopes"]
    share = share_words(probe_metrics)
    sesoi = sl["sesoi"] if "sesoi" in sl else pd.Series(float("nan"), index=sl.index)
    sec.tables.append(
        Table(["model", "margin", "band", "across", "slope per erank", "CI low", "CI high",
               "SESOI", "p_holm", "n", "verdict"],
              [[r.model, r.scheme, r.band, r.baseline, r.value, r.ci_low, r.ci_high, b,
                r.p_holm, int(r.n), r.verdict] for r, b in zip(sl.itertuples(), sesoi,
                                                               strict=True)],
              "within-text slope of the margin on erank (review fixed effects; positive: "
              f"more homogenization, a smaller margin). SESOI: {share} the original's mean "
              "|margin| per its early-to-late erank change; the verdict reads the "
              "(1 - 2 alpha) equivalence CI against it")
    )  # fmt: skip
    for table in (band_table(data["diffs"], share), diff_table(data["diffs"])):
        if table is not None:
            sec.tables.append(table)
    l0 = data["layer0"]
    if len(l0):
        sec.paragraphs.append(
            "Layer-0 control: the position family's largest |difference| from the original at "
            f"layer 0 is {_g(l0['abs_diff'].max())} (the same tokens, so 0 up to rounding)."
        )
    path = _figure(data["curves"], figdir / "cost_probe_accuracy.png")
    if path is not None:
        sec.figures.append((path, "probe accuracy against layer, per variant (dashed: chance)"))
    return sec
