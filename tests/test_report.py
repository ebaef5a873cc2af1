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
from homog.report.build import build_report
from homog.report.claims import claims_table
from homog.stats.paired_tests import sign_flip_p

N_TEXTS, N_LAYERS, ALPHA = 24, 9, 0.05
# per variant: shift of erank at each layer (front much lower, end slightly higher, control 0)
SHIFT = {"original": 0.0, "front": -5.0, "end": +0.8, "control": 0.0}


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
    from homog.stats.stage import stats_stage
    from homog.store import load

    root = tmp_path_factory.mktemp("report")
    layout = Layout(root)
    rng = np.random.default_rng(0)
    for model in ("m1", "m2"):
        write_run(layout, model, "none", rng, 0.0)
        write_run(layout, model, "zero_pos", rng, 4.0 if model == "m1" else -4.0)
    params = {
        "models": {m: {"source": "random:tiny-llama"} for m in ("m1", "m2")},
        # the mixed model: test_confounds.py; the depth margin: the designed effects below
        "stats": {"n_boot": 200, "mixed_metrics": [], "sesoi_basis": "depth"},
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
            "separability": con.execute("SELECT * FROM separability").fetch_df(),
        }


def expected_verdict(effect, p, eq_lo, eq_hi, sesoi, sign, lo, hi, p_tost=math.nan, n=N_TEXTS):
    """The verdict rule of docs/statistics.md, written out independently (lo, hi: the 95 % CI,
    read against +-sesoi for supported / reversed and against 0 for "excludes 0")."""
    if n < 10:
        return "too few pairs"
    if not sesoi > 0:
        return "descriptive"
    if math.isfinite(eq_lo) and math.isfinite(eq_hi):
        inside = -sesoi < eq_lo and eq_hi < sesoi
    else:
        inside = p_tost < ALPHA
    significant = math.isfinite(p) and p < ALPHA and effect != 0
    if inside:
        return "negligible" if significant or lo > 0 or hi < 0 else "equivalent"
    if not significant:
        return "inconclusive"
    if lo > sesoi or hi < -sesoi:
        return "supported" if sign is None or np.sign(effect) == sign else "reversed"
    return "nonzero"


def holm_sm(p) -> np.ndarray:
    """Holm by statsmodels (independent of homog.stats.paired_tests.holm); NaN entries stay NaN."""
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
    if row.claim.startswith("3") or row.claim in ("4", "5c"):
        return +1
    return -1 if row.metric.startswith("erank") else +1


