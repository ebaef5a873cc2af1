"""Paper-quality figures (PNG, matplotlib Agg): layer curves and attention position heatmaps.

Pure plotting over rows from :mod:`homog.store.query`; no database access here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from homog.errors import HomogError
from homog.io import atomic_path
from homog.layout import writable_dir
from homog.metrics.registry import METRICS
from homog.variants import COLORS, EXTRA_COLORS, colors_for

# Colour-blind-safe (Okabe-Ito) colours per variant (homog.variants); fixed so figures stay
# comparable. A variant beyond the registry's (a sweep's key_p25) takes the next EXTRA_COLORS.
VARIANT_COLORS = COLORS
INTERVENTION_STYLES = {"none": "-", "zero_pos": "--", "shuffle_pos": ":"}
METRIC_LABELS = {m.name: m.label for m in METRICS if m.label}  # homog.metrics.registry


def figure_style() -> dict[str, Any]:
    """The rcParams of every homog figure (``plt.rc_context(figure_style())``)."""
    return {
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "legend.fontsize": 8,
        "xtick.labelsize": 8,
        "ytick.labelsize": 8,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.25,
        "grid.linewidth": 0.5,
        "savefig.dpi": 200,
        "figure.dpi": 100,
    }


def legend_below(fig, handles: Sequence[Any], labels: Sequence[str], *, ncol: int) -> Any:
    """A figure legend outside the axes, under everything: its top edge at the figure's
    bottom, so it hangs below the axes' x labels whatever its number of rows (a legend inside
    the figure, at "lower center", covered them once it had more rows than the space kept for
    it). Call it after ``tight_layout`` (which ignores figure legends); ``save_figure``'s tight
    bounding box takes the legend in."""
    return fig.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=ncol,
        frameon=False,
    )


def save_figure(fig, out: str | os.PathLike[str]) -> Path:
    """Write ``fig`` to ``out`` (.png, .pdf or .svg, atomically, marked as homog's) and return
    its path. Raises HomogError for another suffix or a directory or file that cannot be
    written."""
    out = Path(out)
    if out.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise HomogError(f"plot output {out} must end in .png, .pdf or .svg")
    writable_dir(out.parent, what="plot")
    try:
        fmt = out.suffix.lstrip(".").lower()
        # homog's generator mark (homog.owned): `homog plot` may overwrite this file again
        meta = {"Software" if fmt == "png" else "Creator": "homog plot"}
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format=fmt, bbox_inches="tight", metadata=meta)
    except OSError as exc:
        raise HomogError(f"cannot write the plot {out}: {exc.strerror or exc}") from exc
    return out


def layer_curves_figure(
    rows: Sequence[dict[str, Any]],
    metric: str,
    out: str | os.PathLike[str],
    *,
    x: str = "layer",
    significance: float | None = 0.05,
    difference: bool = False,
) -> Path:
    """Plot ``homog.store.layer_curves`` rows: one panel per model, one line per variant.

    ``difference``: the rows are ``homog.store.difference_curves`` (each variant minus the
    original, paired per text): a zero line, and the y axis says so.

    Shaded bands are the 95 % CIs; intervention runs are dashed/dotted; with ``significance``
    a dot on a variant's curve flags layers where it differs from the original (Holm-corrected
    p of the stats stage < significance); on the curve, a mark never leaves the data's range.
    ``x``: 'layer' or 'rel_depth'. Writes ``out`` (.png/.pdf/.svg) atomically and returns its path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise HomogError(f"nothing to plot for metric {metric}: no matching rows")
    models = list(dict.fromkeys(r["model"] for r in rows))
    ncols = min(3, len(models))
    nrows = int(np.ceil(len(models) / ncols))
    with plt.rc_context(figure_style()):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(max(4.2, 3.4 * ncols), 2.8 * nrows), squeeze=False, sharey=False
        )
        colors = colors_for({r["variant"] for r in rows})  # the registry's, then the extras
        for ax, model in zip(axes.flat, models, strict=False):
            for (_, intervention, variant), pts in curve_series(rows, model).items():
                _draw_curve(ax, pts, x, intervention, variant, colors[variant], significance)
            _label_curve_panel(ax, model, metric, x, difference)
        for ax in list(axes.flat)[len(models) :]:
            ax.set_visible(False)
        handles, labels = _panel_legend(list(axes.flat)[: len(models)])
        fig.text(
            0.99,
            1.0,
            curves_note(difference, significance),
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.4",
        )
        fig.tight_layout()
        legend_below(fig, handles, labels, ncol=min(4 if ncols == 1 else 6, len(labels)))
        try:
            return save_figure(fig, out)
        finally:
            plt.close(fig)


