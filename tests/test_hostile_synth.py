"""Issue 39 items 7, 9 and 24: the position family keeps only real moves, a text with no
control move is dropped with a reason (choose_control returned nothing but a ValueError), and
synth's report lists every dropped review with its reason. Pure functions on tiny in-memory
texts: no spaCy pipeline, no model."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from homog.synth.position import choose_control, family_orders, family_problem, join
from homog.synth.position_stage import build_family
from homog.variants import KEY_CONTROL

REPEATED = ["It was good."] * 6
DISTINCT = [
    "The film opens slowly.",
    "The acting is superb.",
    "The score soars.",
    "The ending drags.",
    "I liked it.",
]


def _texts(sentences, fam):
    return {v: join([sentences[i] for i in o]) for v, o in fam.orders.items()}


# --- item 9: no control move is "no control", not a ValueError ------------------------------


def test_choose_control_returns_none_instead_of_raising():
    assert choose_control([5, 5], 0, 5.0) is None  # 2 sentences
    assert choose_control([4, 4, 4, 4, 4, 4, 4], 3, 0.0) is None  # the family moved nothing
    assert choose_control([10, 10, 10, 10, 10, 10], 1, 40.0) == (0, 4)  # unchanged otherwise


def test_zero_shift_family_is_dropped_as_no_control():
    fam = family_orders([0.0] * 7, 6, [0, 0.5, 1])  # lengths 0: every move is 0 tokens
    assert fam is not None and fam.control_sentence is None and KEY_CONTROL not in fam.orders
    sentences = [f"Sentence {i}." for i in range(7)]
    reason, detail = family_problem(sentences, fam)
    assert reason == "no_control" and "0 tokens" in detail


def test_key_already_last_with_positions_1_moves_the_control_to_the_start():
    """`synth.position.positions: [1]` with the key sentence already last raised ValueError;
    the control now moves as far as the key would to the start."""
    lengths = [10, 10, 10, 10, 10]
    fam = family_orders(lengths, 4, [1])
    assert fam.orders["key_last"] == [0, 1, 2, 3, 4]  # the key stays last: a real observation
    assert fam.control_sentence is not None and fam.orders[KEY_CONTROL] != [0, 1, 2, 3, 4]
    assert family_problem(DISTINCT, fam) is None


# --- item 7: identical texts from different orders are "no move" ------------------------------


def test_repeated_sentence_review_is_no_move():
    fam = family_orders([4] * 6, 0, [0, 0.5, 1])
    texts = _texts(REPEATED, fam)
    assert len(set(texts.values())) == 1  # every member byte-identical (the bug's premise)
    assert len({fam.key_index(v) for v in fam.orders}) > 1  # ... with different key_index
    reason, detail = family_problem(REPEATED, fam)
    assert reason == "no_move" and "byte for byte" in detail


def test_key_sentence_equal_to_another_is_no_move():
    sentences = ["Great.", "The plot is thin.", "Great."]
    fam = family_orders([2, 5, 2], 0, [0, 0.5, 1])
    assert family_problem(sentences, fam)[0] == "no_move"


def test_distinct_sentences_and_a_key_already_first_stay():
    fam = family_orders([5, 5, 4, 4, 4], 0, [0, 0.5, 1])
    assert fam.orders["key_first"] == [0, 1, 2, 3, 4]  # same order as the original: kept
    assert family_problem(DISTINCT, fam) is None


# --- build_family: per-review reasons ---------------------------------------------------------


class WordTokenizer:
    """A whitespace tokenizer with the HF call shape encode() uses (no special tokens)."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def __call__(self, texts, add_special_tokens=True, return_special_tokens_mask=True):
        ids = [[self.vocab.setdefault(w, len(self.vocab)) for w in t.split()] for t in texts]
        return {"input_ids": ids, "special_tokens_mask": [[0] * len(i) for i in ids]}


def _doc(sentences, key_phrase):
    text = " ".join(sentences)
    spans, at = [], 0
    for s in sentences:
        spans.append((at, at + len(s)))
        at += len(s) + 1
    phrases = [key_phrase if key_phrase in s else None for s in sentences]
    return SimpleNamespace(
        text=text,
        spans=spans,
        sentence=lambda i: sentences[i],
        extracted=lambda i: [],
        phrases=phrases,
    )


