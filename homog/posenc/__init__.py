"""The positional-encoding lab (after arXiv 2505.13027, *Deconstructing Positional Information*).

Small Transformer encoders with seven positional encodings (plus none) are trained on a
position-sensitive task (distance between two triggers) and a position-agnostic one (counting
triggers); each head is ablated in turn and each head's attention logits are split into
content and position terms. Modules: ``tasks`` (data), ``model`` (the encoder), ``presets``
(configs), ``train``, ``ablate``, ``decompose`` (also for pretrained RoPE LMs).

This module imports no torch, so the CLI can list the choices cheaply.
"""

ENCODINGS = ("nope", "sinusoidal", "learned", "t5", "alibi", "rope", "partial_rope", "mla")
