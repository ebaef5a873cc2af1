"""The report's own figures (matplotlib, Agg): MAUVE curves and head-ablation small multiples.

Layer curves and attention heatmaps come from :mod:`homog.plot`; these two have no CLI
figure of their own. Each function writes one PNG atomically and returns its path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.plot import VARIANT_COLORS, figure_style, legend_below, save_figure


def mauve_figure(rows: Sequence[dict[str, Any]], out: str | os.PathLike[str]) -> Path:
    """MAUVE between layer l and l + 1 per variant; rows (model, variant, layer, mauve) of the
    unchanged runs. One panel per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    if not rows:
        raise HomogError("no mauve_scores rows to plot")
    models = list(dict.fromkeys(r["model"] for r in rows))
    with plt.rc_context(figure_style()):
        fig, axes = plt.subplots(
            1, len(models), figsize=(3.6 * len(models), 2.7), squeeze=False, sharey=True
        )
        for ax, model in zip(axes.flat, models, strict=True):
            for variant, color in VARIANT_COLORS.items():
                pts = sorted(
                    (r["layer"], r["mauve"])
                    for r in rows
                    if r["model"] == model and r["variant"] == variant
                )
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, color=color, lw=1.3, label=variant)
            ax.set_title(model)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("layer l (MAUVE of l vs l + 1)")
            ax.set_ylim(0, 1.02)
        axes.flat[0].set_ylabel("MAUVE (0-1)")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.tight_layout()
        legend_below(fig, handles, labels, ncol=min(4, len(labels)))
        try:
            return save_figure(fig, out)
        finally:
            plt.close(fig)


def ablation_figure(rows: Sequence[dict[str, Any]], task: str, out: str | os.PathLike[str]) -> Path:
    """Accuracy drop when each head is zeroed: one layer x head heatmap per encoding.

    rows: (pe, layer, head, drop) of one task (mean over seeds). The colour scale is shared so
    a single-head deposit stands out across encodings.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise HomogError(f"no head_ablation rows for task {task}")
    pes = list(dict.fromkeys(r["pe"] for r in rows))
    vmax = max(0.01, max(float(r["drop"]) for r in rows))
    ncols = min(4, len(pes))
    nrows = int(np.ceil(len(pes) / ncols))
    with plt.rc_context({**figure_style(), "axes.grid": False}):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(2.3 * ncols + 0.8, 1.9 * nrows + 0.4), squeeze=False
        )
        image = None
        for ax, pe in zip(axes.flat, pes, strict=False):
            pr = [r for r in rows if r["pe"] == pe]
            layers = sorted({r["layer"] for r in pr})
            heads = sorted({r["head"] for r in pr})
            grid = np.full((len(layers), len(heads)), np.nan)
            for r in pr:
                grid[layers.index(r["layer"]), heads.index(r["head"])] = r["drop"]
            image = ax.imshow(
                grid, cmap="viridis", vmin=0, vmax=vmax, origin="lower", aspect="auto"
            )
            ax.set_title(pe)
            ax.set_xticks(range(len(heads)), [str(h) for h in heads])
            ax.set_yticks(range(len(layers)), [str(layer) for layer in layers])
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
        for ax in list(axes.flat)[len(pes) :]:
            ax.set_visible(False)
        fig.suptitle(f"{task}: accuracy drop when one head is zeroed", fontsize=10)
        fig.tight_layout(rect=(0, 0, 0.9, 0.95))
        cax = fig.add_axes((0.92, 0.15, 0.015, 0.7))
        fig.colorbar(image, cax=cax, label="accuracy drop (0-1)")
        try:
            return save_figure(fig, out)
        finally:
            plt.close(fig)