class OneSalience:
    def score(self, phrase, text):
        return 1.0 if phrase else 0.0


def test_build_family_drops_fake_moves_with_a_reason_per_review():
    docs = {
        "rep": _doc(REPEATED, "good"),
        "ok": _doc(DISTINCT, "superb"),
        "two": _doc(["Fine film.", "Superb acting."], "Superb"),
    }
    build = build_family(docs, OneSalience(), {"m": WordTokenizer()}, [0, 0.5, 1])
    assert build.kept == {"ok"}
    assert build.reasons["rep"][0] == "no_move"
    assert build.reasons["two"][0] == "too_few_sentences"
    assert build.dropped["no_move"] == 1 and build.dropped["too_few_sentences"] == 1
    assert set(build.rows["sample_id"]) == {"ok"}
    # the kept review's members are real moves: distinct texts, distinct key_index per text
    rows = build.rows
    by_text = rows.groupby("text")["key_index"].nunique()
    assert (by_text == 1).all()


def test_build_family_without_any_move_is_no_control_not_a_valueerror():
    """No embedded tokenizer: every sentence length is 0 tokens, so no move exists."""
    docs = {"a": _doc(DISTINCT, "superb")}
    build = build_family(docs, OneSalience(), {}, [0, 0.5, 1])
    assert build.kept == set() and build.reasons["a"][0] == "no_control"


# --- item 24: synth's report lists each dropped review ----------------------------------------


def test_select_gives_a_reason_per_dropped_review():
    from homog.synth.selection import select

    rows = []
    for sid, keyed, rewritten, f1 in [
        ("a", 1, 1, 0.95),
        ("b", 0, 0, 1.0),
        ("c", 1, 0, 1.0),
        ("d", 1, 1, 0.5),
    ]:
        for v in ("original", "front", "end", "control"):
            rows.append(
                {
                    "sample_id": sid,
                    "variant": v,
                    "n_keyed": keyed,
                    "n_rewritten": 0 if v == "original" else rewritten,
                    "bertscore_f1": 1.0 if v == "original" else f1,
                }
            )
    keep, counts = select(pd.DataFrame(rows), 0.9, require_rewrite="any")
    assert keep[keep].index.tolist() == ["a"]
    reasons = counts["reasons"]
    assert set(reasons) == {"b", "c", "d"}
    assert reasons["b"][0] == "no_keyphrase" and reasons["c"][0] == "not_rewritten"
    assert reasons["d"][0] == "below_threshold" and "front 0.500" in reasons["d"][1]


def test_dropped_reviews_lists_sample_id_and_reason():
    from homog.synth.report import dropped_reviews

    family = SimpleNamespace(reasons={"rep": ("no_move", "key_mid's text is ...")})
    out = dropped_reviews(
        {"b": ("no_keyphrase", "no sentence holds a key phrase")}, {"long", "b"}, family
    )
    assert [{k: v for k, v in e.items() if k != "kept_in"} for e in out] == [
        {
            "sample_id": "b",
            "stage": "select",
            "reason": "no_keyphrase",
            "detail": "no sentence holds a key phrase",
        },
        {
            "sample_id": "long",
            "stage": "budget",
            "reason": "original_over_budget",
            "detail": "the original does not fit extract.max_tokens",
        },
        {
            "sample_id": "rep",
            "stage": "position_family",
            "reason": "no_move",
            "detail": "key_mid's text is ...",
        },
    ]
    assert {e["kept_in"] for e in out} == {"none"}  # no kept set given: nothing is kept


def test_dropped_reviews_say_which_variants_a_partly_kept_review_keeps():
    """Issue 40 step 0: a review whose rewrites failed stays in the position family."""
    import pandas as pd

    from homog.synth.report import dropped_reviews

    family = SimpleNamespace(reasons={"rep": ("no_move", "...")}, kept={"nr"})
    kept = pd.Series({"nr": True, "rep": True, "gone": False})
    out = dropped_reviews(
        {"nr": ("not_rewritten", "x"), "gone": ("no_keyphrase", "y")}, set(), family, kept
    )
    assert {e["sample_id"]: e["kept_in"] for e in out} == {
        "gone": "none",
        "nr": "position_family",
        "rep": "paper_variants",
    }
