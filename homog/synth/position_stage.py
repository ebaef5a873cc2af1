"""The position family applied to the corpus: key sentences, orders, texts, token checks.

``build_family`` takes the synth stage's parsed texts (``homog.synth.variants.Sentences``: the
sentence spans and the extractor's candidate phrases per sentence) and every model's
tokenizer, and returns the family's rows of the ``texts`` table plus one record per
(text, model, variant) for the report (``homog.synth.position_report``). A text is dropped
from the family, and so from every variant, when it has fewer than
``homog.synth.position.MIN_SENTENCES`` sentences (``too_few_sentences``), no candidate phrase
with a positive salience (``no_key``), no sentence that can make the control move
(``no_control``), two members with byte-identical texts from different orders (``no_move``:
a move on paper only, ``homog.synth.position.family_problem``), or when a family member's
token multiset differs from the original's under some model (``multiset_changed``). Each
dropped text's reason and detail is in ``FamilyBuild.reasons``.

Token positions: a sentence's length under a model is the number of (non-special) tokens of
``LEAD + sentence``, which is how it is tokenized in any place of a joined text; a record's
``separable`` says whether the text's token ids equal the concatenation of its sentences' ids,
in which case every start below is exact.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from homog.synth.position import (
    MIN_SENTENCES,
    Family,
    family_orders,
    family_problem,
    join,
    key_choice,
    sentence_spans,
    starts,
    word_share,
)
from homog.synth.salience import Salience
from homog.text.sentences import LEAD
from homog.text.tokens import encode

# the family's own columns of the texts table: the key sentence (index in this text, first
# word's share of the words), every sentence's character span in this text
# (``homog.synth.position.sentence_spans``, JSON), the sentence key_control moves and the
# same-place control's sentence that ctrl_* move (indices in the original); null on the
# paper's rewrites and on originals outside the family
FAMILY_COLUMNS = [
    "key_index",
    "key_position",
    "sentence_spans",
    "control_sentence",
    "ctrl_sentence",
]
RECORD_COLUMNS = [
    "sample_id",
    "model",
    "variant",
    "key_start",
    "moved_start",
    "total",
    "multiset_equal",
    "separable",
    "key_index",
    "n_sentences",
    "ctrl_index",
]


@dataclass
class FamilyBuild:
    """The family's rows (sample_id, variant, text, key_index, key_position), the original's
    key columns (sample_id, key_index, key_position), the per-model records and the drops."""

    rows: pd.DataFrame
    original: pd.DataFrame
    records: pd.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)
    kept: set[Any] = field(default_factory=set)
    reasons: dict[Any, tuple[str, str]] = field(default_factory=dict)  # sid -> (reason, detail)
    key_phrases: dict[Any, str] = field(default_factory=dict)


def _candidates(doc: Any) -> list[list[str]]:
    """Per sentence: the extractor's phrases plus the rephraser's chosen one."""
    out = []
    for i in range(len(doc.spans)):
        phrases = list(doc.extracted(i))
        if doc.phrases[i] and doc.phrases[i] not in phrases:
            phrases.append(doc.phrases[i])
        out.append(phrases)
    return out


def _ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    return [
        [i for i, s in zip(ids, m, strict=True) if not s] for ids, m in encode(tokenizer, texts)
    ]


def _sentence_ids(
    sentences: Mapping[Any, list[str]], tokenizers: Mapping[str, Any]
) -> dict[str, dict[tuple[Any, int], list[int]]]:
    """Every sentence's non-special ids (of ``LEAD + sentence``) under every model, one batch
    per model: model -> (sample_id, sentence index) -> ids."""
    flat = [(sid, i) for sid, ss in sentences.items() for i in range(len(ss))]
    sent_ids: dict[str, dict[tuple[Any, int], list[int]]] = {}
    for key, tok in tokenizers.items():
        ids = _ids(tok, [LEAD + sentences[sid][i] for sid, i in flat])
        sent_ids[key] = dict(zip(flat, ids, strict=True))
    return sent_ids


def _families(
    docs: Mapping[Any, Any],
    sentences: Mapping[Any, list[str]],
    sent_ids: dict[str, dict[tuple[Any, int], list[int]]],
    salience: Salience,
    tokenizers: Mapping[str, Any],
    positions: Sequence[float],
    drop: Callable[..., None],
) -> dict[Any, tuple[Family, str]]:
    """Each text's family and key phrase; the texts that have none are passed to ``drop``
    (sample_id, reason, detail)."""
    families: dict[Any, tuple[Family, str]] = {}
    for sid, doc in docs.items():
        choice = key_choice(_candidates(doc), lambda ph, t=doc.text: salience.score(ph, t))
        if choice is None:
            drop(sid, "no_key", "no candidate phrase with a positive salience")
            continue
        n = len(sentences[sid])
        lengths = [
            sum(len(sent_ids[k][(sid, i)]) for k in tokenizers) / max(len(tokenizers), 1)
            for i in range(n)
        ]
        fam = family_orders(lengths, choice.sentence, positions)
        if fam is None:
            drop(sid, "too_few_sentences", f"{n} sentence(s), the family needs {MIN_SENTENCES}")
            continue
        problem = family_problem(sentences[sid], fam)
        if problem is not None:  # no control move, or identical texts from different orders
            drop(sid, *problem)
            continue
        families[sid] = (fam, choice.phrase)
    return families


def _token_records(
    families: Mapping[Any, tuple[Family, str]],
    sentences: Mapping[Any, list[str]],
    sent_ids: dict[str, dict[tuple[Any, int], list[int]]],
    tokenizers: Mapping[str, Any],
) -> tuple[dict[tuple[Any, str], list[int]], dict[tuple[Any, str], str], list[tuple], dict]:
    """Every text of the family (original included) under every model: the sentence order
    and text per (sample_id, variant), one record per (text, model, variant)
    (``RECORD_COLUMNS``), and sample_id -> the models whose token multiset changed."""
    variants = ["original", *next(iter(families.values()))[0].orders] if families else []
    order_of = {
        (sid, v): list(range(len(sentences[sid]))) if v == "original" else fam.orders[v]
        for sid, (fam, _) in families.items()
        for v in variants
    }
    texts = {k: join([sentences[k[0]][i] for i in order]) for k, order in order_of.items()}
    records = []
    bad: dict[Any, set[str]] = {}  # sid -> the models whose token multiset changed
    for key, tok in tokenizers.items():
        full = dict(zip(texts, _ids(tok, list(texts.values())), strict=True))
        for (sid, v), order in order_of.items():
            fam = families[sid][0]
            lengths = [len(sent_ids[key][(sid, i)]) for i in range(len(order))]
            at = starts(lengths, order)
            equal = Counter(full[(sid, v)]) == Counter(full[(sid, "original")])
            concat = [t for i in order for t in sent_ids[key][(sid, i)]]
            if not equal:
                bad.setdefault(sid, set()).add(key)
            records.append(
                (
                    sid,
                    key,
                    v,
                    at[fam.key],
                    at[fam.control_sentence],
                    sum(lengths),
                    equal,
                    full[(sid, v)] == concat,
                    fam.key_index(v),
                    len(order),
                    -1 if fam.ctrl_sentence is None else order.index(fam.ctrl_sentence),
                )
            )
    return order_of, texts, records, bad


def _family_rows(
    order_of: Mapping[tuple[Any, str], list[int]],
    texts: Mapping[tuple[Any, str], str],
    families: Mapping[Any, tuple[Family, str]],
    sentences: Mapping[Any, list[str]],
    kept: set[Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The kept texts' rows of the texts table: the family members', the originals'."""
    rows, original = [], []
    for (sid, v), order in order_of.items():
        if sid not in kept:
            continue
        fam = families[sid][0]
        idx = fam.key_index(v)
        row = {
            "sample_id": sid,
            "variant": v,
            "text": texts[(sid, v)],
            "key_index": idx,
            "key_position": word_share(sentences[sid], order, fam.key),
            "sentence_spans": json.dumps(sentence_spans(sentences[sid], order)),
            "control_sentence": fam.control_sentence,
            "ctrl_sentence": fam.ctrl_sentence,
        }
        (original if v == "original" else rows).append(row)
    return rows, original


