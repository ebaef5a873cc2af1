"""Verdicts that survive the confounds (issue 29), on a synthetic run with designed effects.

Per text i: erank_l = 30 - 2 l + u_i + k n_tokens + noise at every layer l (layer 0
included: the embeddings' erank grows with the token count, as the real one does), with
k = 0.3 per token. Variants:

- ``front`` only adds 1..8 tokens per text: a length effect and nothing else;
- ``key_first`` / ``key_mid`` / ``key_last`` keep every token (layer 0 equals the original's
  exactly, as the Gram spectrum of permuted rows does) and add beta (x - x_last) at layers >= 1,
  x the key sentence's position: a designed position effect of slope beta, none for key_last;
- ``key_control`` keeps every token and has no effect (the null variant).

Everything the stats stage and the claims compute is recomputed here independently: the
adjusted effects with scipy's linregress, their bootstrap CI by a loop, the TOST with scipy's
t-tests, the family Holm by a hand loop, the mixed model with statsmodels, the dose-response
slope with a text-fixed-effects OLS (numpy lstsq).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from homog.config.primary import PrimaryConfig
from homog.report.claims import claims_table
from homog.stats.bands import band_of_layers
from homog.stats.contrasts import run_contrasts
from homog.stats.settings import StatsSettings

N, L, K, BETA, SESOI, ALPHA = 60, 8, 0.3, 1.2, 0.1, 0.05
VARIANTS = ("original", "front", "key_first", "key_mid", "key_last", "key_control")


def synthetic(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(layer_metrics rows with n_tokens, texts rows with key_position) of one run."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 2, N)
    n_tok = rng.integers(40, 121, N)
    added = rng.integers(1, 9, N)
    x_last = rng.uniform(0.8, 0.95, N)
    x = {
        "key_first": np.zeros(N),
        "key_mid": rng.uniform(0.4, 0.6, N),
        "key_last": x_last,
        "key_control": np.full(N, np.nan),
    }
    layers = np.arange(L + 1)
    orig0 = 30 + u + K * n_tok + rng.normal(0, 0.3, N)  # layer 0 of the original
    rows, texts = [], []
    for v in VARIANTS:
        tok = n_tok + (added if v == "front" else 0)
        vals = 30 - 2 * layers[None, :] + u[:, None] + K * tok[:, None]
        vals = vals + rng.normal(0, 0.3, (N, L + 1))
        if v in ("key_first", "key_mid", "key_last"):
            vals[:, 1:] += BETA * (x[v] - x_last)[:, None]
        if v != "front":  # token-preserving: layer 0 is the original's exactly
            vals[:, 0] = orig0
        for i in range(N):
            sid = f"s{i:03d}"
            rows += [(v, sid, int(lay), "erank", float(vals[i, lay])) for lay in layers]
            rows.append((v, sid, 0, "n_tokens", float(tok[i])))
            texts.append((v, sid, float(x[v][i]) if v in x else np.nan))
    frame = pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])
    return frame, pd.DataFrame(texts, columns=["variant", "sample_id", "key_position"])


@pytest.fixture(scope="module")
def run():
    frame, texts = synthetic()
    settings = StatsSettings(
        n_boot=300, seed=0, sesoi=SESOI, sesoi_basis="sd", mixed_metrics=("erank",)
    )
    contrasts = run_contrasts(frame, "r1", settings)
    runs = pd.DataFrame([{"run_id": "r1", "model": "m", "intervention": "none"}])
    originals = frame[frame["variant"] == "original"].assign(run_id="r1")
    # the earlier primary endpoints: this synthetic run has no same-place control (ctrl_*)
    primary = PrimaryConfig(
        contrasts=("key_first - key_control", "key_last - key_control", "key_ends - key_mid")
    )
    claims = claims_table(contrasts, runs, originals, alpha=ALPHA, n_boot=300, primary=primary)
    return frame, texts, contrasts, claims


def _band_values(frame: pd.DataFrame, variant: str, band: str) -> pd.Series:
    ls = band_of_layers(range(L + 1))[band]
    g = frame[(frame["variant"] == variant) & (frame["metric"] == "erank")]
    return g[g["layer"].isin(ls)].groupby("sample_id")["value"].mean()


def _tokens(frame: pd.DataFrame, variant: str) -> pd.Series:
    g = frame[(frame["variant"] == variant) & (frame["metric"] == "n_tokens")]
    return g.set_index("sample_id")["value"]


def _row(contrasts, a, b, band):
    c = contrasts[
        (contrasts["variant_a"] == a)
        & (contrasts["variant_b"] == b)
        & (contrasts["band"] == band)
        & (contrasts["metric"] == "erank")
    ]
    assert len(c) == 1
    return c.iloc[0]


def _claim1(claims, variant):
    c = claims[(claims["claim"] == "1") & (claims["metric"] == "erank")]
    return c[c["comparison"] == f"{variant} - original"].set_index("band")


def test_a_variant_that_only_adds_tokens_shows_no_position_effect(run):
    frame, _, contrasts, claims = run
    front = _claim1(claims, "front")
    for band in ("early", "middle", "late", "final"):
        row = front.loc[band]
        assert row["adjusted"] and row["raw_effect"] > 1.0  # raw: +1.35 from length alone
        assert row["verdict"] in ("equivalent", "inconclusive", "negligible"), row
        assert row["lexical_confound"]  # layer 0 differs: the words changed
        assert abs(row["effect"]) < 0.3
    assert (front["verdict"] == "equivalent").sum() >= 3


def test_a_designed_position_effect_without_token_change_is_supported(run):
    _, _, contrasts, claims = run
    kf = _claim1(claims, "key_first")
    for band in ("early", "middle", "late", "final"):
        assert kf.loc[band, "verdict"] == "supported"
        assert not kf.loc[band, "adjusted"] and not kf.loc[band, "lexical_confound"]
        assert kf.loc[band, "effect"] == pytest.approx(-BETA * 0.875, abs=0.15)
        # what the layers add on top of layer 0 is the whole effect here
        assert kf.loc[band, "rel_layer0_effect"] == pytest.approx(kf.loc[band, "effect"])
    assert kf.loc["layer0", "verdict"] == "equivalent"  # the negative control


def test_a_null_variant_is_equivalent_to_no_effect(run):
    _, _, _, claims = run
    # no effect that matters: equivalent, or negligible where a raw 95 % CI excludes 0 by
    # chance (about 1 row in 20: "too small to matter" takes no family correction)
    five_a = claims[(claims["claim"] == "5a") & (claims["comparison"] == "key_control - original")]
    last = _claim1(claims, "key_last")
    for rows in (five_a, last):
        assert set(rows["verdict"]) <= {"equivalent", "negligible"}
        assert (rows["verdict"] == "equivalent").mean() >= 0.5
        neg = rows[rows["verdict"] == "negligible"]
        assert ((neg["ci_low"] > 0) | (neg["ci_high"] < 0)).all()


def test_adjusted_effect_ci_and_p_recomputed_with_scipy(run):
    frame, _, contrasts, _ = run
    row = _row(contrasts, "front", "original", "late")
    d = (_band_values(frame, "front", "late") - _band_values(frame, "original", "late")).to_numpy()
    t = (_tokens(frame, "front") - _tokens(frame, "original")).to_numpy()
    fit = sps.linregress(t, d)
    assert row["adj_diff"] == pytest.approx(fit.intercept, rel=1e-9)
    tstat = fit.intercept / fit.intercept_stderr
    assert row["adj_p_value"] == pytest.approx(2 * sps.t.sf(abs(tstat), N - 2), rel=1e-6)
    assert row["mean_diff"] == pytest.approx(d.mean()) and row["n_tokens_diff"] == t.mean()
    # bootstrap CI: the same seeded multinomial resamples, one polyfit per resample
    counts = np.random.default_rng(0).multinomial(N, np.full(N, 1 / N), size=300)
    boots = [np.polyfit(np.repeat(t, c), np.repeat(d, c), 1)[1] for c in counts]
    assert row["adj_ci_low"] == pytest.approx(np.quantile(boots, 0.025), rel=1e-6)
    assert row["adj_ci_high"] == pytest.approx(np.quantile(boots, 0.975), rel=1e-6)
    # dz of the adjusted effect: over the SD of the length-adjusted differences
    adj = d - fit.slope * t
    assert row["dz"] == pytest.approx(adj.mean() / adj.std(ddof=1), rel=1e-6)
    # TOST of the adjusted effect with the regression's se, n - 2 df
    delta = SESOI * _band_values(frame, "original", "late").std(ddof=1)
    assert row["sesoi"] == pytest.approx(delta)
    lower = sps.t.sf((fit.intercept + delta) / fit.intercept_stderr, N - 2)
    upper = sps.t.cdf((fit.intercept - delta) / fit.intercept_stderr, N - 2)
    assert row["p_tost"] == pytest.approx(max(lower, upper), rel=1e-6)
    # layer 0 and the difference relative to it
    d0 = _band_values(frame, "front", "layer0") - _band_values(frame, "original", "layer0")
    assert row["layer0_diff"] == pytest.approx(d0.mean())
    rel = sps.linregress(t, d - d0.to_numpy())
    assert row["rel_layer0_diff"] == pytest.approx(rel.intercept, rel=1e-9)


def test_raw_tost_dz_and_percent_recomputed_with_scipy(run):
    frame, _, contrasts, claims = run
    row = _row(contrasts, "key_control", "original", "middle")
    assert not row["adjusted"] and np.isnan(row["adj_diff"])
    base = _band_values(frame, "original", "middle")
    d = (_band_values(frame, "key_control", "middle") - base).to_numpy()
    delta = SESOI * base.std(ddof=1)
    p_low = sps.ttest_1samp(d, -delta, alternative="greater").pvalue
    p_up = sps.ttest_1samp(d, delta, alternative="less").pvalue
    assert row["p_tost"] == pytest.approx(max(p_low, p_up), rel=1e-6)
    assert row["dz"] == pytest.approx(d.mean() / d.std(ddof=1))
    assert row["baseline_mean"] == pytest.approx(base.mean())
    c = claims[(claims["comparison"] == "key_control - original") & (claims["band"] == "middle")]
    assert c.iloc[0]["pct_of_baseline"] == pytest.approx(100 * d.mean() / base.mean())


def _holm_by_hand(p: np.ndarray) -> np.ndarray:
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    want = np.full(p.shape, np.nan)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ok) - rank) * p[i]))
        want[i] = running
    return want


def test_family_holm_recomputed_by_hand(run):
    _, _, _, claims = run
    # layer-0 rows are the controls: in no family, their p the raw one
    ctl = claims[claims["family"] == "control"]
    assert set(ctl["band"]) == {"layer0"} and len(ctl) > 0
    assert ctl["p_holm"].to_numpy() == pytest.approx(ctl["p_value"].to_numpy(), nan_ok=True)
    sizes = {}
    for family in ("primary", "exploratory"):
        fam = claims[claims["family"] == family]
        p = fam["p_value"].to_numpy()
        assert fam["p_holm"].to_numpy() == pytest.approx(_holm_by_hand(p), nan_ok=True)
        sizes[family] = int(np.isfinite(p).sum())
    # the default primary endpoints present here: erank (all tokens) at late and final for
    # key_first / key_last - key_control and the U-shape key_ends - key_mid
    prim = claims[claims["family"] == "primary"]
    assert set(prim["comparison"]) == {
        "key_first - key_control",
        "key_last - key_control",
        "key_ends - key_mid",
    }
    assert set(prim["band"]) == {"late", "final"} and sizes["primary"] == 6
    assert sizes["exploratory"] > sizes["primary"]


def test_mixed_model_recomputed_with_statsmodels(run):
    import statsmodels.formula.api as smf

    frame, _, contrasts, _ = run
    long = []
    for v in VARIANTS:
        vals = _band_values(frame, v, "middle")
        long.append(
            pd.DataFrame(
                {
                    "variant": v,
                    "sample_id": vals.index,
                    "value": vals.values,
                    "n_tokens": _tokens(frame, v).reindex(vals.index).values,
                }
            )
        )
    data = pd.concat(long, ignore_index=True)
    fit = smf.mixedlm(
        "value ~ C(variant, Treatment('original')) + np.log(n_tokens)",
        data,
        groups=data["sample_id"],
    ).fit(reml=True)
    name = "C(variant, Treatment('original'))[T.{}]".format
    row = _row(contrasts, "key_first", "original", "middle")
    assert row["mm_diff"] == pytest.approx(fit.fe_params[name("key_first")], rel=1e-3)
    assert row["mm_p_value"] == pytest.approx(fit.pvalues[name("key_first")], rel=1e-2, abs=1e-12)
    # a contrast of two non-reference variants: a difference of coefficients
    row = _row(contrasts, "key_first", "key_last", "middle")
    vec = pd.Series(0.0, index=fit.fe_params.index)
    vec[name("key_first")], vec[name("key_last")] = 1.0, -1.0
    est = float(vec @ fit.fe_params)
    se = float(np.sqrt(vec @ fit.cov_params().loc[vec.index, vec.index] @ vec))
    assert row["mm_diff"] == pytest.approx(est, rel=1e-3)
    assert row["mm_ci_high"] - row["mm_ci_low"] == pytest.approx(2 * 1.959964 * se, rel=1e-2)


def test_dose_response_slope_recomputed_with_fixed_effects_ols(run):
    from homog.stats.dose import dose_response

    frame, texts, _, _ = run
    out = dose_response(
        frame, texts, "r1", StatsSettings(n_boot=300, seed=0), exclude=("n_tokens",)
    )
    slopes = out[out["kind"] == "slope"].set_index("band")
    assert set(slopes.index) == {"layer0", "early", "middle", "late", "final"}
    pos = texts.set_index(["variant", "sample_id"])["key_position"]
    for band in ("middle", "layer0"):
        ys, xs, ids = [], [], []
        for v in ("key_first", "key_mid", "key_last"):  # key_control is no dose
            vals = _band_values(frame, v, band)
            ys += list(vals.values)
            xs += [pos[(v, s)] for s in vals.index]
            ids += list(vals.index)
        dummies = pd.get_dummies(pd.Series(ids)).to_numpy(dtype=float)
        design = np.column_stack([np.array(xs), dummies])
        coef = np.linalg.lstsq(design, np.array(ys), rcond=None)[0]
        assert slopes.loc[band, "value"] == pytest.approx(coef[0], rel=1e-9)
    assert slopes.loc["middle", "value"] == pytest.approx(BETA, abs=0.1)
    assert slopes.loc["middle", "ci_low"] < BETA < slopes.loc["middle", "ci_high"]
    assert slopes.loc["middle", "p_value"] < 0.001
    assert slopes.loc["layer0", "value"] == pytest.approx(0.0, abs=1e-9)  # no position there
    points = out[(out["kind"] == "point") & (out["band"] == "late")].set_index("variant")
    assert list(points.index) == ["key_first", "key_mid", "key_last"]
    assert points.loc["key_first", "value"] == pytest.approx(
        _band_values(frame, "key_first", "late").mean()
    )


def test_stage_load_and_report_carry_the_new_columns(tmp_path):
    """stats stage -> load -> DuckDB: the new contrasts columns, dose_response, n_tokens."""
    import duckdb

    from homog.layout import Layout
    from homog.stats.stage import stats_stage
    from homog.store import load
    from homog.store.query import summary_names

    layout = Layout(tmp_path)
    frame, texts = synthetic(seed=1)
    frame = frame[frame["sample_id"] < "s030"].assign(run_id="m-none")
    texts = texts[texts["sample_id"] < "s030"]
    out = layout.run_dir("m", "none")
    out.mkdir(parents=True)
    frame["layer"] = frame["layer"].astype("int32")
    frame[["run_id", "variant", "sample_id", "layer", "metric", "value"]].to_parquet(
        out / "layer_metrics.parquet", index=False
    )
    record = {
        "run_id": "m-none",
        "model": "m",
        "model_source": "random:tiny-llama",
        "n_layers": L,
        "intervention": "none",
        "pair_key": "m-pair",
    }
    (out / "run.json").write_text(json.dumps(record))
    layout.texts.parent.mkdir(parents=True)
    # each text its own (a texts table of equal texts would make every pair an identity pair)
    texts = texts.assign(dataset="d", text=texts["variant"] + " " + texts["sample_id"])
    texts.to_parquet(layout.texts, index=False)
    params = {
        "models": {"m": {"source": "random:tiny-llama"}},
        "stats": {"n_boot": 100, "mixed_metrics": ["erank"]},
        "extract": {"interventions": ["none"]},
        "posenc": {"encodings": []},
    }
    counts = stats_stage(params, tmp_path)
    assert counts["dose_response"] > 0
    load(params, layout.db(), tmp_path)
    with duckdb.connect(str(layout.db()), read_only=True) as con:
        got = con.execute(
            "SELECT adjusted, adj_diff, lexical, mm FROM (SELECT adjusted, adj_diff, "
            "layer0_p_value < 0.05 AS lexical, mm_diff AS mm FROM contrasts WHERE "
            "variant_a = 'front' AND variant_b = 'original' AND band = 'late' AND "
            "metric = 'erank')"
        ).fetchone()
        assert got[0] is True and abs(got[1]) < 0.5 and got[2] is True and got[3] is not None
        head = json.loads((layout.stats_dir / "metrics.json").read_text())["m"]
        late = head["erank_late_front_vs_original"]  # dvc metrics show: raw, adjusted, layer 0
        assert late["adj_diff"] == pytest.approx(got[1], abs=1e-6) and late["mean_diff"] > 1
        assert head["erank_late_key_first_vs_original"]["adj_diff"] is None  # same tokens
        assert (
            con.execute("SELECT count(*) FROM contrasts WHERE metric = 'n_tokens'").fetchone()[0]
            == 0
        )  # a count, never contrasted
        slope = con.execute(
            "SELECT value FROM dose_response WHERE kind = 'slope' AND band = 'middle' "
            "AND metric = 'erank'"
        ).fetchone()[0]
        assert slope == pytest.approx(BETA, abs=0.2)
        assert "n_tokens" not in summary_names(con)[0]  # no curve of a per-text count
        n_tok = con.execute(
            "SELECT mean FROM layer_summary WHERE metric = 'n_tokens' AND variant = 'original'"
        ).fetchone()[0]
        assert n_tok == pytest.approx(_tokens(frame, "original").mean())


def test_dose_response_figure_draws_points_and_lines(run, tmp_path):
    from homog.errors import HomogError
    from homog.plot import dose_response_figure
    from homog.stats.dose import dose_response

    frame, texts, _, _ = run
    out = dose_response(
        frame, texts, "r1", StatsSettings(n_boot=100, seed=0), exclude=("n_tokens",)
    )
    rows = out.assign(model="m").to_dict("records")
    path = dose_response_figure(rows, "erank", tmp_path / "dose.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    with pytest.raises(HomogError, match="no dose_response rows"):
        dose_response_figure(rows, "mev", tmp_path / "none.png")


def test_dose_response_legend_gives_p_and_holm_p(run, tmp_path, monkeypatch):
    import homog.plot as plot
    from homog.stats.dose import dose_response

    frame, texts, _, _ = run
    out = dose_response(
        frame, texts, "r1", StatsSettings(n_boot=100, seed=0), exclude=("n_tokens",)
    )
    seen = []
    real_save = plot.save_figure

    def spy(fig, path):
        seen.extend(
            t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()
        )
        return real_save(fig, path)

    monkeypatch.setattr(plot, "save_figure", spy)
    plot.dose_response_figure(out.assign(model="m").to_dict("records"), "erank", tmp_path / "d.png")
    middle = out[(out["kind"] == "slope") & (out["band"] == "middle")].iloc[0]
    assert any(
        f"Holm p = {middle['p_holm']:.2g}" in t and f"p = {middle['p_value']:.2g}" in t
        for t in seen
    ), seen
    seen.clear()  # rows from before p_holm: p alone
    plot.dose_response_figure(
        out.drop(columns="p_holm").assign(model="m").to_dict("records"), "erank", tmp_path / "e.png"
    )
    assert seen and not any("Holm" in t for t in seen)


def test_stats_params_are_checked():
    from homog.config import as_params
    from homog.errors import HomogError

    assert as_params({}).stats.sesoi == 0.1
    for bad in (0, -0.1, 2.5):
        with pytest.raises(HomogError, match="stats.sesoi must lie in"):
            as_params({"stats": {"sesoi": bad}})
    with pytest.raises(HomogError, match="stats.mixed_metrics"):
        as_params({"stats": {"mixed_metrics": "erank"}})


def test_rounding_at_layer_0_is_not_a_lexical_confound():
    """A reordering of the same tokens moves layer 0 by ~1e-14 (float64 rounding), whose signs
    can agree across texts; that must not mark the contrast, a real difference must."""
    from homog.report.claims_rows import Claim
    from homog.report.claims_rules import lexical

    def row(layer0_effect: float) -> Claim:
        return Claim(
            model="m",
            claim="5b",
            statement="s",
            metric="erank",
            comparison="a - b",
            scope="late",
            effect=0.1,
            ci_low=0.0,
            ci_high=0.2,
            p_holm=0.5,
            n=50,
            verdict="inconclusive",
            baseline_mean=40.0,
            layer0_effect=layer0_effect,
            layer0_p=0.001,
        )

    rows = [row(2.5e-14), row(-3e-12), row(0.05), row(-0.4)]
    lexical(rows, alpha=0.05)
    assert [r.lexical_confound for r in rows] == [False, False, True, True]
    high_p = row(0.4)
    high_p.layer0_p = 0.3
    lexical([high_p], alpha=0.05)
    assert not high_p.lexical_confound


def test_dose_slope_of_rounding_is_zero_with_p_one():
    """Layer-0 values of reordered tokens differ by ~1e-15 relative, in a direction that can
    follow the position: that is no dose-response (slope 0, p 1), while a real 1e-6 one is."""
    from homog.stats.dose import dose_rows

    rng = np.random.default_rng(0)
    base = rng.uniform(20, 40, size=24)
    samples = [f"s{i:02d}" for i in range(24)]
    where = {"key_first": 0.0, "key_mid": 0.5, "key_last": 1.0}
    positions = pd.DataFrame(
        [(v, s, x) for v, x in where.items() for s in samples],
        columns=["variant", "sample_id", "key_position"],
    )

    def tables(rel):
        return {
            v: pd.DataFrame([base * (1 + rel * x)], index=[0], columns=samples)
            for v, x in where.items()
        }

    settings = StatsSettings(n_boot=200, ci=0.95, seed=0)
    ulp = dose_rows(tables(4e-15), positions, "r", "erank", {"layer0": [0]}, settings)[0]
    assert ulp["value"] == 0.0 and ulp["p_value"] == 1.0
    assert ulp["ci_low"] == 0.0 and ulp["ci_high"] == 0.0
    real = dose_rows(tables(1e-6), positions, "r", "erank", {"layer0": [0]}, settings)[0]
    assert real["value"] == pytest.approx(base.mean() * 1e-6, rel=1e-6)
    assert real["p_value"] < 0.001


def test_dose_p_holm_is_holm_over_the_runs_slopes(run):
    from statsmodels.stats.multitest import multipletests

    from homog.stats.dose import dose_response

    frame, texts, _, _ = run
    out = dose_response(
        frame, texts, "r1", StatsSettings(n_boot=100, seed=0), exclude=("n_tokens",)
    )
    slopes = out[out["kind"] == "slope"]
    assert len(slopes) == 5  # erank x (layer0, early, middle, late, final)
    want = multipletests(slopes["p_value"].to_numpy(dtype=float), method="holm")[1]
    assert slopes["p_holm"].to_numpy(dtype=float) == pytest.approx(want, rel=1e-12)
    assert out.loc[out["kind"] == "point", "p_holm"].isna().all()


def test_adjustable_needs_enough_texts_with_a_token_change():
    """A row is adjusted only when at least 3 texts, and 5 % of them, change their token
    count, and the changes vary; one changed text of 311 (the 380-review study's gemma3 case)
    or a constant change is not adjusted."""
    from homog.stats.adjusted import adjustable, min_changed

    assert min_changed(311) == 16 and min_changed(20) == 3 and min_changed(60) == 3
    t = np.zeros(311)
    t[0] = 1
    assert not adjustable(t)
    t[:15] = np.arange(1, 16)
    assert not adjustable(t)  # 15 of 311 < 16
    t[15] = 2
    assert adjustable(t)
    assert not adjustable(np.ones(311))  # constant: cannot be told apart from the effect
    small = np.zeros(20)
    small[:2] = [1, 2]
    assert not adjustable(small)
    small[2] = 3
    assert adjustable(small)


def test_one_text_with_a_token_change_leaves_the_row_raw():
    """One text of 60 gains a token in ``front``: its rows read the raw difference (and say
    why in the claim's note), as when no text changes; with every text changed they adjust."""
    frame, _ = synthetic()
    tok = frame["metric"] == "n_tokens"
    front = frame["variant"] == "front"
    orig = frame[tok & (frame["variant"] == "original")].set_index("sample_id")["value"]
    one = frame.copy()
    sel = tok & front
    one.loc[sel, "value"] = one.loc[sel, "sample_id"].map(orig).to_numpy()
    one.loc[sel & (one["sample_id"] == "s000"), "value"] += 1
    contrasts = run_contrasts(
        one, "r1", StatsSettings(n_boot=50, seed=0), pairs=[("front", "original")]
    )
    rows = contrasts[contrasts["metric"] == "erank"]
    assert len(rows) and not rows["adjusted"].any()
    assert np.allclose(rows["n_tokens_diff"], 1 / N)
    runs = pd.DataFrame([{"run_id": "r1", "model": "m", "intervention": "none"}])
    originals = one[one["variant"] == "original"].assign(run_id="r1")
    claims = claims_table(contrasts, runs, originals, alpha=ALPHA, n_boot=50)
    notes = claims[(claims["claim"] == "1") & (claims["metric"] == "erank")]["note"]
    assert notes.str.contains("in too few texts to adjust for: raw difference").all()
    every = run_contrasts(
        frame, "r1", StatsSettings(n_boot=50, seed=0), pairs=[("front", "original")]
    )
    assert every[every["metric"] == "erank"]["adjusted"].all()