def curve_series(
    rows: Sequence[dict[str, Any]], model: str
) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """One model's rows by (run_id, intervention, variant), in first-seen order, each by layer."""
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["model"] == model:
            key = (r["run_id"], r.get("intervention") or "none", r["variant"])
            series.setdefault(key, []).append(r)
    return {key: sorted(pts, key=lambda r: r["layer"]) for key, pts in series.items()}


def _column(pts: Sequence[dict[str, Any]], key: str) -> np.ndarray:
    """The ``key`` values of ``pts`` as an array, None as NaN."""
    return np.array([np.nan if r[key] is None else r[key] for r in pts])


def _draw_curve(ax, pts, x: str, intervention: str, variant: str, color, significance) -> None:
    """One series' line, its CI band (unchanged runs) and its significance dots."""
    xs = np.array([r[x] for r in pts], dtype=float)
    mean, lo, hi = _column(pts, "mean"), _column(pts, "ci_low"), _column(pts, "ci_high")
    style = INTERVENTION_STYLES.get(intervention, "-.")
    label = variant if intervention == "none" else f"{variant} ({intervention})"
    ax.plot(xs, mean, style, color=color, lw=1.4, label=label)
    if intervention == "none":  # bands for interventions too would be unreadable
        ax.fill_between(xs, lo, hi, color=color, alpha=0.12, lw=0)
    if significance is not None and variant != "original":
        p = np.array(
            [
                np.nan if r.get("p_holm_vs_original") is None else r["p_holm_vs_original"]
                for r in pts
            ]
        )
        sig = (p < significance) & np.isfinite(mean)
        if sig.any() and intervention == "none":
            # on the curve itself: a mark can never leave the data's range
            ax.plot(xs[sig], mean[sig], "o", color=color, ms=2.6, mew=0, zorder=3)


def _label_curve_panel(ax, model: str, metric: str, x: str, difference: bool) -> None:
    """A panel's title, axis labels and (for differences) its zero line."""
    ax.set_title(model)
    if x == "layer":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer" if x == "layer" else "relative depth")
    label = METRIC_LABELS.get(metric, metric)
    if difference:
        ax.axhline(0, color="0.55", lw=0.8, zorder=1)
        label = f"{label}: variant − original"
    ax.set_ylabel(label)


