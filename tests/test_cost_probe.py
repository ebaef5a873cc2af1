"""The probe's rows of intervention_cost (homog.stats.cost_probe): probes trained on the
unchanged originals of the other folds read every dose's vectors; checked against a loop by
hand, with a planted cost (homogenize shrinks the sentiment direction, the control does not)
and through the run directories' pooled_mean.npy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler
from test_intervention_cost import DOSES, OPTS, N, _write_run, synthetic

from homog.config import parse_params
from homog.stats.cost_probe import probe_bands, probe_rows
from homog.stats.cost_rows import BANDS
from homog.stats.intervention_cost import intervention_cost
from homog.stats.settings import StatsSettings

L, D = 6, 8  # layers 0..6: final [6], late [5]


def vectors(seed: int = 0) -> tuple[np.ndarray, dict[str, list[np.ndarray]], np.ndarray]:
    """The unchanged run's [n, L+1, d] and per arm and dose: the label along feature 0,
    shrunk by (1 - alpha) under homogenize, kept under the control."""
    rng = np.random.default_rng(seed)
    positive = np.arange(N) % 2 == 0
    noise = rng.normal(0, 1, (N, L + 1, D))
    signal = np.zeros((N, L + 1, D))
    signal[:, :, 0] = np.where(positive, 1.5, -1.5)[:, None]
    base = noise + signal
    arms = {
        "homogenize": [noise + (1 - a) * signal for a in DOSES],
        "control": [noise + signal + rng.normal(0, 0.05, noise.shape) * a for a in DOSES],
    }
    return base, arms, positive


def by_hand(base, x, positive, layer) -> np.ndarray:
    """Margins (n,) of x at ``layer`` by the probes of the other folds, in a loop."""
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=3)
    out = np.zeros(N)
    for train, test in folds.split(np.zeros(N), positive):
        sc = StandardScaler().fit(base[train, layer])
        clf = LogisticRegression(C=0.1, max_iter=2000, random_state=3)
        clf.fit(sc.transform(base[train, layer]), positive[train])
        out[test] = clf.decision_function(sc.transform(x[test, layer]))
    return out * np.where(positive, 1, -1)


def test_the_probe_bands_against_a_loop_and_a_planted_cost():
    base, arms, positive = vectors()
    got = probe_bands(base, arms, positive, folds=5, c=0.1, max_iter=2000, seed=3)
    for arm in ("homogenize", "control"):
        assert got[arm].shape == (len(DOSES), 2, 2, N)
        for v in range(len(DOSES)):
            final, late = (
                by_hand(base, arms[arm][v], positive, L),
                by_hand(base, arms[arm][v], positive, L - 1),
            )
            np.testing.assert_allclose(got[arm][v, 0, 1], final, rtol=1e-9)
            np.testing.assert_allclose(got[arm][v, 0, 0], final > 0)
            np.testing.assert_allclose(got[arm][v, 1, 1], late, rtol=1e-9)
    inp = synthetic(cost=0.0)
    key = {"run_id": "r", "model": "m", "family": "homogenize"}
    rows = pd.DataFrame(probe_rows(got, inp, key, OPTS))
    acc = rows[
        (rows["metric"] == "probe_accuracy")
        & (rows["band"] == "final")
        & (rows["kind"] == "dose")
        & (rows["dose"] == 1.0)
    ].set_index("arm")
    # alpha = 1 removes the sentiment direction: the probe falls to chance; the control keeps it
    assert acc.loc["homogenize", "value"] < -0.3 and acc.loc["homogenize", "ci_high"] < -0.02
    assert abs(acc.loc["control", "value"]) < 0.1
    assert acc.loc["homogenize", "value"] == pytest.approx(
        (got["homogenize"][3, 0, 0] - got["homogenize"][0, 0, 0]).mean()
    )
    assert set(rows["sesoi"].dropna()) == {0.02, 0.2}


def write_series(tmp_path):
    """A homogenize series (4 doses and 3 controls) and its unchanged run under ``tmp_path``,
    with their pooled vectors (``vectors``): (found, frames, labels, base vectors, arms)."""
    inp = synthetic(cost=1.5)
    base_vectors, arms, positive = vectors()
    assert (positive == inp.positive).all()
    ids = [f"s{i:02d}" for i in range(N)]
    found, frames = [], {}
    names = {"homogenize": "homogenize", "control": "homogenize_control"}
    for arm, prefix in names.items():
        for v, dose in enumerate(DOSES):
            if dose == 0:
                continue
            iv = f"{prefix}:{dose:g}"
            run, d, frame = _write_run(
                tmp_path, iv, inp.margin[arm][v], inp.erank[arm][v], ids, inp.positive
            )
            np.save(d / "pooled_mean.npy", arms[arm][v].astype(np.float32))
            found.append((run, d))
            frames[iv] = frame
    base, d, frame = _write_run(
        tmp_path, "none", inp.margin["homogenize"][0], inp.erank["homogenize"][0], ids, inp.positive
    )
    np.save(d / "pooled_mean.npy", base_vectors.astype(np.float32))
    found.append((base, d))
    frames["none"] = frame
    labels = pd.DataFrame({"variant": "original", "sample_id": ids, "positive": inp.positive})
    return found, frames, labels, base_vectors, arms


PARAMS = parse_params({"stats": {"n_boot": 500, "n_perm": 2000}, "seed": 3})


def probe_levels(probe, base_vectors, arms, positive, folds: int, band: str):
    """(the table's homogenize probe_margin levels at ``band`` by dose, ``probe_bands``' own
    on the float32 vectors the runs stored) for the same texts."""
    want = probe_bands(
        base_vectors.astype(np.float32).astype(float),
        {a: [x.astype(np.float32).astype(float) for x in xs] for a, xs in arms.items()},
        positive,
        folds=folds,
        c=0.1,
        max_iter=2000,
        seed=3,
    )
    lvl = probe[
        (probe["kind"] == "level")
        & (probe["arm"] == "homogenize")
        & (probe["band"] == band)
        & (probe["metric"] == "probe_margin")
    ]
    return lvl.sort_values("dose")["value"], want["homogenize"][:, BANDS.index(band), 1].mean(1)


def test_the_probe_rows_from_the_run_directories(tmp_path):
    found, frames, labels, base_vectors, arms = write_series(tmp_path)
    positive = labels["positive"].to_numpy()
    base = next(run for run, _ in found if run["intervention"] == "none")
    got = intervention_cost(
        PARAMS, StatsSettings.of(PARAMS), found, frames, labels, lambda r: base, print
    )
    probe = got[got["metric"].str.startswith("probe_")]
    # 2 arms x 4 doses x 2 bands x 2 metrics levels, and 3 changes per arm, band and metric
    assert len(probe) == 2 * 4 * 2 * 2 + 2 * 3 * 2 * 2
    assert set(probe.loc[probe["kind"] == "dose", "family_holm"]) == {"exploratory"}
    got_levels, want = probe_levels(probe, base_vectors, arms, positive, 5, "late")
    np.testing.assert_allclose(got_levels, want, rtol=1e-9)


def test_a_label_with_fewer_texts_than_folds_sets_the_folds(tmp_path):
    """A small draw of extract.dose_texts can hold 3 texts of a label: the probe runs on 3
    folds and says so; with 1 text of a label it has no rows and says why."""
    found, frames, labels, base_vectors, arms = write_series(tmp_path)
    base = next(run for run, _ in found if run["intervention"] == "none")
    logged: list[str] = []
    for n_pos, folds in ((3, 3), (1, None)):
        labels["positive"] = np.arange(N) < n_pos
        logged.clear()
        got = intervention_cost(
            PARAMS, StatsSettings.of(PARAMS), found, frames, labels, lambda r: base, logged.append
        )
        probe = got[got["metric"].str.startswith("probe_")]
        if folds is None:
            assert probe.empty
            assert any("1 texts of a label: the probe needs 2 folds" in m for m in logged)
            continue
        assert any("probe on 3 folds, not probe.folds 5" in m for m in logged), logged
        positive = labels["positive"].to_numpy()
        got_levels, want = probe_levels(probe, base_vectors, arms, positive, 3, "final")
        np.testing.assert_allclose(got_levels, want, rtol=1e-9)
