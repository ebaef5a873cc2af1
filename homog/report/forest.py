"""The answer's forest plot: the primary effects in units of their SESOI, with CIs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from homog.claims import PRIMARY

XMAX = 10.0  # the forest plot's x range in SESOI units (CIs beyond it are cut, arrowed)
VERDICT_COLOURS = {
    "supported": "#2e7d32",
    "reversed": "#c62828",
    "nonzero": "#b8860b",
    "negligible": "#6a8caf",
    "equivalent": "#1f4e99",
    "inconclusive": "#888888",
    "too few pairs": "#bbbbbb",
}


def sesoi_ratio(rows: pd.DataFrame) -> pd.Series:
    """Each row's effect in units of its SESOI (NaN without a margin)."""
    s = pd.to_numeric(rows["sesoi"], errors="coerce").where(lambda x: x > 0)
    return pd.to_numeric(rows["effect"], errors="coerce") / s


def forest_figure(claims: pd.DataFrame, path: Path) -> Path | None:
    """The primary effects in units of their SESOI, with CIs, against the +-1 band, per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "family" not in claims.columns:
        return None
    prim = claims[claims["family"] == PRIMARY].copy()
    prim["_r"] = sesoi_ratio(prim)
    prim = prim[prim["_r"].notna()]
    if prim.empty:
        return None
    models = list(dict.fromkeys(prim["model"]))
    n = max(len(g) for _, g in prim.groupby("model"))
    fig, axes = plt.subplots(
        len(models), 1, figsize=(6.4, (0.15 * n + 0.9) * len(models)), sharex=False, squeeze=False
    )
    for ax, model in zip(axes[:, 0], models, strict=True):
        g = prim[prim["model"] == model].reset_index(drop=True)
        s = pd.to_numeric(g["sesoi"])
        y = np.arange(len(g))[::-1]
        ax.axvspan(-1, 1, color="#e4ecf7", zorder=0, label="+-SESOI")
        ax.axvline(0, color="#555", lw=0.8)
        for yi, (_, r), si in zip(y, g.iterrows(), s, strict=True):
            colour = VERDICT_COLOURS.get(str(r["verdict"]), "#333")
            lo, hi = float(r["ci_low"]) / si, float(r["ci_high"]) / si
            # a CI wider than the axis is cut at its edge, with an arrowhead there
            ax.plot([max(lo, -XMAX), min(hi, XMAX)], [yi, yi], color=colour, lw=1.6)
            for end, mark in ((lo, "<"), (hi, ">")):
                if abs(end) > XMAX:
                    ax.plot(np.sign(end) * XMAX, yi, mark, color=colour, ms=5)
            ax.plot(float(np.clip(r["_r"], -XMAX, XMAX)), yi, "o", color=colour, ms=4)
        reach = np.nanmax(np.abs([g["ci_low"] / s, g["ci_high"] / s]))
        ax.set_xlim(-min(XMAX, max(2.0, reach)) * 1.08, min(XMAX, max(2.0, reach)) * 1.08)
        labels = [f"{r.comparison} | {r.metric} | {r.scope}" for r in g.itertuples()]
        ax.set_yticks(y, labels, fontsize=6)
        ax.set_title(model, fontsize=8, pad=2)
        ax.set_xlabel("effect / SESOI (95% CI)", fontsize=7, labelpad=1)
        ax.tick_params(axis="x", labelsize=7)
    handles = [
        plt.Line2D([], [], color=c, marker="o", lw=1.6, label=v)
        for v, c in VERDICT_COLOURS.items()
        if v in set(prim["verdict"])
    ]
    fig.tight_layout(rect=(0, 0.05, 1, 1), h_pad=0.4)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=6, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
