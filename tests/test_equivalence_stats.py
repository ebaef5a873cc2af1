"""The stats stage's depth SESOI, equivalence CI, key_ends (the U-shape)
and the dose-response's quadratic term, each against an independent hand computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from homog.stats.bands import band_of_layers
from homog.stats.contrasts import VARIANT_PAIRS, run_contrasts
from homog.stats.dose import dose_response
from homog.stats.settings import StatsSettings

N, L = 24, 8  # texts, last layer: interior layers 1..7, early [1, 2], late [6, 7]


def long_frame(values: dict[str, np.ndarray], metric: str = "erank") -> pd.DataFrame:
    """layer_metrics rows from variant -> [N, L + 1] values."""
    rows = [
        (v, f"s{i:02d}", lay, metric, float(x[i, lay]))
        for v, x in values.items()
        for i in range(x.shape[0])
        for lay in range(x.shape[1])
    ]
    return pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])


def curves(seed: int = 0, shift: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """A falling curve per text (the homogenization) plus noise; ``shift`` per variant."""
    rng = np.random.default_rng(seed)
    text = rng.normal(0, 3, (N, 1)) + 40 - 2.5 * np.arange(L + 1)[None, :]
    return {v: text + s + rng.normal(0, 0.5, (N, L + 1)) for v, s in (shift or {}).items()}


def rows_of(out: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    return out[(out["variant_a"] == a) & (out["variant_b"] == b)]


def band_values(x: np.ndarray, band: str) -> np.ndarray:
    return x[:, band_of_layers(range(L + 1))[band]].mean(axis=1)


def test_depth_sesoi_against_a_hand_computation():
    vals = curves(shift={"original": 0.0, "front": 0.3})
    depth = StatsSettings(n_boot=200, sesoi_basis="depth")
    out = run_contrasts(long_frame(vals), "r", depth, pairs=[("front", "original")])
    o = vals["original"]
    # early band: layers 1, 2; late band: layers 6, 7 (band_of_layers of 0..8)
    depth = abs(np.mean(o[:, [1, 2]].mean(1) - o[:, [6, 7]].mean(1)))
    assert depth > 10  # the curve falls by 2.5 a layer
    assert (out["baseline_sd"] < depth).all()  # above its floor, the SD basis
    assert out["sesoi"].to_numpy() == pytest.approx(0.1 * depth)  # every layer and band
    assert out["depth_change"].to_numpy() == pytest.approx(depth)
    late = out[out["band"] == "late"].iloc[0]
    assert late["sesoi_basis"] == (
        f"0.1 x the original's early-to-late change ({depth:.3g}) at the late band"
    )
    # p_tost is against that bound: the raw TOST of the late band, recomputed with scipy
    late = out[out["band"] == "late"].iloc[0]
    d = band_values(vals["front"], "late") - band_values(o, "late")
    lo = sps.ttest_1samp(d, -0.1 * depth, alternative="greater").pvalue
    hi = sps.ttest_1samp(d, 0.1 * depth, alternative="less").pvalue
    assert late["p_tost"] == pytest.approx(max(lo, hi), rel=1e-6)
    # the sd basis keeps the old rule: 0.1 x the original's between-text SD of each row
    # the sd basis (the default): 0.1 x the original's between-text SD of each row's scope
    sd = run_contrasts(
        long_frame(vals), "r", StatsSettings(n_boot=200), pairs=[("front", "original")]
    )
    for band in ("late", "final"):
        row = sd[sd["band"] == band].iloc[0]
        want = 0.1 * band_values(o, band).std(ddof=1)
        assert row["sesoi"] == pytest.approx(want) and row["sesoi"] != pytest.approx(0.1 * depth)
        where = "the final layer" if band == "final" else f"the {band} band"
        assert row["sesoi_basis"] == (
            f"0.1 x the original's between-text SD at {where} ({want / 0.1:.3g})"
        )


def test_depth_sesoi_falls_back_to_the_sd_basis_and_says_so():
    rng = np.random.default_rng(3)
    flat = np.repeat(rng.normal(5, 1, (N, 1)), L + 1, axis=1)  # no change with depth at all
    vals = {"original": flat, "front": flat + rng.normal(0, 0.1, flat.shape)}
    depth = StatsSettings(n_boot=100, sesoi_basis="depth")
    out = run_contrasts(long_frame(vals), "r", depth, pairs=[("front", "original")])
    assert out["sesoi"].to_numpy() == pytest.approx(0.1 * out["baseline_sd"].to_numpy())
    assert all(
        "between-text SD" in t and "does not homogenize monotonically" in t
        for t in out["sesoi_basis"]
    )


def test_equivalence_ci_is_the_90_percent_interval_of_the_same_resamples():
    vals = curves(seed=1, shift={"original": 0.0, "key_last": 0.2})
    settings = StatsSettings(n_boot=400, seed=5, alpha=0.05)
    out = run_contrasts(long_frame(vals), "r", settings, pairs=[("key_last", "original")])
    eff = out["mean_diff"]
    assert ((out["eq_ci_low"] <= eff) & (eff <= out["eq_ci_high"])).all()
    assert ((out["ci_low"] < out["eq_ci_low"]) & (out["eq_ci_high"] < out["ci_high"])).all()
    # recomputed: the same seeded multinomial resamples, the 5 % and 95 % quantiles
    late = out[out["band"] == "late"].iloc[0]
    d = band_values(vals["key_last"], "late") - band_values(vals["original"], "late")
    counts = np.random.default_rng(5).multinomial(N, np.full(N, 1 / N), size=400)
    means = counts @ d / N
    assert late["eq_ci_low"] == pytest.approx(np.quantile(means, 0.05))
    assert late["eq_ci_high"] == pytest.approx(np.quantile(means, 0.95))
    assert late["ci_low"] == pytest.approx(np.quantile(means, 0.025))


def test_adjusted_rows_take_the_equivalence_ci_of_the_intercept():
    rng = np.random.default_rng(2)
    vals = curves(seed=2, shift={"original": 0.0, "front": 0.0})
    added = rng.integers(1, 9, N).astype(float)
    vals["front"] = vals["front"] + 0.4 * added[:, None]  # a pure length effect
    frame = long_frame(vals)
    tok = pd.DataFrame(
        {
            "variant": np.repeat(["original", "front"], N),
            "sample_id": [f"s{i:02d}" for i in range(N)] * 2,
            "layer": 0,
            "metric": "n_tokens",
            "value": np.r_[np.full(N, 50.0), 50 + added],
        }
    )
    settings = StatsSettings(n_boot=300)
    out = run_contrasts(pd.concat([frame, tok]), "r", settings, pairs=[("front", "original")])
    adj = out[out["adjusted"]]
    assert len(adj) == len(out) > 0
    assert ((adj["eq_ci_low"] <= adj["adj_diff"]) & (adj["adj_diff"] <= adj["eq_ci_high"])).all()
    inside = (adj["adj_ci_low"] <= adj["eq_ci_low"]) & (adj["eq_ci_high"] <= adj["adj_ci_high"])
    assert inside.all()
    # not the raw difference's interval (it carries the length effect, about +1.8)
    assert (adj["eq_ci_high"] < adj["mean_diff"]).all()


def test_key_ends_rows_equal_an_independent_numpy_computation():
    vals = curves(
        seed=4, shift={"original": 0.0, "key_first": 0.5, "key_mid": 0.0, "key_last": 0.3}
    )
    frame = long_frame(vals)
    frame = frame[~((frame["variant"] == "key_last") & (frame["sample_id"] == "s03"))]
    tok = pd.DataFrame(
        {
            "variant": np.repeat(["key_first", "key_mid", "key_last"], N),
            "sample_id": [f"s{i:02d}" for i in range(N)] * 3,
            "layer": 0,
            "metric": "n_tokens",
            "value": 60.0,
        }
    )
    out = run_contrasts(pd.concat([frame, tok]), "r", StatsSettings(n_boot=200))
    assert {("key_mid", "original"), ("key_ends", "key_mid")} <= set(VARIANT_PAIRS)
    assert len(rows_of(out, "key_mid", "original")) == L + 1 + 5
    ends = rows_of(out, "key_ends", "key_mid")
    keep = np.arange(N) != 3  # s03 lacks key_last: no key_ends value
    want = ((vals["key_first"] + vals["key_last"]) / 2 - vals["key_mid"])[keep]
    layers = ends[ends["band"].isna()].sort_values("layer")
    assert layers["mean_diff"].to_numpy() == pytest.approx(want.mean(axis=0))
    assert (layers["n"] == N - 1).all()
    bands = ends.set_index("band")
    for band in ("early", "middle", "late"):
        ls = band_of_layers(range(L + 1))[band]
        assert bands.loc[band, "mean_diff"] == pytest.approx(want[:, ls].mean())
    # the family keeps every token: t = 0, the raw difference is the effect
    assert (ends["n_tokens_diff"] == 0).all() and not ends["adjusted"].any()
    assert ends["eq_ci_low"].notna().all() and ends["sesoi_basis"].notna().all()
    assert ends["mm_diff"].isna().all()  # not a variant of the mixed model


def positions_frame(x: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame(
        [(v, f"s{i:02d}", float(p[i])) for v, p in x.items() for i in range(N)],
        columns=["variant", "sample_id", "key_position"],
    )


def test_quadratic_coefficient_against_numpy_polyfit():
    rng = np.random.default_rng(6)
    xs = {
        "key_first": np.zeros(N),
        "key_q": np.full(N, 0.3),
        "key_mid": np.full(N, 0.55),
        "key_last": np.full(N, 0.9),
    }
    vals = curves(seed=6, shift={"original": 0.0})
    for v, x in xs.items():  # a U plus a slope plus noise, different per text
        c_i = rng.normal(2.0, 0.5, (N, 1))
        vals[v] = vals["original"] + c_i * (x[:, None] - 0.5) ** 2 + 0.7 * x[:, None]
        vals[v] = vals[v] + rng.normal(0, 0.05, vals[v].shape)
    out = dose_response(long_frame(vals), positions_frame(xs), "r", StatsSettings(n_boot=200))
    quad = out[out["kind"] == "quadratic"].set_index("band")
    x = np.array([0.0, 0.3, 0.55, 0.9])
    for band in ("early", "late"):
        y = np.stack([band_values(vals[v], band) for v in xs])  # [4, N]
        # every text at the same positions: the within-text fit is the fit of the mean curve
        assert quad.loc[band, "value"] == pytest.approx(np.polyfit(x, y.mean(1), 2)[0])
        assert quad.loc[band, "ci_low"] < quad.loc[band, "value"] < quad.loc[band, "ci_high"]
    assert (quad["p_value"] < 0.01).all() and (quad["n"] == N).all()
    slope = out[out["kind"] == "slope"].set_index("band")
    assert quad["sesoi"].to_numpy() == pytest.approx(4 * slope["sesoi"].to_numpy())
    assert (quad["eq_ci_low"] > quad["ci_low"]).all()
    assert (slope["eq_ci_low"] > slope["ci_low"]).all()


def test_three_positions_identify_the_u_shape_exactly():
    """first, mid, last at 0, 0.5, 1: c = 4 x ((first + last) / 2 - mid) per text, so the
    quadratic row is 4 x the key_ends - key_mid contrast."""
    xs = {"key_first": np.zeros(N), "key_mid": np.full(N, 0.5), "key_last": np.ones(N)}
    vals = curves(
        seed=7, shift={"original": 0.0, "key_first": 0.4, "key_mid": 0.0, "key_last": 0.2}
    )
    frame = long_frame(vals)
    quad = dose_response(frame, positions_frame(xs), "r", StatsSettings(n_boot=100))
    quad = quad[quad["kind"] == "quadratic"].set_index("band")
    ends = rows_of(run_contrasts(frame, "r", StatsSettings(n_boot=100)), "key_ends", "key_mid")
    ends = ends.dropna(subset=["band"]).set_index("band")
    assert quad["value"].to_numpy() == pytest.approx(4 * ends.loc[quad.index, "mean_diff"])
    for band in quad.index:
        y = [band_values(vals[v], band) for v in xs]
        per_text = [np.polyfit([0, 0.5, 1], [a, b, c], 2)[0] for a, b, c in zip(*y, strict=True)]
        assert quad.loc[band, "value"] == pytest.approx(np.mean(per_text))
    # a straight line has no curvature
    line = {v: vals["original"] + 3.0 * xs[v][:, None] for v in xs}
    flat = dose_response(long_frame(line), positions_frame(xs), "r", StatsSettings(n_boot=100))
    assert flat[flat["kind"] == "quadratic"]["value"].to_numpy() == pytest.approx(0, abs=1e-9)
    # ... and with noise, a steep line gives a small slope p but no evidence of curvature
    rng = np.random.default_rng(9)
    noisy = {v: y + rng.normal(0, 0.5, y.shape) for v, y in line.items()}
    out = dose_response(long_frame(noisy), positions_frame(xs), "r", StatsSettings(n_boot=100))
    assert (out[out["kind"] == "slope"]["p_value"] < 0.001).all()
    assert (out[out["kind"] == "quadratic"]["p_value"] > 0.05).all()


def test_per_text_contributions_sum_to_the_quadratic():
    from homog.stats.dose_fit import within_quadratic

    rng = np.random.default_rng(10)
    x = np.stack([np.zeros(N), rng.uniform(0.3, 0.6, N), rng.uniform(0.8, 1.0, N)])
    y = rng.normal(0, 1, (3, 2, N))
    theta, q, used = within_quadratic(x, y)
    assert q.sum(axis=1) == pytest.approx(theta[:, 1]) and used.all()
    # the pooled within-text least squares, by an explicit dummy-variable regression
    for g in range(2):
        design = np.hstack(
            [
                np.kron(np.eye(N), np.ones((3, 1))),
                np.c_[(x.T.ravel() - 0.5), (x.T.ravel() - 0.5) ** 2],
            ]
        )
        coef = np.linalg.lstsq(design, y[:, g, :].T.ravel(), rcond=None)[0]
        assert theta[g] == pytest.approx(coef[-2:])


def test_dose_holm_is_per_kind():
    from homog.stats.paired_tests import holm

    xs = {"key_first": np.zeros(N), "key_mid": np.full(N, 0.5), "key_last": np.ones(N)}
    vals = curves(
        seed=8, shift={"original": 0.0, "key_first": 0.4, "key_mid": 0.0, "key_last": 0.2}
    )
    out = dose_response(long_frame(vals), positions_frame(xs), "r", StatsSettings(n_boot=100))
    for kind in ("slope", "quadratic"):
        k = out[out["kind"] == kind]
        assert k["p_holm"].to_numpy() == pytest.approx(holm(k["p_value"].to_numpy(dtype=float)))


def test_stats_params_take_the_sesoi_basis_and_check_it():
    from homog.config import as_params
    from homog.errors import HomogError

    p = as_params({})
    assert p.stats.sesoi_basis == "sd" and p.stats.sesoi == 0.1
    assert as_params({"stats": {"sesoi_basis": "depth"}}).stats.sesoi_basis == "depth"
    with pytest.raises(HomogError, match="stats.sesoi_basis"):
        as_params({"stats": {"sesoi_basis": "depths"}})
    with pytest.raises(HomogError, match="stats.alpha"):
        as_params({"stats": {"alpha": 0.5}})  # no (1 - 2 alpha) interval
    with pytest.raises(HomogError, match="stats.separability_perm"):
        as_params({"stats": {"separability_perm": -1}})


def test_intervention_rows_take_the_unchanged_runs_original_depth():
    from homog.stats.contrasts import intervention_contrasts

    base = curves(seed=11, shift={"original": 0.0, "front": 0.2})
    moved = {v: x + 0.1 for v, x in base.items()}
    moved["original"] = moved["original"] * 0.5  # the intervention run's own depth differs
    out = intervention_contrasts(
        long_frame(moved),
        long_frame(base),
        "iv",
        "none",
        StatsSettings(n_boot=100, sesoi_basis="depth"),
    )
    o = base["original"]
    depth = abs(np.mean(o[:, [1, 2]].mean(1) - o[:, [6, 7]].mean(1)))
    assert out["sesoi"].to_numpy() == pytest.approx(0.1 * depth)
    assert all(
        t.startswith(f"0.1 x the unchanged run's original's early-to-late change ({depth:.3g}) at ")
        for t in out["sesoi_basis"]
    )
