"""Length-matched rewrites: the moves that insert nothing (real spaCy parses), the token-count
filter and its whole-text check (the embedded models' real tokenizers), the salience-first
choice of key phrases and the edge shares of the manipulation report against hand counts."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import project_params
from test_parse_rephraser import rewrites

from homog.config import as_params
from homog.errors import HomogError
from homog.synth.keyphrase import edges, words
from homog.synth.lengthmatch import (
    LengthFilter,
    edge_shares,
    enforce,
    kind_mix,
    sentence_spans,
)
from homog.synth.rephrase.parse import ParseRephraser, load_parser
from homog.synth.rephrase.shifts import OptionalComma, expand
from homog.synth.salience import Salience
from homog.synth.stage import Variants, assemble, rebuild
from homog.synth.variants import Sentences
from homog.text.sentences import split_sentences
from homog.text.tokens import model_tokenizers, token_counts


@pytest.fixture(scope="module")
def nlp():
    return load_parser("en_core_web_sm")


@pytest.fixture(scope="module")
def tokenizers():
    """smollm2-135m and gemma3-270m, the project's two embedded models."""
    toks = model_tokenizers(as_params(project_params()))
    assert set(toks) == {"smollm2-135m", "gemma3-270m"}
    return toks


@pytest.fixture(scope="module")
def lf(tokenizers) -> LengthFilter:
    return LengthFilter(tokenizers)


def counts(tokenizers, text: str) -> tuple[int, ...]:
    """Independent count: each tokenizer called directly, as extraction calls it."""
    return tuple(
        len(tok(text, add_special_tokens=True)["input_ids"]) for tok in tokenizers.values()
    )


# ---------------------------------------------------------------------------------------------
# the moves that insert nothing


@pytest.mark.parametrize(
    ("kind", "sentence", "expected"),
    [
        ("adjunct_swap", "We watched it at home on Friday.", "We watched it on Friday at home."),
        (
            "adverb_shift",
            "He quickly lost interest in the plot.",
            "He lost interest in the plot quickly.",
        ),
        (
            "conjunct_swap",
            "The acting and the music are superb.",
            "The music and the acting are superb.",
        ),
        ("conjunct_swap", "The film is funny and moving.", "The film is moving and funny."),
        (
            "adverbial_front_bare",
            "The crew filmed the last chase in a disused quarry.",
            "In a disused quarry the crew filmed the last chase.",
        ),
        (
            "adverbial_end_comma",
            "After the first hour, the story loses its nerve.",
            "The story loses its nerve, after the first hour.",
        ),
    ],
)
def test_insert_nothing_moves(nlp, kind, sentence, expected):
    found = rewrites(nlp, sentence)
    assert expected in found.get(kind, set()), found
    # the same words, reordered: nothing inserted, nothing dropped
    assert sorted(words(expected)) == sorted(words(sentence))


def test_comma_twins_keep_the_first_form(nlp):
    found = rewrites(nlp, "The crew filmed the last chase in a disused quarry.")
    assert "In a disused quarry, the crew filmed the last chase." in found["adverbial_front"]
    found = rewrites(nlp, "After the first hour, the story loses its nerve.")
    assert "The story loses its nerve after the first hour." in found["adverbial_end"]


def test_conjunct_swap_leaves_shared_modifiers_and_preconjuncts(nlp):
    for sentence in (
        "I loved the cast and crew of the film.",  # "the" may cover both
        "Both the acting and the music are superb.",  # "both" needs its order
        "He laughed and cried at the end.",  # verbs: events in order
    ):
        assert not [k for k in rewrites(nlp, sentence) if "conjunct_swap" in k], sentence


def test_conjunct_swap_combines_with_another_move(nlp):
    found = rewrites(nlp, "The acting and the music carry the film after the first hour.")
    assert (
        "After the first hour, the music and the acting carry the film."
        in found["adverbial_front+conjunct_swap"]
    )


