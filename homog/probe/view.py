"""What the report shows of the probe stage, from ``probe_metrics`` rows (pure: frames in,
frames and dicts out).

``report_data(probe_metrics)`` returns the data of the section "Does homogenization cost
anything?": the probe curves (accuracy and margin against layer, per variant), the zero-shot
rows per variant and intervention, the paired differences against the original, the
within-text slopes with their verdicts, the best layer per model and the layer-0 check.
``headline(rows)`` is the part ``probe.json`` keeps for one model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from homog.probe.best import BEST_METRIC
from homog.variants import POSITION, VARIANTS

POSITION_FAMILY = tuple(v.name for v in VARIANTS if v.family == POSITION)  # homog.variants


def _level(rows: Any, scheme: str, metric: str) -> Any:
    sel = (rows["kind"] == "level") & (rows["scheme"] == scheme) & (rows["metric"] == metric)
    return rows[sel]


def best_layer(rows: Any, intervention: str = "none", scheme: str = "train_original") -> Any:
    """Per model: the layer where the probe reads the originals best, with its CI and margin.
    Where the table has ``best_accuracy`` rows (homog.probe.best) their accuracy, each fold's
    texts read at the layer chosen on the other folds (``honest`` true); else the highest
    per-layer accuracy (ties to the higher margin, then the lower layer), which reads the
    numbers it was chosen on (``honest`` false)."""
    fair = _level(rows, scheme, BEST_METRIC)
    fair = fair[(fair["intervention"] == intervention) & (fair["variant"] == "original")]
    if len(fair):
        fair = fair.assign(margin=float("nan"), honest=True)
        cols = ["model", "layer", "value", "ci_low", "ci_high", "margin", "n", "honest"]
        return fair[cols].sort_values("model").reset_index(drop=True)

    acc = _level(rows, scheme, "accuracy")
    acc = acc[(acc["intervention"] == intervention) & (acc["variant"] == "original")]
    acc = acc[acc["layer"].notna()]  # per layer (not the band rows)
    mar = _level(rows, scheme, "margin")[["model", "intervention", "variant", "layer", "value"]]
    mar = mar[mar["layer"].notna()]
    both = acc.merge(
        mar.rename(columns={"value": "margin"}), on=["model", "intervention", "variant", "layer"]
    )
    if both.empty:
        return pd.DataFrame(columns=["model", "layer", "value", "ci_low", "ci_high", "n"])
    both = both.sort_values(
        ["model", "value", "margin", "layer"], ascending=[True, False, False, True]
    )
    best = both.groupby("model", as_index=False).head(1).assign(honest=False)
    cols = ["model", "layer", "value", "ci_low", "ci_high", "margin", "n", "honest"]
    return best[cols].reset_index(drop=True)


def layer0_check(rows: Any) -> Any:
    """Per model and scheme: the largest |difference| against the original at layer 0 over the
    position family (0 up to rounding: the same tokens, so the same mean-pooled vector)."""
    at0 = (rows["layer"] == 0).fillna(False).astype(bool)
    if "band" in rows:  # the layer0 band's rows are the same check
        at0 |= (rows["band"] == "layer0").fillna(False).astype(bool)
    sel = (
        (rows["kind"] == "diff")
        & (rows["baseline"] == "original")
        & at0
        & rows["variant"].isin(POSITION_FAMILY)
    )
    sub = rows[sel].assign(abs_diff=lambda f: f["value"].abs())
    return sub.groupby(["model", "intervention", "scheme", "metric"], as_index=False)[
        "abs_diff"
    ].max()


def report_data(probe_metrics: Any) -> dict[str, Any]:
    """The report section's data from the ``probe_metrics`` table (every model).

    Keys: ``curves`` (level rows of the probes: model, intervention, scheme, variant, layer,
    metric, value, ci_low, ci_high, n), ``lm`` (zero-shot level rows per model, intervention,
    variant and metric: accuracy, margin, lm_auc), ``diffs`` (diff rows against the original
    and against ``none``, probe and zero-shot, with p_holm and verdict), ``slopes`` (the
    within-text slopes: model, metric, band, baseline, value, CI, p_holm, verdict), ``best``
    (``best_layer``) and ``layer0`` (``layer0_check``).
    """
    rows = probe_metrics
    level = rows["kind"] == "level"
    zero_shot = rows["scheme"] == "zero_shot"
    keep = [
        "model",
        "intervention",
        "scheme",
        "variant",
        "layer",
        "metric",
        "value",
        "ci_low",
        "ci_high",
        "n",
    ]
    per_layer = rows["layer"].notna() & (rows["metric"] != BEST_METRIC)
    curves = rows[level & ~zero_shot & per_layer][keep].sort_values(keep[:6])
    curves = curves.reset_index(drop=True)
    lm = rows[level & zero_shot][keep].sort_values(keep[:6]).reset_index(drop=True)
    diffs = rows[rows["kind"] == "diff"].reset_index(drop=True)
    slopes = rows[rows["kind"] == "slope"][
        [
            "model",
            "scheme",
            "metric",
            "band",
            "baseline",
            "value",
            "ci_low",
            "ci_high",
            "p_value",
            "p_holm",
            "n",
            "verdict",
            *[c for c in ("sesoi", "eq_ci_low", "eq_ci_high", "sesoi_basis") if c in rows],
        ]
    ].reset_index(drop=True)
    return {
        "curves": curves,
        "lm": lm,
        "diffs": diffs,
        "slopes": slopes,
        "best": best_layer(rows),
        "layer0": layer0_check(rows),
    }


def _clean(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return None if not np.isfinite(value) else round(float(value), 4)
    if isinstance(value, np.integer):
        return int(value)
    return value


def headline(rows: Any) -> dict[str, Any]:
    """probe.json's headline of one model's rows: the best layer on originals, the zero-shot
    accuracy and AUC per intervention on originals, the slopes and the layer-0 check."""
    best = best_layer(rows)
    zs = rows[
        (rows["kind"] == "level")
        & (rows["scheme"] == "zero_shot")
        & (rows["variant"] == "original")
    ]
    lm, auc = zs[zs["metric"] == "accuracy"], zs[zs["metric"] == "lm_auc"]
    slopes = rows[rows["kind"] == "slope"]
    return {
        "best_layer": [{k: _clean(v) for k, v in r.items()} for r in best.to_dict("records")],
        "lm_accuracy_original": {
            r["intervention"]: {k: _clean(r[k]) for k in ("value", "ci_low", "ci_high", "n")}
            for r in lm.to_dict("records")
        },
        "lm_auc_original": {
            r["intervention"]: {k: _clean(r[k]) for k in ("value", "ci_low", "ci_high", "n")}
            for r in auc.to_dict("records")
        },
        "slopes": [
            {
                k: _clean(r[k])
                for k in (
                    "metric",
                    "band",
                    "baseline",
                    "value",
                    "ci_low",
                    "ci_high",
                    "p_holm",
                    "sesoi",
                    "verdict",
                )
                if k in r
            }
            for r in slopes.to_dict("records")
        ],
        "layer0_max_abs_diff": float(layer0_check(rows)["abs_diff"].max())
        if len(layer0_check(rows))
        else None,
    }