def build_family(
    docs: Mapping[Any, Any],
    salience: Salience,
    tokenizers: Mapping[str, Any],
    positions: Sequence[float],
) -> FamilyBuild:
    """The family of every text of ``docs`` (sample_id -> Sentences); see the module doc."""
    dropped = {
        "no_key": 0,
        "too_few_sentences": 0,
        "no_control": 0,
        "no_move": 0,
        "multiset_changed": 0,
    }
    reasons: dict[Any, tuple[str, str]] = {}

    def drop(sid: Any, reason: str, detail: str) -> None:
        dropped[reason] += 1
        reasons[sid] = (reason, detail)

    sentences = {sid: [d.sentence(i) for i in range(len(d.spans))] for sid, d in docs.items()}
    sent_ids = _sentence_ids(sentences, tokenizers)
    families = _families(docs, sentences, sent_ids, salience, tokenizers, positions, drop)
    order_of, texts, records, bad = _token_records(families, sentences, sent_ids, tokenizers)
    for sid, models in sorted(bad.items(), key=lambda kv: str(kv[0])):
        changed = ", ".join(sorted(models))
        drop(sid, "multiset_changed", f"a member's token multiset differs under {changed}")
    kept = set(families) - set(bad)
    rows, original = _family_rows(order_of, texts, families, sentences, kept)
    cols = ["sample_id", "variant", "text", *FAMILY_COLUMNS]
    return FamilyBuild(
        rows=pd.DataFrame(rows, columns=cols),
        original=pd.DataFrame(original, columns=cols).drop(columns=["variant"]),
        records=pd.DataFrame(records, columns=RECORD_COLUMNS),
        dropped=dropped,
        kept=kept,
        reasons=reasons,
        key_phrases={sid: fam[1] for sid, fam in families.items() if sid in kept},  # in order
    )


