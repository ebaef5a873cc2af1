"""The cost section's tables from ``probe_metrics`` (homog.probe.view's frames): the model's
zero-shot answer per variant, the probe's accuracy change per band, and the tally of every
paired difference. homog.report.cost lays them out in its section."""

from __future__ import annotations

import pandas as pd

from homog.report.document import Table
from homog.stats.verdicts import VERDICTS


def sig3(x) -> str:
    """A number as the cost section shows it: three significant digits, "n/a" when missing."""
    return f"{float(x):.3g}" if pd.notna(x) else "n/a"


def verdict_tally(verdicts: pd.Series) -> str:
    """``"6 equivalent, 2 inconclusive"`` in the verdicts' order (homog.stats.verdicts)."""
    counts = verdicts.value_counts()
    order = [v for v in VERDICTS if v in counts] + [v for v in counts.index if v not in VERDICTS]
    return ", ".join(f"{int(counts[v])} {v}" for v in order)


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
    rows = [
        [
            *key,
            int(len(g)),
            verdict_tally(g["verdict"]),
            sig3(g["sesoi"].median()) if g["sesoi"].notna().any() else "n/a",
        ]
        for key, g in diffs.groupby(keys, sort=True, dropna=False)
    ]
    return Table(
        [*keys, "rows", "verdicts", "median SESOI"],
        rows,
        "every paired difference against the original (baseline original) and against the "
        "unchanged model (baseline none): the verdicts' tally. Holm runs per metric over the "
        "per-layer rows, and apart over the band and zero-shot rows; a per-layer family holds "
        "hundreds of rows, so it needs far smaller p-values than a band's (docs/probe.md)",
    )


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
        [
            "model",
            "intervention",
            "variant",
            "against",
            "band",
            "accuracy change",
            "CI low",
            "CI high",
            "SESOI",
            "p_holm",
            "verdict",
        ],
        [
            [
                r.model,
                r.intervention,
                r.variant,
                r.baseline,
                r.band,
                r.value,
                r.ci_low,
                r.ci_high,
                r.sesoi,
                r.p_holm,
                r.verdict,
            ]
            for r in sel.itertuples()
        ],
        "the probe's accuracy (trained on the originals of its intervention; the share of the "
        "band's layers read right, per review) against the original, and under zero_pos "
        f"against the unchanged model; SESOI: {share} the baseline's accuracy above chance",
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
        [
            "model",
            "intervention",
            "variant",
            "zero-shot accuracy",
            "CI low",
            "CI high",
            "AUC",
            "AUC CI low",
            "AUC CI high",
            "margin",
            "margin CI low",
            "margin CI high",
            "n",
        ],
        [
            [
                r.model,
                r.intervention,
                r.variant,
                r.value,
                r.ci_low,
                r.ci_high,
                float(r.value_auc),
                float(r.ci_low_auc),
                float(r.ci_high_auc),
                float(r.value_m),
                float(r.ci_low_m),
                float(r.ci_high_m),
                int(r.n),
            ]
            for r in both.itertuples()
        ],
        "the model's own answer per variant and intervention: the share correct, the ROC AUC "
        "of its log-odds against the label and its mean margin on the true label (log-odds; "
        "CIs over reviews)",
    )


def slope_table(sl: pd.DataFrame, share: str) -> Table:
    """The within-text slopes of the margin on erank per model, margin, band and baseline,
    with their SESOI (``share``: its share in words) and verdict."""
    sesoi = sl["sesoi"] if "sesoi" in sl else pd.Series(float("nan"), index=sl.index)
    return Table(
        [
            "model",
            "margin",
            "band",
            "across",
            "slope per erank",
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
                r.scheme,
                r.band,
                r.baseline,
                r.value,
                r.ci_low,
                r.ci_high,
                b,
                r.p_holm,
                int(r.n),
                r.verdict,
            ]
            for r, b in zip(sl.itertuples(), sesoi, strict=True)
        ],
        "within-text slope of the margin on erank (review fixed effects; positive: "
        f"more homogenization, a smaller margin). SESOI: {share} the original's mean "
        "|margin| per its early-to-late erank change; the verdict reads the "
        "(1 - 2 alpha) equivalence CI against it",
    )
