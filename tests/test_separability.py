"""Claim 4 as separability (homog.stats.separability): a planted signal is found, no signal and
identical rows sit at chance (identical: exactly 0.5), and the pieces agree with sklearn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from homog.stats.classifier import fit_logistic, oof_score_sets, oof_scores, weighted_auc
from homog.stats.separability import null_aucs, run_separability, separate
from homog.stats.settings import StatsSettings

N, K = 60, 6


def pair(seed: int, shift: float, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """(variant rows, original rows) [N, K]: a shared per-text profile, independent noise, the
    variant moved by ``shift`` on every feature."""
    rng = np.random.default_rng(seed)
    text = rng.normal(0, 1, (N, K)) + np.linspace(3, 0, K)
    return text + shift + rng.normal(0, noise, (N, K)), text + rng.normal(0, noise, (N, K))


def test_a_planted_signal_is_separated():
    xa, xb = pair(0, shift=1.0)
    got = separate(xa, xb, n_boot=300, n_perm=99, seed=0)
    assert got["auc"] > 0.9 and got["ci_low"] > 0.8 and got["ci_high"] <= 1.0
    assert got["p_value"] == pytest.approx(1 / 100)  # no permutation reaches it
    assert got["n"] == N


def test_no_signal_sits_at_chance():
    xa, xb = pair(1, shift=0.0)
    got = separate(xa, xb, n_boot=300, n_perm=99, seed=0)
    assert 0.35 < got["auc"] < 0.65 and got["ci_low"] < 0.5 < got["ci_high"]
    assert got["p_value"] > 0.05
    # shuffled labels: a variant that is a random one of each text's two rows
    rng = np.random.default_rng(2)
    xa, xb = pair(2, shift=0.6)
    swap = rng.random(N) < 0.5
    sa, sb = np.where(swap[:, None], xb, xa), np.where(swap[:, None], xa, xb)
    got = separate(sa, sb, n_boot=300, n_perm=99, seed=0)
    assert 0.35 < got["auc"] < 0.65 and got["p_value"] > 0.05


def test_identical_rows_give_exactly_one_half_without_a_fit(monkeypatch):
    import homog.stats.separability as sep

    xa, _ = pair(3, shift=0.0)
    monkeypatch.setattr(sep, "cv_scores", lambda *a: pytest.fail("fitted identical rows"))
    got = separate(xa, xa.copy(), n_boot=100, n_perm=99, seed=0)
    assert (got["auc"], got["ci_low"], got["ci_high"], got["p_value"]) == (0.5, 0.5, 0.5, 1.0)
    # the position family at layer 0: the same tokens reordered, values equal to ~1e-15
    got = separate(xa * (1 + 3e-15), xa, n_boot=100, n_perm=99, seed=0)
    assert (got["auc"], got["ci_low"], got["ci_high"], got["p_value"]) == (0.5, 0.5, 0.5, 1.0)


def test_batched_solver_reaches_sklearns_optimum():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(4)
    x = rng.normal(size=(120, 5))
    labels = np.stack([(x[:, 0] * s + rng.normal(size=120) > 0).astype(float) for s in (0, 1, 8)])
    theta = fit_logistic(x, labels)
    for row, y in zip(theta, labels, strict=True):
        ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(x, y)
        assert row[:-1] == pytest.approx(ref.coef_[0], abs=1e-5)
        assert row[-1] == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_designs_of_their_own_and_padding_rows_reach_sklearns_optimum():
    """One fit per design [P, m, k], weight-0 rows ignored: each fit is sklearn's on its
    unpadded rows (a separable one included, where the penalty alone keeps it finite)."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    sizes = (40, 33, 25)
    xs = np.zeros((3, 40, 4))
    ys = np.zeros((3, 40))
    ws = np.zeros((3, 40))
    for i, (m, s) in enumerate(zip(sizes, (0.0, 1.0, 50.0), strict=True)):
        x = rng.normal(size=(m, 4))
        xs[i, :m], ws[i, :m] = x, 1.0
        ys[i, :m] = (x[:, 1] * s + rng.normal(size=m) * (s < 10) > 0).astype(float)
        xs[i, m:] = rng.normal(size=(40 - m, 4)) * 100  # padding: must not count
        ys[i, m:] = 1.0
    theta = fit_logistic(xs, ys, weights=ws)
    for i, m in enumerate(sizes):
        ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(xs[i, :m], ys[i, :m])
        assert theta[i, :-1] == pytest.approx(ref.coef_[0], abs=1e-5)
        assert theta[i, -1] == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_out_of_fold_scores_are_sklearns_pipeline():
    """The scores of every fold assignment at once equal scikit-learn's StandardScaler +
    LogisticRegression fitted on each training fold (folds of unequal size, a constant
    feature that the scaler leaves unscaled)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from homog.stats.reordering import repeated_folds

    n = 23  # 5 folds of 4 or 5 texts
    xa, xb = pair(7, shift=0.4)
    x = np.vstack([xb[:n], xa[:n]])
    x[:, 2] = 3.0
    y = np.r_[np.zeros(n), np.ones(n)]
    fold_sets = repeated_folds(n, 5, seed=1)
    got = oof_score_sets(x, y, fold_sets)
    for assignment, row in zip(fold_sets, got, strict=True):
        want = np.zeros(2 * n)
        for train, test in assignment:
            pipe = make_pipeline(StandardScaler(), LogisticRegression(tol=1e-10, max_iter=10000))
            want[test] = pipe.fit(x[train], y[train]).decision_function(x[test])
        assert row == pytest.approx(want, abs=1e-5)
    assert oof_scores(x, y, fold_sets[2]) == pytest.approx(got[2], abs=1e-12)


def test_a_text_whose_two_versions_are_the_same_ties_in_every_fold():
    """A text the variant leaves unchanged (key_first where the key sentence opened the
    review) scores the same in both rows, in the fits and under the null: a tie, a half in the
    AUC, never a rounding coin flip (a BLAS product rounds a row by where it sits)."""
    from homog.stats.reordering import repeated_folds

    n, k = 16, 18
    xa, xb = pair(8, shift=0.2)
    xa, xb = xa[:n, :1].repeat(k, 1) * np.linspace(1, 2, k), xb[:n, :1].repeat(k, 1)
    xa = xa + np.random.default_rng(9).normal(0, 0.1, xa.shape)
    same = np.arange(n) % 3 != 0
    xa[same] = xb[same]
    x, y = np.vstack([xb, xa]), np.r_[np.zeros(n), np.ones(n)]
    fold_sets = repeated_folds(n, 5, seed=0)
    scores = oof_score_sets(x, y, fold_sets)
    assert (scores[:, :n][:, same] == scores[:, n:][:, same]).all()
    flips = np.random.default_rng(1).random((40, n)) < 0.5
    null = null_aucs(x, np.vstack([np.zeros((1, n), bool), flips]), fold_sets[0])
    from sklearn.metrics import roc_auc_score

    assert null[0] == pytest.approx(roc_auc_score(y, scores[0]), abs=1e-12)


def test_unpermuted_null_equals_the_sklearn_pipeline_and_folds_keep_texts_whole():
    from sklearn.metrics import roc_auc_score

    xa, xb = pair(5, shift=0.3)
    x = np.vstack([xb, xa])
    y = np.r_[np.zeros(N), np.ones(N)]
    from homog.stats.reordering import repeated_folds

    folds = repeated_folds(N, 5)[0]
    assert len(folds) == 5
    for n in (N, 61, 7):  # both rows of a text in the same test fold, every assignment
        for assignment in repeated_folds(n, 5):
            assert sorted(np.concatenate([t for _, t in assignment])) == list(range(2 * n))
            for _, test in assignment:
                assert set(test[test < n]) == {i - n for i in test[test >= n]}
    want = roc_auc_score(y, oof_scores(x, y, folds))
    assert null_aucs(x, np.zeros((1, N), dtype=bool), folds)[0] == pytest.approx(want, abs=1e-6)
    # flipping every text's labels mirrors the scores: AUC 1 - auc
    flipped = null_aucs(x, np.ones((1, N), dtype=bool), folds)[0]
    assert flipped == pytest.approx(want, abs=1e-6)  # the fit flips too: same separation


def test_weighted_auc_matches_sklearn_with_sample_weights():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(6)
    scores = np.round(rng.normal(size=40), 1)  # ties
    labels = np.r_[np.zeros(20), np.ones(20)]
    w = rng.integers(0, 4, (3, 40)).astype(float)
    got = weighted_auc(scores, labels, w)
    for g, row in zip(got, w, strict=True):
        assert g == pytest.approx(roc_auc_score(labels, scores, sample_weight=row))


def test_run_rows_scopes_and_the_layer0_control():
    """Every variant x metric x scope; attention has no layer 0; profile at layer 0 uses the
    metrics that have it; the position family (same tokens) sits at exactly 0.5 there."""
    rng = np.random.default_rng(7)
    n, layers = 30, 6
    tables = {}
    for metric, first in (("erank", 0), ("mev", 0), ("attn_first", 1)):
        text = rng.normal(0, 1, (layers + 1, n))
        for v, shift in (("original", 0.0), ("key_first", 1.5), ("front", 0.0)):
            vals = text + shift + rng.normal(0, 0.3, text.shape)
            if v != "front":
                vals[0] = text[0]  # the same tokens at layer 0
            tables[(v, metric)] = pd.DataFrame(
                vals[first:], index=range(first, layers + 1), columns=[f"s{i}" for i in range(n)]
            )
    out = run_separability(tables, "r", StatsSettings(n_boot=100, separability_perm=19, seed=0))
    got = {(r.variant_a, r.metric, r.scope): r for r in out.itertuples()}
    assert ("key_first", "attn_first", "layer0") not in got
    assert len(out) == 2 * (3 + 2 + 2)  # variants x (layers: 3 + profile; layer0: 2 + profile)
    for metric in ("erank", "mev", "profile"):
        r = got[("key_first", metric, "layer0")]
        assert (r.auc, r.ci_low, r.ci_high, r.p_value, r.n_layers) == (0.5, 0.5, 0.5, 1.0, 1)
        assert got[("key_first", metric, "layers")].auc > 0.9
    assert got[("key_first", "profile", "layers")].n_layers == layers
    assert got[("front", "erank", "layer0")].auc != 0.5  # fitted: its layer 0 differs
    assert set(out["variant_b"]) == {"original"} and (out["n"] == n).all()


def test_stage_writes_separability_and_load_puts_it_in_duckdb(tmp_path):
    """stats stage -> data/stats/separability.parquet -> load -> the separability table; the
    new contrasts and dose_response columns arrive too."""
    import json

    import duckdb

    from homog.layout import Layout
    from homog.stats.stage import stats_stage
    from homog.store import load

    layout = Layout(tmp_path)
    rng = np.random.default_rng(8)
    n, layers = 20, 6
    ids = [f"s{i:02d}" for i in range(n)]
    pos = {"original": np.nan, "key_first": 0.0, "key_mid": 0.5, "key_last": 1.0}
    text = rng.normal(0, 1, (n, 1)) + 10 - np.arange(layers + 1)[None, :]
    rows, texts = [], []
    for v, x in pos.items():
        vals = text + rng.normal(0, 0.2, text.shape) + (0.0 if v == "original" else 3.0)
        vals[:, 0] = text[:, 0]  # the same tokens: layer 0 identical
        for metric in ("erank", "mev"):
            rows += [
                ("m-none", v, s, lay, metric, float(vals[i, lay]))
                for i, s in enumerate(ids)
                for lay in range(layers + 1)
            ]
        texts += [(v, s, x) for s in ids]
    out = layout.run_dir("m", "none")
    out.mkdir(parents=True)
    frame = pd.DataFrame(
        rows, columns=["run_id", "variant", "sample_id", "layer", "metric", "value"]
    )
    frame.astype({"layer": "int32"}).to_parquet(out / "layer_metrics.parquet", index=False)
    record = {
        "run_id": "m-none",
        "model": "m",
        "model_source": "random:tiny-llama",
        "n_layers": layers,
        "intervention": "none",
        "pair_key": "m-pair",
    }
    (out / "run.json").write_text(json.dumps(record))
    layout.texts.parent.mkdir(parents=True)
    texts = pd.DataFrame(texts, columns=["variant", "sample_id", "key_position"])
    # each text its own bytes (equal texts would be identity pairs, left out of the contrasts)
    texts.assign(dataset="d", text=texts["variant"] + " " + texts["sample_id"]).to_parquet(
        layout.texts, index=False
    )
    params = {
        "models": {"m": {"source": "random:tiny-llama"}},
        "stats": {"n_boot": 100, "mixed_metrics": [], "separability_perm": 19},
        "extract": {"interventions": ["none"]},
        "posenc": {"encodings": []},
    }
    counts = stats_stage(params, tmp_path)
    assert counts["separability"] == 2 * 3 * 2  # key_first, key_last x (2 + profile) x scopes
    load(params, layout.db(), tmp_path)
    with duckdb.connect(str(layout.db()), read_only=True) as con:
        sep = con.execute(
            "SELECT variant_a, metric, scope, auc, ci_low, ci_high, p_value, n, n_layers "
            "FROM separability ORDER BY variant_a, metric, scope"
        ).fetchall()
        assert len(sep) == 12
        for variant, _metric, scope, auc, low, high, p, k, n_layers in sep:
            assert variant in ("key_first", "key_last") and k == n
            if scope == "layer0":
                assert (auc, low, high, p, n_layers) == (0.5, 0.5, 0.5, 1.0, 1)
            else:
                assert auc > 0.9 and p == pytest.approx(1 / 20) and n_layers == layers
        got = con.execute(
            "SELECT count(*), count(DISTINCT sesoi), min(sesoi_basis), "
            "bool_and(eq_ci_low <= mean_diff AND mean_diff <= eq_ci_high) FROM contrasts "
            "WHERE variant_a = 'key_ends' AND variant_b = 'key_mid' AND metric = 'erank'"
        ).fetchone()
        # the SD basis: a margin per row (layer or band), its scope named
        assert got[0] == layers + 1 + 5 and got[1] > 1 and "between-text SD at" in got[2] and got[3]
        quad = con.execute(
            "SELECT count(*), bool_and(sesoi > 0) FROM dose_response WHERE kind = 'quadratic'"
        ).fetchone()
        assert quad == (2 * 5, True)  # 2 metrics x 5 bands


def test_the_p_ranks_the_first_assignments_own_auc_in_its_null():
    """Like with like: the null reruns the first fold assignment, so the observed statistic
    is that assignment's AUC (the pipeline on it), not the mean over assignments."""
    from sklearn.metrics import roc_auc_score

    from homog.stats.reordering import repeated_folds

    xa, xb = pair(6, shift=0.12, noise=0.6)
    perms = 199
    got = separate(xa, xb, n_boot=50, n_perm=perms, seed=0)
    x, y = np.vstack([xb, xa]), np.r_[np.zeros(N), np.ones(N)]
    first = roc_auc_score(y, oof_scores(x, y, repeated_folds(N, 5, seed=0)[0]))
    flips = np.random.default_rng([0, N, 0x5E9]).random((perms, N)) < 0.5
    null = null_aucs(x, flips, repeated_folds(N, 5, seed=0)[0])
    assert got["p_value"] == pytest.approx((1 + np.sum(null >= first - 1e-9)) / (1 + perms))
    # the mean over assignments ranks otherwise here: the test tells the two apart
    assert np.sum(null >= first - 1e-9) != np.sum(null >= got["auc"] - 1e-9)
