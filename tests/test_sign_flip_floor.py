"""refine_at_floor: sign-flip p-values at the Monte Carlo floor redrawn for a large Holm family
(the probe's per-layer families hold ~500 rows; 1 / (10,000 + 1) x 500 > 0.05)."""

from __future__ import annotations

import numpy as np

from homog.stats.paired_tests import holm, refine_at_floor, sign_flip_p


def test_a_strong_effect_at_the_floor_is_redrawn_until_holm_can_pass():
    rng = np.random.default_rng(0)
    strong = rng.normal(1.0, 1.0, size=(3, 80))  # p far below any floor
    null = rng.normal(0.0, 1.0, size=(2, 80))
    d = np.vstack([strong, null])
    p = sign_flip_p(d, n_perm=100, seed=0)
    assert np.allclose(p[:3], 1 / 101) and (p[3:] > 1 / 101).all()
    # a family of 500 rows: the first floor could pass nothing (1/101 x 500 > 1)
    q = refine_at_floor(d, p, n_perm=100, family=500, alpha=0.05, seed=0)
    total = int(np.ceil(10 * 500 / 0.05))
    assert np.allclose(q[:3], 1 / (1 + total))  # no redraw reaches the strong effects
    assert np.array_equal(q[3:], p[3:])  # rows above the floor stay as they are
    assert (holm(np.r_[q[:3], np.ones(497)]) < 0.05).sum() == 3
    # a family the first draw already serves, and an exact test, are left alone
    p4 = sign_flip_p(d, n_perm=10000, seed=0)
    assert np.array_equal(refine_at_floor(d, p4, n_perm=10000, family=2, alpha=0.05), p4)
    small = d[:, :6]
    exact = sign_flip_p(small, n_perm=100)
    assert np.array_equal(refine_at_floor(small, exact, n_perm=100, family=500, alpha=0.05), exact)


def test_the_redrawn_p_stays_a_valid_p_value_under_the_null():
    """Under H0 (symmetric differences) P(p <= t) <= t at thresholds below and above the first
    floor (1/21 = 0.048), within Monte Carlo error over 3,000 null rows."""
    rng = np.random.default_rng(1)
    d = rng.normal(size=(3000, 30))
    p = sign_flip_p(d, n_perm=20, seed=0)
    q = refine_at_floor(d, p, n_perm=20, family=10, alpha=0.05, seed=0)
    assert (q < p).any()  # some rows were redrawn below the first floor
    for t in (0.005, 0.01, 0.03, 0.05, 0.2):
        share = (q <= t).mean()
        assert share <= t + 3 * np.sqrt(t * (1 - t) / len(q)), (t, share)
