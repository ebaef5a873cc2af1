"""The homogenize intervention and its control (homog.extract.edits) on small tensors and the
tiny random LLaMA: the prefix mean is causal, the control moves each token as far as the
homogenization does in an orthogonal direction, alpha = 1 makes every token its prefix mean,
alpha = 0 reproduces the unchanged run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import extract_config, forward_edited

from homog.extract.edits import control_directions, homogenized
from homog.extract.local import run_extract
from homog.extract.plan import EncodedText
from homog.models import load_model


def prefix_means(x: np.ndarray, movable: np.ndarray) -> np.ndarray:
    """m_i = mean of the movable x_j, j <= i, by a loop (the independent reference)."""
    out = np.zeros_like(x)
    for i in range(len(x)):
        rows = [j for j in range(i + 1) if movable[j]]
        out[i] = x[rows].mean(0) if rows else x[i]
    return out


def test_homogenized_against_a_loop():
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(2, 9, 5, generator=gen)
    movable = torch.ones(2, 9, dtype=torch.bool)
    movable[:, 0] = False  # the sink
    movable[1, 7:] = False  # padding
    got = homogenized(h, movable, 0.3, None).double().numpy()
    for b in range(2):
        x, mv = h[b].double().numpy(), movable[b].numpy()
        want = np.where(mv[:, None], x + 0.3 * (prefix_means(x, mv) - x), x)
        np.testing.assert_allclose(got[b], want, rtol=1e-6, atol=1e-6)


def test_prefix_mean_is_causal():
    """Changing a later token changes no earlier output, for the dose and its control."""
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(1, 12, 6, generator=gen)
    dirs = torch.randn(1, 12, 6, generator=gen)
    movable = torch.ones(1, 12, dtype=torch.bool)
    movable[:, 0] = False
    h2 = h.clone()
    h2[0, 8] += 5.0
    for d in (None, dirs):
        a, b = homogenized(h, movable, 0.6, d), homogenized(h2, movable, 0.6, d)
        torch.testing.assert_close(a[0, :8], b[0, :8], rtol=0, atol=0)
        assert not torch.allclose(a[0, 8:], b[0, 8:])


def test_control_moves_as_far_orthogonally():
    gen = torch.Generator().manual_seed(2)
    h = torch.randn(3, 10, 16, generator=gen, dtype=torch.float64)
    dirs = torch.randn(3, 10, 16, generator=gen)
    movable = torch.ones(3, 10, dtype=torch.bool)
    movable[:, 0] = False
    for alpha in (0.1, 0.5, 1.0):
        step_h = homogenized(h, movable, alpha, None) - h
        step_c = homogenized(h, movable, alpha, dirs) - h
        np.testing.assert_allclose(step_c.norm(dim=-1), step_h.norm(dim=-1), rtol=1e-9, atol=1e-12)
        cos = (step_c * step_h).sum(-1) / (step_c.norm(dim=-1) * step_h.norm(dim=-1) + 1e-300)
        assert cos.abs().max() < 1e-9  # orthogonal to (m_i - h_i)
        assert step_c[:, 1].abs().max() == 0  # m_1 = h_1 (the first movable token): no move


def test_control_directions_are_seeded_per_text():
    t = [
        EncodedText(0, "original", "a", np.arange(5), np.zeros(5, bool), False),
        EncodedText(1, "original", "b", np.arange(3), np.zeros(3, bool), False),
    ]
    a = control_directions(t, 6, 4, 0)
    b = control_directions(t[::-1], 5, 4, 0)  # another batch: same vectors per text
    np.testing.assert_array_equal(a[0, :5], b[1, :5])
    np.testing.assert_array_equal(a[1, :3], b[0, :3])
    assert (a[1, 3:] == 0).all()
    assert not np.array_equal(a[0, :5], control_directions(t, 6, 4, 1)[0, :5])


@pytest.fixture(scope="module")
def llama():
    return load_model("random:tiny-llama", device="cpu", attention=True)


def hidden_layers(lm, texts, intervention, cfg) -> list[torch.Tensor]:
    """Every block's output (B, n, d) as the next block reads it, under the edits."""
    return forward_edited(
        lm,
        texts,
        intervention,
        cfg,
        lm.layers,
        lambda out: (out[0] if isinstance(out, tuple) else out).clone(),
    )


def texts_of(*ids: list[int]) -> list[EncodedText]:
    return [
        EncodedText(i, "original", f"t{i}", np.array(x), np.zeros(len(x), bool), False)
        for i, x in enumerate(ids)
    ]


def test_alpha_one_makes_every_token_its_prefix_mean_at_the_layer(llama):
    texts = texts_of(list(range(1000, 1014)))
    cfg = extract_config(homogenize_layer=1)
    plain = hidden_layers(llama, texts, "none", cfg)[0][0].double().numpy()
    moved = hidden_layers(llama, texts, "homogenize:1", cfg)[0][0].double().numpy()
    mv = np.ones(14, bool)
    mv[0] = False  # the sink stays, and is in no mean
    want = np.where(mv[:, None], prefix_means(plain, mv), plain)
    np.testing.assert_allclose(moved, want, rtol=1e-5, atol=1e-5)


def test_the_model_stays_causal_under_homogenize(llama):
    """A later token changed: no earlier hidden state changes at any layer."""
    a, b = list(range(2000, 2012)), list(range(2000, 2012))
    b[9] = 3333
    cfg = extract_config(homogenize_layer=1)
    for iv in ("homogenize:0.5", "homogenize_control:0.5"):
        ha = hidden_layers(llama, texts_of(a), iv, cfg)
        hb = hidden_layers(llama, texts_of(b), iv, cfg)
        for x, y in zip(ha, hb, strict=True):
            torch.testing.assert_close(x[0, :9], y[0, :9], rtol=1e-6, atol=1e-6)


def test_alpha_zero_reproduces_the_unchanged_run(llama, tmp_path):
    texts = pd.DataFrame(
        {
            "variant": "original",
            "sample_id": ["a", "b"],
            "text": [
                "A quiet film about a loud family, and it works well.",
                "The plot is thin but the acting keeps it going to the end.",
            ],
        }
    )
    cfg = extract_config(homogenize_layer=1)
    ivs = ["none", "homogenize:0", "homogenize:0.5"]
    run_extract(
        "tiny", "random:tiny-llama", texts, cfg, ivs, tmp_path, loaded=llama, show_progress=False
    )
    keys = ["variant", "sample_id", "layer", "metric"]
    frames = {
        iv: pd.read_parquet(tmp_path / iv / "layer_metrics.parquet").sort_values(keys) for iv in ivs
    }
    np.testing.assert_allclose(
        frames["homogenize:0"]["value"], frames["none"]["value"], rtol=1e-6, atol=1e-12
    )
    assert not np.allclose(frames["homogenize:0.5"]["value"], frames["none"]["value"])
    pooled = {iv: np.load(tmp_path / iv / "pooled_mean.npy") for iv in ivs}
    np.testing.assert_allclose(pooled["homogenize:0"], pooled["none"], rtol=1e-6, atol=1e-9)
    # layer 0 and the homogenized layer's input are untouched; the layer itself moves
    assert np.allclose(pooled["homogenize:0.5"][:, 0], pooled["none"][:, 0])
