"""The position family: joining, the key-sentence rule, key_control's choice, the corpus cut,
and what the family does to the token multiset under both embedded tokenizers."""

from __future__ import annotations

from collections import Counter

import pytest

from homog.config import parse_params
from homog.corpus.cut import budget_check, cut_texts
from homog.errors import HomogError
from homog.synth.position import (
    choose_control,
    choose_ctrl,
    family_orders,
    join,
    key_choice,
    move,
    starts,
    target_index,
    word_share,
)
from homog.synth.salience import Salience
from homog.text.sentences import LEAD
from homog.variants import family_names, variant_name

SENTENCES = [
    "The film opens in a small town.",
    "Nothing much happens for an hour.",
    "Then the alien spaceship lands in the cornfield.",
    '"Wow" is all I could say.',
    "iTunes sells it now.",
]


@pytest.fixture(scope="module")
def tokenizers():
    from homog.models import load_tokenizer

    return {k: load_tokenizer(f"embedded:{k}")[0] for k in ("smollm2-135m", "gemma3-270m")}


def multiset(tok, text: str) -> Counter:
    enc = tok(text, add_special_tokens=True, return_special_tokens_mask=True)
    pairs = zip(enc["input_ids"], enc["special_tokens_mask"], strict=True)
    return Counter(i for i, s in pairs if not s)


def test_names_and_targets() -> None:
    assert family_names([0, 0.5, 1]) == [
        "key_first",
        "key_mid",
        "key_last",
        "key_control",
        "ctrl_first",
        "ctrl_mid",
        "ctrl_last",
    ]
    assert family_names([0, 0.25]) == ["key_first", "key_p25", "key_control", "ctrl_first"]
    assert [variant_name(p) for p in (0.25, 0.75)] == ["key_p25", "key_p75"]
    assert [target_index(p, 5) for p in (0, 0.25, 0.5, 0.75, 1)] == [0, 1, 2, 3, 4]
    assert target_index(0.5, 4) == 2 and target_index(0.5, 3) == 1  # halves round up
    assert move(5, 3, 0) == [3, 0, 1, 2, 4] and move(5, 1, 4) == [0, 2, 3, 4, 1]


def test_join_leads_with_one_space_and_keeps_capitals() -> None:
    text = join([SENTENCES[i] for i in move(5, 4, 0)])
    assert text.startswith(" iTunes sells it now. The film") and "  " not in text
    assert join(["A.", "b."]) == LEAD + "A. b."


def test_joining_keeps_the_multiset_and_the_lead_is_needed(tokenizers) -> None:
    """Moving a sentence keeps every token under both tokenizers with the leading space;
    without it the first word's token changes (the known failure)."""
    for tok in tokenizers.values():
        original = join(SENTENCES)
        for src in range(5):
            for dst in range(5):
                moved = join([SENTENCES[i] for i in move(5, src, dst)])
                assert multiset(tok, moved) == multiset(tok, original)
        bare = " ".join(SENTENCES[i] for i in move(5, 2, 0))
        assert multiset(tok, bare) != multiset(tok, " ".join(SENTENCES))


def test_key_sentence_is_the_most_salient_phrase_not_the_earliest() -> None:
    corpus = ["The film opens in a town.", "A film about a town.", "The town film."]
    sal = Salience.fit(corpus)
    doc = join(SENTENCES)
    candidates = [["film", "small town"], ["hour"], ["alien spaceship", "cornfield"], [], []]
    choice = key_choice(candidates, lambda ph: sal.score(ph, doc))
    assert choice is not None and choice.sentence == 2 and choice.phrase == "alien spaceship"
    # ties: the phrase that sorts first, then the earlier sentence
    tie = key_choice([["b"], ["a"], ["a"]], lambda ph: 1.0)
    assert (tie.sentence, tie.phrase) == (1, "a")
    assert key_choice([["the"], []], lambda ph: 0.0) is None


def test_control_moves_a_similar_sentence_as_far_the_same_way() -> None:
    lengths = [10, 10, 10, 10, 10, 10]
    # key 1 -> last: shift 40; j=0 to index 4 shifts exactly 40 (j=2 can reach 30 at most)
    assert choose_control(lengths, 1, 40.0) == (0, 4)
    # a long j=0 (30 tokens) still matches the distance (cost 20 x 0.25 = 5); j=2 to the last
    # place shifts 30 (cost 10): the distance first
    assert choose_control([30, 10, 10, 10, 10, 10], 1, 40.0) == (0, 4)
    # when two sentences reach the distance exactly, the one nearer the key's length wins
    assert choose_control([30, 10, 10, 10, 10, 10, 10, 10], 1, 40.0) == (2, 6)
    # towards the start: a destination before the moved sentence, never after
    j, dst = choose_control(lengths, 4, -40.0)
    assert dst < j and starts(lengths, move(6, j, dst))[j] - 10 * j == -40
    # the key already first, crossing the whole text: no other sentence moves as far; the
    # best is the sentence right after it, to the last place (a sentence short)
    assert choose_control(lengths, 0, 50.0) == (1, 5)
    assert choose_control([5, 5], 0, 5.0) is None  # no control move (issue 39 item 9)