def test_every_claim_row_matches_the_contrasts_table(project):
    db = Layout(project).db()
    f = frames(db)
    table = claims_table(
        f["contrasts"],
        f["runs"],
        f["erank"],
        alpha=ALPHA,
        n_boot=200,
        separability=f["separability"],
    )
    assert set(table["claim"].str[0]) == {"1", "2", "3", "4", "5"}
    assert "3 (summary)" not in set(table["claim"])  # claim 3: one reading, counted once
    assert set(table["family"]) <= {"primary", "exploratory", "control"}
    # layer-0 rows are the controls: in no family, their p the raw one
    ctl = table[table["family"] == "control"]
    assert (
        set(ctl["band"]) == {"layer0"}
        and (table[table["band"] == "layer0"]["family"] == "control").all()
    )
    assert ctl["p_holm"].to_numpy() == pytest.approx(ctl["p_value"].to_numpy(), nan_ok=True)
    with duckdb.connect(str(db), read_only=True) as con:
        for model, t in table.groupby("model"):
            four = t["claim"] == "4"
            for family, classifier in (
                ("primary", False),
                ("exploratory", False),
                ("exploratory", True),
            ):
                # Holm over the model's rows of one family, apart from the other family; claim
                # 4's classifier rows apart (their permutation p has a floor)
                fam = t[(t["family"] == family) & (four == classifier)]
                assert fam["p_holm"].to_numpy() == pytest.approx(
                    holm_sm(fam["p_value"]), nan_ok=True, rel=1e-12
                )
            assert t["sesoi"].notna().sum() > 0 and t["eq_ci_low"].notna().sum() > 0
            run = con.execute(
                "SELECT run_id FROM runs WHERE model = ? AND intervention = 'none'", [model]
            ).fetchone()[0]
            for row in t[t["claim"] != "2"].itertuples():  # claim 2: its own test below
                a, b = [x.strip() for x in row.comparison.split(" - ")]
                if row.claim[0] in "13" or row.claim[:2] in ("5a", "5b"):
                    got = con.execute(
                        "SELECT mean_diff, ci_low, ci_high, p_value, adjusted, layer0_diff, "
                        "layer0_p_value, sesoi, eq_ci_low, eq_ci_high FROM contrasts WHERE "
                        "run_id = ? AND variant_a = ? AND variant_b = ? AND metric = ? AND "
                        "band = ? AND baseline_run_id IS NULL",
                        [run, a, b, row.metric, row.band],
                    ).fetchone()
                    effect, lo, hi, p, adjusted, l0, l0p, sesoi, elo, ehi = got
                    assert not adjusted  # these runs have no n_tokens: raw differences
                    assert (row.effect, row.ci_low, row.ci_high, row.p_value) == (effect, lo, hi, p)
                    assert (row.sesoi, row.eq_ci_low, row.eq_ci_high) == (sesoi, elo, ehi)
                    want = expected_verdict(
                        effect, row.p_holm, elo, ehi, sesoi, claim_sign(row), lo, hi
                    )
                    assert row.verdict == want, row
                    if row.metric == "attn_first":  # no layer 0 for attention
                        assert l0 is None or math.isnan(l0)
                        assert not row.lexical_confound
                    else:
                        assert row.layer0_effect == pytest.approx(l0)
                        assert row.lexical_confound == (l0p < ALPHA)
                elif row.claim == "4":
                    auc, lo, hi, p = con.execute(
                        "SELECT auc, ci_low, ci_high, p_value FROM separability WHERE "
                        "run_id = ? AND variant_a = ? AND variant_b = ? AND metric = ? AND "
                        "scope = ?",
                        [run, a, b, row.metric, "layer0" if row.band == "layer0" else "layers"],
                    ).fetchone()
                    assert (row.effect, row.ci_low, row.ci_high, row.p_value) == (auc, lo, hi, p)
                    # no effect is AUC 0.5; the margin 0.5 +- 0.05, read on the CI
                    want = expected_verdict(
                        auc - 0.5, row.p_holm, lo - 0.5, hi - 0.5, 0.05, +1, lo - 0.5, hi - 0.5
                    )
                    assert row.verdict == want, row
                elif row.claim == "5c":
                    iv_run = con.execute(
                        "SELECT run_id FROM runs WHERE model = ? AND intervention = 'zero_pos'",
                        [row.model],
                    ).fetchone()[0]
                    effect, p, sesoi, elo, ehi, lo, hi = con.execute(
                        "SELECT mean_diff, p_value, sesoi, eq_ci_low, eq_ci_high, ci_low, "
                        "ci_high FROM contrasts "
                        "WHERE run_id = ? AND baseline_run_id = ? AND metric = 'erank' AND "
                        "variant_a = 'original' AND band = ?",
                        [iv_run, run, row.band],
                    ).fetchone()
                    assert (row.effect, row.p_value) == (effect, p)
                    want = expected_verdict(effect, row.p_holm, elo, ehi, sesoi, +1, lo, hi)
                    assert row.verdict == want


def test_no_row_inside_its_margin_reads_supported_or_reversed(project):
    f = frames(Layout(project).db())
    t = claims_table(
        f["contrasts"],
        f["runs"],
        f["erank"],
        alpha=ALPHA,
        n_boot=200,
        separability=f["separability"],
    )
    null = np.where(t["claim"] == "4", 0.5, 0.0)
    inside = ((t["eq_ci_low"] - null).abs() < t["sesoi"]) & (
        (t["eq_ci_high"] - null).abs() < t["sesoi"]
    )
    assert inside.any()  # the test can fail: some rows are inside their margin
    assert not t[inside]["verdict"].isin(["supported", "reversed"]).any()
    assert set(t[inside]["verdict"]) <= {"negligible", "equivalent"}
    # every row says what its margin is based on (claim 2's rows: that they have none)
    assert (t["sesoi_basis"].astype(str).str.len() > 0).all(), t[t["sesoi_basis"] == ""]


