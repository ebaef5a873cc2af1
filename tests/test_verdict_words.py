"""The verdict words say what the interval shows (docs/statistics.md, "Verdicts"): supported
only when the CI lies wholly beyond the margin, a significant effect whose CI reaches into it
is "nonzero", a row without a margin is descriptive, and too few pairs give no verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from homog.stats.paired_tests import bootstrap_ci, sign_flip_p
from homog.stats.verdicts import (
    DESCRIPTIVE,
    MIN_PAIRS,
    NEGLIGIBLE,
    NONZERO,
    REVERSED,
    SUPPORTED,
    TOO_FEW,
    verdict_of,
)

SESOI, ALPHA = 1.0, 0.05


def planted(effect: float, sd: float, n: int, seed: int = 0) -> dict:
    """A paired difference of mean ``effect`` (exactly: the noise is centred) with its 95 % CI,
    90 % equivalence CI and sign-flip p, as the stats stage computes them."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, sd, n)
    d = effect + (noise - noise.mean())
    lo, hi = bootstrap_ci(d[None, :], n_boot=2000, ci=0.95, seed=0)
    elo, ehi = bootstrap_ci(d[None, :], n_boot=2000, ci=1 - 2 * ALPHA, seed=0)
    p = sign_flip_p(d[None, :], n_perm=10000, seed=0)[0]
    return {
        "effect": float(d.mean()),
        "ci": (float(lo[0]), float(hi[0])),
        "eq": (float(elo[0]), float(ehi[0])),
        "p": float(p),
        "n": n,
    }


def word(r: dict, sesoi: float = SESOI, sign: int | None = +1, p: float | None = None) -> str:
    return verdict_of(
        r["effect"],
        *r["ci"],
        *r["eq"],
        sesoi,
        r["p"] if p is None else p,
        ALPHA,
        sign=sign,
        n=r["n"],
    )


def test_a_significant_effect_of_half_a_sesoi_is_not_supported():
    for sd, n in ((0.3, 200), (1.6, 60)):  # precise, and as noisy as significance allows
        r = planted(0.5 * SESOI, sd=sd, n=n)
        assert r["p"] < ALPHA
        assert word(r) == NEGLIGIBLE  # a real effect too small to matter
    # 0.8 SESOI, significant, its CI reaching past the margin: real, not shown to matter
    r = planted(0.8 * SESOI, sd=2.3, n=60)
    assert r["p"] < ALPHA and 0 < r["ci"][0] < SESOI < r["ci"][1]
    assert word(r) == NONZERO
    # the rule before (significant, equivalence CI not inside +-SESOI) read it supported
    assert not (-SESOI < r["eq"][0] and r["eq"][1] < SESOI)


def test_a_significant_effect_of_two_sesoi_is_supported_on_its_side():
    r = planted(2 * SESOI, sd=1.0, n=60)
    assert r["ci"][0] > SESOI
    assert word(r) == SUPPORTED
    assert word(r, sign=-1) == REVERSED
    assert word(r, sign=None) == SUPPORTED  # undirected by declaration: either side
    neg = planted(-2 * SESOI, sd=1.0, n=60)
    assert word(neg, sign=None) == SUPPORTED and word(neg, sign=+1) == REVERSED
    # beyond the margin but not significant after the family's Holm: not supported
    assert word(r, p=0.2) != SUPPORTED


def test_too_few_pairs_give_no_verdict():
    r = planted(12.0, sd=0.0, n=2)  # n = 2: CI [12, 12], p 0.5 at best
    assert word(r) == TOO_FEW
    assert word({**r, "p": 0.001}) == TOO_FEW
    assert word(planted(3 * SESOI, sd=1.0, n=MIN_PAIRS)) == SUPPORTED


@pytest.mark.parametrize("sesoi", [math.nan, 0.0])
def test_a_row_without_a_margin_is_descriptive(sesoi):
    r = planted(5 * SESOI, sd=1.0, n=60)
    assert word(r, sesoi=sesoi) == DESCRIPTIVE


def test_a_bootstrap_p_is_never_0():
    from homog.stats.paired_tests import bootstrap_p

    boot = np.linspace(1.0, 2.0, 1999)  # every draw on one side of 0
    assert bootstrap_p(boot) == pytest.approx(2 / 2000)
    assert bootstrap_p(np.r_[boot, np.nan]) == pytest.approx(2 / 2000)  # NaN draws left out
    assert bootstrap_p(np.r_[-boot[:9], boot]) == pytest.approx(2 * 10 / 2009)
    assert bootstrap_p(np.zeros(99)) == 1.0


def test_the_probe_cost_slope_p_is_never_0():
    import pandas as pd

    from homog.probe.cost import slope_row
    from homog.stats.settings import StatsSettings

    rng = np.random.default_rng(0)
    n = 40
    x = rng.normal(0, 1, (n, 2))
    frame = pd.DataFrame(
        {
            "review": np.repeat(np.arange(n), 2),
            "x": x.ravel(),
            "y": 3.0 * x.ravel() + rng.normal(0, 0.01, 2 * n),
            "unit": np.repeat(np.arange(n), 2).astype(str),
            "cond": np.tile(["a", "b"], n),
        }
    )
    row = slope_row(frame, StatsSettings(n_boot=999))
    assert row["value"] == pytest.approx(3.0, abs=0.05)
    assert row["p_value"] == pytest.approx(2 / 1000)
