"""The probe's batched fits (homog.probe.fit, homog.stats.classifier): every layer of a fold
at once, solved in the span of the training rows when they are fewer than the features
(``fit_logistic_dual``), give scikit-learn's pipeline (StandardScaler + LogisticRegression,
lbfgs) to within 1e-5 of its logits when that pipeline is converged tightly (tol 1e-10):
more rows or fewer than features, a constant feature, separable data, several C chosen by the
inner CV, and one label in a fold is still an error."""

from __future__ import annotations

import numpy as np
import pytest

from homog.errors import HomogError
from homog.probe.fit import choose_c, fit_layers, fit_predict, probe_texts
from homog.stats.classifier import fit_logistic, fit_logistic_dual

# the logits' distance to a tightly converged sklearn pipeline: lbfgs stops ~1e-6 from the
# optimum at tol 1e-10 (our Newton fits reach it to ~1e-9); its default tol 1e-4 stops
# 1e-3 to 1e-1 from it (bench/probe_fit.py), too far to compare with
ATOL = 1e-5


def sklearn_logits(x_train, y, x_test, c, tol=1e-10):
    """[t, L] sklearn's pipeline per layer of x_train [m, L, k], fitted tightly."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    cs = np.broadcast_to(np.asarray(c, dtype=float), (x_train.shape[1],))
    out = []
    for layer, c_layer in enumerate(cs):
        pipe = make_pipeline(
            StandardScaler(), LogisticRegression(C=c_layer, tol=tol, max_iter=100_000)
        )
        out.append(pipe.fit(x_train[:, layer], y).decision_function(x_test[:, layer]))
    return np.stack(out, axis=1)


def layers_data(m: int, k: int, layers: int = 3, t: int = 20, signal: float = 1.0, seed=0):
    """(x_train [m, L, k], y [m], x_test [t, L, k]): features of unequal scales and offsets,
    the label in the first two features, more strongly with depth."""
    rng = np.random.default_rng(seed)
    y = np.arange(m) % 2
    rng.shuffle(y)
    scale = rng.uniform(0.2, 5.0, size=(1, layers, k))
    x = rng.normal(size=(m + t, layers, k)) * scale + rng.normal(size=(1, layers, k)) * 3
    y_all = np.r_[y, rng.integers(0, 2, t)]
    x[:, :, :2] += signal * (y_all[:, None, None] - 0.5) * np.arange(1, layers + 1)[:, None]
    return x[:m], y, x[m:]


@pytest.mark.parametrize("m,k", [(14, 60), (40, 120), (90, 12), (30, 30)])
@pytest.mark.parametrize("c", [0.1, 1.0])
def test_every_layer_at_once_is_sklearns_pipeline(m, k, c):
    """Fewer rows than features (the dual fits), more (the primal ones), as many."""
    xtr, y, xte = layers_data(m, k, seed=m + k)
    got = fit_layers(xtr, y, np.arange(m).astype(str), xte, cs=[c])
    assert got.shape == (len(xte), xtr.shape[1])
    assert got == pytest.approx(sklearn_logits(xtr, y, xte, c), abs=ATOL)
    # one layer alone is the same fit
    one = fit_predict(xtr[:, 2], y, np.arange(m).astype(str), xte[:, 2], cs=[c])
    assert one == pytest.approx(got[:, 2], abs=1e-9)


@pytest.mark.parametrize("m,k", [(16, 40), (60, 8)])
def test_a_constant_feature_keeps_sd_1(m, k):
    """StandardScaler leaves a constant feature unscaled (SD 1): it is 0 after centring, so
    it adds nothing, in training or test rows (where it may differ from the constant)."""
    xtr, y, xte = layers_data(m, k, seed=3)
    xtr[:, :, 4] = 7.0
    xte[:, :, 4] = 7.0 + np.linspace(-1, 1, len(xte))[:, None]
    got = fit_layers(xtr, y, np.arange(m).astype(str), xte, cs=[0.1])
    assert np.isfinite(got).all()
    assert got == pytest.approx(sklearn_logits(xtr, y, xte, 0.1), abs=ATOL)


@pytest.mark.parametrize("m,k", [(20, 50), (80, 6)])
def test_separable_data_stay_finite_at_the_penalised_optimum(m, k):
    """Perfectly separated labels: without the penalty the logits would grow without bound;
    with it the optimum is finite and the fits find it (C = 10: a weak penalty)."""
    xtr, y, xte = layers_data(m, k, signal=40.0, seed=4)
    got = fit_layers(xtr, y, np.arange(m).astype(str), xte, cs=[10.0])
    assert np.isfinite(got).all() and np.abs(got).max() > 5
    assert got == pytest.approx(sklearn_logits(xtr, y, xte, 10.0), abs=ATOL)


def old_choose_c(x, y, groups, cs, inner, seed):
    """The previous choose_c: sklearn's pipeline per C and inner split (converged to tol 1e-6:
    its accuracies only count signs; 1e-10 takes seconds more on C = 10)."""
    from sklearn.model_selection import StratifiedGroupKFold

    n_splits = min(inner, int(np.bincount(y).min()))
    splits = list(
        StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed).split(x, y, groups)
    )
    scores = [
        np.mean(
            [
                (
                    (sklearn_logits(x[tr, None], y[tr], x[te, None], c, tol=1e-6)[:, 0] > 0)
                    == y[te]
                ).mean()
                for tr, te in splits
            ]
        )
        for c in sorted(cs)
    ]
    return float(sorted(cs)[int(np.argmax(scores))])


@pytest.mark.parametrize("m,k,seed", [(48, 30, 3), (30, 80, 1)])
def test_several_c_are_chosen_per_layer_by_the_inner_cv_as_before(m, k, seed):
    """Three values of C: the inner CV's choice per layer is the previous implementation's,
    and the final fit uses it (the logits of the chosen C per layer); more rows than
    features and fewer (the layers of these data choose all three)."""
    xtr, y, xte = layers_data(m, k, layers=4, signal=1.0, seed=seed)
    groups = np.array([f"r{i:02d}" for i in range(m)])
    cs = (0.001, 0.1, 10.0)
    chosen = choose_c(xtr, y, groups, cs, inner=3, seed=2)
    assert chosen.shape == (4,)
    for layer in range(4):
        assert chosen[layer] == old_choose_c(xtr[:, layer], y, groups, cs, 3, 2)
        assert choose_c(xtr[:, layer], y, groups, cs, 3, 2) == chosen[layer]  # one layer
    got = fit_layers(xtr, y, groups, xte, cs=cs, inner=3, seed=2)
    assert got == pytest.approx(sklearn_logits(xtr, y, xte, chosen), abs=ATOL)
    assert len(set(chosen)) == 3  # the layers do not choose alike: a per-layer choice
    # one value, or too few of a label for two inner folds: no inner CV
    assert choose_c(xtr, y, groups, [0.5], 3, 2).tolist() == [0.5] * 4
    few = np.r_[np.zeros(m - 1, int), 1]
    assert choose_c(xtr, few, groups, cs, 3, 2).tolist() == [0.001] * 4


def test_one_label_in_a_training_fold_is_an_error():
    xtr, y, xte = layers_data(20, 30, seed=6)
    ones = np.ones_like(y)
    with pytest.raises(HomogError, match="one label only"):
        fit_predict(xtr[:, 0], ones, np.arange(20).astype(str), xte[:, 0], cs=[0.1])
    with pytest.raises(HomogError, match="one label only"):
        fit_layers(xtr, ones, np.arange(20).astype(str), xte, cs=[0.1])
    # through probe_texts: folds whose training reviews hold one label
    ids = np.array([f"r{i:02d}" for i in range(20)])
    folds = {s: int(i < 10) for i, s in enumerate(ids)}
    y_split = (np.arange(20) < 10).astype(int)  # fold 1 all of one label, fold 0 the other
    with pytest.raises(HomogError, match="one label only"):
        probe_texts(xtr, np.full(20, "original"), ids, y_split, folds, cs=[0.1])


def test_identical_test_rows_get_identical_logits_wherever_they_sit():
    """A text whose variant is the same vector (the position family at layer 0) scores the
    same in every row: each logit is summed alone, never by a product that rounds a row by
    where it sits."""
    xtr, y, xte = layers_data(24, 300, seed=7)
    xte[7] = xte[0]
    xte[13] = xte[0]
    got = fit_layers(xtr, y, np.arange(24).astype(str), xte, cs=[0.1])
    assert np.array_equal(got[7], got[0]) and np.array_equal(got[13], got[0])


def test_dual_fits_are_the_primal_ones_and_c_per_fit_is_c_alone():
    """fit_logistic_dual (m < k: m + 1 unknowns on the Gram matrix) reaches fit_logistic's
    optimum; a C per fit [P] gives each fit its C alone; fit_logistic's default is C = 1."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 15, 40))
    y = (rng.random((4, 15)) < 0.5).astype(float)
    x[:, :, 0] += 2 * y
    cs = np.array([0.01, 0.1, 1.0, 10.0])
    primal = fit_logistic(x, y, tol=1e-12, c=cs)
    assert fit_logistic_dual(x, y, tol=1e-12, c=cs) == pytest.approx(primal, abs=1e-8)
    for i, c in enumerate(cs):
        alone = fit_logistic(x[i : i + 1], y[i : i + 1], tol=1e-12, c=float(c))
        assert alone[0] == pytest.approx(primal[i], abs=1e-8)
    assert np.array_equal(fit_logistic(x, y), fit_logistic(x, y, c=1.0))
    assert fit_logistic(x, y, bound_steps=0, tol=1e-12) == pytest.approx(
        fit_logistic(x, y, tol=1e-12), abs=1e-8
    )
