"""Claim 4 as table rows: does a classifier tell original from biased text by its metrics?

The stats stage's ``separability`` table (``homog.stats.separability``) holds, per unchanged run,
variant and metric (or ``profile``, every metric at once), the out-of-fold AUC of a
cross-validated logistic regression (folds grouped by review) on the per-text, per-layer
metric profile (scope ``layers``: layers 1..L) and on layer 0 alone (scope ``layer0``: the
control; the position family keeps every token, so its layer-0 classifier must sit at 0.5),
with a bootstrap CI over reviews and a permutation p.

A row's effect is the AUC; no effect is 0.5 (``null``). The smallest AUC of interest is
0.5 +- ``AUC_SESOI``: a classifier that is right on 55 % of (original, variant) pairs is the
least separation worth reporting. The CI (``stats.ci``) stands in for the equivalence CI
(a wider interval: conservative for "equivalent").
"""

from __future__ import annotations

import math

import pandas as pd

from homog.claims import CONTROL_FAMILY, EXPLORATORY, Tag
from homog.metrics.registry import token_set_of
from homog.report.claims_rows import Claim
from homog.stats.reordering import DIFF
from homog.variants import SEPARABLE

AUC_SESOI = 0.05


def _scope(row: pd.Series) -> tuple[str, str]:
    if str(row["scope"]) == "layer0":
        if str(row["variant_a"]).startswith("key_"):  # the same tokens in another order
            return "layer 0 (order-invariant by construction: a check, not a control)", "layer0"
        return "layer 0 (control)", "layer0"
    n = row.get("n_layers")
    layers = f"{int(n)} layers (1..L)" if n is not None and pd.notna(n) else "layers 1..L"
    return layers, "all layers"


def separation_claims(separability: pd.DataFrame, runs: pd.DataFrame) -> list[Claim]:
    """Claim 4's rows from the ``separability`` table: one per run, variant, metric and scope
    (p_holm and the verdict are set by the family; the layer-0 rows are controls)."""
    unchanged = runs[runs["intervention"].fillna("none") == "none"].set_index("run_id")
    out: list[Claim] = []
    for _, row in separability.iterrows():
        if row["run_id"] not in unchanged.index or row["variant_a"] not in SEPARABLE:
            continue
        scope, band = _scope(row)
        metric = str(row["metric"])
        what = "every separation metric's" if metric == "profile" else f"{metric}'s"
        if _get(row, "statistic", "auc") == DIFF:
            out.append(_difference(row, str(unchanged.loc[row["run_id"], "model"]), what))
            continue
        auc, lo, hi = float(row["auc"]), float(row["ci_low"]), float(row["ci_high"])
        split = _get(row, "first_changed", None)
        part = (
            ""
            if split is None
            else (" (first sentence changed)" if split else " (first sentence kept)")
        )
        out.append(
            Claim(
                model=str(unchanged.loc[row["run_id"], "model"]),
                claim=Tag.SEPARATION,
                statement=f"a classifier on {what} per-layer values tells "
                f"{row['variant_a']} from {row['variant_b']}",
                metric=metric,
                comparison=f"{row['variant_a']} - {row['variant_b']}{part}",
                scope=scope,
                effect=auc,
                ci_low=lo,
                ci_high=hi,
                p_holm=math.nan,
                n=int(row["n"]),
                verdict="",
                note="cross-validated logistic regression (folds grouped by review), "
                "out-of-fold AUC; permutation p (labels swapped within reviews)" + _left_out(row),
                raw_effect=auc,
                baseline_mean=0.5,
                pct_of_baseline=100 * (auc - 0.5) / 0.5,
                unit="AUC (0.5: chance)",
                p_value=float(row["p_value"]),
                # a split row describes a part of the texts: no test, no verdict
                sesoi=AUC_SESOI if split is None else float("nan"),
                sesoi_basis=f"AUC within 0.5 +- {AUC_SESOI:g}"
                if split is None
                else "none: the AUC of a part of the texts, described",
                eq_ci_low=lo,
                eq_ci_high=hi,
                token_set=token_set_of(metric),
                band=band,
                family=CONTROL_FAMILY if band == "layer0" else EXPLORATORY,
                sign=+1,
                null=0.5,
            )
        )
    return out


def _left_out(row: pd.Series) -> str:
    """'; N unchanged texts left out' (nothing when none were, or it was not checked)."""
    same = _get(row, "n_identical", 0)
    return f"; {int(same)} unchanged texts left out (the variant is the original)" if same else ""


def _get(row: pd.Series, col: str, default):
    v = row.get(col, default)
    return default if v is None or (not isinstance(v, str) and pd.isna(v)) else v


def _difference(row: pd.Series, model: str, what: str) -> Claim:
    """The row 'variant - key_control': position beyond reordering, null 0, claimed +."""
    d, lo, hi = float(row["auc"]), float(row["ci_low"]), float(row["ci_high"])
    return Claim(
        model=model,
        claim=Tag.SEPARATION_BEYOND,
        statement=f"a classifier on {what} per-layer values tells {row['variant_a']} from "
        "the original better than it tells key_control (a non-key sentence moved) from it",
        metric=str(row["metric"]),
        comparison=f"{row['variant_a']} - key_control (AUC)",
        scope="layers 1..L",
        effect=d,
        ci_low=lo,
        ci_high=hi,
        p_holm=math.nan,
        n=int(row["n"]),
        verdict="",
        note=f"AUC difference paired over the same texts and "
        f"{int(_get(row, 'n_repeats', 0))} fold assignments; bootstrap p" + _left_out(row),
        raw_effect=d,
        unit="AUC difference",
        p_value=float(row["p_value"]),
        sesoi=AUC_SESOI,
        sesoi_basis=f"AUC difference within +- {AUC_SESOI:g}",
        eq_ci_low=lo,
        eq_ci_high=hi,
        token_set=token_set_of(str(row["metric"])),
        band="all layers",
        family=EXPLORATORY,
        sign=+1,
    )
