"""homog.metrics against an independent numpy computation, plus its edge cases."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from homog.metrics.spectra import (
    METRIC_NAMES,
    MetricInputError,
    NonFiniteError,
    alpha_fit,
    dataset_spectra,
    layer_metrics,
    pool,
    token_mask,
)


def reference(x: np.ndarray, center: bool = False) -> dict[str, float]:
    """The docs/design.md definitions, written directly with an SVD of X (float64)."""
    norms = np.linalg.norm(x, axis=1)
    r = np.linalg.norm((x / norms[:, None]).mean(0))
    n = len(x)
    cos = x @ x.T / np.outer(norms, norms)
    mean_cos = (cos.sum() - n) / (n * (n - 1)) if n > 1 else math.nan
    xs = x - x.mean(0) if center else x
    s = np.linalg.svd(xs, compute_uv=False)
    s = s[s > s[0] * 1e-7]  # drop rounding-level singular values
    p = s / s.sum()
    return {
        "erank": float(np.exp(-(p * np.log(p)).sum())),
        "mev": float(s[0] ** 2 / (s**2).sum()),
        "schatten_1": float(s.sum() / np.sqrt((s**2).sum())),
        "schatten_4": float((s**4).sum() ** 0.25 / np.sqrt((s**2).sum())),
        "resultant_length": float(r),
        "mean_cosine": float(mean_cos),
        "norm_mean": float(norms.mean()),
    }


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("n,d", [(9, 16), (20, 6)])  # both Gram orientations
def test_matches_reference_on_padded_batch(center, n, d):
    gen = torch.Generator().manual_seed(1)
    b, layers = 4, 3
    hidden = torch.randn(b, layers, n, d, generator=gen, dtype=torch.float64) + 0.2
    lengths = [n, n - 2, 3, 1 + n // 2]
    mask = torch.zeros(b, n, dtype=torch.bool)
    for i, k in enumerate(lengths):
        mask[i, :k] = True
    hidden[~mask[:, None, :].expand(b, layers, n)] = 1e6  # padding garbage must not leak in
    out = layer_metrics(hidden, mask[:, None, :], center=center)
    for i, k in enumerate(lengths):
        for layer in range(layers):
            want = reference(hidden[i, layer, :k].numpy(), center=center)
            for name in METRIC_NAMES:
                got = out[name][i, layer].item()
                assert got == pytest.approx(want[name], rel=1e-8, abs=1e-10), (name, i, layer)


def test_output_dtype_shape_and_device():
    hidden = torch.randn(2, 5, 7, 8, dtype=torch.float32)
    out = layer_metrics(hidden, torch.ones(2, 1, 7, dtype=torch.bool))
    assert set(out) == set(METRIC_NAMES)
    for v in out.values():
        assert v.dtype == torch.float64 and v.shape == (2, 5) and v.device == hidden.device


def test_text_metrics_do_not_depend_on_batch_companions():
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(6, 10, generator=gen)
    alone = layer_metrics(a[None], torch.ones(1, 6, dtype=torch.bool))
    batch = torch.randn(3, 12, 10, generator=gen)
    batch[1, :6] = a
    mask = torch.zeros(3, 12, dtype=torch.bool)
    mask[0], mask[1, :6], mask[2, :9] = True, True, True
    together = layer_metrics(batch, mask)
    for name in METRIC_NAMES:
        assert together[name][1].item() == pytest.approx(alone[name][0].item(), rel=1e-12)


def test_token_mask_excludes_special_tokens():
    attn = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    special = torch.tensor([[1, 0, 0, 0], [1, 0, 0, 1]])
    assert token_mask(attn, special).tolist() == [
        [False, True, True, False],
        [False, True, True, False],
    ]
    assert token_mask(attn, special, exclude_special=False).tolist() == attn.bool().tolist()
    with pytest.raises(MetricInputError, match="special_tokens_mask shape"):
        token_mask(attn, special[:, :3])


def test_empty_text_is_an_error():
    mask = torch.tensor([[True, True], [False, False]])
    with pytest.raises(MetricInputError, match=r"no tokens.*\(1,\)"):
        layer_metrics(torch.randn(2, 2, 4), mask)


def test_single_token_mean_cosine_is_nan_rest_defined():
    out = layer_metrics(torch.randn(1, 3, 4), torch.tensor([[True, False, False]]))
    assert math.isnan(out["mean_cosine"].item())
    assert out["erank"].item() == pytest.approx(1.0)
    assert out["mev"].item() == pytest.approx(1.0)
    assert out["resultant_length"].item() == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_reported_with_positions(bad):
    hidden = torch.randn(2, 3, 5, 4)
    hidden[1, 2, 0, 1] = bad
    with pytest.raises(NonFiniteError) as info:
        layer_metrics(hidden, torch.ones(2, 1, 5, dtype=torch.bool))
    assert info.value.indices == [(1, 2)]
    assert "float32" in str(info.value)


def test_non_finite_in_padding_is_ignored():
    hidden = torch.randn(1, 5, 4)
    hidden[0, 4] = math.nan
    out = layer_metrics(hidden, torch.tensor([[True, True, True, True, False]]))
    assert all(math.isfinite(v.item()) for v in out.values())


def test_mismatched_mask_is_an_error():
    with pytest.raises(MetricInputError, match="does not match hidden states"):
        layer_metrics(torch.randn(2, 5, 4), torch.ones(2, 6, dtype=torch.bool))


def test_zero_token_gives_nan_direction_metrics():
    hidden = torch.randn(1, 4, 3)
    hidden[0, 2] = 0
    out = layer_metrics(hidden, torch.ones(1, 4, dtype=torch.bool))
    assert math.isnan(out["resultant_length"].item())
    assert math.isnan(out["mean_cosine"].item())
    assert math.isfinite(out["erank"].item())


def test_pool_mean_and_last():
    hidden = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 3, 2)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert pool(hidden, mask, "mean").tolist() == [[1.0, 2.0], [8.0, 9.0]]
    assert pool(hidden, mask, "last").tolist() == [[2.0, 3.0], [10.0, 11.0]]
    with pytest.raises(MetricInputError, match="unknown pooling"):
        pool(hidden, mask, "max")


def test_alpha_fit_recovers_a_power_law():
    i = torch.arange(1, 201, dtype=torch.float64)
    eig = torch.stack([i**-1.0, 3 * i**-2.5])
    alpha, r2 = alpha_fit(eig)
    assert alpha.tolist() == pytest.approx([1.0, 2.5], rel=1e-9)
    assert r2.tolist() == pytest.approx([1.0, 1.0], rel=1e-9)


def test_dataset_spectra_against_numpy():
    gen = torch.Generator().manual_seed(3)
    # layer 0: spread out, layer 1: nearly one direction
    spread = torch.randn(40, 16, generator=gen, dtype=torch.float64)
    one = torch.randn(40, 1, generator=gen, dtype=torch.float64) * torch.ones(1, 16) + 0.01 * spread
    out = dataset_spectra(torch.stack([spread, one]))
    for layer, x in enumerate([spread, one]):
        s = np.linalg.svd(x.numpy(), compute_uv=False)
        p = s / s.sum()
        assert out["rankme"][layer].item() == pytest.approx(np.exp(-(p * np.log(p)).sum()))
        lam = np.linalg.eigvalsh(np.cov(x.numpy().T))[::-1]
        r = int((lam > lam[0] * 1e-12).sum())
        k = np.arange(1, int(np.ceil(0.9 * r)) + 1)
        w = 1 / k
        slope = np.polyfit(np.log(k), np.log(lam[: len(k)]), 1, w=np.sqrt(w))[0]
        assert out["alpha_req"][layer].item() == pytest.approx(-slope, rel=1e-6)
    assert out["rankme"][0] > out["rankme"][1]


def test_dataset_spectra_needs_two_texts():
    with pytest.raises(MetricInputError, match="at least 2 texts"):
        dataset_spectra(torch.randn(3, 1, 8))


@pytest.mark.parametrize("threads", [1, 2])
def test_cpu_eigensolvers_agree(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """NumPy's eigensolver (the CPU default) and torch's give the same eigenvalues, batched
    and split over threads, on Gram matrices with a massive direction."""
    import homog.metrics.eigensolver as es

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 40, 48, generator=gen, dtype=torch.float64)
    x[..., 0] *= 1e4  # a massive feature: eigenvalues spread over 8 orders of magnitude
    gram = x @ x.mT
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
        ref = es.eigvalsh(gram)
        monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "numpy")
        got = es.eigvalsh(gram)
        monkeypatch.delenv("HOMOG_CPU_EIGENSOLVER")
        default = es.eigvalsh(gram)
    finally:
        torch.set_num_threads(saved)
    assert got.shape == ref.shape == (2, 5, 40) and got.dtype == torch.float64
    top = ref[..., -1:]
    assert torch.allclose(got, ref, rtol=0, atol=float(top.max()) * 1e-13)
    assert torch.equal(default, got)
    # and both against an independent SVD: sigma^2
    sv = torch.linalg.svdvals(x).flip(-1) ** 2
    assert torch.allclose(got, sv, rtol=0, atol=float(top.max()) * 1e-12)


def test_cpu_eigensolver_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    import homog.metrics.eigensolver as es

    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "mkl")
    with pytest.raises(MetricInputError, match="HOMOG_CPU_EIGENSOLVER='mkl'.*numpy.*torch"):
        es.eigvalsh(torch.eye(3, dtype=torch.float64))


def test_metrics_of_a_tensor_that_requires_grad() -> None:
    """A caller's tensor in an autograd graph goes through torch's solver (NumPy cannot take
    it) and gives the same metrics."""
    gen = torch.Generator().manual_seed(5)
    h = torch.randn(1, 6, 20, 24, generator=gen, dtype=torch.float64)
    mask = torch.ones(1, 20, dtype=torch.bool)
    plain = layer_metrics(h, mask)
    tracked = layer_metrics(h.clone().requires_grad_(True), mask)
    for name in plain:
        assert torch.allclose(plain[name], tracked[name].detach(), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_minor_spectrum_from_one_reduction(threads: int) -> None:
    """eigenvalues_with_minor: the spectrum of a Gram matrix and of its minor without one row
    and column (the no_sink set's Gram matrix when it drops one token) from one tridiagonal
    reduction, against two separate solves. The removed token is 3,000x the others, so an
    error on its scale would swamp the minor's eigenvalues; padding rows and duplicate tokens
    give exact zeros that must stay zeros."""
    import homog.metrics.spectra as hm

    gen = torch.Generator().manual_seed(11)
    n, d = 24, 30
    x = torch.randn(6, n, d, generator=gen, dtype=torch.float64) + 0.5
    rows = torch.tensor([0, 5, n - 1, -1, 3, 0])
    for i, r in enumerate(rows.tolist()):
        if r >= 0:
            x[i, r] *= 3000
    x[4, 10:14] = x[4, 14:18]  # duplicates: rank-deficient minor
    x[5, 20:] = 0  # padding
    gram = x @ x.mT
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        eig, minor = hm.eigenvalues_with_minor(gram, rows, max(n, d))
    finally:
        torch.set_num_threads(saved)
    assert eig.shape == minor.shape == (6, n)
    separate = hm.gram_eigenvalues(gram, max(n, d))
    assert torch.allclose(eig, separate, rtol=0, atol=float(separate.max()) * 1e-13)
    for i, r in enumerate(rows.tolist()):
        if r < 0:
            assert torch.equal(minor[i], torch.zeros(n, dtype=torch.float64))
            continue
        keep = [j for j in range(n) if j != r]
        want = torch.linalg.svdvals(x[i, keep]).square()  # independent: sigma^2
        top = float(want[0])
        got = minor[i]
        assert got[-1] == 0  # the removed row's place
        torch.testing.assert_close(got[: len(want)], want, rtol=0, atol=top * 1e-12)
        assert float(eig[i, 0]) > 1e5 * top  # the removed token dominated the whole matrix
    assert int((minor[4] == 0).sum()) == 1 + 4  # the removed row and the 4 duplicates
    assert int((minor[5] == 0).sum()) == 1 + (n - 20)


def test_minor_spectrum_edge_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    import homog.metrics.eigensolver as es
    import homog.metrics.spectra as hm

    one = torch.tensor([[[4.0]]], dtype=torch.float64)
    eig, minor = hm.eigenvalues_with_minor(one, torch.tensor([0]), 1)
    assert eig.tolist() == [[4.0]] and minor.tolist() == [[0.0]]
    two = torch.tensor([[[2.0, 1.0], [1.0, 3.0]]], dtype=torch.float64)
    eig, minor = hm.eigenvalues_with_minor(two, torch.tensor([1]), 2)
    assert minor.tolist() == [[2.0, 0.0]]
    torch.testing.assert_close(eig[0].sum(), torch.tensor(5.0, dtype=torch.float64))
    bad = two.clone()
    bad[0, 0, 1] = bad[0, 1, 0] = math.nan
    raw = es._spectra_with_minor_numpy(bad, torch.tensor([0]))
    assert raw[0, 0].isnan().all()  # NaN in, NaN out (as eigvalsh), never a silent number
    assert raw[0, 1].tolist() == [0.0, 3.0]  # the minor without row 0 holds no NaN
    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
    assert not es.minor_spectra_supported(two)
    with pytest.raises(ValueError, match="NumPy's eigensolver"):
        hm.eigenvalues_with_minor(two, torch.tensor([0]), 2)


_PIN_PROBE = """
import json, threadpoolctl
from homog.metrics import eigensolver
controller = eigensolver._blas()  # built before anything imported SciPy, as in `homog extract`
from scipy.linalg import lapack
with controller.limit(limits=1, user_api="blas"):
    print(json.dumps([(i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()
                      if i["user_api"] == "blas"]))
"""


def test_blas_pin_covers_scipys_lapack() -> None:
    """Inside the eigensolver's one-thread limit, every BLAS that NumPy and SciPy's LAPACK
    load runs on one thread, whatever was imported first. SciPy ships an OpenBLAS of its own
    (the shared all/no_sink reduction calls its dsytrd); a controller built before it was
    loaded left it on 3 threads here, in each pool worker."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "3"}
    out = subprocess.run(
        [sys.executable, "-c", _PIN_PROBE], env=env, capture_output=True, text=True, check=True
    )
    libs = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(libs) >= 2  # NumPy's and SciPy's
    assert all(threads == 1 for _, threads in libs), libs


def test_gpu_eigensolver_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """HOMOG_GPU_EIGENSOLVER names where a GPU's spectra are solved; it is checked, and a
    CPU tensor is never sent anywhere (the setting concerns GPU tensors only)."""
    import homog.metrics.eigensolver as es

    assert es.gpu_eigensolver() == "batched"  # the default (docs/gpu.md measured why)
    monkeypatch.setenv("HOMOG_GPU_EIGENSOLVER", " Host ")
    assert es.gpu_eigensolver() == "host"
    monkeypatch.setenv("HOMOG_GPU_EIGENSOLVER", "host-serial")
    assert es.gpu_eigensolver() == "host-serial"
    gram = torch.eye(3, dtype=torch.float64)
    assert not es._on_host(gram) and es.minor_spectra_supported(gram)
    monkeypatch.setenv("HOMOG_GPU_EIGENSOLVER", "cpu")
    want = "HOMOG_GPU_EIGENSOLVER='cpu'.*batched.*device.*host.*host-serial"
    with pytest.raises(MetricInputError, match=want):
        es.gpu_eigensolver()
