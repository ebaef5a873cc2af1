"""The homogenize cost table (homog.stats.intervention_cost) against numpy by hand on small
synthetic dose series: every level, change, slope and manipulation number; a planted cost
(homogenize hurts, its control does not) comes out supported, a null does not; and the
table built from run directories (answers, layer_metrics) as the stats stage reads them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from homog.config import parse_params
from homog.stats.cost_rows import DIFF_ARM, CostInputs, cost_rows, finish
from homog.stats.intervention_cost import intervention_cost
from homog.stats.settings import StatsSettings

DOSES = np.array([0.0, 0.2, 0.5, 1.0])
N = 40
OPTS = StatsSettings(n_boot=500, seed=3, n_perm=2000, cost_margin=0.2, cost_accuracy_margin=0.02)


def synthetic(cost: float, seed: int = 0) -> CostInputs:
    """Margins [V, n] per arm: dose 0 shared, the homogenize arm falls by ``cost`` per unit
    alpha, the control only by noise; erank falls under homogenize and rises under control."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.8, 1.5, N)
    homog = np.stack([base if a == 0 else base - cost * a + rng.normal(0, 0.1, N) for a in DOSES])
    ctrl = np.stack([base if a == 0 else base + rng.normal(0, 0.1, N) for a in DOSES])
    e0 = rng.normal(60, 5, (2, N))
    erank = {
        "homogenize": np.stack([e0 - 20 * a + rng.normal(0, 1, (2, N)) for a in DOSES]),
        "control": np.stack([e0 + 5 * a + rng.normal(0, 1, (2, N)) for a in DOSES]),
    }
    for e in erank.values():
        e[0] = e0
    return CostInputs(
        doses={"homogenize": DOSES, "control": DOSES},
        margin={"homogenize": homog, "control": ctrl},
        erank=erank,
        positive=np.arange(N) % 2 == 0,
    )


def table(inp: CostInputs) -> pd.DataFrame:
    return finish(cost_rows(inp, "r1", "m", OPTS), OPTS.alpha)


def pick(frame: pd.DataFrame, **kw) -> pd.Series:
    sel = np.ones(len(frame), bool)
    for k, v in kw.items():
        sel &= (frame[k] == v).to_numpy() if v is not None else frame[k].isna().to_numpy()
    assert sel.sum() == 1, kw
    return frame[sel].iloc[0]


