"""homog report: every claim row equals a direct computation from the store's tables.

The test database is built the way the pipeline builds one: synthetic per-text layer metrics
with known effects are written as extract outputs, then the real ``stats`` and ``load`` stages
run over them. The claims are then recomputed here with SQL and numpy/scipy, independently
of homog.report.claims.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import save_run
from scipy.stats import wilcoxon

from homog.cli import main
from homog.layout import Layout
from homog.report import build_report, claims_table
from homog.stats import sign_flip_p

N_TEXTS, N_LAYERS, ALPHA = 24, 9, 0.05
# per variant: shift of erank at each layer (front much lower, end slightly higher, control 0)
SHIFT = {"original": 0.0, "front": -3.0, "end": +0.8, "control": 0.0}


def write_run(layout: Layout, model: str, intervention: str, rng, extra: float) -> None:
    rows = []
    base = 40 - 3.0 * np.arange(N_LAYERS + 1) ** 1.2  # a progressive fall of erank
    for variant, shift in SHIFT.items():
        for s in range(N_TEXTS):
            noise = rng.normal(0, 0.5, N_LAYERS + 1)
            erank = base + shift + extra + noise
            for layer in range(N_LAYERS + 1):
                rows.append((variant, f"s{s:03d}", layer, "erank", erank[layer]))
                mev = 0.2 - 0.01 * shift + rng.normal(0, 0.01)
                rows.append((variant, f"s{s:03d}", layer, "mev", mev))
                if layer:
                    first = 0.3 + (0.1 if variant == "front" else 0.0) + rng.normal(0, 0.02)
                    rows.append((variant, f"s{s:03d}", layer, "attn_first", first))
    frame = pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])
    save_run(layout, model, intervention, frame, N_LAYERS)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from homog.stats_stage import stats_stage
    from homog.store import load

    root = tmp_path_factory.mktemp("report")
    layout = Layout(root)
    rng = np.random.default_rng(0)
    for model in ("m1", "m2"):
        write_run(layout, model, "none", rng, 0.0)
        write_run(layout, model, "zero_pos", rng, 1.5 if model == "m1" else -1.5)
    params = {
        "models": {m: {"source": "random:tiny-llama"} for m in ("m1", "m2")},
        "stats": {"n_boot": 200, "mixed_metrics": []},  # the mixed model: test_confounds.py
        "extract": {"interventions": ["none", "zero_pos"]},
        "posenc": {"encodings": []},
    }
    stats_stage(params, root)
    load(params, layout.db(), root)
    return root


def frames(db: Path) -> dict[str, pd.DataFrame]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            "runs": con.execute("SELECT * FROM runs").fetch_df(),
            "contrasts": con.execute("SELECT * FROM contrasts").fetch_df(),
            "erank": con.execute(
                "SELECT * FROM layer_metrics WHERE metric = 'erank' AND variant = 'original'"
            ).fetch_df(),
        }


def expected_verdict(effect: float, p: float, p_tost: float, sign: int | None) -> str:
    """The verdict rule of docs/statistics.md, written out independently."""
    if math.isfinite(p) and p < ALPHA and effect != 0:
        return "supported" if sign is None or np.sign(effect) == sign else "reversed"
    if math.isfinite(p_tost) and p_tost < ALPHA:
        return "equivalent to no effect"
    return "inconclusive"


def holm_sm(p) -> np.ndarray:
    """Holm by statsmodels (independent of homog.paired_tests.holm); NaN entries stay NaN."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def claim_sign(row) -> int | None:
    if row.claim in ("5a",):
        return None
    if row.claim.startswith("3"):
        return -1 if "summary" in row.claim else +1
    if row.claim == "5c":
        return +1
    return -1 if row.metric.startswith("erank") else +1