def test_expand_renders_both_forms_and_renames_the_kind():
    soft = OptionalComma(True, "adverbial_front", "adverbial_front_bare")
    extra = OptionalComma(False, "adverbial_end", "adverbial_end_comma")
    assert expand((1, soft, 2), ("adverbial_front",)) == [
        ((1, ",", 2), ("adverbial_front",)),
        ((1, 2), ("adverbial_front_bare",)),
    ]
    assert expand((1, extra, 2), ("passive", "adverbial_end")) == [
        ((1, 2), ("passive", "adverbial_end")),
        ((1, ",", 2), ("passive", "adverbial_end_comma")),
    ]
    assert expand((1, 2), ("x",)) == [((1, 2), ("x",))]


# ---------------------------------------------------------------------------------------------
# the filter


def test_filter_rejects_an_added_token_and_keeps_an_equal_count(lf, tokenizers):
    context = "I rented it last week. The crew filmed the last chase in a quarry. It shows."
    sentence = "The crew filmed the last chase in a quarry."
    comma = "In a quarry, the crew filmed the last chase."
    bare = "In a quarry the crew filmed the last chase."
    article = "The crew filmed the last chase in a big quarry."
    keep = lf.keep(sentence, context, [comma, bare, article])
    whole = {s: counts(tokenizers, context.replace(sentence, s)) for s in (comma, bare, article)}
    base = counts(tokenizers, context)
    assert [whole[s] == base for s in (comma, bare, article)] == keep == [False, True, False]
    assert all(w[0] == b + 1 for w, b in zip([whole[comma]], base, strict=False))


def test_parse_rephraser_with_the_filter_keeps_only_equal_counts(nlp, lf, tokenizers):
    free = ParseRephraser(nlp=nlp, fluency=None)
    matched = ParseRephraser(nlp=nlp, fluency=None, length_filter=lf)
    context = "The crew filmed the last chase in a disused quarry. Nobody noticed."
    sentence = "The crew filmed the last chase in a disused quarry."
    item = [(sentence, "disused quarry", context)]
    base = counts(tokenizers, context)
    (r_free,) = free.rewrite_many(item, "front")
    (r_lm,) = matched.rewrite_many(item, "front")
    assert r_free.status == r_lm.status == "rewritten" and r_free.text != r_lm.text
    assert counts(tokenizers, context.replace(sentence, r_free.text)) != base
    assert counts(tokenizers, context.replace(sentence, r_lm.text)) == base
    assert edges(r_lm.text, "disused quarry")[0] <= 2
    # a sentence whose every rewrite changes the count is counted, not dropped
    only = "He gave his sister the tickets."
    (r,) = matched.rewrite_many([(only, "tickets", only)], "end")
    assert r.status in ("length_mismatch", "at_target", "left_alone") and r.text == only


def make_variants(texts: dict[str, str], phrases: dict[str, list], edits: dict) -> Variants:
    """Variants of hand-written texts: ``phrases`` per text (None: no key phrase),
    ``edits``: variant -> sample_id -> {sentence: rewrite}."""
    docs = {sid: Sentences(t, split_sentences(t), phrases[sid]) for sid, t in texts.items()}
    rows, records = [], []
    for sid, doc in docs.items():
        for v in ("original", "front", "end", "control"):
            done = {} if v == "original" else edits.get(v, {}).get(sid, {})
            rows.append(
                {
                    "variant": v,
                    "sample_id": sid,
                    "text": assemble(doc, done),
                    "position": 0.0,
                    "n_rewritten": len(done),
                }
            )
            if v != "original":
                for i in doc.keyed:
                    records.append(
                        {
                            "sample_id": sid,
                            "variant": v,
                            "sentence": i,
                            "phrase": doc.phrases[i],
                            "original": doc.sentence(i),
                            "text": done.get(i, doc.sentence(i)),
                            "status": "rewritten" if i in done else "left_alone",
                            "kinds": "x" if i in done else "",
                        }
                    )
    full = {v: edits.get(v, {}) for v in ("front", "end", "control")}
    return Variants(pd.DataFrame(rows), 0, 0, {}, pd.DataFrame(records), docs, full)


