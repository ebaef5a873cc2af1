"""The probe stage's differences and cost slopes get the project's verdict rule:
a SESOI with its basis, the (1 - 2 alpha) equivalence CI, families (layer 0 a control)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from homog.probe.cost import cost_slopes, slope_sesoi
from homog.probe.summary import summarise
from homog.stats.bands import band_of_layers
from homog.stats.paired_tests import holm
from homog.stats.settings import StatsSettings

STATS = StatsSettings(n_boot=500, ci=0.95, alpha=0.05, test="sign_flip", n_perm=500, seed=0)


def _probe(n: int = 60) -> pd.DataFrame:
    """Per-text probe outputs of n reviews (labels balanced) at layers 0..2: ``same`` moves
    each margin by noise far inside the margin, ``worse`` loses 1.5 logits beyond layer 0;
    at layer 0 every variant has the original's margins (the same tokens)."""
    rng = np.random.default_rng(1)
    base = rng.normal(2.0, 1.0, size=(3, n))
    rows = []
    for layer in range(3):
        for variant, shift in (("original", 0.0), ("same", 1e-4), ("worse", -1.5)):
            noise = rng.normal(0, shift and abs(shift) / 3, n) if layer else np.zeros(n)
            margin = base[layer] + (shift if layer else 0.0) + noise
            rows.append(
                pd.DataFrame(
                    {
                        "intervention": "none",
                        "scheme": "train_original",
                        "train_set": "original",
                        "variant": variant,
                        "sample_id": [f"r{i:03d}" for i in range(n)],
                        "layer": layer,
                        "y": np.arange(n) % 2,
                        "margin": margin,
                        "correct": margin > 0,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_probe_differences_get_sesoi_equivalence_ci_families_and_verdicts():
    probe = _probe()
    out = summarise(probe, None, STATS)
    diff = out[out["kind"] == "diff"].set_index(["variant", "layer", "metric"])
    # SESOI of the margin: a tenth of the original's mean |margin| at that layer
    orig = probe[probe["variant"] == "original"]
    for layer in range(3):
        size = orig.loc[orig["layer"] == layer, "margin"].abs().mean()
        assert np.isclose(diff.loc[("worse", layer, "margin"), "sesoi"], 0.1 * size)
        acc = (orig.loc[orig["layer"] == layer, "margin"] > 0).mean()
        assert np.isclose(diff.loc[("worse", layer, "accuracy"), "sesoi"], 0.1 * (acc - 0.5))
    assert "mean |margin|" in diff.loc[("worse", 1, "margin"), "sesoi_basis"]
    # the equivalence CI (90 %) lies inside the 95 % CI, both around the mean
    assert (diff["eq_ci_low"] >= diff["ci_low"] - 1e-12).all()
    assert (diff["eq_ci_high"] <= diff["ci_high"] + 1e-12).all()
    # layer 0: controls, outside the Holm family, equivalent (the same margins)
    l0 = diff.xs(0, level="layer")
    assert (l0["family"] == "control").all() and l0["p_holm"].isna().all()
    assert (l0["verdict"] == "equivalent").all()
    # beyond layer 0: a real loss is supported, a difference of 1e-4 logits equivalent
    later = diff[diff.index.get_level_values("layer") > 0]
    assert (later["family"] == "exploratory").all()
    assert diff.loc[("worse", 1, "margin"), "verdict"] == "supported"
    assert diff.loc[("worse", 2, "margin"), "verdict"] == "supported"
    assert diff.loc[("same", 1, "margin"), "verdict"] in ("equivalent", "negligible")
    # Holm runs over the metric's non-control rows only
    margin = later.xs("margin", level="metric")
    assert np.allclose(np.sort(margin["p_holm"]), np.sort(holm(margin["p_value"].to_numpy())))
    # the band rows: per-text means over the band's layers (layer0, final; 1 is no depth band
    # of 3 layers), layer NULL, Holm apart from the per-layer rows; the layer0 band a control
    band = out[(out["kind"] == "diff") & out["band"].notna()].set_index(
        ["variant", "band", "metric"]
    )
    assert band["layer"].isna().all()
    assert set(band.index.get_level_values("band")) == {"layer0", "final"}
    assert band.loc[("worse", "layer0", "margin"), "family"] == "control"
    final = diff.loc[("worse", 2, "margin")]
    assert np.isclose(band.loc[("worse", "final", "margin"), "value"], final["value"])
    fam = band[band["family"] == "exploratory"].xs("margin", level="metric")
    assert np.allclose(np.sort(fam["p_holm"]), np.sort(holm(fam["p_value"].to_numpy())))
    # level rows carry no verdict columns
    level = out[out["kind"] == "level"]
    assert level["verdict"].isna().all() and level["family"].isna().all()


def test_an_accuracy_at_chance_has_no_sesoi_so_nothing_is_called_negligible():
    probe = _probe()
    probe.loc[probe["variant"] == "original", "correct"] = (
        np.arange((probe["variant"] == "original").sum()) % 2 == 0
    )
    out = summarise(probe, None, STATS)
    acc = out[(out["kind"] == "diff") & (out["metric"] == "accuracy")]
    assert acc["sesoi"].isna().all()
    assert not acc["verdict"].isin(["negligible", "equivalent"]).any()


def _frames(slope: float, n: int = 80):
    """erank falling 2 per layer (layers 0..5) with review and variant offsets; the margin
    ``slope`` x erank + noise."""
    rng = np.random.default_rng(3)
    rows = []
    for s in range(n):
        base = rng.normal(scale=3)
        for v, off in (("original", 0.0), ("key_first", -1.0), ("front", 1.0)):
            for layer in range(6):
                e = 30 + base + off + rng.normal() - 2 * layer
                rows.append(("none", v, f"s{s}", layer, e, slope * e + 5 + rng.normal(0, 0.2)))
    f = pd.DataFrame(
        rows, columns=["intervention", "variant", "sample_id", "layer", "value", "margin"]
    )
    return f.assign(scheme="train_original"), f[list(f.columns[:5])]


def test_slope_sesoi_is_a_tenth_of_the_margin_per_the_depth_change():
    probe, erank = _frames(0.5)
    bands = band_of_layers(list(range(6)))
    orig = probe[probe["variant"] == "original"]
    late = orig[orig["layer"].isin(bands["late"])].groupby("sample_id")["margin"].mean()
    bound, text = slope_sesoi(late, erank, bands, 0.1)
    e = erank[erank["variant"] == "original"]
    early_mean = e[e["layer"].isin(bands["early"])].groupby("sample_id")["value"].mean()
    late_mean = e[e["layer"].isin(bands["late"])].groupby("sample_id")["value"].mean()
    depth = abs((early_mean - late_mean).mean())
    assert np.isclose(bound, 0.1 * late.abs().mean() / depth)
    assert "early-to-late erank change" in text


def test_cost_slopes_verdicts_supported_and_equivalent():
    probe, erank = _frames(0.5)
    out = cost_slopes(probe, None, erank, StatsSettings(n_boot=300, sesoi=0.1))
    assert (out["verdict"] == "supported").all() and (out["family"] == "primary").all()
    # no link: the slope's CI sits well inside a tenth of the margin per the depth change
    probe, erank = _frames(0.0)
    out = cost_slopes(probe, None, erank, StatsSettings(n_boot=300, sesoi=0.1))
    assert ((out["eq_ci_low"] > -out["sesoi"]) & (out["eq_ci_high"] < out["sesoi"])).all()
    assert out["verdict"].isin(["equivalent", "negligible"]).all()
    # a benefit (margin grows as erank falls) is reversed
    probe, erank = _frames(-0.5)
    out = cost_slopes(probe, None, erank, StatsSettings(n_boot=300, sesoi=0.1))
    assert (out["verdict"] == "reversed").all()


def test_the_best_layer_accuracy_is_read_on_folds_it_was_not_chosen_on():
    """Ten layers of pure chance: the highest per-layer accuracy is biased upward, the
    cross-fitted one (each fold read at the layer the other folds chose) is not."""
    from homog.probe.best import BEST_METRIC, crossfit_rows

    rng = np.random.default_rng(0)
    n, layers, folds = 100, 10, 5
    rows = [
        {
            "intervention": "none",
            "scheme": "train_original",
            "variant": "original",
            "sample_id": f"s{i:03d}",
            "fold": i % folds,
            "layer": la,
            "correct": float(rng.random() < 0.5),
            "margin": rng.normal(),
        }
        for i in range(n)
        for la in range(layers)
    ]
    probe = pd.DataFrame(rows)
    stats = StatsSettings(n_boot=500, ci=0.95, seed=0)
    (row,) = crossfit_rows(probe, stats)
    assert row["metric"] == BEST_METRIC and row["n"] == n and 0 <= row["layer"] < layers
    wide = probe.pivot_table(index="sample_id", columns="layer", values="correct")
    fold = probe.groupby("sample_id")["fold"].first()
    want = []
    for s in wide.index:  # an independent loop: choose on the other folds, read this text
        other = wide[fold != fold[s]]
        mar = probe[probe["fold"] != fold[s]].groupby("layer")["margin"].mean()
        acc = other.mean()
        best = sorted(acc.index, key=lambda la: (-acc[la], -mar[la], la))[0]
        want.append(wide.loc[s, best])
    assert row["value"] == pytest.approx(np.mean(want))
    assert row["value"] < wide.mean().max()  # the maximum reads its own noise
    assert row["ci_low"] < 0.5 < row["ci_high"]
