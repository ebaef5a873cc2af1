"""A small Transformer encoder classifier with seven positional encodings, nanoGPT style.

Each encoding is a small, visible piece:
- nope:         nothing; attention is permutation-equivariant, mean pooling sees a bag
- sinusoidal:   a fixed sin/cos table added to the token embeddings (Vaswani et al.)
- learned:      a learned position table added to the token embeddings
- t5:           a learned per-head bias on the logits, indexed by bucketed offset j - i
- alibi:        a fixed per-head linear penalty -m_h |i - j| on the logits (bidirectional)
- rope:         q and k of every head rotated by position (Su et al.)
- partial_rope: the same rotation on the first ``rope_heads`` heads only
- mla:          DeepSeek-V2/V3 style latent attention: keys and values come from a shared
                low-rank latent (content, not rotated) and every head's query has an extra
                ``mla_rope_dim`` slice that meets one rotary key shared across heads

Attention logits are computed explicitly (no fused kernel) because the lab looks at them:
``Attention.scores`` gives a layer's logits, ``Attention.heads`` each head's output before the
output projection, and ``Attention.head_mask`` zeroes chosen heads' outputs (ablation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

from homog.config.posenc import ENCODINGS

ADDITIVE = ("nope", "sinusoidal", "learned", "t5", "alibi")  # logits split by decompose
ROTARY = ("rope", "partial_rope", "mla")


@dataclass
class EncoderConfig:
    vocab_size: int = 128
    n_classes: int = 70
    block_size: int = 128  # longest (padded) sequence
    n_layer: int = 6
    n_head: int = 16
    n_embd: int = 256
    d_ff: int = 512
    dropout: float = 0.0
    pe: str = "rope"
    rope_base: float = 10000.0
    rope_heads: int = 1  # partial_rope: heads 0..rope_heads-1 are rotated
    mla_latent: int = 64  # mla: width of the shared key/value latent
    mla_rope_dim: int = 8  # mla: rotary query slice per head = width of the shared rotary key
    t5_buckets: int = 32
    t5_max_distance: int = 128

    def __post_init__(self):
        assert self.pe in ENCODINGS, f"unknown positional encoding {self.pe!r}"
        assert self.n_embd % self.n_head == 0, (
            f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}"
        )
        assert (self.n_embd // self.n_head) % 2 == 0, "rotary needs an even head size"
        assert self.mla_rope_dim % 2 == 0, f"mla_rope_dim {self.mla_rope_dim} must be even"


# ----------------------------------------------------------------------------------------------
# the encodings' building blocks


def sinusoidal_table(n_pos: int, dim: int) -> torch.Tensor:
    """[n_pos, dim]: sin on even, cos on odd channels, wavelengths 2*pi .. 10000*2*pi."""
    pos = torch.arange(n_pos, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_pos, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


def rope_cos_sin(n_pos: int, dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [n_pos, dim] for the rotate-half RoPE convention (as in LLaMA)."""
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angle = torch.arange(n_pos, dtype=torch.float32)[:, None] * inv_freq[None, :]
    angle = torch.cat([angle, angle], dim=-1)
    return angle.cos(), angle.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs (i, i + dim/2) of x [..., T, dim] by position-dependent angles."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def t5_bucket(offset: torch.Tensor, n_buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bidirectional buckets: half per direction, exact near 0, log-spaced further out."""
    half = n_buckets // 2
    bucket = (offset > 0).long() * half
    dist = offset.abs()
    exact = half // 2
    log_ratio = torch.log(dist.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    log_bucket = exact + (log_ratio * (half - exact)).long()
    return bucket + torch.where(dist < exact, dist, log_bucket.clamp(max=half - 1))


def alibi_slopes(n_head: int) -> torch.Tensor:
    """The geometric ALiBi slopes 2^(-8 h / n_head), h = 1..n_head."""
    return torch.tensor([2 ** (-8.0 * h / n_head) for h in range(1, n_head + 1)])


# ----------------------------------------------------------------------------------------------
# attention


class Attention(nn.Module):
    """Multi-head self-attention with the relative encodings (t5, alibi, rope, partial_rope)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.n_head, self.head_size = config.n_head, config.n_embd // config.n_head
        self.pe = config.pe
        self.build(config)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        cos, sin = rope_cos_sin(config.block_size, self.rotary_dim, config.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        if config.pe == "t5":
            self.rel_bias = nn.Embedding(config.t5_buckets, config.n_head)
            pos = torch.arange(config.block_size)
            offset = pos[None, :] - pos[:, None]  # j - i
            self.register_buffer(
                "buckets", t5_bucket(offset, config.t5_buckets, config.t5_max_distance), False
            )
        if config.pe == "alibi":
            self.register_buffer("slopes", alibi_slopes(config.n_head), persistent=False)
        # 1 keeps a head, 0 zeroes its output (per-head ablation); not part of the checkpoint
        self.register_buffer("head_mask", torch.ones(config.n_head), persistent=False)

    def build(self, config: EncoderConfig) -> None:
        """The q/k/v projection, and which heads and channels of q and k the rotation touches."""
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        rotary = {"rope": config.n_head, "partial_rope": config.rope_heads}
        self.rotary_heads = rotary.get(config.pe, 0)
        self.rotary_dim = self.head_size
        self.scale = 1.0 / math.sqrt(self.head_size)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v [B, H, T, head channels] before any rotation."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        return tuple(t.view(B, T, self.n_head, -1).transpose(1, 2) for t in (q, k, v))

    def rotate(self, t: torch.Tensor) -> torch.Tensor:
        """Apply RoPE to the rotary heads' last ``rotary_dim`` channels of q or k [B,H,T,c]."""
        if self.rotary_heads == 0:
            return t
        T, h, d = t.size(2), self.rotary_heads, t.size(-1) - self.rotary_dim
        rot = apply_rope(t[:, :h, :, d:], self.rope_cos[:T], self.rope_sin[:T])
        return torch.cat([torch.cat([t[:, :h, :, :d], rot], dim=-1), t[:, h:]], dim=1)

    def position_bias(self, T: int) -> torch.Tensor | float:
        """The additive logit bias [H, T, T] of t5 and alibi (0 for the other encodings)."""
        if self.pe == "t5":
            return self.rel_bias(self.buckets[:T, :T]).permute(2, 0, 1)
        if self.pe == "alibi":
            offset = torch.arange(T, device=self.slopes.device)
            return -self.slopes[:, None, None] * (offset[None, :] - offset[:, None]).abs()
        return 0.0

    def scores(self, q: torch.Tensor, k: torch.Tensor, rotate: bool = True) -> torch.Tensor:
        """Pre-softmax logits [B, H, T, T], before the padding mask; rotate=False skips RoPE."""
        if rotate:
            q, k = self.rotate(q), self.rotate(k)
        return (q @ k.transpose(-2, -1)) * self.scale + self.position_bias(q.size(2))

    def heads(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """Each head's output [B, H, T, head_size] (ablated heads are zero); key_mask [B, T]."""
        q, k, v = self.qkv(x)
        att = self.scores(q, k).masked_fill(~key_mask[:, None, None, :], float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        return (att @ v) * self.head_mask[None, :, None, None]

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        y = self.heads(x, key_mask)
        y = y.transpose(1, 2).reshape(x.size(0), x.size(1), -1)
        return self.resid_dropout(self.c_proj(y))


class LatentAttention(Attention):
    """MLA: content keys/values from a shared low-rank latent, plus a decoupled RoPE path.

    Head h's logit is q_c,h . k_c,h + rot(q_r,h) . rot(k_r): the rotary key k_r is one vector
    per token shared by all heads. Zeroing head h (head_mask) removes its whole output, content
    and rotary paths alike, unlike zeroing latent channels, which touches every head.
    """

    def build(self, config: EncoderConfig) -> None:
        hs, dr = self.head_size, config.mla_rope_dim
        self.q_proj = nn.Linear(config.n_embd, config.n_head * (hs + dr), bias=False)
        self.kv_down = nn.Linear(config.n_embd, config.mla_latent, bias=False)
        self.k_up = nn.Linear(config.mla_latent, config.n_embd, bias=False)
        self.v_up = nn.Linear(config.mla_latent, config.n_embd, bias=False)
        self.k_rope = nn.Linear(config.n_embd, dr, bias=False)
        self.rotary_heads, self.rotary_dim = config.n_head, dr  # every head, last dr channels
        self.scale = 1.0 / math.sqrt(hs + dr)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k [B, H, T, head_size + rope_dim] (rotary slice last) and v [B, H, T, head_size]."""
        B, T, _ = x.size()
        H = self.n_head
        q = self.q_proj(x).view(B, T, H, -1).transpose(1, 2)
        latent = self.kv_down(x)
        k_c = self.k_up(latent).view(B, T, H, -1).transpose(1, 2)
        k_r = self.k_rope(x)[:, None].expand(B, H, T, self.rotary_dim)
        v = self.v_up(latent).view(B, T, H, -1).transpose(1, 2)
        return q, torch.cat([k_c, k_r], dim=-1), v


# ----------------------------------------------------------------------------------------------
# the encoder


class MLP(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, config.d_ff)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(config.d_ff, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = LatentAttention(config) if config.pe == "mla" else Attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), key_mask)
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Token ids [B, T] (0 = padding) -> class logits [B, n_classes] via mean pooling."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        if config.pe == "learned":
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
        if config.pe == "sinusoidal":
            table = sinusoidal_table(config.block_size, config.n_embd)
            self.register_buffer("wpe_table", table, persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.n_classes)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def position_embedding(self, T: int) -> torch.Tensor | None:
        """The absolute position vectors [T, n_embd] added to the input, or None."""
        if self.config.pe == "learned":
            return self.wpe.weight[:T]
        if self.config.pe == "sinusoidal":
            return self.wpe_table[:T]
        return None

    def forward(self, idx: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T = idx.size()
        assert T <= self.config.block_size, f"sequence of {T} > block_size {self.config.block_size}"
        key_mask = idx != 0 if key_mask is None else key_mask
        x = self.wte(idx)
        pos = self.position_embedding(T)
        if pos is not None:
            x = x + pos
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, key_mask)
        x = self.ln_f(x)
        # mean over the real tokens only, so padding never reaches the classifier
        w = key_mask.to(x.dtype)[:, :, None]
        pooled = (x * w).sum(1) / w.sum(1).clamp(min=1.0)
        return self.head(pooled)

    def head_masks(self) -> list[torch.Tensor]:
        """The per-layer head_mask buffers [n_head] (set an entry to 0 to ablate that head)."""
        return [block.attn.head_mask for block in self.blocks]

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
