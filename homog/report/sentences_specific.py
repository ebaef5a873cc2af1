""" "Where position acts", like with like: what any sentence gets from its place, then what the
key sentence gets beyond it (homog.stats.sentences' ``ctrl`` and ``key - ctrl`` rows, and
``position_pred`` of homog.stats.position_curve). Pure: frames in, lines and columns out.
"""

from __future__ import annotations

import pandas as pd

from homog.report.document import Table

# key-specific question -> (the key sentence's own move, the same-place control's move), as
# (sentence, variant_a, variant_b) rows of sentence_contrasts
MOVES = {
    "key-specific first": (("key", "key_first", "key_mid"), ("ctrl", "ctrl_first", "ctrl_mid")),
    "key-specific last": (("key", "key_last", "key_mid"), ("ctrl", "ctrl_last", "ctrl_mid")),
    "key-specific U-shape": (("key", "key_ends", "key_mid"), ("ctrl", "ctrl_ends", "ctrl_mid")),
}
PLACES = (("the first place", "ctrl_first"), ("the last place", "ctrl_last"))


def _g(x) -> str:
    return f"{float(x):.3g}" if pd.notna(x) else "n/a"


def _index(sc: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Band rows of the unchanged runs, indexed by (model, sentence, a, b, metric, band)."""
    model = runs.set_index("run_id")["model"]
    iv = runs.set_index("run_id")["intervention"].fillna("none")
    s = sc[(sc["run_id"].map(iv) == "none") & sc["band"].notna()]
    s = s.assign(model=s["run_id"].map(model))
    if "position_pred" not in s.columns:  # an older database without the curve
        s = s.assign(position_pred=float("nan"))
    return s.set_index(["model", "sentence", "variant_a", "variant_b", "metric", "band"])


def beside(rows: pd.DataFrame, sc: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (homog.report.sentences_view.verdict_rows) with, beside each key-specific row,
    ``any_sentence`` (the same-place control's move: what the place gives any sentence),
    ``predicted`` (the position curve's prediction for the key sentence's move) and
    ``key_move`` (the key sentence's own move, position included); NaN elsewhere."""
    idx = _index(sc, runs)
    cols = {"any_sentence": [], "predicted": [], "key_move": []}
    for r in rows.itertuples():
        key, ctrl = MOVES.get(r.question, (None, None))

        def at(who, col, r=r):
            k = (r.model, *who, r.metric, r.band) if who else None
            return idx.loc[k, col] if k is not None and k in idx.index else float("nan")

        cols["any_sentence"].append(at(ctrl, "mean_diff"))
        cols["predicted"].append(at(key, "position_pred"))
        cols["key_move"].append(at(key, "mean_diff"))
    return rows.assign(**cols)


def place_lines(sc: pd.DataFrame, runs: pd.DataFrame, metrics, bands) -> list[str]:
    """Per model: what the first and the last place give any sentence against the middle (the
    same-place control's own moves, with CIs), per metric, in the late and final bands."""
    if sc is None or sc.empty:
        return []
    idx = _index(sc, runs)
    out = []
    for model in dict.fromkeys(idx.index.get_level_values("model")):
        parts = []
        for metric in metrics:
            for band in [b for b in bands if b in ("late", "final")]:
                got = []
                for place, va in PLACES:
                    k = (model, "ctrl", va, "ctrl_mid", metric, band)
                    if k in idx.index:
                        r = idx.loc[k]
                        got.append(
                            f"{place} {_g(r['mean_diff'])} [{_g(r['ci_low'])}, {_g(r['ci_high'])}]"
                        )
                if got:
                    parts.append(f"{metric} {band}: " + ", ".join(got))
        if parts:
            out.append(f"{model}: " + "; ".join(parts))
    if not out:
        return []
    return [
        "**What any sentence gets from its place** (a non-key sentence moved from the middle to "
        "the first or the last place, the same slots the key sentence takes; the causal mask's "
        "and the attention sink's primacy and recency): " + " | ".join(out) + "."
    ]


def _int(x) -> int | None:
    return int(x) if pd.notna(x) else None


def family_tables(rows: pd.DataFrame, sc: pd.DataFrame, runs: pd.DataFrame) -> list[Table]:
    """The primary table (the key-specific rows with what stands beside them, :func:`beside`)
    and the exploratory one (the earlier position effect, the key sentence's own U-shape)."""
    out = []
    prim = beside(rows[(rows["family"] == "primary") & ~rows["control"]], sc, runs)
    if len(prim):
        out.append(_primary_table(prim))
    fam = rows[(rows["family"] == "exploratory") & ~rows["control"]]
    if len(fam):
        out.append(_exploratory_table(fam))
    return out


def _primary_table(prim: pd.DataFrame) -> Table:
    """The key-specific rows with the control's move, the prediction and the key's move."""
    return Table(
        [
            "model",
            "question",
            "metric",
            "band",
            "any sentence",
            "predicted",
            "key move",
            "key-specific",
            "CI low",
            "CI high",
            "SESOI",
            "p_holm",
            "n",
            "identical",
            "verdict",
        ],
        [
            [
                r.model,
                r.question,
                r.metric,
                r.band,
                r.any_sentence,
                r.predicted,
                r.key_move,
                r.effect,
                r.ci_low,
                r.ci_high,
                r.sesoi,
                r.p_holm,
                _int(r.n),
                _int(r.n_identical),
                r.verdict,
            ]
            for r in prim.itertuples()
        ],
        "what the key sentence gets beyond its place (primary, per model): any sentence = "
        "the control's move to the same slot, predicted = the positional curve's value "
        "for the key's move, key move = the key sentence's own move",
        verdict_column="verdict",
    )


def _exploratory_table(fam: pd.DataFrame) -> Table:
    """The earlier position effect and the key sentence's own U-shape."""
    return Table(
        [
            "model",
            "question",
            "metric",
            "band",
            "effect",
            "CI low",
            "CI high",
            "SESOI",
            "p_holm",
            "n",
            "identical",
            "verdict",
        ],
        [
            [
                r.model,
                r.question,
                r.metric,
                r.band,
                r.effect,
                r.ci_low,
                r.ci_high,
                r.sesoi,
                r.p_holm,
                _int(r.n),
                _int(r.n_identical),
                r.verdict,
            ]
            for r in fam.itertuples()
        ],
        "exploratory: the earlier position effect (different destinations) and the key "
        "sentence's own U-shape, position alone included",
        verdict_column="verdict",
    )