def boot_ci(d: np.ndarray, ci: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, by a loop over seeded multinomial draws."""
    rng = np.random.default_rng(OPTS.seed)
    counts = rng.multinomial(len(d), np.full(len(d), 1 / len(d)), size=OPTS.n_boot)
    means = np.array([(c * d).sum() / len(d) for c in counts])
    return tuple(np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2]))


def test_every_number_against_numpy_by_hand():
    inp = synthetic(cost=0.8)
    t = table(inp)
    y = inp.positive.astype(int)
    sign = np.where(inp.positive, 1.0, -1.0)
    for arm in ("homogenize", "control"):
        m = inp.margin[arm]
        for v, dose in enumerate(DOSES):
            row = pick(t, arm=arm, kind="level", metric="lm_margin", dose=dose)
            assert row["value"] == pytest.approx(m[v].mean())
            np.testing.assert_allclose([row["ci_low"], row["ci_high"]], boot_ci(m[v]))
            acc = pick(t, arm=arm, kind="level", metric="lm_accuracy", dose=dose)
            assert acc["value"] == pytest.approx((m[v] > 0).mean())
            auc = pick(t, arm=arm, kind="level", metric="lm_auc", dose=dose)
            assert auc["value"] == pytest.approx(roc_auc_score(y, sign * m[v]))
            assert auc["ci_low"] <= auc["value"] <= auc["ci_high"]
            if dose == 0:
                continue
            d = m[v] - m[0]
            row = pick(t, arm=arm, kind="dose", metric="lm_margin", dose=dose)
            assert row["value"] == pytest.approx(d.mean()) and row["n"] == N
            np.testing.assert_allclose([row["ci_low"], row["ci_high"]], boot_ci(d))
            np.testing.assert_allclose([row["eq_ci_low"], row["eq_ci_high"]], boot_ci(d, 0.9))
            assert row["sesoi"] == 0.2 and row["family_holm"] == "exploratory"
            acc = pick(t, arm=arm, kind="dose", metric="lm_accuracy", dose=dose)
            assert acc["value"] == pytest.approx(((m[v] > 0).astype(float) - (m[0] > 0)).mean())
            auc = pick(t, arm=arm, kind="dose", metric="lm_auc", dose=dose)
            want = roc_auc_score(y, sign * m[v]) - roc_auc_score(y, sign * m[0])
            assert auc["value"] == pytest.approx(want) and auc["sesoi"] == 0.02
            for g, band in enumerate(("final", "late")):
                e = inp.erank[arm]
                row = pick(t, arm=arm, kind="manipulation", metric="erank", dose=dose, band=band)
                assert row["value"] == pytest.approx((e[v, g] - e[0, g]).mean())
                assert row["verdict"] is None or pd.isna(row["verdict"])
    slopes = {
        a: np.array([np.polyfit(DOSES, inp.margin[a][:, i], 1)[0] for i in range(N)])
        for a in ("homogenize", "control")
    }
    diff = slopes["homogenize"] - slopes["control"]
    row = pick(t, arm=DIFF_ARM, kind="slope")
    assert row["value"] == pytest.approx(diff.mean())
    np.testing.assert_allclose([row["ci_low"], row["ci_high"]], boot_ci(diff))
    assert row["family_holm"] == "primary" and row["sesoi"] == pytest.approx(0.2 / 1.0)
    assert row["p_holm"] == row["p_value"]  # one model: Holm over one row
    for arm in ("homogenize", "control"):
        r = pick(t, arm=arm, kind="slope")
        assert r["value"] == pytest.approx(slopes[arm].mean()) and r["family_holm"] == "exploratory"
    # Holm within the exploratory rows, by hand
    ex = t[t["family_holm"] == "exploratory"].sort_values("p_value")
    k = len(ex)
    want = np.maximum.accumulate(np.minimum(1, ex["p_value"].to_numpy() * (k - np.arange(k))))
    np.testing.assert_allclose(ex["p_holm"], want)


def test_a_planted_cost_is_supported_and_a_null_is_not():
    planted = pick(table(synthetic(cost=1.5)), arm=DIFF_ARM, kind="slope")
    assert planted["value"] < -1 and planted["verdict"] == "supported"
    null = pick(table(synthetic(cost=0.0, seed=1)), arm=DIFF_ARM, kind="slope")
    assert null["verdict"] != "supported" and null["verdict"] in ("equivalent", "negligible")
    gain = pick(table(synthetic(cost=-1.5)), arm=DIFF_ARM, kind="slope")
    assert gain["verdict"] == "reversed"  # the claimed sign is a cost: a gain is reversed


def _write_run(root: Path, iv: str, margin: np.ndarray, erank: np.ndarray, ids, positive):
    d = root / iv
    d.mkdir(parents=True)
    lo = np.where(positive, 1.0, -1.0) * margin
    pd.DataFrame({"variant": "original", "sample_id": ids, "log_odds": lo}).to_parquet(
        d / "zero_shot.parquet"
    )
    rows = [
        {"variant": "original", "sample_id": s, "layer": layer, "metric": "erank", "value": v}
        for layer in range(6)
        for s, v in zip(ids, erank[1] if 0 < layer < 5 else erank[0], strict=True)
    ]
    return {"run_id": iv, "model": "m", "intervention": iv}, d, pd.DataFrame(rows)


def test_the_table_from_run_directories(tmp_path, capsys):
    inp = synthetic(cost=1.5)
    ids = [f"s{i:02d}" for i in range(N)]
    found, frames = [], {}
    for arm, prefix in (("homogenize", "homogenize"), ("control", "homogenize_control")):
        for v, dose in enumerate(DOSES):
            if arm == "control" and dose == 0:
                continue
            iv = f"{prefix}:{dose:g}"
            run, d, frame = _write_run(
                tmp_path, iv, inp.margin[arm][v], inp.erank[arm][v], ids, inp.positive
            )
            found.append((run, d))
            frames[iv] = frame
    base, d, frame = _write_run(
        tmp_path, "none", inp.margin["homogenize"][0], inp.erank["homogenize"][0], ids, inp.positive
    )
    found.append((base, d))
    frames["none"] = frame
    labels = pd.DataFrame({"variant": "original", "sample_id": ids, "positive": inp.positive})
    params = parse_params({"stats": {"n_boot": 500, "n_perm": 2000}, "seed": 3})
    base_of = lambda r: base  # noqa: E731
    got = intervention_cost(params, StatsSettings.of(params), found, frames, labels, base_of, print)
    want = table(inp)
    keys = ["arm", "kind", "metric", "dose", "band"]
    got, want = (
        f.sort_values(keys, na_position="first").reset_index(drop=True) for f in (got, want)
    )
    np.testing.assert_allclose(got["value"], want["value"], rtol=1e-12)
    assert list(got["verdict"]) == list(want["verdict"])
    assert pick(got, arm=DIFF_ARM, kind="slope")["run_id"] == "none"
    # answers missing in one run: no rows, and a message naming it
    (tmp_path / "homogenize:0.5" / "zero_shot.parquet").unlink()
    assert intervention_cost(
        params, StatsSettings.of(params), found, frames, labels, base_of, print
    ).empty
    assert "homogenize:0.5" in capsys.readouterr().out
    assert intervention_cost(
        params, StatsSettings.of(params), found, frames, None, base_of, print
    ).empty
    assert "no label" in capsys.readouterr().out
    assert not math.isnan(want["value"].sum())


def extracted_tiny_project(tmp_path, monkeypatch, **extract):
    """A project in ``tmp_path`` (the working directory) whose 12 labelled texts a tiny random
    model (two blocks) has extracted with the homogenize doses 0 and 1 (``extract`` adds
    settings); returns (params, layout)."""
    import yaml
    from click.testing import CliRunner
    from conftest import TINY
    from test_probe import labelled_texts

    from homog.cli import main
    from homog.layout import Layout

    layout = Layout(tmp_path)
    layout.texts.parent.mkdir(parents=True)
    labelled_texts().assign(dataset="d").to_parquet(layout.texts, index=False)
    params = {
        "models": {"m": {"source": TINY}},
        "extract": {
            "device": "cpu",
            "max_tokens": 32,
            "interventions": ["none"],
            "homogenize_doses": [0, 1],
            "attention": False,
            "peer_metrics": False,
            "sentence_metrics": False,
            **extract,
        },
        "stats": {"n_boot": 100, "n_perm": 200, "mixed_metrics": []},
        "probe": {"folds": 3},
        "posenc": {"encodings": []},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["extract", "--model", "m", "--params", "params.yaml"])
    assert res.exit_code == 0, res.output
    return params, layout


def test_extract_stats_and_load_carry_the_cost_table(tmp_path, monkeypatch):
    """A tiny random model (two blocks: a final layer, no late band) through `homog extract`,
    the stats stage and the store: the table is loaded, and its dose-0 margins are the
    answers of the homogenize:0 run (the shared dose 0) signed by the label."""
    import duckdb

    from homog.stats.stage import stats_stage
    from homog.store import load

    params, layout = extracted_tiny_project(tmp_path, monkeypatch)
    assert stats_stage(params, tmp_path)["intervention_cost"] > 0
    load(params, layout.db(), tmp_path)
    with duckdb.connect(str(layout.db()), read_only=True) as con:
        cost = con.execute("SELECT * FROM intervention_cost").df()
    primary = cost[cost["family_holm"] == "primary"]
    assert len(primary) == 1 and primary.iloc[0]["n"] == 12
    answers = pd.read_parquet(layout.run_dir("m", "homogenize:0") / "zero_shot.parquet")
    answers = answers[answers["variant"] == "original"].sort_values("sample_id")
    # labelled_texts: the odd reviews are positive
    sign = np.array([1.0 if int(s[1:]) % 2 else -1.0 for s in answers["sample_id"]])
    zero = cost[(cost["kind"] == "level") & (cost["metric"] == "lm_margin") & (cost["dose"] == 0)]
    assert set(zero["arm"]) == {"homogenize", "control"}
    np.testing.assert_allclose(zero["value"], (sign * answers["log_odds"]).mean(), rtol=1e-9)
    assert {"probe_accuracy", "probe_margin"} <= set(cost["metric"])
    # the tiny model has too few layers for a late band: its rows are left out, none is NaN
    assert set(cost["band"].dropna()) == {"final"} and cost["value"].notna().all()


def test_texts_of_one_label_have_no_auc_and_keep_the_rest():
    inp = synthetic(cost=1.5)
    one = CostInputs(inp.doses, inp.margin, inp.erank, np.ones(N, bool))
    t = table(one)
    auc = t[t["metric"] == "lm_auc"]
    assert auc["value"].isna().all() and auc["verdict"].isna().all()
    assert pick(t, arm=DIFF_ARM, kind="slope")["verdict"] == "supported"
