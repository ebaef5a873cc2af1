"""homog.metrics.attention against a direct per-text, per-head loop in numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from homog.metrics.attention import N_BINS, attention_stats


def causal_softmax(logits: np.ndarray, length: int, n: int) -> np.ndarray:
    """(H, n, n) row-stochastic causal weights over the first `length` tokens, NaN padding."""
    out = np.full((logits.shape[0], n, n), np.nan)
    for i in range(length):
        row = logits[:, i, : i + 1]
        e = np.exp(row - row.max(-1, keepdims=True))
        out[:, i, :] = 0.0
        out[:, i, : i + 1] = e / e.sum(-1, keepdims=True)
    return out


def reference(a: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """docs/design.md definitions for one text: a is (H, n, n), padding beyond `length`."""
    a = a[:, :length, :length]
    c = a.sum(1) / length
    ent = np.zeros(a.shape[0])
    for i in range(length):
        p = a[:, i, :]
        ent += -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1)
    profile = np.zeros((a.shape[0], N_BINS))
    for j in range(length):
        profile[:, min(N_BINS - 1, (N_BINS * j) // length)] += c[:, j]
    return {
        "attn_first": c[:, 0],
        "attn_last": c[:, length - 1],
        "attn_entropy": ent / length,
        "profile": profile,
    }


def test_matches_reference_with_padding():
    rng = np.random.default_rng(0)
    n, h = 37, 3
    lengths = [37, 5, 1, 23]
    weights = np.stack([causal_softmax(rng.normal(size=(h, n, n)) * 2, ln, n) for ln in lengths])
    out = attention_stats(torch.tensor(weights, dtype=torch.float32), torch.tensor(lengths))
    for b, ln in enumerate(lengths):
        ref = reference(weights[b], ln)
        for key, value in ref.items():
            np.testing.assert_allclose(out[key][b].numpy(), value, rtol=1e-5, atol=1e-6)
        # column mass is a distribution over positions
        np.testing.assert_allclose(out["profile"][b].sum(-1).numpy(), 1.0, rtol=1e-5)
    assert torch.isfinite(out["attn_entropy"]).all()  # NaN padding rows did not leak


def test_uniform_and_sink_cases():
    n = 8
    # every row attends only to token 0 (an attention sink): all mass at the first token
    sink = torch.zeros(1, 2, n, n)
    sink[..., 0] = 1.0
    out = attention_stats(sink, torch.tensor([n]))
    assert torch.allclose(out["attn_first"], torch.ones(1, 2))
    assert torch.allclose(out["attn_entropy"], torch.zeros(1, 2))
    assert torch.allclose(out["profile"][..., 0], torch.ones(1, 2))
    # uniform causal rows: entropy mean_i ln(i + 1)
    uni = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    out = attention_stats(uni.expand(1, 1, n, n), torch.tensor([n]))
    expected = float(np.mean(np.log(np.arange(1, n + 1))))
    assert out["attn_entropy"].item() == pytest.approx(expected, rel=1e-6)
    # the last token is attended only by itself, with weight 1/n
    assert out["attn_last"].item() == pytest.approx(1 / n / n, rel=1e-6)


def test_bad_shapes():
    with pytest.raises(ValueError, match="B, H, n, n"):
        attention_stats(torch.zeros(2, 3, 4), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="lengths must lie"):
        attention_stats(torch.zeros(1, 1, 4, 4), torch.tensor([0]))


def test_sink_rate_and_attn_massive_against_numpy():
    """sink_rate: share of heads whose first token gets > eps of the attention on average
    over the queries; attn_massive: mean over the queries i >= j of A_ij at a given j."""
    rng = np.random.default_rng(5)
    lengths, n, h = [9, 6, 3], 9, 5
    logits = rng.normal(size=(3, h, n, n)) * 2
    logits[:, :2, :, 0] += 4  # two heads sink into token 0
    w = np.stack([causal_softmax(logits[b], k, n) for b, k in enumerate(lengths)])
    positions = np.array([4, 0, 2])
    for eps in (0.1, 0.3, 0.6):
        out = attention_stats(
            torch.from_numpy(w),
            torch.tensor(lengths),
            sink_epsilon=eps,
            positions=torch.from_numpy(positions),
        )
        for b, k in enumerate(lengths):
            a = w[b, :, :k, :k]
            want_sink = (a[:, :, 0].mean(1) > eps).mean()
            assert out["sink_rate"][b].item() == pytest.approx(want_sink, abs=1e-12)
            j = positions[b]
            want = a[:, j:, j].mean(1).mean()
            assert out["attn_massive"][b].item() == pytest.approx(want, rel=1e-5)
    assert out["sink_rate"][0].item() >= 0.4 - 1e-9  # the two sink heads at least
