"""How strong the manipulation was: one table per question from the texts table and the synth
stage's report.json (pure: a frame and a dict in, a Section out).

report.json keys read (each optional; a measure that is absent is named, never guessed):
``edges[v]`` (start/end shares beside the original's, and shifts) or the older
``keyphrase_edges[v]`` (at_front/at_end), ``manipulation.per_model[m][v]`` (token change,
multiset share), ``manipulation.key_sentence[v]``, ``manipulation.length_match`` (its
``variants[v]``: kept_share, rewritten, length_mismatch, token_change[m], kinds; beside them
texts_kept_share and control_kind_distance; homog/synth/lengthmatch.py writes it),
``bertscore_f1``, ``texts_changed``, ``edit_distance``, ``fluency[v]``, ``fluency_audit[v]``.
``edges`` and ``length_match`` are read under ``manipulation`` or at the top level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from homog.report.document import Section, Table
from homog.variants import TEXT_VARIANTS

NA = "n/a"
ORDER = TEXT_VARIANTS  # homog.variants
# the columns of the per-model and the length-match tables
TOKEN_CHANGE_HEADER = (
    "model",
    "variant",
    "token change (mean)",
    "no token change (share)",
    "multiset equal (share)",
)
LENGTH_MATCH_HEADER = (
    "variant",
    "kept (share of sentences)",
    "rewritten / length mismatch",
    "token change: texts per change, per model",
    "move kinds (top 5)",
)


def _dig(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _part(report: dict[str, Any], key: str) -> dict[str, Any]:
    """A block of the manipulation measures: under ``manipulation`` or at the top level."""
    found = _dig(report, "manipulation", key)
    if found is None:
        found = report.get(key)
    return found if isinstance(found, dict) else {}


def _length_match(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """variant -> its length-match measures (``length_match.variants``)."""
    found = _part(report, "length_match").get("variants") or {}
    rank = {v: i for i, v in enumerate(ORDER)}
    keys = sorted(found, key=lambda v: (rank.get(str(v), len(ORDER)), str(v)))
    return {str(v): found[v] for v in keys if isinstance(found[v], dict)}


def _variants(texts: pd.DataFrame, report: dict[str, Any]) -> list[str]:
    seen: dict[str, None] = {}
    if not texts.empty:
        seen.update(dict.fromkeys(map(str, texts["variant"])))
    for block in ("edges", "key_sentence"):
        seen.update(dict.fromkeys(_part(report, block)))
    seen.update(dict.fromkeys(_length_match(report)))
    for per in _part(report, "per_model").values():
        seen.update(dict.fromkeys(per or {}))
    for key in ("keyphrase_edges", "bertscore_f1", "texts_changed", "fluency"):
        seen.update(dict.fromkeys(report.get(key) or {}))
    known = [v for v in ORDER if v in seen]
    rest = [v for v in seen if v not in ORDER and v not in ("model", "threshold")]
    return known + rest


def _edge(report: dict[str, Any], v: str, side: str, what: str) -> Any:
    """start/end share of variant v (what: 'share', 'original', 'shift'): the new ``edges``
    block, else the older ``keyphrase_edges`` (at_front/at_end beside the original's)."""
    edges = _part(report, "edges")
    if v == "original" and what != "shift" and edges:
        # the original's share is the baseline every variant's row carries
        base = [e.get(f"{side}_share_original") for e in edges.values() if isinstance(e, dict)]
        return next((b for b in base if b is not None), None)
    new = edges.get(v)
    if isinstance(new, dict):
        key = {
            "share": f"{side}_share",
            "original": f"{side}_share_original",
            "shift": f"{side}_shift",
        }[what]
        return new.get(key)
    old = report.get("keyphrase_edges") or {}
    col = "at_front" if side == "start" else "at_end"
    mine, orig = _dig(old, v, col), _dig(old, "original", col)
    if what == "share":
        return mine
    if what == "original":
        return orig
    return None if mine is None or orig is None else round(mine - orig, 4)


def variant_columns(texts: pd.DataFrame) -> dict[str, Callable[[dict[str, Any], str], Any]]:
    """header -> (report, variant) -> value, for the per-variant table."""
    n_texts = texts.groupby("variant")["n_texts"].sum() if not texts.empty else pd.Series()
    f1 = texts.groupby("variant")["bertscore_f1"].mean() if not texts.empty else pd.Series()

    def db_or(series: pd.Series, key: str) -> Callable[[dict[str, Any], str], Any]:
        return lambda r, v: series.get(v) if v in series.index else _dig(r, key, v)

    ks = "key_sentence"
    return {
        "texts": lambda r, v: (
            n_texts.get(v) if v in n_texts.index else _dig(r, "kept_per_variant", v)
        ),
        "mean BERTScore F1": db_or(f1, "bertscore_f1"),
        "key phrase at sentence start": lambda r, v: _edge(r, v, "start", "share"),
        "original at start": lambda r, v: _edge(r, v, "start", "original"),
        "start shift": lambda r, v: _edge(r, v, "start", "shift"),
        "key phrase at sentence end": lambda r, v: _edge(r, v, "end", "share"),
        "original at end": lambda r, v: _edge(r, v, "end", "original"),
        "end shift": lambda r, v: _edge(r, v, "end", "shift"),
        "key sentence start (share of tokens)": lambda r, v: _dig(
            _part(r, ks), v, "start_token_share_mean"
        ),
        "key sentence shift": lambda r, v: _dig(_part(r, ks), v, "shift_mean"),
        "already first": lambda r, v: _dig(_part(r, ks), v, "already_first_share"),
        "already last": lambda r, v: _dig(_part(r, ks), v, "already_last_share"),
        "texts changed": lambda r, v: _dig(r, "texts_changed", v),
        "word edit distance": lambda r, v: _dig(r, "edit_distance", v),
        "length-matched kept": lambda r, v: _dig(_length_match(r), v, "kept_share"),
        "fluency Δ median (filter)": lambda r, v: _dig(r, "fluency", v, "median"),
        "fluency Δ median (audit)": lambda r, v: _dig(r, "fluency_audit", v, "median"),
    }


def measure_table(
    columns: dict[str, Callable], report: dict[str, Any], variants: list[str]
) -> tuple[list[str], list[list[Any]], list[str]]:
    """One row per measure, one column per variant (n/a where a variant lacks it); measures
    without any value are left out and returned by name."""
    body, missing = [], []
    for measure, get in columns.items():
        values = [get(report, v) for v in variants]
        if all(x is None for x in values):
            missing.append(measure)
            continue
        body.append([measure, *(NA if x is None else _plain(x) for x in values)])
    return ["measure", *variants], body, missing


def _plain(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def _shares(d: Any, top: int = 5) -> str:
    """{kind: share} as 'kind 35%, ...' (the largest ``top``)."""
    if not isinstance(d, dict) or not d:
        return NA
    best = sorted(d.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {100 * float(x):.0f}%" for k, x in best)


def _counts(d: Any) -> str:
    if not isinstance(d, dict) or not d:
        return NA
    return ", ".join(f"{k}: {v}" for k, v in d.items())


def manipulation_section(texts: pd.DataFrame, report: dict[str, Any] | None) -> Section:
    """The manipulation strength: per variant, how far the key phrase / key sentence moved
    (beside the original's baseline), how much text changed, how much meaning and fluency it
    kept; per model, the token change and the share of texts whose token multiset is kept."""
    report = report or {}
    sec = Section(
        "Manipulation strength",
        paragraphs=[
            "What the variants changed. Edge shares: the share of key phrases within 2 words "
            "of their sentence's start (end), beside the same share in the original texts; a "
            "shift is the variant's share minus the original's. Key sentence: its first token's "
            "index as a share of the text's tokens, and its shift from the original. Token "
            "change: tokens added per text against the original (model tokenizer); multiset "
            "equal: the share of texts whose token multiset equals the original's. Fluency Δ: "
            "the language model's score of the rewrite minus the original's (nats, median)."
        ],
    )
    if not report:
        sec.paragraphs.append(
            "No synth report.json was found (data/synth/report.json): only the database's "
            "texts table is shown."
        )
    variants = _variants(texts, report)
    if not variants:
        sec.paragraphs.append("No texts in the database and no synth report: nothing to show.")
        return sec
    header, body, missing = measure_table(variant_columns(texts), report, variants)
    sec.tables.append(Table(header, body, "per variant"))
    if report and missing:
        sec.after.append("Not in the database or this report.json: " + ", ".join(missing) + ".")
    rows = token_change_rows(report)
    if rows:
        sec.tables.append(
            Table(list(TOKEN_CHANGE_HEADER), rows, "token change per model's tokenizer")
        )
    lm = _length_match(report)
    if lm:
        sec.tables.append(
            Table(
                list(LENGTH_MATCH_HEADER),
                length_match_rows(lm),
                "length-matched rewrites (synth.length_match)",
            )
        )
        line = length_match_line(_part(report, "length_match"))
        if line:
            sec.paragraphs.append(line)
    sec.paragraphs += identity_lines(report)
    if "texts_in" in report:
        dropped = report.get("dropped") or {}
        sec.paragraphs.append(
            f"Synth: {report['texts_in']} texts in, {report.get('texts_kept', NA)} kept"
            + (f" (dropped: {_counts(dropped)})" if dropped else "")
            + "."
        )
    return sec


def identity_lines(report: dict[str, Any]) -> list[str]:
    """The texts a variant left unchanged (``manipulation.identical_to_original``) and where
    the same-place control landed (``manipulation.position_family.same_place_control``)."""
    out = []
    same = _part(report, "identical_to_original")
    shares = [
        f"{v} {_pct(m.get('share'))} of {m.get('texts')}"
        for v, m in same.items()
        if isinstance(m, dict) and m.get("share") is not None
    ]
    if shares:
        out.append(
            "Unchanged texts (byte-identical to their original; a pair of them is an exact zero, "
            "left out of every contrast it cancels in and counted in n_identical): "
            + ", ".join(shares)
            + "."
        )
    ctrl = _dig(report, "manipulation", "position_family", "same_place_control") or {}
    if ctrl.get("texts_share") is not None:
        slots = ", ".join(f"{v} {_pct(x)}" for v, x in (ctrl.get("same_slot_share") or {}).items())
        out.append(
            f"Same-place control (ctrl_first / ctrl_mid / ctrl_last): in "
            f"{_pct(ctrl['texts_share'])} of the family's reviews; on the key sentence's slot: "
            f"{slots or NA}."
        )
    return out


def _pct(x: Any) -> str:
    return NA if x is None else f"{100 * float(x):.0f} %"


def token_change_rows(report: dict[str, Any]) -> list[list[Any]]:
    """Per model and variant of ``manipulation.per_model``: the token change measures."""
    return [
        [
            model,
            v,
            *(
                _plain(m.get(k)) if m.get(k) is not None else NA
                for k in ("token_change_mean", "token_change_zero_share", "multiset_equal_share")
            ),
        ]
        for model, per in _part(report, "per_model").items()
        for v, m in (per or {}).items()
        if isinstance(m, dict)
    ]


def length_match_rows(lm: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """Per variant of ``length_match.variants``: kept, rewritten, token change, move kinds."""
    return [
        [
            v,
            _plain(m.get("kept_share", NA)),
            f"{m.get('rewritten', NA)} / {m.get('length_mismatch', NA)}",
            "; ".join(
                f"{model}: {_counts(t.get('distribution'))}"
                for model, t in (m.get("token_change") or {}).items()
            )
            or NA,
            _shares(m.get("kinds")),
        ]
        for v, m in lm.items()
    ]


def length_match_line(block: dict[str, Any]) -> str | None:
    """The length match's texts kept and control-kind distance in words (None without them)."""
    said = []
    if block.get("texts_kept_share") is not None:
        said.append(f"{_plain(block['texts_kept_share']):.0%} of the texts kept")
    if block.get("control_kind_distance") is not None:
        said.append(
            f"the control's move kinds are {block['control_kind_distance']:.2f} (total "
            "variation: 0 the same mix, 1 none in common) from front's and end's"
        )
    return "Length match: " + "; ".join(said) + "." if said else None