def test_family_orders_keep_the_others_in_order() -> None:
    lengths = [8, 6, 9, 7, 5]
    fam = family_orders(lengths, 3, [0, 0.5, 1])
    assert fam.orders["key_first"] == [3, 0, 1, 2, 4]
    assert fam.orders["key_mid"] == [0, 1, 3, 2, 4]
    assert fam.orders["key_last"] == [0, 1, 2, 4, 3]
    # largest move: to the first place (start 23 -> 0, shift -23); the control moves the
    # last sentence (5 tokens, start 30) to index 1 (start 8): shift -22, the nearest
    assert fam.control_sentence == 4 and fam.orders["key_control"] == [0, 4, 1, 2, 3]
    assert [fam.key_index(v) for v in ("original", "key_first", "key_last")] == [3, 0, 4]
    assert starts(lengths, fam.orders["key_last"])[3] == 8 + 6 + 9 + 5
    assert family_orders([5, 5], 0, [0, 1]) is None
    sweep = family_orders(lengths, 0, [0, 0.25, 0.5, 0.75, 1])
    keys = [
        o.index(0) for v, o in sweep.orders.items() if v.startswith("key_") and v != "key_control"
    ]
    assert keys == [0, 1, 2, 3, 4]


def test_same_place_control_is_interior_nearest_in_length_never_first() -> None:
    # key 3 (7 tokens): interior non-key sentences 1 (6) and 2 (9); 1 is nearer in length
    assert choose_ctrl([8, 6, 9, 7, 5], 3) == 1
    # the first sentence (7 tokens, the key's length) and the last (7) are never chosen while
    # an interior one exists
    assert choose_ctrl([7, 20, 7, 30, 7], 2) == 1
    assert choose_ctrl([7, 20, 12, 20, 7], 2) == 1  # ties: the earlier
    # three sentences, key in the middle: no interior candidate, the last one (never the first)
    assert choose_ctrl([7, 7, 7], 1) == 2
    assert choose_ctrl([7, 7], 0) is None


@pytest.mark.parametrize("n", [3, 4, 5, 6, 9])
def test_same_place_control_lands_on_the_key_sentences_slot(n: int) -> None:
    """ctrl_first / ctrl_mid / ctrl_last put the control sentence at exactly the sentence
    index key_first / key_mid / key_last give the key sentence, for every key place."""
    lengths = [5 + (3 * i) % 7 for i in range(n)]
    for key in range(n):
        fam = family_orders(lengths, key, [0, 0.5, 1])
        c = fam.ctrl_sentence
        assert c not in (None, key, 0)
        for ctrl, moved in (
            ("ctrl_first", "key_first"),
            ("ctrl_mid", "key_mid"),
            ("ctrl_last", "key_last"),
        ):
            assert fam.orders[ctrl].index(c) == fam.orders[moved].index(key)
            rest = [i for i in fam.orders[ctrl] if i != c]
            assert rest == [i for i in range(n) if i != c]  # the others keep their order


def test_word_share() -> None:
    s = ["one two", "three four five", "six"]
    assert word_share(s, [0, 1, 2], 1) == pytest.approx(2 / 6)
    assert word_share(s, [1, 2, 0], 1) == 0.0


def test_corpus_cut_keeps_whole_sentences_that_fit() -> None:
    def fits(texts):  # a budget of 6 words, as synth writes the text
        return [len(t.split()) <= 6 for t in texts]

    texts = [
        "Red fox runs. Dogs bark. Cats sleep all day.",
        "Short one.",
        "Far too long a first line here. Yes.",
    ]
    assert cut_texts(texts, fits) == ["Red fox runs. Dogs bark.", "Short one.", None]


def test_corpus_cut_fits_both_tokenizers(tokenizers) -> None:
    budgets = {"smollm2-135m": 12, "gemma3-270m": 13}
    fits = budget_check(tokenizers, budgets)
    text = " ".join(SENTENCES)
    (cut,) = cut_texts([text], fits)
    assert text.startswith(cut) and cut.count(".") < text.count(".")
    for key, tok in tokenizers.items():
        n = len(tok(LEAD + cut, add_special_tokens=True)["input_ids"])
        assert n <= budgets[key]
    # one more sentence would not fit under some model
    longer = text[: text.index(".", len(cut) + 1) + 1]
    assert not all(fits([LEAD + longer]))


