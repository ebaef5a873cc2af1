"""The stats stage's summaries for DVC: the headline numbers of ``metrics.json`` and the
layer curves of ``plots/``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PLOT_METRICS = ("erank", "mev", "resultant_length", "attn_first")


def headline(
    contrasts: pd.DataFrame,
    runs: list[dict[str, Any]],
    summaries: pd.DataFrame,
    mauve: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Headline numbers for ``dvc metrics show`` (nested dict, one entry per model run).

    Per unchanged run (intervention none) of each model: erank and mev at the last layer per
    variant, the late-band erank differences front/end/control vs original with Holm p, the
    length-adjusted difference and the layer-0 difference beside them, the
    number of layers where front vs original is significant at ``alpha``, and mean MAUVE per
    variant. Intervention runs add their late-band erank difference vs the unchanged run.
    """
    out: dict[str, Any] = {}
    by_id = {r["run_id"]: r for r in runs}
    for run_id, run in by_id.items():
        key = (
            run["model"]
            if run.get("intervention", "none") == "none"
            else f"{run['model']}:{run['intervention']}"
        )
        entry: dict[str, Any] = {}
        s = summaries[summaries["run_id"] == run_id]
        for metric in ("erank", "mev"):
            sm = s[s["metric"] == metric]
            if not sm.empty:
                last = sm[sm["layer"] == sm["layer"].max()]
                entry[f"{metric}_last"] = {
                    v: round(float(m), 6)
                    for v, m in zip(last["variant"], last["mean"], strict=True)
                }
        c = contrasts[(contrasts["run_id"] == run_id) & (contrasts["metric"] == "erank")]
        late = c[(c["band"] == "late") & c["baseline_run_id"].isna()]
        for _, row in late.iterrows():
            entry[f"erank_late_{row['variant_a']}_vs_{row['variant_b']}"] = {
                "mean_diff": _r(row["mean_diff"]),
                "p_holm": _r(row["p_holm"]),
                # at zero added tokens (null where the token counts do not differ)
                "adj_diff": _r(row["adj_diff"]) if row.get("adjusted") else None,
                "layer0_diff": _r(row["layer0_diff"]),
            }
        fo = c[
            (c["variant_a"] == "front")
            & (c["variant_b"] == "original")
            & c["band"].isna()
            & c["baseline_run_id"].isna()
        ]
        if not fo.empty:
            entry["erank_front_vs_original_sig_layers"] = int((fo["p_holm"] < alpha).sum())
        iv = c[(c["band"] == "late") & c["baseline_run_id"].notna()]
        for _, row in iv.iterrows():
            entry[f"erank_late_{row['variant_a']}_vs_unchanged"] = {
                "mean_diff": _r(row["mean_diff"]),
                "p_holm": _r(row["p_holm"]),
            }
        if mauve is not None and not mauve.empty:
            mv = mauve[mauve["run_id"] == run_id]
            if not mv.empty:
                entry["mauve_mean"] = {
                    v: _r(m) for v, m in mv.groupby("variant")["mauve"].mean().items()
                }
        out[key] = entry
    return out


def _r(x: Any) -> float | None:
    x = float(x)
    return round(x, 6) if math.isfinite(x) else None


def summarise(frame: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """Per (variant, metric, layer) mean over texts, with run_id."""
    g = frame[np.isfinite(frame["value"])].groupby(["variant", "metric", "layer"])["value"]
    return g.mean().rename("mean").reset_index().assign(run_id=run_id)


def write_plots(out_dir: Path, summaries: pd.DataFrame, runs: list[dict[str, Any]]) -> None:
    """``out_dir/<metric>__<model>.csv``: the unchanged run's layer curve of each of
    PLOT_METRICS, columns layer, rel_depth and one per variant (DVC plots)."""
    meta = pd.DataFrame(runs).reindex(columns=["run_id", "model", "n_layers", "intervention"])
    meta["intervention"] = meta["intervention"].fillna("none")
    curves = summaries.merge(meta, on="run_id")
    curves = curves[curves["intervention"] == "none"]
    for (model, metric), cm in curves.groupby(["model", "metric"]):
        if metric not in PLOT_METRICS:
            continue
        wide = cm.pivot_table(
            index=["layer", "n_layers"], columns="variant", values="mean"
        ).reset_index()
        wide["rel_depth"] = wide["layer"] / wide["n_layers"]
        cols = ["layer", "rel_depth"] + [
            v for v in ("original", "front", "end", "control") if v in wide.columns
        ]
        wide[cols].to_csv(out_dir / f"{metric}__{model}.csv", index=False, float_format="%.6g")
