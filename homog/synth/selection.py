"""Which synth texts are kept: BERTScore of every variant against its original, and the
selection by key phrase, rewrites and threshold (``select``, pure)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from homog.config.synth import SynthConfig
from homog.errors import HomogError
from homog.progress import progress
from homog.synth.rephrase import TARGETS

VARIANTS = ("original", *TARGETS)


def score_variants(table: pd.DataFrame, scorer: Any, show_progress: bool = False) -> pd.Series:
    """BERTScore F1 of every row against its original (1.0 for the originals themselves)."""
    originals = table[table["variant"] == "original"].set_index("sample_id")["text"]
    f1 = pd.Series(1.0, index=table.index)
    mask = (table["variant"] != "original").to_numpy()
    rows = table[mask]
    if len(rows):
        refs = originals.loc[rows["sample_id"]].tolist()
        with progress(transient=True) as bar:
            task = bar.add_task("BERTScore", total=len(rows), visible=show_progress)
            f1[mask] = _f1(scorer, rows["text"].tolist(), refs, lambda k: bar.advance(task, k))
    return f1


def _f1(scorer: Any, candidates: list[str], refs: list[str], on_done: Any) -> Any:
    """``scorer.f1`` with a progress callback where the scorer takes one (test doubles may
    not)."""
    import inspect

    if "on_done" in inspect.signature(scorer.f1).parameters:
        return scorer.f1(candidates, refs, on_done=on_done)
    return scorer.f1(candidates, refs)


REQUIRE_REWRITE = ("none", "any", "all")


def select(
    table: pd.DataFrame, threshold: float, *, require_rewrite: str = SynthConfig.require_rewrite
) -> tuple[pd.Series, dict[str, Any]]:
    """Which sample_ids are kept, and why the others were not (pure).

    ``table`` needs columns variant, sample_id, n_keyed, n_rewritten, bertscore_f1. A text is
    kept when it has a key phrase, when it was rewritten (``require_rewrite``: ``any`` = at
    least one sentence in front or end, since a text neither variant could change tells
    nothing about position; ``all`` = at least one sentence in every non-original variant;
    ``none`` = no condition) and when every variant's F1 >= threshold. Returns (boolean Series
    over sample_ids, counts dict; ``no_rewrite`` counts texts a variant left unchanged;
    ``reasons``: sample_id -> (reason, detail) of every text not kept).
    """
    if require_rewrite not in REQUIRE_REWRITE:
        raise HomogError(
            f"synth.require_rewrite must be one of {REQUIRE_REWRITE} (got {require_rewrite!r})"
        )
    wide_f1 = table.pivot(index="sample_id", columns="variant", values="bertscore_f1")
    wide_rw = table.pivot(index="sample_id", columns="variant", values="n_rewritten")
    keyed = table[table["variant"] == "original"].set_index("sample_id")["n_keyed"] > 0
    targets = [v for v in VARIANTS if v != "original" and v in wide_f1.columns]
    changed = wide_rw[targets] > 0
    if require_rewrite == "all":
        has_rewrite = changed.all(axis=1)
    elif require_rewrite == "any":
        has_rewrite = changed[[v for v in ("front", "end") if v in targets]].any(axis=1)
    else:
        has_rewrite = pd.Series(True, index=wide_rw.index)
    above = wide_f1[targets] >= threshold
    keep = keyed & has_rewrite & above.all(axis=1)
    reasons = {}  # sample_id -> (reason, detail) of every text not kept
    for sid in wide_f1.index:
        if not keyed.get(sid, False):
            reasons[sid] = ("no_keyphrase", "no sentence holds a key phrase")
        elif not has_rewrite.get(sid, False):
            reasons[sid] = ("not_rewritten", f"require_rewrite {require_rewrite}: not rewritten")
        elif not above.loc[sid].all():
            low = ", ".join(
                f"{v} {wide_f1.loc[sid, v]:.3f}" for v in targets if not above.loc[sid, v]
            )
            reasons[sid] = ("below_threshold", f"BERTScore F1 below {threshold}: {low}")
    counts = {
        "reasons": reasons,
        "no_keyphrase": int((~keyed).sum()),
        "not_rewritten": int((keyed & ~has_rewrite).sum()),
        "unchanged_per_variant": {v: int((keyed & ~changed[v]).sum()) for v in targets},
        "below_threshold": {v: int((keyed & has_rewrite & ~above[v]).sum()) for v in targets},
        "pass_per_variant": {v: int((keyed & has_rewrite & above[v]).sum()) for v in targets},
    }
    return keep.reindex(wide_f1.index).fillna(False).astype(bool), counts