def test_position_params_are_checked() -> None:
    p = parse_params({"synth": {"position": {"positions": [0, 0.25, 0.5, 0.75, 1]}}})
    assert family_names(p.synth.position.positions)[1] == "key_p25"
    for bad in ([1.5], [], [0, 0.0]):
        with pytest.raises(HomogError, match="synth.position.positions"):
            parse_params({"synth": {"position": {"positions": bad}}})


def demo_docs(n: int = 10) -> dict:
    import pandas as pd

    from homog.corpus.sources import DEMO_PATH
    from homog.corpus.stage import clean_text
    from homog.synth.salience import content_words
    from homog.synth.variants import Sentences
    from homog.text.sentences import split_sentences

    docs = {}
    for k, text in enumerate(pd.read_json(DEMO_PATH, lines=True)["text"].head(n)):
        text = clean_text(text)
        spans = split_sentences(text)
        opts = [content_words(text[a:b]) for a, b in spans]
        docs[f"d{k}"] = Sentences(text, spans, [None] * len(spans), opts)
    return docs


def test_family_sweep_rows_report_and_table(tokenizers) -> None:
    """A finer sweep through build_family, with_family and the report on demo reviews."""
    import pandas as pd

    from homog.synth.position_report import family_report, token_measures
    from homog.synth.position_stage import build_family, with_family

    docs = demo_docs()
    sweep = [0, 0.25, 0.5, 0.75, 1]
    texts = [d.text for d in docs.values()]
    build = build_family(docs, Salience.fit(texts), tokenizers, sweep)
    assert build.kept and sum(build.dropped.values()) + len(build.kept) == len(docs)
    names = family_names(sweep)
    assert set(build.rows["variant"]) == set(names)
    for row in build.rows.itertuples():
        n = len(docs[row.sample_id].spans)
        if row.variant in names[: len(sweep)]:
            p = sweep[names.index(row.variant)]
            assert row.key_index == target_index(p, n)
        assert 0 <= row.key_position < 1
    paper = pd.DataFrame(
        [
            {
                "dataset": "demo",
                "variant": "original",
                "sample_id": s,
                "text": docs[s].text,
                "label": "pos",
                "keyphrase": "k",
                "bertscore_f1": 1.0,
            }
            for s in build.kept
        ]
    )
    out = with_family(paper, build, ["original", *names])
    assert list(pd.unique(out["variant"])) == ["original", *names]
    assert out["text"].str.startswith(LEAD).all() and not out["text"].str.startswith("  ").any()
    assert out.loc[out["variant"] != "original", "bertscore_f1"].isna().all()
    assert (out["keyphrase"] == "k").all()  # the original's: phrases stay in their sentences
    per_model = token_measures(out, tokenizers, dict.fromkeys(tokenizers, 10**6))
    for key in tokenizers:
        for v in names:
            assert per_model[key][v] == {
                "token_change_mean": 0.0,
                "token_change_zero_share": 1.0,
                "multiset_equal_share": 1.0,
            }
    rep = family_report(build, build.kept, sweep)
    fam = rep["position_family"]
    assert fam["first_last_variants"] == ["key_first", "key_last"]
    assert 0.3 < fam["first_last_distance_mean"] < 1
    assert rep["key_sentence"]["key_first"]["start_token_share_mean"] == 0.0
    assert (
        rep["key_sentence"]["key_p25"]["shift_mean"] < rep["key_sentence"]["key_p75"]["shift_mean"]
    )
    same = fam["same_place_control"]
    assert same["texts_share"] == 1.0
    assert same["same_slot_share"] == {"ctrl_first": 1.0, "ctrl_mid": 1.0, "ctrl_last": 1.0}


def test_token_measures_count_changes_against_the_tokenizer(tokenizers) -> None:
    import pandas as pd

    from homog.synth.position_report import token_measures

    tok = tokenizers["smollm2-135m"]
    df = pd.DataFrame(
        {
            "variant": ["original", "original", "front", "front"],
            "sample_id": ["a", "b", "a", "b"],
            "text": [
                " Good film. Bad plot.",
                " Bad plot here.",
                " Bad plot. Good film.",
                " Bad plot here, really.",
            ],
        }
    )
    m = token_measures(df, {"s": tok}, {"s": 10**6})["s"]["front"]
    n = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in df["text"]]
    assert m["token_change_mean"] == pytest.approx(((n[2] - n[0]) + (n[3] - n[1])) / 2)
    assert m["multiset_equal_share"] == 0.5 and m["token_change_zero_share"] == 0.5


