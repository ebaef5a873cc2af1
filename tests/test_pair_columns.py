"""The contrasts' array path (homog.stats.pair_columns, bands.pivot_metrics / band_means)
against pandas' own computations on planted inputs: the same tables, the same numbers to the
last bit, the same dtypes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from homog.stats.bands import band_means, band_of_layers, pivot_metrics
from homog.stats.combos import without
from homog.stats.contrasts import pair_rows, run_contrasts
from homog.stats.margins import Margin
from homog.stats.pair_columns import rows_frame
from homog.stats.paired_tests import bootstrap_ci
from homog.stats.settings import StatsSettings


def _long(rng, variants=("original", "front"), n_texts=12, n_layers=13, metrics=("erank",)):
    rows = [
        (v, f"s{t:02d}", layer, m, float(rng.normal(layer, 1) * 10.0 ** rng.integers(-3, 3)))
        for v in variants
        for m in metrics
        for t in range(n_texts)
        for layer in range(n_layers)
    ]
    return pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])


def test_pivot_metrics_equals_pandas_pivot_table_with_gaps_nans_and_repeats():
    rng = np.random.default_rng(0)
    f = _long(rng, variants=("b", "a"), metrics=("mev", "erank"), n_layers=5)
    f = f.sample(frac=1.0, random_state=1).reset_index(drop=True)  # no order to lean on
    f = f.drop(index=[3, 10, 11])  # pairs without a value
    f.loc[f.index[:6], "value"] = np.nan  # values that are NaN
    # a repeated pair: pandas' "first" takes its first non-NaN value
    repeat = f.iloc[[20, 20, 21]].assign(value=[np.nan, 7.0, 8.0])
    f = pd.concat([f, repeat, f.iloc[[21]].assign(value=9.0)], ignore_index=True)
    got = pivot_metrics(f)
    want = {
        key: g.pivot_table(
            index="layer", columns="sample_id", values="value", aggfunc="first", dropna=False
        ).sort_index()
        for key, g in f.groupby(["variant", "metric"], sort=True)
    }
    assert list(got) == list(want) == [("a", "erank"), ("a", "mev"), ("b", "erank"), ("b", "mev")]
    for key, table in want.items():
        pd.testing.assert_frame_equal(got[key], table, check_exact=True)
        # the same memory layout, so later reductions over it sum in the same order
        assert got[key].to_numpy().flags.c_contiguous == table.to_numpy().flags.c_contiguous
    assert pivot_metrics(f.iloc[:0]) == {}


@pytest.mark.parametrize("layout", ["pivoted", "dropped", "pieces", "columns"])
def test_band_means_are_pandas_band_means(layout):
    # 31 layers: a middle band of 15, where pairwise and row-by-row sums differ in the last
    # bits; how the frame was made decides pandas' memory layout, and so its order of sums:
    # the means agree to rounding whatever the layout
    rng = np.random.default_rng(1)
    table = pivot_metrics(_long(rng, n_texts=40, n_layers=31))[("front", "erank")]
    if layout == "dropped":  # a text left out, then aligned: each text's layers contiguous
        table = table.drop(columns=["s05"]).align(table, join="inner")[0]
    elif layout == "pieces":  # texts from two tables side by side (the key_far side)
        table = pd.concat([table.iloc[:, :9], table.iloc[:, 9:] * 2.0], axis=1)
    elif layout == "columns":  # one block per text
        table = pd.DataFrame({c: table[c] for c in table.columns})
    bands = band_of_layers(list(table.index))
    want = np.stack([table.loc[ls].mean(axis=0, skipna=False) for ls in bands.values()])
    got = band_means(table.to_numpy(dtype=float), list(table.index), bands)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    # a missing layer or a NaN value: NaN, not a mean of fewer layers
    part = band_means(table.to_numpy()[:-1], list(table.index)[:-1], {"final": [30]})
    assert np.isnan(part).all()


def test_pair_rows_with_texts_left_out_equal_a_row_by_row_computation():
    rng = np.random.default_rng(2)
    f = _long(rng, n_texts=14, n_layers=13)
    tables = pivot_metrics(f)
    a, b, n_same = without(
        tables[("front", "erank")], tables[("original", "erank")], pd.Index(["s03", "s07"])
    )
    assert n_same == 2
    settings = StatsSettings(n_boot=300, seed=4, n_perm=500)
    layer_part, band_part = pair_rows(
        a, b, {"run_id": "r", "n_identical": n_same}, settings, Margin(0.1, "sd")
    )
    kept = [s for s in tables[("front", "erank")].columns if s not in ("s03", "s07")]
    av = tables[("front", "erank")][kept].to_numpy()
    bv = tables[("original", "erank")][kept].to_numpy()
    for i in range(13):  # one layer at a time, as 1-D arrays
        d = av[i] - bv[i]
        low, high = bootstrap_ci(d[None, :], n_boot=300, ci=0.95, seed=4)
        assert layer_part["mean_diff"][i] == d.mean()
        # one matrix product for all layers: the same CI up to the product's rounding
        ci = (layer_part["ci_low"][i], layer_part["ci_high"][i])
        assert ci == pytest.approx((low[0], high[0]), rel=1e-12)
        assert layer_part["baseline_sd"][i] == np.std(bv[i], ddof=1)
        assert layer_part["baseline_mean"][i] == pytest.approx(bv[i].mean(), rel=1e-13)
    assert list(layer_part["n"]) == [12] * 13 and layer_part["layer"] == list(range(13))
    bands = band_of_layers(range(13))
    for j, (band, ls) in enumerate(bands.items()):
        d = np.array([np.mean(av[ls, t]) - np.mean(bv[ls, t]) for t in range(12)])
        assert band_part["band"][j] == band
        assert band_part["mean_diff"][j] == pytest.approx(d.mean(), rel=1e-12, abs=1e-15)
    assert band_part["layer"] is None and band_part["run_id"] == "r"
    assert np.isnan(band_part["mm_diff"]).all()  # no mixed model asked for


def test_rows_frame_has_the_dtypes_of_concatenated_part_frames():
    parts = [
        {"layer": [0, 1], "band": None, "x": np.array([1.0, 2.0]), "ok": np.array([True, False])},
        {
            "band": ["early", "late"],
            "layer": None,
            "x": np.array([3.0, 4.0]),
            "ok": np.ones(2, bool),
        },
    ]
    parts = [
        {**p, "run_id": "r", "basis": np.array(["one", None], dtype=object), "base": None}
        for p in parts
    ]
    parts.append({**parts[0], "basis": np.array([None, None], dtype=object), "n_identical": 3})
    cols = ["run_id", "layer", "band", "x", "ok", "basis", "base", "n_identical"]
    got = rows_frame(parts, cols)

    def frame(p):  # what one frame per part made of the same columns
        n = 2
        data = {
            k: (v if isinstance(v, (list, np.ndarray)) else [v] * n)
            for k, v in p.items()
            if k in cols
        }
        return pd.DataFrame(data)

    want = pd.concat([frame(p) for p in parts], ignore_index=True).reindex(columns=cols)
    for col in ("layer", "n_identical"):
        want[col] = want[col].astype("Int64")
    pd.testing.assert_frame_equal(got, want)
    assert got["band"].dtype == object and got["run_id"].dtype == want["run_id"].dtype
    # a text part's missing text is NaN, an all-None part's stays None (pandas' concat)
    assert got.loc[0, "basis"] == "one" and math.isnan(got.loc[1, "basis"])
    assert got.loc[4, "basis"] is None and got["basis"].dtype == object


def test_run_contrasts_table_has_the_stores_columns_in_order():
    f = _long(np.random.default_rng(3), variants=("original", "front", "end"), n_layers=6)
    out = run_contrasts(f, "r1", StatsSettings(n_boot=50, n_perm=100))
    from homog.stats.contrasts import CONTRAST_COLUMNS

    assert list(out.columns) == list(CONTRAST_COLUMNS)
    assert out["layer"].dtype == "Int64" and out["n"].dtype == np.int64
    assert out["adjusted"].dtype == bool and len(out) == 2 * (6 + 5)
