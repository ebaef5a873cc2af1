"""Per-head ablation and logit decomposition (trained-encoder and pretrained-LM paths)."""

from __future__ import annotations

import pytest
import torch
from test_posenc_model import one_thread  # noqa: F401  (autouse: one torch thread)

from homog.config.posenc import ENCODINGS
from homog.posenc.ablate import ablated, head_ablation
from homog.posenc.decompose import (
    ADDITIVE_TERMS,
    ROTARY_TERMS,
    causal_pairs,
    centered_energy,
    encoder_decomposition,
    encoder_terms,
    pretrained_decomposition,
    qk_pre_rotation,
    rotary_fn,
    shares,
)
from homog.posenc.model import ADDITIVE, Encoder, EncoderConfig
from homog.posenc.tasks import TaskData
from homog.posenc.train import accuracy


def tiny(pe: str) -> Encoder:
    torch.manual_seed(0)
    cfg = EncoderConfig(
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
    model = Encoder(cfg).eval()
    # larger position tables / biases than the init, so every term is clearly non-zero
    for name, p in model.named_parameters():
        if name.startswith("wpe") or "rel_bias" in name or name.endswith("ln_1.bias"):
            p.data.normal_(0, 0.5)
    return model


def _ids(B: int = 3, T: int = 10, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(1, 11, (B, T), generator=g)
    idx[0, 7:] = 0
    return idx


@pytest.mark.parametrize("pe", ["rope", "mla", "learned"])
def test_ablation_zeroes_exactly_one_head(pe):
    model = tiny(pe)
    attn = model.blocks[1].attn
    x = torch.randn(2, 9, 32)
    mask = torch.ones(2, 9, dtype=torch.bool)
    with torch.no_grad():
        intact_heads, intact_out = attn.heads(x, mask), attn(x, mask)
        with ablated(model, layer=2, head=1):
            heads, out = attn.heads(x, mask), attn(x, mask)
            assert model.blocks[0].attn.head_mask.tolist() == [1, 1, 1, 1]
    assert heads[:, 1].abs().max() == 0
    torch.testing.assert_close(heads[:, [0, 2, 3]], intact_heads[:, [0, 2, 3]], rtol=0, atol=0)
    # the block output loses exactly head 1's share of the output projection
    hs = attn.head_size
    contribution = intact_heads[:, 1].transpose(0, 1) @ attn.c_proj.weight[:, hs : 2 * hs].T
    torch.testing.assert_close(out, intact_out - contribution.transpose(0, 1), atol=1e-6, rtol=1e-5)
    assert attn.head_mask.tolist() == [1, 1, 1, 1]  # restored


def test_head_ablation_rows_match_manual_masks():
    model = tiny("rope")
    data = TaskData(_ids(40, 10, seed=1), torch.randint(0, 5, (40,)), 5)
    dev = torch.device("cpu")
    rows = head_ablation(model, data, 16, dev)
    assert [(r["layer"], r["head"]) for r in rows] == [(lyr, h) for lyr in (1, 2) for h in range(4)]
    base = accuracy(model, data, 16, dev)
    for r in rows[::3]:
        model.blocks[r["layer"] - 1].attn.head_mask[r["head"]] = 0
        assert r["accuracy"] == accuracy(model, data, 16, dev)
        assert r["drop"] == pytest.approx(base - r["accuracy"])
        model.blocks[r["layer"] - 1].attn.head_mask[r["head"]] = 1


def _layer_logits(model: Encoder, idx: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's real logits, from a hook on its LayerNorm output."""
    seen = []
    for block in model.blocks:
        block.ln_1.register_forward_hook(lambda m, a, out: seen.append(out))
    with torch.no_grad():
        model(idx)
    return [b.attn.scores(*b.attn.qkv(x)[:2]) for b, x in zip(model.blocks, seen, strict=True)]


@pytest.mark.parametrize("pe", ENCODINGS)
def test_decomposition_terms_add_up_to_the_logits(pe):
    model, idx = tiny(pe), _ids()
    terms = encoder_terms(model, idx)
    for layer_terms, logits in zip(terms, _layer_logits(model, idx), strict=True):
        if pe in ADDITIVE:
            assert tuple(layer_terms) == ADDITIVE_TERMS
            total = sum(layer_terms.values())
        else:
            assert tuple(layer_terms) == ROTARY_TERMS
            total = sum(layer_terms.values()) * model.blocks[0].attn.scale
        torch.testing.assert_close(total, logits, atol=1e-5, rtol=1e-5)
    position_terms = [layer_terms.get(k) for k in ("cp", "pc", "pp") for layer_terms in terms]
    if pe in ("sinusoidal", "learned"):
        assert all(t.abs().max() > 1e-3 for t in position_terms)
    elif pe in ADDITIVE:  # no absolute position vector: no position terms
        assert all(t.abs().max() == 0 for t in position_terms)
    if pe in ADDITIVE:  # the relative bias term is t5's and alibi's alone
        assert all((t["bias"].abs().max() > 0) == (pe in ("t5", "alibi")) for t in terms)


def test_decomposition_shares():
    rows = encoder_decomposition(tiny("partial_rope"), _ids())
    by_head: dict[tuple, float] = {}
    for r in rows:
        by_head[(r["layer"], r["head"])] = by_head.get((r["layer"], r["head"]), 0) + r["share"]
    assert len(by_head) == 8 and all(s == pytest.approx(1.0) for s in by_head.values())
    rot = {(r["layer"], r["head"]): r["share"] for r in rows if r["term"] == "rotation"}
    assert all(rot[(lyr, h)] < 1e-9 for lyr in (1, 2) for h in (2, 3))  # heads 2, 3 unrotated
    assert all(rot[(lyr, h)] > 0.01 for lyr in (1, 2) for h in (0, 1))


def test_centered_energy_against_loops():
    g = torch.Generator().manual_seed(3)
    term = torch.randn(2, 3, 4, 4, generator=g)
    valid = torch.rand(2, 4, 4, generator=g) > 0.3
    got = centered_energy(term, valid)
    for h in range(3):
        want = 0.0
        for b in range(2):
            for i in range(4):
                vals = [term[b, h, i, j].item() for j in range(4) if valid[b, i, j]]
                if vals:
                    mean = sum(vals) / len(vals)
                    want += sum((v - mean) ** 2 for v in vals)
        assert got[h].item() == pytest.approx(want, rel=1e-5)
    # a constant added to a row does not change the energy (softmax ignores it)
    torch.testing.assert_close(centered_energy(term + torch.randn(2, 3, 4, 1), valid), got)
    s = shares({"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([3.0, 0.0])})
    assert s["a"].tolist() == [0.25, 0.0] and s["b"].tolist() == [0.75, 0.0]


def _tiny_lm(kind: str):
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        LlamaConfig,
        LlamaForCausalLM,
    )

    torch.manual_seed(0)
    common = dict(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="eager",
    )
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, max_position_embeddings=64))
    else:
        model = Gemma3ForCausalLM(Gemma3TextConfig(**common, head_dim=8, sliding_window=5))
    return model.eval()


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_pretrained_q_k_reproduce_the_models_attention(kind):
    model = _tiny_lm(kind)
    captured = {}

    def grab(module, args, kwargs):
        captured["hidden"] = kwargs["hidden_states"]
        captured["cos_sin"] = kwargs["position_embeddings"]

    attn = model.model.layers[1].self_attn
    attn.register_forward_pre_hook(grab, with_kwargs=True)
    ids = torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        probs = model(input_ids=ids, output_attentions=True).attentions[1]
        q, k = qk_pre_rotation(attn, captured["hidden"])
        rq, rk = rotary_fn(attn)(q, k, *captured["cos_sin"])
    logits = (rq @ rk.transpose(-2, -1)) * attn.scaling
    visible = causal_pairs(12, getattr(attn, "sliding_window", None))
    ours = logits.masked_fill(~visible[:, None], float("-inf")).softmax(-1)
    torch.testing.assert_close(ours, probs, atol=1e-5, rtol=1e-4)


def test_pretrained_decomposition_rows():
    model = _tiny_lm("llama")
    g = torch.Generator().manual_seed(1)
    texts = [torch.randint(0, 64, (n,), generator=g) for n in (9, 14)]
    rows = pretrained_decomposition(model, [b.self_attn for b in model.model.layers], texts)
    assert len(rows) == 2 * 4 * 2
    assert {r["term"] for r in rows} == set(ROTARY_TERMS)
    for layer in (1, 2):
        for head in range(4):
            got = [r["share"] for r in rows if (r["layer"], r["head"]) == (layer, head)]
            assert sum(got) == pytest.approx(1.0) and all(0 < s < 1 for s in got)
