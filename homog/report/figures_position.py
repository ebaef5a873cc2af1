"""The figure of position's negative control: each band contrast beside the same contrast at
layer 0 (the position-free token embeddings). Pure plotting over rows; one PNG each. (The
dose-response figure is ``homog.plot.dose_response_figure``, over the stats stage's table.)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.plot import METRIC_LABELS, figure_style, legend_below, save_figure

BAND_ORDER = ("early", "middle", "late")
LEVEL_COLORS = {
    "layer 0": "#555555",
    "early": "#56B4E9",
    "middle": "#0072B2",
    "late": "#D55E00",
    "final": "#CC79A7",
}


def layer0_contrast_figure(
    rows: Sequence[dict[str, Any]], metric: str, out: str | os.PathLike[str]
) -> Path:
    """Each variant contrast per band beside the same contrast at layer 0.

    rows: (model, comparison, level, mean_diff, ci_low, ci_high); level is "layer 0" or a band.
    One panel per model: a row per comparison, one dot with its CI per level, a line at 0. A
    band difference as large as layer 0's is what the words already give, before any position.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise HomogError(f"no contrasts to plot for {metric}")
    models = list(dict.fromkeys(r["model"] for r in rows))
    comparisons = list(dict.fromkeys(r["comparison"] for r in rows))
    levels = [lv for lv in LEVEL_COLORS if any(r["level"] == lv for r in rows)]
    with plt.rc_context(figure_style()):
        fig, axes = plt.subplots(
            1,
            len(models),
            squeeze=False,
            sharey=True,
            figsize=(3.6 * len(models) + 0.8, 0.42 * len(comparisons) + 1.4),
        )
        for ax, model in zip(axes.flat, models, strict=True):
            ax.axvline(0, color="0.7", lw=0.8)
            for k, level in enumerate(levels):
                offset = (k - (len(levels) - 1) / 2) * 0.17
                pts = [
                    (comparisons.index(r["comparison"]), r)
                    for r in rows
                    if r["model"] == model and r["level"] == level
                ]
                if not pts:
                    continue
                ys = np.array([i for i, _ in pts], dtype=float) + offset
                xs = np.array([r["mean_diff"] for _, r in pts], dtype=float)
                lo = xs - np.array([r["ci_low"] for _, r in pts], dtype=float)
                hi = np.array([r["ci_high"] for _, r in pts], dtype=float) - xs
                marker = "s" if level == "layer 0" else "o"
                ax.errorbar(
                    xs,
                    ys,
                    xerr=[np.abs(lo), np.abs(hi)],
                    fmt=marker,
                    ms=3.5,
                    color=LEVEL_COLORS[level],
                    capsize=1.5,
                    lw=1,
                    label=level,
                    mfc="white" if level == "layer 0" else LEVEL_COLORS[level],
                )
            ax.set_yticks(range(len(comparisons)), comparisons)
            ax.invert_yaxis()
            ax.set_title(model)
            ax.set_xlabel(f"mean difference in {METRIC_LABELS.get(metric, metric)}")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.tight_layout()
        legend_below(fig, handles, labels, ncol=len(labels))
        try:
            return save_figure(fig, out)
        finally:
            plt.close(fig)