def test_every_claim_row_matches_the_contrasts_table(project):
    db = Layout(project).db()
    f = frames(db)
    table = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200)
    assert set(table["claim"].str[0]) == {"1", "2", "3", "4", "5"}
    assert {"3", "3 (summary)"} <= set(table["claim"])  # both readings of claim 3
    with duckdb.connect(str(db), read_only=True) as con:
        for model, t in table.groupby("model"):
            fam = t[~t["claim"].isin(["4", "3 (summary)"])]
            # family Holm over the model's rows (claims x bands x variants x token sets); the
            # second reading of claim 3 is the same test as the first (counted once)
            assert fam["p_holm"].to_numpy() == pytest.approx(
                holm_sm(fam["p_value"]), nan_ok=True, rel=1e-12
            )
            three = t[t["claim"] == "3"].set_index(["comparison", "band"])["p_holm"]
            summary = t[t["claim"] == "3 (summary)"].set_index(["comparison", "band"])["p_holm"]
            assert summary.sort_index().to_numpy() == pytest.approx(
                three.sort_index().to_numpy(), nan_ok=True
            )
            assert fam["p_tost"].notna().sum() > 0
            run = con.execute(
                "SELECT run_id FROM runs WHERE model = ? AND intervention = 'none'", [model]
            ).fetchone()[0]
            for row in t[t["claim"] != "2"].itertuples():  # claim 2: its own test below
                a, b = [x.strip() for x in row.comparison.split(" - ")]
                if row.claim[0] in "13" or row.claim in ("5a", "5b"):
                    got = con.execute(
                        "SELECT mean_diff, ci_low, ci_high, p_value, adjusted, layer0_diff, "
                        "layer0_p_value FROM contrasts WHERE run_id = ? AND variant_a = ? AND "
                        "variant_b = ? AND metric = ? AND band = ? AND baseline_run_id IS NULL",
                        [run, a, b, row.metric, row.band],
                    ).fetchone()
                    effect, lo, hi, p, adjusted, l0, l0p = got
                    assert not adjusted  # these runs have no n_tokens: raw differences
                    assert (row.effect, row.ci_low, row.ci_high, row.p_value) == (
                        effect, lo, hi, p
                    )  # fmt: skip
                    want = expected_verdict(effect, row.p_holm, row.p_tost, claim_sign(row))
                    assert row.verdict == want, row
                    if row.metric == "attn_first":  # no layer 0 for attention
                        assert l0 is None or math.isnan(l0)
                        assert not row.lexical_confound
                    else:
                        assert row.layer0_effect == pytest.approx(l0)
                        assert row.lexical_confound == (l0p < ALPHA)
                elif row.claim == "4":
                    sign = -1 if row.metric == "erank" else 1
                    lay = t[(t["claim"] == "4")]
                    assert row.effect >= 0 and row.unit == "layers"
                    assert row.verdict in (
                        "supported", "reversed", "equivalent to no effect", "inconclusive"
                    )  # fmt: skip
                    del sign, lay
                elif row.claim == "5c":
                    iv_run = con.execute(
                        "SELECT run_id FROM runs WHERE model = ? AND intervention = 'zero_pos'",
                        [row.model],
                    ).fetchone()[0]
                    effect, p = con.execute(
                        "SELECT mean_diff, p_value FROM contrasts WHERE run_id = ? AND "
                        "baseline_run_id = ? AND metric = 'erank' AND variant_a = 'original' AND "
                        "band = ?",
                        [iv_run, run, row.band],
                    ).fetchone()
                    assert (row.effect, row.p_value) == (effect, p)
                    assert row.verdict == expected_verdict(effect, row.p_holm, row.p_tost, +1)


def test_claim4_counts_layers_under_the_claim4_family_holm(project):
    db = Layout(project).db()
    f = frames(db)
    t = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200)
    c = f["contrasts"]
    for model in ("m1", "m2"):
        run = f"{model}-none"
        lay = c[(c["run_id"] == run) & c["band"].isna() & c["baseline_run_id"].isna()
                & (c["variant_b"] == "original") & (c["layer"] >= 1)
                & c["metric"].isin(["erank", "mev", "resultant_length", "attn_first"])
                & c["variant_a"].isin(["front", "end", "key_first", "key_last"])]  # fmt: skip
        lay = lay.assign(ph=holm_sm(lay["p_value"]))
        rows = t[(t["model"] == model) & (t["claim"] == "4")]
        assert len(rows) == lay.groupby(["metric", "variant_a"]).ngroups
        for row in rows.itertuples():
            sign = -1 if row.metric == "erank" else 1
            g = lay[(lay["metric"] == row.metric) & (lay["variant_a"] == row.comparison.split()[0])]
            sig = g[g["ph"] < ALPHA]
            agree = int((np.sign(sig["mean_diff"]) == sign).sum())
            against = int((np.sign(sig["mean_diff"]) == -sign).sum())
            assert row.effect == agree
            if agree > against:
                assert row.verdict == "supported"
                assert row.p_holm == pytest.approx(
                    sig[np.sign(sig["mean_diff"]) == sign]["ph"].min()
                )  # the claimed side's smallest p, not the smallest whatever its sign
            elif against > agree:
                assert row.verdict == "reversed"
                assert row.p_holm == pytest.approx(
                    sig[np.sign(sig["mean_diff"]) == -sign]["ph"].min()
                )


