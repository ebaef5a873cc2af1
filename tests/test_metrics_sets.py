"""Token sets, the peers' metrics and massive activations (homog.metrics.sets) against direct
numpy computations on small inputs. ``numpy_reference`` is reused by test_extract to check
the extraction against HF ``output_hidden_states``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import largest_tensor_mode

from homog.metrics.massive import MASSIVE_METRICS, massive_activations, median_of_valid
from homog.metrics.sets import (
    N_REMOVED,
    PEER_METRICS,
    hidden_metric_names,
    hidden_metrics,
    sq_distances,
    twonn,
)
from homog.metrics.spectra import METRIC_NAMES, layer_metrics

# --- independent numpy definitions ---------------------------------------------------------


def np_spectral(x: np.ndarray) -> dict[str, float]:
    s = np.linalg.svd(x, compute_uv=False)
    s = s[s > s[0] * 1e-7]
    p = s / s.sum()
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    r = np.linalg.norm(unit.mean(0))
    n = len(x)
    return {
        "erank": float(np.exp(-(p * np.log(p)).sum())),
        "mev": float(s[0] ** 2 / (s**2).sum()),
        "schatten_1": float(s.sum() / np.sqrt((s**2).sum())),
        "schatten_4": float((s**4).sum() ** 0.25 / np.sqrt((s**2).sum())),
        "resultant_length": float(r),
        "mean_cosine": float((n * r**2 - 1) / (n - 1)),
        "norm_mean": float(np.linalg.norm(x, axis=1).mean()),
    }


def np_prompt_entropy(x: np.ndarray, alpha: float = 1.0) -> float:
    k = x @ x.T
    lam = np.clip(np.linalg.eigvalsh(k / np.trace(k)), 0, None)
    lam = lam[lam > lam.max() * 1e-12]
    if alpha == 1:
        return float(-(lam * np.log(lam)).sum())
    return float(np.log((lam**alpha).sum()) / (1 - alpha))


def np_curvature(x: np.ndarray) -> float:
    angles = []
    for k in range(len(x) - 2):
        a, b = x[k + 1] - x[k], x[k + 2] - x[k + 1]
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        if na > 0 and nb > 0:
            angles.append(math.acos(max(-1.0, min(1.0, a @ b / (na * nb)))))
    return float(np.mean(angles)) if angles else math.nan


def np_twonn(x: np.ndarray) -> float:
    """dadapy's compute_id_2NN (fraction 0.9, fit through the origin), duplicates left out."""
    if len(x) < 3:
        return math.nan
    dist = np.linalg.norm(x[:, None] - x[None], axis=-1)
    np.fill_diagonal(dist, np.inf)
    r = np.sort(dist, axis=1)[:, :2]
    sq = (x**2).sum(1)
    keep = r[:, 0] ** 2 > 1e-10 * sq
    mu = r[keep, 1] / r[keep, 0]
    n = len(mu)
    n_eff = int(n * 0.9)
    if n_eff < 2:
        return math.nan
    xs = np.sort(np.log(mu))[:n_eff]
    y = -np.log(1 - np.arange(1, n_eff + 1) / n)
    sxx = (xs**2).sum()
    return float((xs * y).sum() / sxx) if sxx > 0 else math.nan


def np_set_metrics(x: np.ndarray, alpha: float = 1.0) -> dict[str, float]:
    if len(x) < 2:
        return dict.fromkeys((*METRIC_NAMES, *PEER_METRICS), math.nan)
    out = np_spectral(x)
    out.update(
        prompt_entropy=np_prompt_entropy(x, alpha), curvature=np_curvature(x), twonn_id=np_twonn(x)
    )
    return out


