"""Paired statistics: Holm, bootstrap, Wilcoxon, bands, contrasts against hand computations."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata, wilcoxon

from homog.stats.bands import band_of_layers
from homog.stats.contrasts import intervention_contrasts, paired_contrasts, run_contrasts
from homog.stats.paired_tests import bootstrap_ci, holm, paired_p, sign_flip_p, wilcoxon_p
from homog.stats.settings import StatsSettings


def test_holm_matches_hand_computation():
    # m = 4; sorted p: 0.01, 0.02, 0.03, 0.04 -> 0.04, 0.06, 0.06 (monotone), 0.06 (max w/ 0.04)
    p = [0.03, 0.01, 0.04, 0.02]
    assert holm(p) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # Capped at 1, NaN not counted as a test: m = 2 here.
    assert np.allclose(holm([0.6, np.nan, 0.01]), [0.6, np.nan, 0.02], equal_nan=True)
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1, then max
    assert np.isnan(holm([np.nan])).all()


def test_bootstrap_ci_equals_loop_and_has_normal_width():
    rng = np.random.default_rng(1)
    d = rng.normal(0.5, 2.0, size=(3, 200))
    low, high = bootstrap_ci(d, n_boot=1000, ci=0.9, seed=7)
    # Independent loop over resamples with the same seeded draws.
    counts = np.random.default_rng(7).multinomial(200, np.full(200, 1 / 200), size=1000)
    for g in range(3):
        means = np.array([np.repeat(d[g], c).mean() for c in counts])
        assert low[g] == pytest.approx(np.quantile(means, 0.05))
        assert high[g] == pytest.approx(np.quantile(means, 0.95))
        se = d[g].std(ddof=1) / np.sqrt(200)
        assert (high[g] - low[g]) == pytest.approx(2 * 1.645 * se, rel=0.15)


def test_wilcoxon_matches_scipy_and_handles_zeros():
    rng = np.random.default_rng(2)
    d = rng.normal(0.3, 1, 40)
    assert wilcoxon_p(d) == pytest.approx(wilcoxon(d).pvalue)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wilcoxon_p(np.zeros(10)) == 1.0
    assert np.isnan(wilcoxon_p(np.array([1.0])))


def test_band_split():
    # issue 29: layer 0 (embeddings) and L (final norm) are rows of their own, outside the bands
    assert band_of_layers(range(8)) == {
        "layer0": [0],
        "early": [1, 2],
        "middle": [3, 4],
        "late": [5, 6],
        "final": [7],
    }
    b = band_of_layers(range(31))  # 29 interior layers: round(29/4) = 7 at each end
    assert len(b["early"]) == len(b["late"]) == 7 and len(b["middle"]) == 15
    assert list(b) == ["layer0", "early", "middle", "late", "final"]
    assert band_of_layers([0, 1]) == {"layer0": [0], "final": [1]}
    # attention metrics start at layer 1, a layer like the others: no layer0 row
    assert band_of_layers([1, 2, 3, 4, 5]) == {
        "early": [1],
        "middle": [2, 3],
        "late": [4],
        "final": [5],
    }


def frame(shift: dict[str, float], n_texts=30, n_layers=8, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n_texts, n_layers + 1))  # per-text values shared by variants
    rows = []
    for v, s in shift.items():
        noise = rng.normal(scale=0.1, size=base.shape)
        for t in range(n_texts):
            for layer in range(n_layers + 1):
                value = base[t, layer] + s * layer + noise[t, layer]
                rows.append((v, f"s{t}", layer, "erank", value))
    return pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])


def test_run_contrasts_against_pandas():
    f = frame({"original": 0.0, "front": -0.2, "end": -0.1, "control": 0.0})
    out = run_contrasts(f, "r1", StatsSettings(n_boot=500, seed=0))
    layers = out[out["band"].isna()]
    assert set(zip(layers["variant_a"], layers["variant_b"], strict=True)) == {
        ("front", "original"),
        ("end", "original"),
        ("control", "original"),
        ("front", "control"),
        ("end", "control"),
    }
    fo = layers[(layers["variant_a"] == "front") & (layers["variant_b"] == "original")]
    wide = f.pivot_table(index=["sample_id", "layer"], columns="variant", values="value")
    diff = (wide["front"] - wide["original"]).groupby("layer")
    assert fo["mean_diff"].to_numpy() == pytest.approx(diff.mean().to_numpy())
    want_p = [sign_flip_p(g.to_numpy()[None, :], n_perm=10000, seed=0)[0] for _, g in diff]
    assert fo["p_value"].to_numpy() == pytest.approx(want_p)
    assert fo["p_holm"].to_numpy() == pytest.approx(holm(want_p))
    assert (fo["ci_low"] <= fo["mean_diff"]).all() and (fo["mean_diff"] <= fo["ci_high"]).all()
    assert (fo[fo["layer"] >= 4]["p_holm"] < 0.01).all()  # a real shift is found
    bands = out[
        out["band"].notna() & (out["variant_a"] == "front") & (out["variant_b"] == "original")
    ].set_index("band")
    # 9 layers 0..8 -> interior 1..7, late band = the last round(7/4) = 2 of them (issue 29)
    late = diff.mean().loc[[6, 7]].mean()
    assert bands.loc["late", "mean_diff"] == pytest.approx(late)
    assert bands.loc["layer0", "mean_diff"] == pytest.approx(diff.mean().loc[0])
    assert bands.loc["final", "mean_diff"] == pytest.approx(diff.mean().loc[8])
    assert bands["layer"].isna().all() and len(bands) == 5


def test_run_contrasts_wilcoxon_option_matches_scipy():
    f = frame({"original": 0.0, "front": -0.2})
    out = run_contrasts(
        f, "r1", StatsSettings(n_boot=100, seed=0, test="wilcoxon"), pairs=[("front", "original")]
    )
    layers = out[out["band"].isna()]
    wide = f.pivot_table(index=["sample_id", "layer"], columns="variant", values="value")
    diff = (wide["front"] - wide["original"]).groupby("layer")
    assert layers["p_value"].to_numpy() == pytest.approx([wilcoxon(g).pvalue for _, g in diff])


def _brute_sign_flip(d: np.ndarray) -> float:
    """Exact two-sided sign-flip p by listing every sign vector in Python (independent)."""
    import itertools

    obs = abs(sum(d) / len(d))
    hits = total = 0
    for signs in itertools.product([1, -1], repeat=len(d)):
        m = abs(sum(s * x for s, x in zip(signs, d, strict=True)) / len(d))
        hits += m >= obs - 1e-12
        total += 1
    return hits / total


def test_sign_flip_exact_against_brute_force():
    rng = np.random.default_rng(5)
    for n in (2, 5, 9):
        d = rng.normal(0.3, 1.0, size=(4, n))
        got = sign_flip_p(d, n_perm=10000, seed=0)
        assert got == pytest.approx([_brute_sign_flip(row) for row in d])
    # 1..8 all positive: only the identity and the full flip reach |mean| = 4.5
    assert sign_flip_p(np.arange(1.0, 9.0)[None, :])[0] == pytest.approx(2 / 2**8)


def test_sign_flip_monte_carlo_close_to_exact_and_never_zero():
    rng = np.random.default_rng(1)
    d = rng.normal(0.4, 1.0, size=(3, 14))  # 2^14 = 16384 > n_perm: Monte Carlo
    exact = [_brute_sign_flip(row) for row in d]
    mc = sign_flip_p(d, n_perm=4000, seed=3)
    assert np.abs(mc - exact).max() < 0.03  # binomial sd at p <= 0.5 and B = 4000: <= 0.008
    big = np.full((1, 200), 1.0) + rng.normal(0, 0.01, size=(1, 200))
    p = sign_flip_p(big, n_perm=500, seed=0)[0]
    assert p == pytest.approx(1 / 501)  # never exactly 0
    assert sign_flip_p(np.zeros((2, 30)))[0] == 1.0
    assert np.isnan(sign_flip_p(np.ones((1, 1)))[0])


def test_sign_flip_agrees_with_the_bootstrap_ci_where_wilcoxon_does_not():
    """Skewed differences: mostly small negatives, a few large positives. The mean is clearly
    positive (CI excludes 0); the signed-rank test is significant in the other direction (its
    positive rank sum is the smaller); the sign-flip test of the mean agrees with the CI."""
    rng = np.random.default_rng(0)
    d = np.concatenate([-np.abs(rng.normal(0.05, 0.02, 170)), np.abs(rng.normal(1.5, 0.2, 30))])
    low, high = bootstrap_ci(d[None, :], n_boot=2000, seed=0)
    assert low[0] > 0
    assert sign_flip_p(d[None, :], n_perm=5000, seed=0)[0] < 0.01
    w = wilcoxon(d)
    pos_ranks = sum(r for r, x in zip(rankdata(np.abs(d)), d, strict=True) if x > 0)
    assert w.pvalue < 0.01 and pos_ranks < len(d) * (len(d) + 1) / 4  # the opposite direction


def test_stats_params_validate_the_test():
    from homog.config import as_params
    from homog.io import HomogError

    with pytest.raises(HomogError, match="stats.test"):
        as_params({"stats": {"test": "ttest"}})
    assert as_params({}).stats.test == "sign_flip"


def test_paired_p_rejects_unknown_test():
    from homog.io import HomogError

    with pytest.raises(HomogError, match="stats.test"):
        paired_p(np.ones((1, 3)), test="t")


def test_identical_variants_give_p_one_without_warnings():
    f = frame({"original": 0.0})
    g = pd.concat([f, f.assign(variant="front")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run_contrasts(g, "r1", StatsSettings(n_boot=200), pairs=[("front", "original")])
    assert (out["mean_diff"] == 0).all() and (out["p_value"] == 1.0).all()
    assert (out["ci_low"] == 0).all() and (out["ci_high"] == 0).all()
    assert (out["p_holm"] == 1.0).all()


def test_rounding_differences_read_as_no_difference():
    """A reordering changes values by ~1e-14 relative with agreeing signs: a paired test would
    call that significant. paired_difference sets it to 0, so mean 0, CI [0, 0], p 1, also in
    the layer-0 column; a real difference of 1e-6 relative stays and is tested."""
    from homog.stats.paired_tests import paired_difference

    f = frame({"original": 0.0}, n_texts=20)
    f["value"] = f["value"] + 30.0  # erank-like level
    ulp = f.assign(variant="key_last", value=f["value"] * (1 + 3e-14))
    real = f.assign(variant="front", value=f["value"] * (1 + 1e-6))
    pairs = [("key_last", "original"), ("front", "original")]
    out = run_contrasts(pd.concat([f, ulp, real]), "r1", StatsSettings(n_boot=200), pairs=pairs)
    moved = out[out["variant_a"] == "key_last"]
    assert (moved["mean_diff"] == 0).all() and (moved["p_value"] == 1.0).all()
    assert (moved["ci_low"] == 0).all() and (moved["ci_high"] == 0).all()
    assert (moved["layer0_diff"] == 0).all() and (moved["layer0_p_value"] == 1.0).all()
    front = out[(out["variant_a"] == "front") & out["band"].isna()]
    assert (front["mean_diff"] > 0).all() and (front["p_value"] < 0.01).all()
    # the raw difference of the 1e-14 kind is what a plain subtraction would test
    a, b = ulp["value"].to_numpy(), f["value"].to_numpy()
    assert (a - b != 0).any() and (paired_difference(a, b) == 0).all()
    assert np.isnan(paired_difference(np.array([np.nan]), np.array([1.0]))).all()


def test_missing_pairs_are_dropped_and_counted():
    f = frame({"original": 0.0, "front": -0.5}, n_texts=12)
    f = f[~((f["variant"] == "front") & (f["sample_id"] == "s0"))]
    out = run_contrasts(f, "r1", StatsSettings(n_boot=200), pairs=[("front", "original")])
    assert (out["n"] == 11).all() and out["ci_low"].notna().all()


def test_intervention_contrasts_pair_same_variant():
    a = frame({"original": 0.0, "front": 0.0}, seed=3)
    b = a.assign(value=a["value"] + 0.25)
    out = intervention_contrasts(b, a, "iv", "base", StatsSettings(n_boot=200))
    assert (out["baseline_run_id"] == "base").all()
    assert (out["variant_a"] == out["variant_b"]).all()
    assert out["mean_diff"].to_numpy() == pytest.approx(0.25)


def test_paired_contrasts_ragged_rows():
    a = pd.DataFrame([[1.0, 2.0, np.nan], [1.0, 2.0, 3.0]], index=[0, 1], columns=["x", "y", "z"])
    b = a * 0
    out = paired_contrasts(a, b, StatsSettings(n_boot=100, ci=0.95, seed=0))
    assert list(out["n"]) == [2, 3]
    assert out.loc[0, "mean_diff"] == pytest.approx(1.5)


# --- issue 16: stale outputs are not trusted ------------------------------------------------


def _run_dir(root, intervention, run_id, pair_key, max_tokens, shift=0.0):
    """A finished run under root/data/extract/m/<intervention>/ (run.json + layer_metrics)."""
    import json

    d = root / "data" / "extract" / "m" / intervention
    d.mkdir(parents=True, exist_ok=True)
    record = {
        "run_id": run_id,
        "model": "m",
        "intervention": intervention,
        "n_layers": 3,
        "config_json": json.dumps({"extract": {"max_tokens": max_tokens}}),
    }
    if pair_key is not None:
        record["pair_key"] = pair_key
    (d / "run.json").write_text(json.dumps(record))
    rng = np.random.default_rng(len(run_id))
    rows = [
        (run_id, v, f"s{t}", layer, "erank", float(rng.normal(layer + shift, 1)))
        for v in ("original", "front")
        for t in range(6)
        for layer in range(4)
    ]
    pd.DataFrame(
        rows, columns=["run_id", "variant", "sample_id", "layer", "metric", "value"]
    ).to_parquet(d / "layer_metrics.parquet")


def _params(interventions=("none", "zero_pos")):
    from tests.conftest import project_params

    p = project_params()
    p["models"] = {"m": {"source": "random:tiny-llama"}}
    p["extract"]["interventions"] = list(interventions)
    p["stats"]["n_boot"] = 50
    p["stats"]["mixed_metrics"] = ["erank"]  # the one metric these runs have (else: a warning)
    return p


def _baselines(root, params):
    from homog.stats.stage import compute_all

    logged: list[str] = []
    out = compute_all(params, root, log=logged.append)
    return dict(
        out.dropna(subset=["baseline_run_id"]).groupby("run_id")["baseline_run_id"].first()
    ), logged


def test_interrupted_re_extract_is_not_paired_with_the_new_run(tmp_path):
    """Issue 16 item 5: a re-extract with new params (max_tokens 128 -> 64) wrote the new
    `none` run and was interrupted during `zero_pos`; the old zero_pos run (max_tokens 128)
    is still there. Stats must not compare it with the new none run."""
    _run_dir(tmp_path, "none", "new-none", "key-64", 64)
    _run_dir(tmp_path, "zero_pos", "old-zero", "key-128", 128, shift=1.0)
    pairs, logged = _baselines(tmp_path, _params())
    assert pairs == {}
    assert any("old-zero" in m and "no unchanged (none) run" in m for m in logged)
    # An old zero_pos output written before run.json had a pair_key: not paired either.
    _run_dir(tmp_path, "zero_pos", "old-zero", None, 128, shift=1.0)
    pairs, logged = _baselines(tmp_path, _params())
    assert pairs == {} and any("no pair_key" in m for m in logged)
    # The re-extract finishes: the same pair_key, so the runs are compared.
    _run_dir(tmp_path, "zero_pos", "new-zero", "key-64", 64, shift=1.0)
    pairs, logged = _baselines(tmp_path, _params())
    assert pairs == {"new-zero": "new-none"} and logged == []


def test_stats_reads_only_the_interventions_params_name(tmp_path):
    from homog.stats.stage import compute_all

    _run_dir(tmp_path, "none", "n1", "k", 64)
    _run_dir(tmp_path, "shuffle_pos", "s1", "k", 64)  # left from params that named it
    out = compute_all(_params(("none", "zero_pos")), tmp_path, log=lambda m: None)
    assert set(out["run_id"]) == {"n1"}
    out = compute_all(_params(("none", "shuffle_pos")), tmp_path, log=lambda m: None)
    assert set(out["run_id"]) == {"n1", "s1"}


def test_pair_key_is_the_run_id_minus_the_intervention():
    from homog.config import ExtractConfig
    from homog.extract.plan import RunSpec
    from homog.extract.run import run_record
    from homog.models import ModelFacts

    cfg = ExtractConfig(device="cpu", max_tokens=64)
    a = RunSpec("m", "random:tiny-llama", "none", cfg, "t1")
    b = RunSpec("m", "random:tiny-llama", "zero_pos", cfg, "t1")
    assert a.run_id != b.run_id and a.pair_key == b.pair_key
    for other in (
        RunSpec(
            "m", "random:tiny-llama", "zero_pos", ExtractConfig(device="cpu", max_tokens=128), "t1"
        ),
        RunSpec("m", "random:tiny-llama", "zero_pos", cfg, "t2"),
        RunSpec("m", "random:other", "zero_pos", cfg, "t1"),
    ):
        assert other.pair_key != a.pair_key
    facts = ModelFacts(n_layers=3, d_model=8, n_heads=2, dtype="float32", device="cpu")
    assert run_record(facts, b, 0, [])["pair_key"] == a.pair_key