def test_enforce_reverts_the_rewrite_that_changes_the_count(lf, tokenizers):
    text = "The crew filmed the chase in a quarry. It rained. The cast was fine."
    v = make_variants(
        {"a": text},
        {"a": ["quarry", None, "cast"]},
        {
            "front": {
                "a": {
                    0: "In a quarry, the crew filmed the chase.",  # +1 (the comma)
                    2: "The cast was fine.",
                }
            },
            "end": {"a": {0: "The crew filmed the chase in a quarry."}},
        },
    )
    out = enforce(v, lf, rebuild)
    assert out == {"texts": 1, "rewrites": 1}
    assert v.edits["front"]["a"] == {2: "The cast was fine."}
    front = v.table[v.table["variant"] == "front"]["text"].iloc[0]
    assert front == text and counts(tokenizers, front) == counts(tokenizers, text)
    row = v.rewrites[(v.rewrites["variant"] == "front") & (v.rewrites["sentence"] == 0)]
    assert row["status"].tolist() == ["length_mismatch"]
    assert kind_mix(v.rewrites)["front"] == {"x": 1.0}


# ---------------------------------------------------------------------------------------------
# key phrases: salience first, movability second


def test_salience_first_then_movability(nlp):
    corpus = [f"The movie was long and the {w} was fine." for w in ("music", "plot", "cast")] * 5
    context = "We loved it. The crew filmed the movie on a Zeppelin."
    corpus.append(context)
    sentence = "The crew filmed the movie on a Zeppelin."
    options = ["movie", "movie on a Zeppelin"]
    sal = Salience.fit(corpus)
    assert sal.score("movie on a Zeppelin", context) > sal.score("movie", context)
    strict = ParseRephraser(nlp=nlp, fluency=None, salience_margin=0.0, noun_chunks=False)
    loose = ParseRephraser(nlp=nlp, fluency=None, salience_margin=1.0, noun_chunks=False)
    for r in (strict, loose):
        r.salience = sal
    # "movie" reaches both edges, "movie on a Zeppelin" only the end (where it is already):
    # salience decides under margin 0, movability under margin 1
    status, front = strict.ranked(sentence, "movie on a Zeppelin", "front", context)
    assert status == "left_alone" and not front
    assert strict.select_phrase(sentence, options, context) == "movie on a Zeppelin"
    assert loose.select_phrase(sentence, options, context) == "movie"
    # no Salience fitted: movability, then the extractor's order
    without = ParseRephraser(nlp=nlp, fluency=None, salience_margin=0.0, noun_chunks=False)
    assert without.select_phrase(sentence, options[::-1], context) == "movie"


# ---------------------------------------------------------------------------------------------
# edge shares


def test_edge_shares_against_a_hand_count(lf, tokenizers):
    a = "Great acting saves the film. The plot drags in the middle. I liked the music a lot."
    b = "Honestly the ending is a mess. Nobody should watch this film at home."
    v = make_variants(
        {"a": a, "b": b},
        {"a": ["acting", "plot", "music"], "b": ["ending", "film"]},
        {
            "front": {
                "a": {1: "In the middle the plot drags.", 2: "The music I liked a lot."},
                "b": {0: "The ending honestly is a mess."},
            },
            "end": {
                "a": {0: "The film is saved by great acting."},
                "b": {1: "Nobody should watch at home this film."},
            },
        },
    )
    keep = pd.Series(True, index=["a", "b"])
    big = {k: 10_000 for k in tokenizers}
    got = edge_shares(v, keep, lf, big)
    # by hand, words before / after each phrase (<= 2 is at the edge):
    # original: acting 1/3 (start), plot 1/3 (start), music 3/2 (end), ending 2/3 (start),
    #   film 4/2 (end): start 3/5, end 2/5
    # front: acting 1/3, plot 3/1 (start? no: 3 before; end: yes), music 1/3, ending 1/4,
    #   film 4/2: start 3/5 (acting, music, ending), end 2/5 (plot, film)
    # end: acting 5/0, plot 1/3, music 3/2, ending 2/3, film 5/0: start 2/5, end 3/5
    assert got["front"] == {
        "start_share": 0.6,
        "end_share": 0.4,
        "start_share_original": 0.6,
        "end_share_original": 0.4,
        "start_shift": 0.0,
        "end_shift": 0.0,
        "sentences": 5,
    }
    assert got["end"]["start_share"] == 0.4 and got["end"]["end_share"] == 0.6
    assert got["end"]["end_shift"] == pytest.approx(0.2)
    assert got["control"]["start_shift"] == 0.0 and got["control"]["sentences"] == 5
    # a budget that cuts each text inside its second sentence: only first sentences count
    small = {}
    for key, tok in tokenizers.items():
        first = max(token_counts(tok, [x[: x.index(".") + 1]])[0] for x in (a, b))
        small[key] = first + 2
    got = edge_shares(v, keep, lf, small)
    # first sentences only: original acting 1/3, ending 2/3 -> start 1.0, end 0.0;
    # end variant: acting 5/0 -> start 0.5, end 0.5
    assert got["end"]["sentences"] == 2
    assert got["end"]["start_share_original"] == 1.0 and got["end"]["end_share"] == 0.5


