"""homog report: every claim row equals a direct computation from the store's tables.

The test database is built the way the pipeline builds one: synthetic per-text layer metrics
with known effects are written as extract outputs, then the real ``stats`` and ``load`` stages
run over them. The claims are then recomputed here with SQL and numpy/scipy, independently
of homog.report.claims.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
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
    run_id = f"{model}-{intervention}"
    frame.insert(0, "run_id", run_id)
    frame["layer"] = frame["layer"].astype("int32")
    out = layout.run_dir(model, intervention)
    out.mkdir(parents=True)
    frame.to_parquet(out / "layer_metrics.parquet", index=False)
    record = {
        "run_id": run_id,
        "model": model,
        "model_source": "random:tiny-llama",
        "n_layers": N_LAYERS,
        "d_model": 64,
        "n_heads": 4,
        "dtype": "float32",
        "device": "cpu",
        "intervention": intervention,
        "config_json": json.dumps({"extract": {"max_tokens": 64}, "versions": {"homog": "t"}}),
        "homog_version": "test",
        "created_at": "2026-01-01T00:00:00+00:00",
        "pair_key": f"{model}-pair",
    }
    (out / "run.json").write_text(json.dumps(record))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from homog.stats import stats_stage
    from homog.store import load

    root = tmp_path_factory.mktemp("report")
    layout = Layout(root)
    rng = np.random.default_rng(0)
    for model in ("m1", "m2"):
        write_run(layout, model, "none", rng, 0.0)
        write_run(layout, model, "zero_pos", rng, 1.5 if model == "m1" else -1.5)
    params = {
        "models": {m: {"source": "random:tiny-llama"} for m in ("m1", "m2")},
        "stats": {"n_boot": 200},
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


def expected_verdict(effect: float, p: float, sign: int | None) -> str:
    if not math.isfinite(p) or p >= ALPHA:
        return "not supported"
    if sign is None:
        return "supported"
    return "supported" if np.sign(effect) == sign else "reversed"


def test_every_claim_row_matches_the_contrasts_table(project):
    db = Layout(project).db()
    f = frames(db)
    table = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200)
    assert set(table["claim"].str[0]) == {"1", "2", "3", "4", "5"}
    with duckdb.connect(str(db), read_only=True) as con:
        for row in table.itertuples():
            run = con.execute(
                "SELECT run_id FROM runs WHERE model = ? AND intervention = 'none'", [row.model]
            ).fetchone()[0]
            a, b = [s.strip() for s in row.comparison.split(" - ")]
            if row.claim[0] in "13" or row.claim in ("5a", "5b"):
                band = row.scope.split()[0]
                effect, lo, hi, p = con.execute(
                    "SELECT mean_diff, ci_low, ci_high, p_holm FROM contrasts WHERE run_id = ? "
                    "AND variant_a = ? AND variant_b = ? AND metric = ? AND band = ? "
                    "AND baseline_run_id IS NULL",
                    [run, a, b, row.metric, band],
                ).fetchone()
                assert (row.effect, row.ci_low, row.ci_high, row.p_holm) == (effect, lo, hi, p)
                sign = None if row.claim == "5a" else (-1 if row.metric == "erank" else 1)
                assert row.verdict == expected_verdict(effect, p, sign), row
            elif row.claim == "4":
                sign = -1 if row.metric == "erank" else 1
                sig = con.execute(
                    "SELECT mean_diff FROM contrasts WHERE run_id = ? AND variant_a = ? AND "
                    "variant_b = 'original' AND metric = ? AND band IS NULL AND "
                    "baseline_run_id IS NULL AND p_holm < ?",
                    [run, a, row.metric, ALPHA],
                ).fetchall()
                agree = sum(np.sign(d) == sign for (d,) in sig)
                against = sum(np.sign(d) == -sign for (d,) in sig)
                assert row.effect == agree
                want = (
                    "supported" if agree > against else "reversed" if against > agree
                    else "not supported"
                )  # fmt: skip
                assert row.verdict == want
            elif row.claim == "5c":
                iv_run = con.execute(
                    "SELECT run_id FROM runs WHERE model = ? AND intervention = 'zero_pos'",
                    [row.model],
                ).fetchone()[0]
                effect, p = con.execute(
                    "SELECT mean_diff, p_holm FROM contrasts WHERE run_id = ? AND "
                    "baseline_run_id = ? AND metric = 'erank' AND variant_a = 'original' AND "
                    "band = ?",
                    [iv_run, run, row.scope.split()[0]],
                ).fetchone()
                assert (row.effect, row.p_holm) == (effect, p)
                assert row.verdict == expected_verdict(effect, p, +1)


def test_claims_match_the_designed_effects(project):
    f = frames(Layout(project).db())
    t = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200)
    one = t[(t["claim"] == "1") & (t["metric"] == "erank")]
    assert set(one[one["statement"].str.startswith("front")]["verdict"]) == {"supported"}
    assert set(one[one["statement"].str.startswith("end")]["verdict"]) == {"reversed"}
    five_c = t[t["claim"] == "5c"].set_index("model")["verdict"]
    assert set(five_c.loc["m1"]) == {"supported"} and set(five_c.loc["m2"]) == {"reversed"}
    control = t[t["claim"] == "5a"]
    assert set(control["verdict"]) == {"not supported"}  # no paraphrase effect was designed


@pytest.mark.parametrize("test", ["wilcoxon", "sign_flip"])
def test_progression_claim_recomputed_with_numpy(project, test):
    f = frames(Layout(project).db())
    t = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200, test=test)
    two = t[t["claim"] == "2"].set_index("model")
    ps = {}
    for model in ("m1", "m2"):
        m = f["erank"][f["erank"]["run_id"] == f"{model}-none"]
        wide = m.pivot_table(index="sample_id", columns="layer", values="value")
        # 10 layers (0..9): bands of round(10/4) = 2 layers at each end
        d = wide[[8, 9]].mean(axis=1) - wide[[0, 1]].mean(axis=1)
        assert two.loc[model, "effect"] == pytest.approx(d.mean(), rel=1e-12)
        ps[model] = (
            wilcoxon(d.to_numpy()).pvalue
            if test == "wilcoxon"  # the stats stage's test (sign_flip_p is checked in test_stats)
            else sign_flip_p(d.to_numpy()[None, :], n_perm=10000, seed=0)[0]
        )
        steepest = int(wide.mean().diff().idxmin())
        assert two.loc[model, "scope"].startswith(f"steepest fall at layer {steepest} ")
    (m_lo, p_lo), (m_hi, p_hi) = sorted(ps.items(), key=lambda kv: kv[1])
    adjusted = {m_lo: min(1.0, 2 * p_lo)}  # Holm over the two models' tests
    adjusted[m_hi] = max(adjusted[m_lo], min(1.0, p_hi))
    for model in ps:
        assert two.loc[model, "p_holm"] == pytest.approx(adjusted[model], rel=1e-9)
    # base 40 - 3 l^1.2 falls fastest at the last layer: progressive, not fastest in the middle
    assert set(two["verdict"]) == {"not supported"}
    assert two["note"].str.contains("outside the middle band").all()


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
