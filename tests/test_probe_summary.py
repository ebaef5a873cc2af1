"""The probe's summary rows on arrays (homog.probe.summary): ``diff_rows`` and ``level_rows``
match their pairs by sample_id without a frame per group and take each row's CI and p as that
row alone gets them, so the rows are bit for bit those of the frame-by-frame implementation
they replaced (kept below, as it was, to compare with) on a frame shaped like the demo's:
two interventions, both schemes, a variant equal to the original (zero differences), a
rewrite on fewer reviews (its own baseline probe, an exact sign-flip test) and the zero-shot
rows (labels, no y)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from homog.errors import HomogError
from homog.probe import summary
from homog.stats.paired_tests import bootstrap_ci, paired_difference, paired_p
from homog.stats.settings import StatsSettings

STATS = StatsSettings(n_boot=500, ci=0.95, alpha=0.05, test="sign_flip", n_perm=1000, seed=3)


def old_sesoi_of(base, metric, factor):
    if metric == "accuracy":
        labels = base["y"] if "y" in base else base["label"].astype(str)
        chance = float(labels.value_counts(normalize=True).max())
        above = float(base["correct"].to_numpy(float).mean()) - chance
        text = f"{factor:g} x the baseline's accuracy above chance ({above:.3g})"
        return (factor * above if above > 0 else np.nan), text
    size = float(np.abs(base["margin"].to_numpy(float)).mean())
    return factor * size, f"{factor:g} x the baseline's mean |margin| ({size:.3g})"


def old_level_rows(texts, keys, settings):
    rows = []
    for key, g in texts.groupby(list(keys), sort=True, dropna=False):
        g = g.sort_values("sample_id")
        for metric in summary.METRICS:
            v = summary._values(g, metric)[None, :]
            low, high = bootstrap_ci(v, n_boot=settings.n_boot, ci=settings.ci, seed=settings.seed)
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "kind": "level",
                    "metric": metric,
                    "value": float(v.mean()),
                    "ci_low": float(low[0]),
                    "ci_high": float(high[0]),
                    "n": v.shape[1],
                }
            )
    return rows


def old_diff_rows(texts, keys, by, base, settings):
    rows = []
    rest = [k for k in keys if k != by]
    for key, g in texts.groupby(rest, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        fixed = dict(zip(rest, key, strict=True))
        baseline = g[g[by] == base].set_index("sample_id")
        for other, h in g[g[by] != base].groupby(by, sort=True):
            h = h.set_index("sample_id")
            common = sorted(set(h.index) & set(baseline.index))
            if not common:
                continue
            for metric in summary.METRICS:
                a = summary._values(h.loc[common], metric)
                b = summary._values(baseline.loc[common], metric)
                d = paired_difference(a, b)[None, :]
                draws = dict(n_boot=settings.n_boot, seed=settings.seed)
                low, high = bootstrap_ci(d, ci=settings.ci, **draws)
                eq_low, eq_high = bootstrap_ci(d, ci=1 - 2 * settings.alpha, **draws)
                p = paired_p(d, test=settings.test, n_perm=settings.n_perm, seed=settings.seed)
                sesoi, basis = old_sesoi_of(baseline.loc[common], metric, settings.sesoi)
                rows.append(
                    {
                        **fixed,
                        by: other,
                        "kind": "diff",
                        "baseline": base,
                        "metric": metric,
                        "value": float(d.mean()),
                        "ci_low": float(low[0]),
                        "ci_high": float(high[0]),
                        "p_value": float(p[0]),
                        "n": d.shape[1],
                        "sesoi": sesoi,
                        "sesoi_basis": basis,
                        "eq_ci_low": float(eq_low[0]),
                        "eq_ci_high": float(eq_high[0]),
                        "_d": d[0],
                    }
                )
    return rows


def demo_like(n: int = 16, layers: int = 5, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(probe texts, zero-shot texts) shaped like the demo's: none with the original, a
    key_first equal to it at layer 0, front, and a rewrite on 9 of the n reviews (per_variant:
    its own probe and the original's on its reviews); zero_pos with the original only."""
    rng = np.random.default_rng(seed)
    ids = [f"r{i:03d}" for i in rng.permutation(n)]  # not in sample_id order
    y = dict(zip(ids, rng.integers(0, 2, n).tolist(), strict=True))
    rewrite = sorted(ids)[:9]
    rows = []
    for iv, variants in (
        ("none", ["original", "key_first", "front", "rewrite"]),
        ("zero_pos", ["original"]),
    ):
        base = {(s, layer): rng.normal(layer * 0.4, 1.0) for s in ids for layer in range(layers)}
        for scheme in ("train_original", "per_variant"):
            for v in variants:
                for s in rewrite if v == "rewrite" else ids:
                    for layer in range(layers):
                        if v in ("original", "key_first") and layer == 0:
                            margin = base[(s, layer)]  # the same tokens: the same vector
                        else:
                            margin = base[(s, layer)] + rng.normal(0, 0.3)
                        train_sets = [v if scheme == "per_variant" else "original"]
                        if scheme == "per_variant" and v == "original" and s in rewrite:
                            train_sets.append("rewrite")  # the rewrite's baseline probe
                        for ts in train_sets:
                            m = margin + (rng.normal(0, 0.2) if ts == "rewrite" else 0.0)
                            rows.append((iv, scheme, ts, v, s, layer, y[s], m))
    probe = pd.DataFrame(
        rows,
        columns=[
            "intervention",
            "scheme",
            "train_set",
            "variant",
            "sample_id",
            "layer",
            "y",
            "margin",
        ],
    )
    probe["logit"] = np.where(probe["y"] == 1, probe["margin"], -probe["margin"])
    probe["correct"] = probe["margin"] > 0
    probe["fold"] = probe["sample_id"].map({s: i % 4 for i, s in enumerate(sorted(ids))})
    lm = probe[(probe["layer"] == layers - 1) & (probe["scheme"] == "train_original")]
    lm = lm.drop(columns=["scheme", "train_set", "layer", "y", "logit", "fold"])
    lm = lm.assign(label=lm["sample_id"].map(lambda s: "pos" if y[s] else "neg"))
    lm = lm.assign(log_odds=np.where(lm["label"] == "pos", lm["margin"], -lm["margin"]))
    return probe.sample(frac=1.0, random_state=1).reset_index(drop=True), lm