def test_sentence_spans_follow_rewrites_and_moves():
    text = "One two. Three four five. Six."
    doc = Sentences(text, split_sentences(text), ["one", "four", None])
    new = assemble(doc, {1: "Five four three."})
    spans = sentence_spans(doc, new, {1: "Five four three."})
    assert [new[x:y] for x, y in spans] == ["One two.", "Five four three.", "Six."]
    moved = "Three four five. One two. Six."
    spans = sentence_spans(doc, moved, None)
    assert [moved[x:y] for x, y in spans] == ["One two.", "Three four five.", "Six."]


def test_config_checks():
    params = project_params()
    assert as_params(params).synth.length_match is True
    params["synth"]["keyphrase"]["salience_margin"] = 1.5
    with pytest.raises(HomogError, match="salience_margin"):
        as_params(params)
    params = project_params()
    params["synth"]["length_match"] = "yes"
    with pytest.raises(HomogError, match="length_match"):
        as_params(params)


def test_kind_distance_is_total_variation_to_front_and_end_pooled():
    from homog.synth.lengthmatch import kind_distance

    same = {"front": {"a": 0.5, "b": 0.5}, "end": {"a": 0.5, "b": 0.5}, "control": {"a": 1, "b": 1}}
    assert kind_distance(same) == 0.0
    apart = {"front": {"a": 1.0}, "end": {"a": 1.0}, "control": {"c": 1.0}}
    assert kind_distance(apart) == 1.0
    # front all a, end all b: pooled 1/2 a + 1/2 b; control 3/4 a + 1/4 c -> (1/4 + 1/2 + 1/4)/2
    mix = {"front": {"a": 0.6}, "end": {"b": 0.2}, "control": {"a": 0.3, "c": 0.1}}
    assert kind_distance(mix) == pytest.approx(0.5)
    assert kind_distance({"front": {"a": 1.0}}) is None


def test_a_first_sentence_is_measured_after_the_leading_space(lf, tokenizers):
    """Found on IMDB review 19680: a conjunct swap re-capitalised the text's first word
    ("Twisted, bizarre" -> "Bizarre, ..."). Without the leading space both first words are one
    token under gemma3; with it (as every variant text starts) " Bizarre" is two. The filter
    and the whole-text counts must see the text as the model does."""
    from homog.text.sentences import LEAD

    gemma = tokenizers["gemma3-270m"]
    context = "Twisted, bizarre, enchanting, and hilarious! I couldn't stop laughing."
    sentence = "Twisted, bizarre, enchanting, and hilarious!"
    swap = "Bizarre, enchanting, hilarious, and twisted!"

    def n(text: str) -> int:
        return len(gemma(text, add_special_tokens=False)["input_ids"])

    assert n(sentence) == n(swap)  # what a filter without the leading space saw
    assert n(LEAD + sentence) != n(LEAD + swap)  # what the model sees
    assert lf.keep(sentence, context, [swap]) == [False]
    changed = context.replace(sentence, swap)
    assert lf.counts([context])[0] != lf.counts([changed])[0]
