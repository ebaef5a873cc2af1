"""The positional-encoding lab's encoder: shapes, padding, and each encoding's defining property."""

from __future__ import annotations

import math

import pytest
import torch

from homog.config.posenc import ENCODINGS
from homog.posenc.model import (
    Encoder,
    EncoderConfig,
    alibi_slopes,
    rope_cos_sin,
    sinusoidal_table,
    t5_bucket,
)

ROTARY = ("rope", "partial_rope", "mla")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run faster on one thread, and the suite shares two cores.

    Autouse here; test_posenc_ablate and test_posenc_cli import it to use it too.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(pe: str, **kw) -> Encoder:
    torch.manual_seed(0)
    cfg = dict(
        vocab_size=11,
        n_classes=5,
        block_size=16,
        n_layer=2,
        n_head=4,
        n_embd=32,
        d_ff=48,
        pe=pe,
        rope_heads=2,
        mla_latent=12,
        mla_rope_dim=4,
    )
    return Encoder(EncoderConfig(**{**cfg, **kw})).eval()


@pytest.mark.parametrize("pe", ENCODINGS)
def test_forward_shape_and_padding_does_not_change_the_output(pe):
    model = tiny(pe)
    g = torch.Generator().manual_seed(1)
    lengths = [5, 9, 12]
    idx = torch.zeros(3, 12, dtype=torch.long)
    for i, n in enumerate(lengths):
        idx[i, :n] = torch.randint(1, 11, (n,), generator=g)
    with torch.no_grad():
        out = model(idx)
        assert out.shape == (3, 5) and torch.isfinite(out).all()
        # each sequence alone, unpadded, and with extra padding columns
        for i, n in enumerate(lengths):
            alone = model(idx[i : i + 1, :n])
            longer = model(torch.cat([idx[i : i + 1], torch.zeros(1, 4, dtype=torch.long)], 1))
            torch.testing.assert_close(alone[0], out[i], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(longer[0], out[i], atol=1e-5, rtol=1e-5)
        # whatever the masked positions hold, they are ignored
        key_mask = idx != 0
        noisy = torch.where(key_mask, idx, torch.randint(1, 11, idx.shape, generator=g))
        torch.testing.assert_close(model(noisy, key_mask), out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pe", ENCODINGS)
def test_only_nope_is_blind_to_order(pe):
    model = tiny(pe)
    for p in model.parameters():  # larger weights than the init: order effects well above 1e-6
        p.data.normal_(0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    idx = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    shuffled = idx[:, [3, 0, 6, 1, 7, 2, 5, 4]]
    with torch.no_grad():
        same = torch.allclose(model(idx), model(shuffled), atol=1e-6)
        mirrored = torch.allclose(model(idx), model(idx.flip(1)), atol=1e-6)
    assert same == (pe == "nope")
    # bidirectional ALiBi penalises |i - j| only, so it cannot tell a sequence from its mirror
    assert mirrored == (pe in ("nope", "alibi"))


def _layer_scores(model: Encoder, x: torch.Tensor, rotate: bool = True) -> torch.Tensor:
    attn = model.blocks[0].attn
    q, k, _ = attn.qkv(x)
    return attn.scores(q, k, rotate=rotate)[0]


@pytest.mark.parametrize("pe", ROTARY)
def test_rope_logits_depend_only_on_the_offset(pe):
    model = tiny(pe)
    T, s = 12, 3
    x = torch.randn(1, T, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        # fixed content at every position: logits are Toeplitz (constant along diagonals)
        const = _layer_scores(model, x[:, :1].expand(1, T, 32))
        for d in range(-T + 1, T):
            diag = const.diagonal(offset=d, dim1=-2, dim2=-1)
            torch.testing.assert_close(diag, diag[:, :1].expand_as(diag), atol=1e-5, rtol=1e-5)
        # shifting the whole sequence by s shifts the logits along the diagonal
        base = _layer_scores(model, x)
        shifted = _layer_scores(model, torch.cat([torch.randn(1, s, 32), x[:, : T - s]], 1))
        torch.testing.assert_close(
            shifted[:, s:, s:], base[:, : T - s, : T - s], atol=1e-5, rtol=1e-5
        )
        # without the rotation the logits are pure content (and differ from the rotated ones)
        plain = _layer_scores(model, x[:, :1].expand(1, T, 32), rotate=False)
        assert torch.allclose(plain, plain[:, :1, :1].expand_as(plain), atol=1e-6)
        assert not torch.allclose(const, plain, atol=1e-4)


def test_absolute_encoding_is_not_shift_invariant():
    model = tiny("learned")
    model.wpe.weight.data.normal_(0, 1.0)
    x = torch.randn(1, 8, 32)
    with torch.no_grad():
        pos = model.position_embedding(8)
        a = _layer_scores(model, model.blocks[0].ln_1(x + pos))
        b = _layer_scores(model, model.blocks[0].ln_1(torch.cat([x[:, :1], x[:, :-1]], 1) + pos))
    assert not torch.allclose(b[:, 1:, 1:], a[:, :-1, :-1], atol=1e-3)


def test_partial_rope_rotates_only_the_first_heads():
    model = tiny("partial_rope", rope_heads=1)
    x = torch.randn(1, 10, 32)
    with torch.no_grad():
        rotated, plain = _layer_scores(model, x), _layer_scores(model, x, rotate=False)
    assert not torch.allclose(rotated[0], plain[0])
    torch.testing.assert_close(rotated[1:], plain[1:])


def test_mla_shares_one_rotary_key_across_heads():
    model = tiny("mla")
    attn = model.blocks[0].attn
    q, k, v = attn.qkv(torch.randn(2, 7, 32))
    assert q.shape == (2, 4, 7, 8 + 4) and k.shape == q.shape and v.shape == (2, 4, 7, 8)
    torch.testing.assert_close(k[:, :, :, 8:], k[:, :1, :, 8:].expand(2, 4, 7, 4))
    assert not torch.allclose(k[:, 0, :, :8], k[:, 1, :, :8])  # content keys are per head
    assert attn.scale == pytest.approx(1 / math.sqrt(12))


def test_t5_and_alibi_biases():
    offset = torch.arange(-40, 41)
    b = t5_bucket(offset, 32, 128)
    assert b.min() >= 0 and b.max() < 32
    assert torch.equal(b[41:48], 16 + torch.arange(1, 8))  # exact for small j - i > 0
    assert torch.equal(b[33:41], torch.arange(7, -1, -1))  # and for small i - j >= 0
    assert len(set(b[:40].tolist()) & set(b[41:].tolist())) == 0  # the two directions differ
    assert (b[41:].diff() >= 0).all()  # monotone with distance
    model = tiny("alibi")
    bias = model.blocks[0].attn.position_bias(5)
    slopes = alibi_slopes(4)
    torch.testing.assert_close(bias[2, 1, 4], -slopes[2] * 3)
    torch.testing.assert_close(bias, bias.transpose(1, 2))


def test_sinusoidal_and_rope_tables():
    table = sinusoidal_table(10, 8)
    assert table[3, 2].item() == pytest.approx(math.sin(3 / 10000 ** (2 / 8)))
    assert table[3, 3].item() == pytest.approx(math.cos(3 / 10000 ** (2 / 8)))
    cos, sin = rope_cos_sin(6, 4, 10000.0)
    assert cos.shape == (6, 4) and cos[5, 1].item() == pytest.approx(math.cos(5 / 100))
