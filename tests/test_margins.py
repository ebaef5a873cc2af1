"""The margin (SESOI) of every contrast row: the SD basis per scope by default, the depth
basis only where the metric homogenizes monotonically and never below the SD basis, pins from
params.yaml, and the floor of 1e-3 x the between-text SD (homog.stats.margins)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_equivalence_stats import L, N, band_values, long_frame

from homog.stats.contrasts import run_contrasts
from homog.stats.margins import FLOOR, sesoi_at
from homog.stats.settings import StatsSettings


def texts(slope: float, seed: int = 0) -> dict[str, np.ndarray]:
    """erank curves of ``slope`` per layer around 40, texts 3 apart, and a front variant."""
    rng = np.random.default_rng(seed)
    text = rng.normal(0, 3, (N, 1)) + 40 + slope * np.arange(L + 1)[None, :]
    orig = text + rng.normal(0, 1e-4, (N, L + 1))
    return {"original": orig, "front": orig - 0.4 + rng.normal(0, 0.5, (N, L + 1))}


def contrasts_of(vals: dict[str, np.ndarray], **opts) -> pd.DataFrame:
    settings = StatsSettings(n_boot=200, **opts)
    return run_contrasts(long_frame(vals), "r", settings, pairs=[("front", "original")])


def late_row(out: pd.DataFrame) -> pd.Series:
    return out[out["band"] == "late"].iloc[0]


def test_a_metric_flat_across_depth_does_not_get_a_collapsed_margin():
    # erank that barely falls over depth (39.89 to 39.87 on a real model): the depth basis
    # would be a tenth of a change of ~0.02, far below how much reviews differ
    vals = texts(slope=-0.003)
    settings = StatsSettings(n_boot=200, sesoi_basis="depth")
    out = run_contrasts(long_frame(vals), "r", settings, pairs=[("front", "original")])
    o = vals["original"]
    depth = abs(np.mean(band_values(o, "early") - band_values(o, "late")))
    sd = band_values(o, "late").std(ddof=1)
    assert depth < 0.1 and sd > 1
    assert out["depth_change"].to_numpy() == pytest.approx(depth)  # it does homogenize
    row = late_row(out)
    assert row["sesoi"] == pytest.approx(0.1 * sd)  # the SD basis is the floor
    assert row["sesoi"] > 100 * 0.1 * depth
    assert "between-text SD at the late band" in row["sesoi_basis"]
    assert f"early-to-late change ({depth:.3g})" in row["sesoi_basis"]  # says why


def test_a_metric_that_rises_with_depth_falls_back_to_the_sd_basis():
    vals = texts(slope=+2.0)  # erank rising: the network does not homogenize it here
    settings = StatsSettings(n_boot=200, sesoi_basis="depth")
    out = run_contrasts(long_frame(vals), "r", settings, pairs=[("front", "original")])
    row = late_row(out)
    assert row["sesoi"] == pytest.approx(0.1 * row["baseline_sd"])
    assert "does not homogenize monotonically over depth" in row["sesoi_basis"]
    assert np.isnan(out["depth_change"]).all()


def test_a_pinned_margin_replaces_the_basis_for_its_scope_only():
    vals = texts(slope=-2.5)
    out = contrasts_of(vals, sesoi_pin={"erank": {"late": 0.7}})
    row = late_row(out)
    assert row["sesoi"] == 0.7
    assert row["sesoi_basis"] == (
        "pinned in params.yaml (stats.sesoi_pin erank late: 0.7) at the late band"
    )
    final = out[out["band"] == "final"].iloc[0]
    assert final["sesoi"] == pytest.approx(0.1 * final["baseline_sd"])


def test_no_margin_below_the_floor():
    vals = texts(slope=-2.5)
    out = contrasts_of(vals, sesoi_pin={"erank": {"all": 1e-9}})
    sd = out["baseline_sd"].to_numpy()
    assert out["sesoi"].to_numpy() == pytest.approx(FLOOR * sd)
    assert all("raised to the floor 0.001 x that SD" in t for t in out["sesoi_basis"])
    assert (out["sesoi"] >= FLOOR * out["baseline_sd"] * (1 - 1e-12)).all()


def test_the_stored_columns_recompute_every_setting():
    vals = texts(slope=-2.5)
    for basis in ("sd", "depth"):
        for factor in (0.05, 0.2):
            out = run_contrasts(
                long_frame(vals),
                "r",
                StatsSettings(n_boot=50, sesoi=factor, sesoi_basis=basis),
                pairs=[("front", "original")],
            )
            again = [
                sesoi_at(d, s, factor, basis)
                for d, s in zip(out["depth_change"], out["baseline_sd"], strict=True)
            ]
            assert out["sesoi"].to_numpy() == pytest.approx(np.array(again))


def test_pinned_margins_go_into_the_provenance(tmp_path):
    import pandas as pd

    from homog.config import as_params
    from homog.report.provenance import gather, provenance_sections

    params = as_params({"stats": {"sesoi_pin": {"mev": {"late": 0.005}}}})
    prov = gather(
        pd.DataFrame(),
        tmp_path / "db",
        "homog report",
        root=tmp_path,
        params=params,
        params_name="params.yaml",
        synth=None,
        synth_path=None,
        n_original_texts=None,
    )
    text = " ".join(provenance_sections(prov, pd.DataFrame())[0].paragraphs)
    assert "stats.sesoi 0.1 x basis sd" in text and "(stats.sesoi_pin): mev late 0.005" in text