def test_fit_budget_reverts_the_largest_growth_until_it_fits() -> None:
    import pandas as pd

    from homog.synth.budget import fit_budget
    from homog.synth.stage import Variants, rebuild
    from homog.synth.variants import Sentences
    from homog.text.sentences import split_sentences

    text = "One two. Three four. Five six."
    doc = Sentences(text, split_sentences(text), ["one", "three", "five"])
    edits = {0: "One two extra words here.", 2: "Five six more."}
    from homog.synth.stage import assemble

    table = pd.DataFrame(
        [
            {
                "variant": v,
                "sample_id": "s",
                "text": assemble(doc, e),
                "position": 0.0,
                "n_rewritten": len(e),
            }
            for v, e in (("original", {}), ("front", edits))
        ]
    )
    variants = Variants(
        table, 3, 3, {"front": {"rewritten": 2}}, None, {"s": doc}, {"front": {"s": dict(edits)}}
    )

    def fits(texts):  # at most 9 words
        return [len(t.split()) <= 9 for t in texts]

    report, too_long = fit_budget(variants, fits, rebuild)
    assert too_long == set() and report["reverted"]["front"] == 1
    assert variants.edits["front"]["s"] == {2: "Five six more."}  # the longer growth went
    assert table.loc[1, "text"] == "One two. Three four. Five six more."
    assert variants.status["front"] == {"rewritten": 1, "over_budget": 1}
    report, too_long = fit_budget(variants, lambda ts: [False] * len(ts), rebuild)
    assert too_long == {"s"} and report["original_over_budget"] == 1


def test_with_family_disabled_leads_and_leaves_keys_null() -> None:
    import pandas as pd

    from homog.synth.position_stage import with_family

    paper = pd.DataFrame(
        [
            {
                "dataset": "d",
                "variant": v,
                "sample_id": "s",
                "text": "A b. C d.",
                "label": "pos",
                "keyphrase": "k",
                "bertscore_f1": 1.0,
            }
            for v in ("end", "original")
        ]
    )
    out = with_family(paper, None, ["original", "end"])
    assert list(out["variant"]) == ["original", "end"]
    assert (out["text"] == " A b. C d.").all()
    assert out["key_index"].isna().all() and out["key_position"].isna().all()


def test_control_ratio_apart_for_keys_inside_and_at_an_edge() -> None:
    """family_measures against a hand count: one text with its key sentence first (the control
    falls a sentence short), one with it inside (the control matches the distance)."""
    import pandas as pd

    from homog.synth.position_report import family_measures

    texts = {"edge": ([10, 10, 10, 10, 10], 0), "inside": ([10, 10, 10, 10, 10, 10], 1)}
    rows, expect = [], {}
    for sid, (lengths, key) in texts.items():
        fam = family_orders(lengths, key, [0, 0.5, 1])
        total = sum(lengths)
        orders = {"original": list(range(len(lengths))), **fam.orders}
        for v, order in orders.items():
            at = starts(lengths, order)
            ctrl = order.index(fam.ctrl_sentence)
            rows.append(
                (
                    sid,
                    "m",
                    v,
                    at[key],
                    at[fam.control_sentence],
                    total,
                    True,
                    True,
                    order.index(key),
                    len(lengths),
                    ctrl,
                )
            )
        before = starts(lengths, range(len(lengths)))
        largest = max(
            abs(starts(lengths, fam.orders[v])[key] - before[key])
            for v in ("key_first", "key_mid", "key_last")
        )
        moved = starts(lengths, fam.orders["key_control"])[fam.control_sentence]
        expect[sid] = abs(moved - before[fam.control_sentence]) / largest
    from homog.synth.position_stage import RECORD_COLUMNS

    out = family_measures(pd.DataFrame(rows, columns=RECORD_COLUMNS), [0, 0.5, 1])["control"]
    # key first of 5: key_last moves it 40 tokens; the best other sentence moves 30
    assert expect["edge"] == pytest.approx(0.75) and expect["inside"] == pytest.approx(1.0)
    assert out["key_at_edge_share"] == 0.5
    assert out["ratio_mean_key_at_edge"] == pytest.approx(0.75)
    assert out["ratio_mean_key_inside"] == pytest.approx(1.0)
    assert out["ratio_mean"] == pytest.approx(0.875)
    assert out["within_10pct_share"] == 0.5