def numpy_reference(x: np.ndarray, positions: np.ndarray, ratio: float = 10.0) -> dict:
    """Every hidden-state metric of one text at one layer: x (n, d) its metric tokens (in
    order) and positions (n,) their sequence positions."""
    x = x.astype(np.float64)
    out = np_set_metrics(x)
    norms = np.linalg.norm(x, axis=1)
    keep = (np.arange(len(x)) != 0) & ~(norms > ratio * np.median(norms))
    out.update({f"{k}__no_sink": v for k, v in np_set_metrics(x[keep]).items()})
    out[N_REMOVED] = float((~keep).sum())
    sd = x.std(0)
    z = np.where(sd > 0, (x - x.mean(0)) / np.where(sd > 0, sd, 1), 0.0)
    out.update({f"{k}__standardized": v for k, v in np_set_metrics(z).items()})
    a = np.abs(x)
    flat = int(np.argmax(a))
    out.update(
        act_top1=float(a.max()),
        act_median=float(np.median(a)),
        act_ratio=float(a.max() / np.median(a)),
        act_top1_pos=float(positions[flat // x.shape[1]]),
        act_top1_feature=float(flat % x.shape[1]),
    )
    return out


def assert_matches(got: dict[str, float], want: dict[str, float], rel: float, where=()) -> None:
    for k, w in want.items():
        g = got[k]
        if math.isnan(w):
            assert math.isnan(g), (where, k, g)
        else:
            assert g == pytest.approx(w, rel=rel, abs=1e-9), (where, k, g, w)


ALL_SETS = ("no_sink", "standardized")


def run(h: torch.Tensor, m: torch.Tensor, **kw) -> dict[str, np.ndarray]:
    out, _ = hidden_metrics(h, m, token_sets=ALL_SETS, peers=True, **kw)
    return {k: v.numpy() for k, v in out.items()}


# --- tests -----------------------------------------------------------------------------------


def test_names_and_order():
    names = hidden_metric_names(ALL_SETS, True)
    assert names[: len(METRIC_NAMES)] == METRIC_NAMES
    assert "erank__no_sink" in names and "mean_cosine__standardized" in names
    assert N_REMOVED in names and set(MASSIVE_METRICS) <= set(names)
    assert hidden_metric_names((), False) == METRIC_NAMES


@pytest.mark.parametrize("n,d", [(12, 20), (30, 8)])  # n <= d and n > d (the two Gram routes)
def test_matches_numpy_with_padding(n, d):
    gen = torch.Generator().manual_seed(n)
    h = torch.randn(3, 2, n, d, dtype=torch.float64, generator=gen) + 0.3
    h[0, 0, 4] *= 60  # a massive token inside the text
    h[1, 1, 0] *= 40  # a massive first token
    lengths = [n, n - 3, n - 7]
    mask = torch.zeros(3, 2, n, dtype=torch.bool)
    for b, k in enumerate(lengths):
        mask[b, :, 1:k] = True  # position 0 is a special token, as a BOS would be
    h = torch.where(mask[..., None], h, torch.nan)  # padding must not leak
    got = run(h, mask)
    ref = layer_metrics(h, mask)
    for k in METRIC_NAMES:  # the `all` set is today's metrics (to rounding: its spectrum
        # may come from the reduction it shares with no_sink, on a permuted matrix)
        np.testing.assert_allclose(got[k], ref[k].numpy(), rtol=1e-13, atol=0)
    for b, k in enumerate(lengths):
        for layer in range(2):
            want = numpy_reference(h[b, layer, 1:k].numpy(), np.arange(1, k))
            assert_matches({m: float(v[b, layer]) for m, v in got.items()}, want, 1e-7, (b, layer))


def test_no_sink_removes_first_and_outliers_and_reports_few_tokens():
    x = torch.tensor([[5.0, 0], [1, 0], [0, 1], [500, 3]], dtype=torch.float64)
    got = run(x[None], torch.ones(1, 4, dtype=torch.bool))
    assert got[N_REMOVED][0] == 2  # the first token and the 500-norm one
    assert got["norm_mean__no_sink"][0] == pytest.approx(1.0)
    # two tokens: the first is removed, one is left -> NaN, never an error
    two = run(x[None, 1:3], torch.ones(1, 2, dtype=torch.bool))
    assert math.isnan(two["erank__no_sink"][0]) and two[N_REMOVED][0] == 1
    assert math.isfinite(two["erank"][0])
    one = run(x[None, :1], torch.ones(1, 1, dtype=torch.bool))
    assert math.isnan(one["erank__standardized"][0]) and math.isnan(one["twonn_id"][0])


def test_renyi_alpha():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(9, 14, dtype=torch.float64, generator=gen)
    for alpha in (0.5, 2.0):
        got = run(x[None], torch.ones(1, 9, dtype=torch.bool), renyi_alpha=alpha)
        assert got["prompt_entropy"][0] == pytest.approx(np_prompt_entropy(x.numpy(), alpha))


def test_peers_on_known_shapes():
    # a straight line: every turn is 0; a zig-zag: every turn is pi
    t = torch.arange(8, dtype=torch.float64)[:, None]
    line = t * torch.tensor([[1.0, 2.0, 0.5]])
    zig = torch.stack([t[:, 0], (-1) ** t[:, 0]], 1)
    mask = torch.ones(1, 8, dtype=torch.bool)
    assert run(line[None], mask)["curvature"][0] == pytest.approx(0.0, abs=1e-6)
    zz = zig.clone()
    zz[:, 0] = 0  # pure back-and-forth along one axis: angle pi
    assert run(zz[None] + 0.0, mask)["curvature"][0] == pytest.approx(math.pi, rel=1e-6)
    # TwoNN on points filling a 2-d plane in 10 dims reads about 2
    gen = np.random.default_rng(0)
    pts = gen.uniform(size=(300, 2)) @ gen.normal(size=(2, 10))
    got = run(torch.from_numpy(pts)[None], torch.ones(1, 300, dtype=torch.bool))
    assert 1.6 < got["twonn_id"][0] < 2.4
    assert got["twonn_id"][0] == pytest.approx(np_twonn(pts), rel=1e-7)


def test_duplicates_are_left_out_of_twonn():
    gen = np.random.default_rng(1)
    x = gen.normal(size=(10, 6))
    x[5] = x[2]  # a repeated token (same embedding)
    got = run(torch.from_numpy(x)[None], torch.ones(1, 10, dtype=torch.bool))
    assert math.isfinite(got["twonn_id"][0])
    assert got["twonn_id"][0] == pytest.approx(np_twonn(x), rel=1e-7)


def test_twonn_reads_rounding_ties_as_ties():
    """Tokens whose two nearest are copies of one token (repeated words at layer 0) have
    r2 = r1: every log ratio is 0 and the fit has no dimension (NaN, as ``np_twonn``). The
    Gram matrix's rounding can set r2 1e-16 above r1; that must not read as a dimension of
    1e15 (it did, depending on how a text was batched)."""
    n = 8
    sq = torch.full((1, n), 500.0, dtype=torch.float64)
    r1 = torch.full((1, n), 900.0, dtype=torch.float64)
    for bump in (0.0, 1e-15, 3e-14):
        near = torch.stack([r1, r1 * (1 + bump)], -1)
        got = twonn(None, torch.ones(1, n, dtype=torch.bool), near=near, sq=sq)
        assert math.isnan(got[0]), bump
    near = torch.stack([r1, r1 * torch.linspace(1.5, 4, n, dtype=torch.float64)], -1)
    assert math.isfinite(twonn(None, torch.ones(1, n, dtype=torch.bool), near=near, sq=sq)[0])


def test_massive_activation_median_and_position():
    x = torch.zeros(1, 5, 4)
    x[0, :, :] = torch.arange(20, dtype=torch.float32).view(5, 4) - 7
    x[0, 3, 2] = -1000
    mask = torch.tensor([[False, True, True, True, True]])
    out, top = hidden_metrics(x, mask, peers=True)
    vals = np.abs(x[0, 1:].numpy())
    assert out["act_top1"][0] == 1000 and out["act_top1_pos"][0] == 3
    assert out["act_top1_feature"][0] == 2
    assert out["act_median"][0] == pytest.approx(np.median(vals))
    assert top[0, 0].tolist() == [3.0, 2.0, -1000.0]
    assert top.shape == (1, 3, 3)


def test_standardize_removes_a_rogue_dimension():
    """A feature with a huge constant-ish offset (a rogue dimension) dominates mean_cosine;
    after standardisation the anisotropy is gone."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 32, dtype=torch.float64, generator=gen)
    x[:, 7] += 50 + torch.randn(40, dtype=torch.float64, generator=gen)
    got = run(x[None], torch.ones(1, 40, dtype=torch.bool))
    assert got["mean_cosine"][0] > 0.9
    assert abs(got["mean_cosine__standardized"][0]) < 0.1


@pytest.mark.parametrize("use_numpy", [True, False])  # the CPU selection and the device one
def test_median_of_valid_equals_numpy_median(use_numpy):
    """Odd and even counts, a single value, ties and zeros: the exact median of the entries
    >= 0 (the others are the -1 fill), as np.median computes it."""
    gen = np.random.default_rng(7)
    n_all = 101
    rows, counts = [], []
    for c in (1, 2, 3, 50, 51, 100, 101):
        vals = np.abs(gen.normal(size=c)).astype(np.float32)
        vals[: c // 3] = np.round(vals[: c // 3])  # ties, and zeros among them
        row = np.full(n_all, -1.0, dtype=np.float32)
        row[gen.permutation(n_all)[:c]] = vals  # the fill is anywhere, not only at the end
        rows.append(row)
        counts.append(c)
    scored = torch.from_numpy(np.stack(rows)).reshape(7, 1, n_all)  # leading dims kept
    want = [np.median(r[r >= 0].astype(np.float64)) for r in rows]
    got = median_of_valid(scored.clone(), torch.tensor(counts).reshape(7, 1), use_numpy=use_numpy)
    assert got.dtype == torch.float64 and got.shape == (7, 1)
    np.testing.assert_array_equal(got[:, 0].numpy(), want)
    # 35 rows in a shuffled order: each row still its own median
    many = scored.repeat(5, 1, 1)[torch.randperm(35, generator=torch.Generator().manual_seed(1))]
    many_counts = torch.tensor(counts).repeat(5)[
        torch.randperm(35, generator=torch.Generator().manual_seed(1))
    ]
    got = median_of_valid(many.clone(), many_counts.reshape(35, 1), use_numpy=use_numpy)
    want = [np.median(r[r >= 0].astype(np.float64)) for r in many[:, 0].numpy()]
    np.testing.assert_array_equal(got[:, 0].numpy(), want)


def test_massive_top1_is_the_first_of_many_tied_maxima():
    """More tied maxima than the top k kept (a token repeated 5 times at the embedding layer):
    act_top1_pos/feature name the first in (position, feature) order, as np.argmax does."""
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(4, 10, 8, generator=gen)
    h[1:, [2, 4, 5, 7, 9], 3] = 30.0  # five equal maxima in feature 3 (rows 1-3)
    h[2, 1, 6] = -30.0  # an earlier tie of the same |value|, of the other sign
    mask = torch.ones(4, 10, dtype=torch.bool)
    mask[3, 2] = False  # the first maximum masked out: the next one counts
    out, top = massive_activations(h, mask)
    for b in range(4):
        a = h[b].abs().masked_fill(~mask[b].unsqueeze(-1), -1.0).numpy()
        flat = int(np.argmax(a))
        assert out["act_top1_pos"][b] == flat // 8, b
        assert out["act_top1_feature"][b] == flat % 8, b
        assert top[b, 0, 2] == h[b].flatten()[flat]  # the signed value
    assert (out["act_top1_pos"][1:] == torch.tensor([2.0, 1.0, 4.0], dtype=torch.float64)).all()


def test_massive_activations_same_on_both_median_paths():
    gen = torch.Generator().manual_seed(5)
    h = torch.randn(3, 2, 9, 16, generator=gen)
    mask = torch.ones(3, 2, 9, dtype=torch.bool)
    mask[1, :, 6:] = False  # an odd and an even count of values
    mask[2, :, 0] = False
    out, top = massive_activations(h, mask)
    flat = h.abs().masked_fill(~mask.unsqueeze(-1), -1.0).flatten(-2)
    torch_path = median_of_valid(flat, mask.sum(-1) * 16, use_numpy=False)
    np.testing.assert_array_equal(out["act_median"].numpy(), torch_path.numpy())
    for b in range(3):
        for layer in range(2):
            vals = h[b, layer][mask[b, layer]].abs().double().numpy()
            assert out["act_median"][b, layer] == np.median(vals)
            assert out["act_top1"][b, layer] == vals.max()


def test_twonn_with_shared_distances_equals_its_own():
    """no_sink reuses the squared distances of all: same values as computing them anew."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 12, 7, dtype=torch.float64, generator=gen)
    g = x @ x.mT
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[:, :2] = False
    d2 = sq_distances(g)
    np.testing.assert_array_equal(twonn(g, mask, d2).numpy(), twonn(g, mask).numpy())
    direct = ((x[:, :, None] - x[:, None]) ** 2).sum(-1)
    np.testing.assert_allclose(d2.numpy(), direct.numpy(), rtol=1e-12, atol=1e-12)


def test_long_texts_make_no_n_by_n_tensor_and_match_numpy(monkeypatch):
    """n > d: the peers' metrics come from the vectors (curvature from the difference vectors,
    twonn_id from blocks of distance rows), equal to numpy, and no (n x n) tensor is made."""
    import homog.metrics.sets as ms

    n, d, block = 90, 6, 16
    monkeypatch.setattr(ms, "NEIGHBOUR_BLOCK", block)
    gen = torch.Generator().manual_seed(4)
    h = torch.randn(2, n, d, dtype=torch.float64, generator=gen)
    h[0, 5] *= 50  # a massive token: no_sink drops it
    h[1, 10] = h[1, 30]  # a duplicate point: left out of twonn's N
    mask = torch.ones(2, n, dtype=torch.bool)
    mask[1, 70:] = False  # padding
    h = torch.where(mask[..., None], h, torch.nan)

    mode = largest_tensor_mode()
    with mode:
        got = run(h, mask)
    assert mode.largest < n * n  # the biggest: a (2 x 16 x 90) block of distances
    for b, k in enumerate([n, 70]):
        want = numpy_reference(h[b, :k].numpy(), np.arange(k))
        assert_matches({m: float(v[b]) for m, v in got.items()}, want, 1e-7, (b,))


def test_no_sink_spectrum_shared_with_all_equals_its_own_solve(monkeypatch):
    """With n <= d on the CPU, a no_sink set that drops only the first token takes its
    spectrum from the `all` matrix's tridiagonal reduction. It must equal the separate solve
    (HOMOG_CPU_EIGENSOLVER=torch keeps every set's own matrix) on texts whose first metric
    token is not at position 0, with a second outlier in one (text, layer) and padding."""
    import homog.metrics.pending as hmp  # where hidden_metrics' spectra are solved

    gen = torch.Generator().manual_seed(7)
    h = torch.randn(3, 4, 40, 48, generator=gen)
    h[:, :, 0] *= 3000  # a massive first token
    h[1, 2, 10] *= 500  # a second removed token: solved on its own
    h[2, :, 3] *= 2000  # text 2 starts at position 3
    h[2, :, 5:9] = h[2, :, 20:24]  # duplicate tokens
    mask = torch.ones(3, 1, 40, dtype=torch.bool)
    mask[0, :, 30:] = False
    mask[2, :, :3] = False
    calls = []
    real = hmp.eigenvalues_with_minor
    monkeypatch.setattr(
        hmp, "eigenvalues_with_minor", lambda g, m, s: calls.append(m.clone()) or real(g, m, s)
    )
    shared = run(h, mask)
    assert len(calls) == 1
    minor = calls[0]
    assert minor[1, 2] == -1 and (minor[2] == 3).all() and minor[0, 0] == 0
    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
    separate = run(h, mask)
    assert len(calls) == 1  # the torch solver never takes the shared route
    assert shared[N_REMOVED][1, 2] == 2 and (shared[N_REMOVED].sum() == 13)
    for k, want in separate.items():
        np.testing.assert_allclose(shared[k], want, rtol=1e-11, atol=0, err_msg=k)
    # and centring (the minor of a centred matrix is not the centred minor) keeps its own
    monkeypatch.delenv("HOMOG_CPU_EIGENSOLVER")
    run(h, mask, center=True)
    assert len(calls) == 1


def test_long_texts_share_the_neighbour_search_of_all_with_no_sink(monkeypatch):
    """n > d: no_sink's two nearest neighbours come from all's 2 + r nearest (r: the most
    tokens no_sink drops in a text); twonn_id equals each set searching on its own, also
    where no_sink drops a token that is some token's nearest neighbour."""
    import homog.metrics.sets as ms

    n, d = 70, 5
    gen = torch.Generator().manual_seed(9)
    h = torch.randn(3, 2, n, d, dtype=torch.float64, generator=gen)
    h[:, :, 0] *= 40  # the first token, a massive one
    h[1, 1, 12] = h[1, 1, 13] * 30  # a second outlier (r = 2 in that text and layer)
    h[2, 0, 0] = h[2, 0, 25] + 1e-3  # a first token of normal norm, 25's nearest neighbour
    mask = torch.ones(3, 1, n, dtype=torch.bool)
    mask[0, :, 60:] = False
    calls = []
    real = ms.nearest_blockwise
    monkeypatch.setattr(
        ms,
        "nearest_blockwise",
        lambda *a, **k: calls.append(a[4] if len(a) > 4 else 2) or real(*a, **k),
    )
    shared = run(h, mask)
    assert calls[0] == 2 + 2  # one search for all and no_sink, then standardized's
    assert len(calls) == 2 and shared[N_REMOVED][1, 1] == 2
    monkeypatch.setattr(ms, "MAX_SHARED_REMOVED", 1)  # r = 2 > 1: each set on its own
    calls.clear()
    alone = run(h, mask)
    assert calls == [2, 2, 2]
    for k in ("twonn_id", "twonn_id__no_sink", "twonn_id__standardized"):
        np.testing.assert_array_equal(shared[k], alone[k], err_msg=k)
    # the shortcut itself: dropping a token's nearest neighbours promotes the next ones
    values = torch.tensor([[1.0, 2.0, 3.0, 4.0]]).expand(6, 4)  # 6 tokens, 4 nearest each
    indices = torch.tensor([[5, 1, 2, 3]]).expand(6, 4)
    keep = torch.tensor([True, True, False, True, True, False])
    got = ms.two_nearest_within(values, indices, keep)
    assert got.tolist() == [[2.0, 4.0]] * 6
