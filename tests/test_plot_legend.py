"""Figures a reader can read (issue 42): the layer-curve legend lies outside the axes, below
every x-axis label, however many rows it has (inside the figure at "lower center" it covered
the labels of a two-row grid with 24 lines)."""

from __future__ import annotations

import pytest

import homog.plot as hp


def curve_rows(n_models: int, variants: list[str], interventions: list[str]) -> list[dict]:
    rows = []
    for m in range(n_models):
        for iv in interventions:
            for v in variants:
                for layer in range(6):
                    rows.append(
                        dict(
                            model=f"model{m}",
                            run_id=f"r{m}{iv}",
                            intervention=iv,
                            variant=v,
                            layer=layer,
                            rel_depth=layer / 5,
                            mean=10.0 - layer,
                            ci_low=9.0 - layer,
                            ci_high=11.0 - layer,
                            p_holm_vs_original=0.01,
                        )
                    )
    return rows


@pytest.mark.parametrize(
    "n_models, n_variants, interventions",
    [(1, 4, ["none"]), (3, 8, ["none", "zero_pos"]), (6, 8, ["none", "zero_pos", "shuffle_pos"])],
)
def test_legend_hangs_below_every_x_label(
    monkeypatch, tmp_path, n_models, n_variants, interventions
):
    variants = [
        "original",
        "front",
        "end",
        "control",
        "key_first",
        "key_mid",
        "key_last",
        "key_control",
    ][:n_variants]
    seen = {}

    def keep(fig, out):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legend = fig.legends[0].get_window_extent(renderer)
        axes = [ax for ax in fig.axes if ax.get_visible()]
        seen["gap"] = min(ax.get_tightbbox(renderer).y0 for ax in axes) - legend.y1
        seen["overlaps"] = [
            ax.get_title() for ax in axes if ax.get_tightbbox(renderer).overlaps(legend)
        ]
        return out

    monkeypatch.setattr(hp, "save_figure", keep)
    hp.layer_curves_figure(
        curve_rows(n_models, variants, interventions), "erank", tmp_path / "c.png"
    )
    assert seen["overlaps"] == [] and seen["gap"] >= 0


def test_saved_figure_takes_the_legend_in(tmp_path):
    from PIL import Image

    out = hp.layer_curves_figure(
        curve_rows(2, ["original", "front"], ["none"]), "erank", tmp_path / "c.png"
    )
    with Image.open(out) as im:
        width, height = im.size
        bottom = im.convert("L").crop((0, int(height * 0.85), width, height))
    assert bottom.getextrema()[0] < 128  # dark legend text in the bottom strip


# --- the report's own figures: the same legend_below, the same check ----------------------


def measure_legend(fig) -> dict:
    """The gap between the lowest axes' tight bbox and the figure legend's top (>= 0: the
    legend lies below every x label), and the titles of the axes the legend overlaps."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    return {
        "gap": min(ax.get_tightbbox(renderer).y0 for ax in axes) - legend.y1,
        "overlaps": [ax.get_title() for ax in axes if ax.get_tightbbox(renderer).overlaps(legend)],
    }


@pytest.mark.parametrize("n_models", [1, 3])
def test_mauve_figure_legend_hangs_below_the_x_labels(monkeypatch, tmp_path, n_models):
    import homog.report.figures as rf

    seen = {}
    monkeypatch.setattr(rf, "save_figure", lambda fig, out: seen.update(measure_legend(fig)) or out)
    rows = [
        dict(model=f"model{m}", variant=v, layer=layer, mauve=0.5 + 0.05 * layer)
        for m in range(n_models)
        for v in hp.VARIANT_COLORS
        for layer in range(6)
    ]
    rf.mauve_figure(rows, tmp_path / "m.png")
    assert seen["overlaps"] == [] and seen["gap"] >= 0


@pytest.mark.parametrize("n_models, n_comparisons", [(1, 1), (2, 3)])
def test_layer0_contrast_legend_hangs_below_the_x_labels(
    monkeypatch, tmp_path, n_models, n_comparisons
):
    import homog.report.figures_position as fp

    seen = {}
    monkeypatch.setattr(fp, "save_figure", lambda fig, out: seen.update(measure_legend(fig)) or out)
    comparisons = ["key_first - key_control", "key_last - key_control", "front - control"]
    comparisons = comparisons[:n_comparisons]
    rows = [
        dict(
            model=f"model{m}",
            comparison=c,
            level=lv,
            mean_diff=0.1 * k,
            ci_low=0.1 * k - 0.2,
            ci_high=0.1 * k + 0.2,
        )
        for m in range(n_models)
        for k, c in enumerate(comparisons)
        for lv in fp.LEVEL_COLORS
    ]
    fp.layer0_contrast_figure(rows, "erank", tmp_path / "c.png")
    assert seen["overlaps"] == [] and seen["gap"] >= 0
