"""The positional-encoding lab (after arXiv 2505.13027, *Deconstructing Positional Information*).

Small Transformer encoders with seven positional encodings (plus none) are trained on a
position-sensitive task (distance between two triggers) and a position-agnostic one (counting
triggers); each head is ablated in turn and each head's attention logits are split into
content and position terms. Modules: ``tasks`` (data), ``model`` (the encoder), ``presets``
(configs), ``train``, ``ablate``, ``decompose`` (also for pretrained RoPE LMs).

The encodings and presets are named in ``homog.config.posenc`` and
``homog.config.posenc_presets``, so the CLI and the params check list the choices without this
package.
"""