def _panel_legend(axes: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """The legend entries of every panel, each label once, in first-seen order."""
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def curves_note(difference: bool, significance: float | None) -> str:
    """The layer-curves figure's corner note: what the band and the dots are."""
    note = (
        "paired difference from the original; shaded: its 95% CI (unchanged runs)"
        if difference
        else "shaded: 95% CI over texts (unchanged runs)"
    )
    if significance is not None:
        note += f"; dots: Holm p < {significance:g} vs original"
    return note


def attention_heatmap_figure(
    rows: Sequence[dict[str, Any]], out: str | os.PathLike[str], *, title: str = ""
) -> Path:
    """Plot ``homog.store.attention_profile`` rows (layer, bin, mass) as a layer x position map.

    Colour is the attention column mass per relative-position bin (log scale, so the sink at
    the first bin does not wash out the rest). Writes ``out`` atomically and returns its path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    if not rows:
        raise HomogError("nothing to plot: no attention_profile rows for this run/variant")
    layers = sorted({r["layer"] for r in rows})
    bins = sorted({r["bin"] for r in rows})
    grid = np.full((len(layers), len(bins)), np.nan)
    li = {v: i for i, v in enumerate(layers)}
    bi = {v: i for i, v in enumerate(bins)}
    for r in rows:
        grid[li[r["layer"]], bi[r["bin"]]] = r["mass"]
    positive = grid[np.isfinite(grid) & (grid > 0)]
    vmin = max(float(positive.min()) if positive.size else 1e-4, 1e-4)
    with plt.rc_context({**figure_style(), "axes.grid": False}):
        fig, ax = plt.subplots(figsize=(4.2, 0.16 * len(layers) + 1.2))
        im = ax.imshow(
            np.clip(grid, vmin, None),
            aspect="auto",
            origin="lower",
            cmap="magma",
            norm=LogNorm(vmin=vmin, vmax=float(np.nanmax(grid))),
            extent=(0, 1, layers[0] - 0.5, layers[-1] + 0.5),
            interpolation="nearest",
        )
        ax.set_xlabel("relative key position")
        ax.set_ylabel("layer")
        if title:
            ax.set_title(title)
        cb = fig.colorbar(im, ax=ax, pad=0.02)
        cb.set_label("attention column mass")
        fig.tight_layout()
        try:
            return save_figure(fig, out)
        finally:
            plt.close(fig)


def dose_response_figure(
    rows: Sequence[dict[str, Any]], metric: str, out: str | os.PathLike[str]
) -> Path:
    """Plot ``dose_response`` rows of one metric (with a ``model`` key, e.g. joined from
    ``runs``): one panel per band, the metric against the key sentence's relative position.

    Points: each position-family variant's mean position and mean value (95 % interval);
    line: the within-text slope through the pooled means (``kind = 'slope'``), its CI, p and
    Holm p (where the rows have ``p_holm``) in the legend. One colour per model. Writes ``out``
    atomically and returns its path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("metric", metric) == metric]
    if not rows:
        raise HomogError(f"nothing to plot for metric {metric}: no dose_response rows")
    order = ("layer0", "early", "middle", "late", "final")
    bands = [b for b in order if any(r["band"] == b for r in rows)]
    models = list(dict.fromkeys(r["model"] for r in rows))
    palette = ("#000000", "#D55E00", "#0072B2", "#009E73", *EXTRA_COLORS)
    colors = dict(zip(models, palette, strict=False))
    with plt.rc_context(figure_style()):
        fig, axes = plt.subplots(
            1, len(bands), figsize=(2.3 * len(bands) + 0.6, 2.8), squeeze=False
        )
        for ax, band in zip(axes.flat, bands, strict=True):
            for model in models:
                sel = [r for r in rows if r["band"] == band and r["model"] == model]
                _draw_dose(ax, sel, model, colors[model])
            ax.set_title(band)
            ax.legend(
                fontsize=6,
                frameon=False,
                loc="upper center",
                bbox_to_anchor=(0.5, -0.12),
                title="slope per unit position [CI]",
                title_fontsize=6,
            )
        axes.flat[0].set_ylabel(METRIC_LABELS.get(metric, metric))
        fig.supxlabel("key sentence position (share of the text's words)", fontsize=9)
        fig.text(
            0.99,
            1.0,
            "points: mean and 95% CI of the within-text deviation",
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.4",
        )
        fig.tight_layout()
        try:
            return save_figure(fig, out)
        finally:
            plt.close(fig)


def _draw_dose(ax, sel: Sequence[dict[str, Any]], model: str, color: str) -> None:
    """One model's points (by key position) and slope lines in one band's panel."""
    pts = sorted((r for r in sel if r["kind"] == "point"), key=lambda r: r["key_position"])
    if pts:
        xs = _draw_dose_points(ax, pts, color)
    for r in (r for r in sel if r["kind"] == "slope"):
        if pts and r["intercept"] is not None and np.isfinite(r["value"]):
            line = np.array([xs.min(), xs.max()])
            label = slope_label(model, r)
            ax.plot(line, r["intercept"] + r["value"] * line, "-", color=color, lw=1.2, label=label)


def _draw_dose_points(ax, pts: Sequence[dict[str, Any]], color: str) -> np.ndarray:
    """The points with their intervals, each named by its variant; their x positions."""
    xs = np.array([r["key_position"] for r in pts], dtype=float)
    ys = np.array([r["value"] for r in pts], dtype=float)
    err = np.array([[y - r["ci_low"], r["ci_high"] - y] for r, y in zip(pts, ys, strict=True)]).T
    ax.errorbar(
        xs,
        ys,
        yerr=np.clip(np.nan_to_num(err), 0, None),
        fmt="o",
        color=color,
        ms=3.5,
        capsize=2,
        lw=1,
    )
    for k, (r, x_, y_) in enumerate(zip(pts, xs, ys, strict=True)):
        ax.annotate(  # alternate above / below: near positions stay legible
            r["variant"].removeprefix("key_"),
            (x_, y_),
            fontsize=6,
            color="0.35",
            xytext=(3, 3 if k % 2 == 0 else -8),
            textcoords="offset points",
        )
    return xs


def slope_label(model: str, r: dict[str, Any]) -> str:
    """A slope row's legend entry: model, slope [CI], p and (where present) Holm p."""
    label = (
        f"{model}: {r['value']:+.3g} [{r['ci_low']:+.3g}, "
        f"{r['ci_high']:+.3g}]\np = {r['p_value']:.2g}"
    )
    ph = r.get("p_holm")
    if ph is not None and np.isfinite(ph):
        label += f", Holm p = {ph:.2g}"
    return label