def test_claims_match_the_designed_effects(project):
    f = frames(Layout(project).db())
    t = claims_table(f["contrasts"], f["runs"], f["erank"], alpha=ALPHA, n_boot=200)
    one = t[
        (t["claim"] == "1") & (t["metric"] == "erank") & t["band"].isin(["early", "middle", "late"])
    ]
    assert set(one[one["statement"].str.startswith("front")]["verdict"]) == {"supported"}
    # end: +0.8, significant, but inside the margin (0.1 x the original's early-to-late fall,
    # about 29 erank here: 2.9): negligible, never "reversed"
    end = one[one["statement"].str.startswith("end")]
    assert set(end["verdict"]) == {"negligible"}
    assert (end["sesoi"] > 2.0).all() and (end["sesoi_basis"].str.contains("early-to-late")).all()
    # the designed shift is on every layer, layer 0 included: a lexical difference by design
    assert one["lexical_confound"].all()
    assert (one["rel_layer0_effect"].abs() < 0.6).all()  # the layers add ~nothing beyond it
    five_c = t[(t["claim"] == "5c") & (t["band"] != "layer0")].set_index("model")["verdict"]
    assert set(five_c.loc["m1"]) == {"supported"} and set(five_c.loc["m2"]) == {"reversed"}
    # no paraphrase effect was designed: never supported where a family corrects for the
    # number of rows (a layer-0 control row reads its raw p: 1 in 20 may pass by chance)
    control = t[(t["claim"] == "5a") & (t["family"] != "control")]
    assert not control["verdict"].isin(["supported", "reversed"]).any()
    three = t[(t["claim"] == "3") & (t["statement"].str.startswith("front"))]
    assert set(three["verdict"]) == {"supported"}


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
        # a layer index has no margin: descriptive, its note says where the interval lies
        assert where["verdict"] == "descriptive"
        assert "outside the middle band" in where["note"] or "straddling" in where["note"]
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


def test_claims_on_a_database_before_issue_38_warn_nothing(project):
    """A database written before the equivalence CI and separability: verdicts fall back on
    the TOST p, no claim-4 rows, and no numpy all-NaN warning."""
    f = frames(Layout(project).db())
    old = f["contrasts"].drop(columns=["eq_ci_low", "eq_ci_high", "sesoi_basis"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        table = claims_table(old, f["runs"], f["erank"], alpha=ALPHA, n_boot=50)
    assert not (table["claim"] == "4").any()
    one = table[table["claim"] == "1"]
    assert one["eq_ci_low"].isna().all() and one["verdict"].notna().all()


def test_readme_answer_is_the_pages_answer(project, tmp_path):
    """`python -m homog.report.readme` writes the same answer lines as the report's first
    section, between the README's markers, and nothing else of the README changes."""
    from homog.report.answer import README_END, README_START
    from homog.report.readme import main as readme_main

    db = Layout(project).db()
    page = build_report(db, tmp_path / "r.md", fmt="md")
    readme = tmp_path / "README.md"
    before, after = "# title\n\nintro\n\n", "\n\n## More\n\ntext\n"
    readme.write_text(f"{before}{README_START}\nold answer\n{README_END}{after}")
    assert readme_main(["--db", str(db), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(before) and text.endswith(after) and "old answer" not in text
    block = text.split(README_START)[1].split(README_END)[0].strip().splitlines()
    lines = [line[2:] for line in block if line.startswith("- ")]
    # this project has no position family: the exploratory lines answer
    assert len(lines) >= 3 and any(line.startswith("**The paper's rewrites**") for line in lines)
    answer = page.read_text().split("## The answer")[1].split("\n## ")[0]
    for line in lines:
        assert line in answer
    # and the other way: every line of the page's answer is in the README (the cost line too)
    bold = [p for p in answer.split("\n\n") if p.startswith("**")]
    assert bold and all(p.strip() in lines for p in bold), bold
    with pytest.raises(ValueError, match="current-answer"):
        from homog.report.answer import replace_block

        replace_block("no markers here", lines, "")
