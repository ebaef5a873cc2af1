"""Claim 4 against reordering (homog.stats.reordering): repeated cross-validation, the AUC
difference against key_control over the same folds, and the first-sentence split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from homog.stats.reordering import (
    DIFF,
    REPEATS,
    cv_scores,
    first_sentence_changed,
    repeated_folds,
)
from homog.stats.separability import run_separability
from homog.stats.settings import StatsSettings

N, LAYERS = 60, 6


def tables_of(shifts: dict[str, np.ndarray], seed: int = 0) -> dict:
    """(variant, erank) -> [layer x sample_id]: per text a profile, each variant moved by its
    per-text shift on layers 1..L (layer 0 the same tokens)."""
    rng = np.random.default_rng(seed)
    text = rng.normal(0, 1, (LAYERS + 1, N)) + np.linspace(3, 0, LAYERS + 1)[:, None]
    cols = [f"s{i:02d}" for i in range(N)]
    out = {}
    for v, shift in shifts.items():
        vals = text + rng.normal(0, 0.3, text.shape) + shift[None, :]
        vals[0] = text[0]
        out[(v, "erank")] = pd.DataFrame(vals, index=range(LAYERS + 1), columns=cols)
    return out


def separability(tables: dict, variants: tuple[str, ...]) -> pd.DataFrame:
    settings = StatsSettings(n_boot=400, seed=0, separability_perm=0)
    return run_separability(tables, "r", settings, variants=variants, metrics=("erank",))


def diff_row(out: pd.DataFrame, variant: str) -> pd.Series:
    rows = out[
        (out["statistic"] == DIFF) & (out["variant_a"] == variant) & (out["metric"] == "erank")
    ]
    assert len(rows) == 1
    return rows.iloc[0]


def test_a_pure_reordering_shows_no_difference_against_key_control():
    # key_first is a reordering like key_control (the same kind of change, no position effect):
    # identical features give exactly 0; a fresh draw of the same change a CI around 0
    move = np.full(N, 0.4)
    tables = tables_of({"original": np.zeros(N), "key_control": move, "key_last": move})
    tables[("key_first", "erank")] = tables[("key_control", "erank")].copy()
    out = separability(tables, ("key_first", "key_last", "key_control"))
    same = diff_row(out, "key_first")
    assert (same["auc"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)
    assert same["p_value"] == 1.0 and same["n_repeats"] == REPEATS
    again = diff_row(out, "key_last")
    assert abs(again["auc"]) < 0.05 and again["ci_low"] < 0 < again["ci_high"]
    plain = out[
        (out["statistic"] == "auc")
        & (out["variant_a"] == "key_control")
        & (out["scope"] == "layers")
        & (out["metric"] == "erank")
    ]
    assert plain.iloc[0]["auc"] > 0.7  # key_control itself separates: reordering is seen


def test_a_position_effect_beyond_reordering_is_found():
    tables = tables_of(
        {"original": np.zeros(N), "key_control": np.full(N, 0.2), "key_first": np.full(N, 0.8)}
    )
    out = separability(tables, ("key_first", "key_control"))
    row = diff_row(out, "key_first")
    assert row["auc"] > 0.1 and row["ci_low"] > 0 and row["p_value"] < 0.01


def test_the_auc_is_the_mean_over_fold_assignments():
    from sklearn.metrics import roc_auc_score

    tables = tables_of({"original": np.zeros(N), "key_first": np.full(N, 0.3)})
    out = run_separability(
        tables,
        "r",
        StatsSettings(n_boot=200, separability_perm=0, seed=3),
        variants=("key_first",),
        metrics=("erank",),
    )
    row = out[(out["scope"] == "layers") & (out["metric"] == "erank")].iloc[0]
    xa = tables[("key_first", "erank")].loc[1:].to_numpy().T
    xb = tables[("original", "erank")].loc[1:].to_numpy().T
    folds = repeated_folds(N, 5, seed=3)
    assert len(folds) == REPEATS >= 10
    y = np.r_[np.zeros(N), np.ones(N)]
    want = np.mean([roc_auc_score(y, s) for s in cv_scores(xa, xb, folds)])
    assert row["auc"] == pytest.approx(want, abs=1e-9)
    assert row["ci_low"] < row["auc"] < row["ci_high"]


def test_every_auc_is_split_by_a_changed_first_sentence():
    texts = pd.DataFrame(
        {
            "variant": ["original", "key_first", "original", "key_first"],
            "sample_id": ["a", "a", "b", "b"],
            "text": [
                "One here. Two there. Key!",
                "Key! One here. Two there.",
                "Key first. Then more. End.",
                "Key first. Then more. End.",
            ],
        }
    )
    flags = first_sentence_changed(texts)["key_first"]
    assert flags.to_dict() == {"a": True, "b": False}
    # the variant moves only the texts whose first sentence changed (the sink): the split
    # shows where the separation comes from
    changed = pd.Series(np.arange(N) % 2 == 0, index=[f"s{i:02d}" for i in range(N)])
    tables = tables_of({"original": np.zeros(N), "key_first": np.where(changed, 1.0, 0.0)})
    out = run_separability(
        tables,
        "r",
        StatsSettings(n_boot=200, separability_perm=0, seed=0),
        variants=("key_first",),
        metrics=("erank",),
        first_changed={"key_first": changed},
    )
    sel = out[(out["scope"] == "layers") & (out["metric"] == "erank")]
    part = sel.set_index("first_changed", drop=False)
    assert set(sel["first_changed"].dropna()) == {True, False}
    assert part.loc[True, "auc"] > 0.8 > part.loc[False, "auc"]
    assert (part.loc[True, "n"], part.loc[False, "n"]) == (N // 2, N // 2)


def test_texts_a_variant_left_unchanged_are_left_out_and_counted():
    # a third of the texts: key_first is the original text (its key sentence opened the
    # review), so both versions give the same values; key_control leaves a sixth unchanged
    from homog.stats.combos import text_ids

    cols = [f"s{i:02d}" for i in range(N)]
    same_first, same_ctrl = set(cols[: N // 3]), set(cols[N // 3 : N // 2])
    tables = tables_of(
        {"original": np.zeros(N), "key_first": np.full(N, 0.5), "key_control": np.full(N, 0.2)}
    )
    for variant, same in (("key_first", same_first), ("key_control", same_ctrl)):
        cells = sorted(same)
        tables[(variant, "erank")][cells] = tables[("original", "erank")][cells]
    rows = [("original", s, f"text {s}") for s in cols]
    rows += [("key_first", s, f"text {s}" if s in same_first else f"first {s}") for s in cols]
    rows += [("key_control", s, f"text {s}" if s in same_ctrl else f"ctrl {s}") for s in cols]
    ids = text_ids(pd.DataFrame(rows, columns=["variant", "sample_id", "text"]))
    settings = StatsSettings(n_boot=200, seed=0, separability_perm=19)
    kw = {"variants": ("key_first", "key_control"), "metrics": ("erank",)}
    out = run_separability(tables, "r", settings, text_ids=ids, **kw)
    unchecked = run_separability(tables, "r", settings, **kw)

    def row(frame, variant, statistic="auc"):
        sel = frame[
            (frame["variant_a"] == variant)
            & (frame["scope"] == "layers")
            & (frame["metric"] == "erank")
            & (frame["statistic"] == statistic)
        ]
        assert len(sel) == 1
        return sel.iloc[0]

    got = row(out, "key_first")
    assert (got["n"], got["n_identical"]) == (N - N // 3, N // 3)
    # the same AUC as on the changed texts alone: the unchanged ones are not ties pulling it
    changed = [c for c in cols if c not in same_first]
    alone = run_separability({k: t[changed] for k, t in tables.items()}, "r", settings, **kw)
    assert got["auc"] == pytest.approx(row(alone, "key_first")["auc"], abs=1e-12)
    assert got["auc"] > row(unchecked, "key_first")["auc"]  # the ties pulled it to 0.5
    assert row(unchecked, "key_first")["n"] == N
    assert pd.isna(row(unchecked, "key_first")["n_identical"])
    # the difference against key_control leaves out a text either of the two left unchanged
    diff = row(out, "key_first", DIFF)
    assert (diff["n"], diff["n_identical"]) == (N - N // 2, N // 2)