def same_rows(got: list[dict], want: list[dict]) -> None:
    """The same rows, keys in the same order, every value identical (NaN as NaN)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        for k in w:
            if isinstance(w[k], np.ndarray):
                assert np.array_equal(g[k], w[k]), k
            elif isinstance(w[k], float) and math.isnan(w[k]):
                assert isinstance(g[k], float) and math.isnan(g[k]), k
            else:
                assert g[k] == w[k] and type(g[k]) is type(w[k]), (k, g[k], w[k])


@pytest.mark.parametrize("test", ["sign_flip", "wilcoxon"])
def test_diff_and_level_rows_are_the_frame_by_frame_ones_bit_for_bit(test):
    probe, lm = demo_like()
    stats = StatsSettings(**{**STATS.__dict__, "test": test})
    keys = ["intervention", "scheme", "variant", "layer"]
    own = probe[(probe["scheme"] != "per_variant") | (probe["train_set"] == probe["variant"])]
    bands = summary.band_texts(probe)
    bands = bands[(bands["scheme"] != "per_variant") | (bands["train_set"] == bands["variant"])]
    bkeys = ["intervention", "scheme", "variant", "band"]
    for frame, k in ((own, keys), (bands, bkeys), (lm.assign(scheme="zero_shot"), keys[:3])):
        same_rows(summary.level_rows(frame, k, stats), old_level_rows(frame, k, stats))
        for by, base in (("variant", "original"), ("intervention", "none")):
            got = summary.diff_rows(frame, k, by, base, stats)
            assert got  # the frame has pairs of both kinds
            same_rows(got, old_diff_rows(frame, k, by, base, stats))
    zeros = [
        r for r in summary.diff_rows(own, keys, "variant", "original", stats) if r["layer"] == 0
    ]
    assert any(not r["_d"].any() for r in zeros)  # key_first at layer 0: all differences 0


def test_summarise_is_the_same_table_bit_for_bit(monkeypatch):
    probe, lm = demo_like(seed=4)
    new = summary.summarise(probe, lm, STATS, positive_label="pos")
    monkeypatch.setattr(summary, "diff_rows", old_diff_rows)
    monkeypatch.setattr(summary, "level_rows", old_level_rows)
    old = summary.summarise(probe, lm, STATS, positive_label="pos")
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    assert (new["kind"] == "diff").sum() > 100 and new["verdict"].notna().any()


def test_sesoi_of_a_frame_is_the_array_rule():
    probe, lm = demo_like(n=12, layers=2)
    for frame in (probe, lm):
        for metric in summary.METRICS:
            assert summary.sesoi_of(frame, metric, 0.1) == old_sesoi_of(frame, metric, 0.1)


def test_a_review_twice_in_a_pair_is_an_error():
    probe, _ = demo_like(n=10, layers=1)
    first = (probe["intervention"] == "none") & (probe["scheme"] == "train_original")
    twice = pd.concat([probe, probe[first & (probe["variant"] == "front")].iloc[[0]]])
    keys = ["intervention", "scheme", "train_set", "variant", "layer"]
    with pytest.raises(HomogError, match="appears twice"):
        summary.diff_rows(twice, keys, "variant", "original", STATS)