def test_claims_match_the_designed_effects(project):
    f = frames(Layout(project).db())
    t = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200)
    one = t[(t["claim"] == "1") & (t["metric"] == "erank") & t["band"].isin(["early", "middle",
                                                                              "late"])]  # fmt: skip
    assert set(one[one["statement"].str.startswith("front")]["verdict"]) == {"supported"}
    assert set(one[one["statement"].str.startswith("end")]["verdict"]) == {"reversed"}
    # the designed shift is on every layer, layer 0 included: a lexical difference by design
    assert one["lexical_confound"].all()
    assert (one["rel_layer0_effect"].abs() < 0.6).all()  # the layers add ~nothing beyond it
    five_c = t[(t["claim"] == "5c") & (t["band"] != "layer0")].set_index("model")["verdict"]
    assert set(five_c.loc["m1"]) == {"supported"} and set(five_c.loc["m2"]) == {"reversed"}
    control = t[t["claim"] == "5a"]
    # no paraphrase effect was designed: never supported (noise 0.5 at 24 texts is too much
    # to show equivalence within 0.1 SD: inconclusive, not "not supported" any more)
    assert set(control["verdict"]) <= {"inconclusive", "equivalent to no effect"}
    three = t[t["claim"].str.startswith("3") & (t["statement"].str.startswith("front"))]
    both = three.groupby("claim")["verdict"].agg(set)
    assert both["3"] == {"supported"} and both["3 (summary)"] == {"reversed"}


@pytest.mark.parametrize("test", ["wilcoxon", "sign_flip"])
def test_progression_claim_recomputed_with_numpy(project, test):
    f = frames(Layout(project).db())
    t = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200, test=test)
    two = t[(t["claim"] == "2") & (t["comparison"] == "late - early (original)")]
    two = two.set_index("model")
    for model in ("m1", "m2"):
        m = f["erank"][f["erank"]["run_id"] == f"{model}-none"]
        wide = m.pivot_table(index="sample_id", columns="layer", values="value")
        # 10 layers (0..9): layer 0 and 9 apart, bands of round(8/4) = 2 of the 8 between
        d = wide[[7, 8]].mean(axis=1) - wide[[1, 2]].mean(axis=1)
        assert two.loc[model, "effect"] == pytest.approx(d.mean(), rel=1e-12)
        p = (
            wilcoxon(d.to_numpy()).pvalue
            if test == "wilcoxon"  # the stats stage's test (sign_flip_p is checked in test_stats)
            else sign_flip_p(d.to_numpy()[None, :], n_perm=10000, seed=0)[0]
        )
        assert two.loc[model, "p_value"] == pytest.approx(p, rel=1e-9)
        steps = wide.diff(axis=1)[list(range(2, 9))]  # falls into layers 2..8 (not 1, not L)
        steepest = int(steps.mean().idxmin())
        # base 40 - 3 l^1.2 falls fastest at the last layers: outside the middle band
        where = t[(t["model"] == model) & (t["comparison"] == "steepest fall (original)")].iloc[0]
        assert where["effect"] == steepest
        assert where["ci_low"] <= steepest <= where["ci_high"]
        assert where["verdict"] in ("reversed", "inconclusive")
        assert two.loc[model, "verdict"] == "supported"  # progressive: erank falls


def test_report_html_and_markdown(project, tmp_path):
    db = Layout(project).db()
    before = db.read_bytes()
    html = build_report(db, tmp_path / "r.html")
    text = html.read_text()
    assert text.startswith("<!doctype html>") and "data:image/png;base64," in text
    assert "Claims of arXiv 2508.17126" in text and "m1" in text and "m2" in text
    assert "homog report --db" in text  # provenance names the command
    md = build_report(db, tmp_path / "r.md", fmt="md")
    figures = sorted((tmp_path / "r_files").glob("*.png"))
    assert figures and all(f"r_files/{p.name}" in md.read_text() for p in figures)
    assert db.read_bytes() == before  # read-only


def test_cli_report_and_bad_input(project, tmp_path):
    runner = CliRunner()
    db = Layout(project).db()
    out = tmp_path / "cli.html"
    res = runner.invoke(main, ["report", "--db", str(db), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists()
    res = runner.invoke(main, ["report", "--db", str(tmp_path / "none.duckdb"), "-o", str(out)])
    assert res.exit_code == 1 and "no database" in res.output


def test_claims_on_a_database_without_the_tost_columns_warn_nothing(project):
    """A database written before the TOST columns: claim 4's p_tost is NaN, with no numpy
    all-NaN warning (it printed one per metric)."""
    f = frames(Layout(project).db())
    old = f["contrasts"].drop(columns=["p_tost", "sesoi"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        table = claims_table(old, f["runs"], f["erank"], alpha=ALPHA, n_boot=50)
    four = table[table["claim"] == "4"]
    assert len(four) and four["p_tost"].isna().all()