def with_family(out: pd.DataFrame, build: FamilyBuild | None, order: Sequence[str]) -> pd.DataFrame:
    """The kept rows ``out`` (TEXT_COLUMNS less FAMILY_COLUMNS, texts without ``LEAD``: the
    originals of every kept review, the paper's variants where they were kept) with ``LEAD``
    prepended, the family's columns filled in on the originals of the family's reviews, and the
    family's rows added for the reviews whose original is in ``out`` (dataset, label, keyphrase
    from the original: the family moves sentences, not the phrases within them; bertscore_f1
    null, the family is exempt from the BERTScore check); sorted by ``order`` of variants, then
    sample_id. ``build`` None: no family, the family's columns null.

    An original whose text is not the family's own original (the sentences joined as
    ``homog.synth.position.join`` joins them) keeps null spans: its sentences cannot be
    followed, and extraction reports it."""
    out = out.assign(text=LEAD + out["text"])
    out = out.assign(
        key_index=pd.NA,
        key_position=float("nan"),
        sentence_spans=None,
        control_sentence=pd.NA,
        ctrl_sentence=pd.NA,
    )
    if build is not None and not build.original.empty:
        orig = (out["variant"] == "original") & out["sample_id"].isin(build.original["sample_id"])
        keys = build.original.set_index("sample_id").loc[out.loc[orig, "sample_id"]]
        for col in FAMILY_COLUMNS:
            out.loc[orig, col] = keys[col].to_numpy()
        same = keys["text"].to_numpy() == out.loc[orig, "text"].to_numpy()
        out.loc[out.index[orig][~same], "sentence_spans"] = None
        base = out[out["variant"] == "original"].set_index("sample_id")
        fam = build.rows[build.rows["sample_id"].isin(base.index)].copy()
        fam["dataset"] = base.loc[fam["sample_id"], "dataset"].to_numpy()
        fam["label"] = base.loc[fam["sample_id"], "label"].to_numpy()
        fam["keyphrase"] = base.loc[fam["sample_id"], "keyphrase"].to_numpy()
        fam["bertscore_f1"] = float("nan")
        out = pd.concat([out, fam[out.columns]], ignore_index=True)
    out["key_index"] = out["key_index"].astype("Int64")
    out["control_sentence"] = out["control_sentence"].astype("Int64")
    out["ctrl_sentence"] = out["ctrl_sentence"].astype("Int64")
    out["key_position"] = out["key_position"].astype(float)
    out["sentence_spans"] = out["sentence_spans"].astype(object)
    rank = {v: i for i, v in enumerate(order)}
    return out.sort_values(
        ["variant", "sample_id"], key=lambda s: s.map(rank) if s.name == "variant" else s
    ).reset_index(drop=True)
