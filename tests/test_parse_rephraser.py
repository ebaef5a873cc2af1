"""The parse rephraser: each licensed rewrite of the catalogue on sentences written for these
tests, the choice per target (fluency check included), and bad input counted, never dropped."""

from __future__ import annotations

import pytest

from homog.errors import HomogError
from homog.synth.rephrase import make_rephraser, rephraser_class
from homog.synth.rephrase.clauses import analyse, render
from homog.synth.rephrase.moves import candidates
from homog.synth.rephrase.parse import ParseRephraser, edges, load_parser


@pytest.fixture(scope="module")
def nlp():
    return load_parser("en_core_web_sm")


@pytest.fixture(scope="module")
def parse(nlp) -> ParseRephraser:
    return ParseRephraser(nlp=nlp, fluency=None)


def rewrites(nlp, sentence: str) -> dict[str, set[str]]:
    """kinds ('+'-joined) -> rendered rewrites of ``sentence``."""
    doc = nlp(sentence)
    sent = analyse(doc)
    assert sent is not None, sentence
    out: dict[str, set[str]] = {}
    for c in candidates(doc, sent, set()):
        out.setdefault("+".join(c.kinds), set()).add(render(doc, c.items))
    return out


# (kinds, sentence, one expected rewrite): every kind of the catalogue on its own sentence
CATALOGUE = [
    (
        "adverbial_front",
        "The crew filmed the last chase in a disused quarry.",
        "In a disused quarry, the crew filmed the last chase.",
    ),
    (
        "adverbial_front",
        "We left the cinema early because the sound kept failing.",
        "Because the sound kept failing, we left the cinema early.",
    ),
    (
        "adverbial_end",
        "After the first hour, the story loses its nerve.",
        "The story loses its nerve after the first hour.",
    ),
    (
        "adverbial_end",
        "Sadly, the sequel never found its audience.",
        "The sequel never found its audience, sadly.",
    ),
    (
        "clause_swap",
        "The songs are lovely, but the dialogue is clumsy.",
        "The dialogue is clumsy, but the songs are lovely.",
    ),
    (
        "passive",
        "A young Danish editor cut the final version.",
        "The final version was cut by a young Danish editor.",
    ),
    (
        "active",
        "The score was written by a jazz pianist.",
        "A jazz pianist wrote the score.",
    ),
    (
        "dative",
        "My uncle gave my cousin the box set.",
        "My uncle gave the box set to my cousin.",
    ),
    (
        "particle",
        "The hero picks up the broken lantern.",
        "The hero picks the broken lantern up.",
    ),
    (
        "cleft",
        "The lighting ruins the final duel.",
        "It is the final duel that the lighting ruins.",
    ),
    (
        "pseudo_cleft",
        "The producer wanted a happier finale.",
        "What the producer wanted was a happier finale.",
    ),
    (
        "as_for",
        "I never understood the subplot about the lighthouse.",
        "As for the subplot about the lighthouse, I never understood it.",
    ),
    (
        "left_dislocation",
        "Nobody remembers the second season.",
        "The second season, nobody remembers it.",
    ),
    (
        "right_dislocation",
        "The soundtrack carries the weaker scenes.",
        "It carries the weaker scenes, the soundtrack.",
    ),
    (
        "adverbial_raised",
        "You have to watch it with subtitles.",
        "With subtitles, you have to watch it.",
    ),
    (
        "adverbial_raised",
        "No one seemed to have any emotion throughout most of the film.",
        "Throughout most of the film, no one seemed to have any emotion.",
    ),
    (
        "matrix_end",
        "I think the remake improves on the original.",
        "The remake improves on the original, I think.",
    ),
    (
        "reverse_pseudo_cleft",
        "The acting is a disaster.",
        "A disaster is what the acting is.",
    ),
    (
        "reverse_pseudo_cleft",
        "It's a really bad mess.",
        "A really bad mess is what it is.",
    ),
    (
        "reverse_pseudo_cleft",
        "It was probably a mistake.",
        "A mistake was what it probably was.",
    ),
]


@pytest.mark.parametrize(("kind", "sentence", "expected"), CATALOGUE)
def test_catalogue(nlp, kind, sentence, expected):
    found = rewrites(nlp, sentence)
    assert expected in found.get(kind, set()), found


def test_combined_moves_and_clause_swap(nlp):
    found = rewrites(nlp, "The plot drags in the middle, and the villain is wasted.")
    assert "The villain is wasted, and the plot drags in the middle." in found["clause_swap"]
    both = {
        t for k, ts in found.items() if "clause_swap" in k and "adverbial_front" in k for t in ts
    }
    assert "The villain is wasted, and in the middle, the plot drags." in both


def test_joiner_hung_on_a_word_of_the_first_clause(parse):
    """spaCy often attaches the "and" between two clauses to the first clause's object; the
    sentence is still read as two clauses (it used to count as unparsed)."""
    s = "It has very real portrayals of the characters and most of the actors do a fine job."
    doc = parse.nlp(s)
    assert [t.head.dep_ for t in doc if t.text == "and"] != ["ROOT"]  # the misparse
    texts = {o.text for o in parse.parsed(s).options if o.kinds == ("clause_swap",)}
    assert texts == {
        "Most of the actors do a fine job and it has very real portrayals of the characters."
    }


def test_so_joins_two_clauses_that_keep_their_order(parse):
    """ "A, so B": two clauses joined by the adverb (once counted as unparsed); each clause
    is rewritten, but they never trade places (B follows from A)."""
    s = "The case had a couple of award symbols on it, so I figured it could not be too bad."
    options = parse.parsed(s).options
    assert options and not [o for o in options if "clause_swap" in o.kinds]
    texts = {o.text for o in options}
    assert (
        "On it, the case had a couple of award symbols, so I figured it could not be too bad."
        in texts
    )
    assert all(t.endswith(", so I figured it could not be too bad.") for t in texts)


def test_what_never_moves(nlp):
    # a complement the verb selects, a predicate PP of "be", a quoted title split apart
    for sentence, bad in [
        ("She was looking for a better script.", "For a better script"),
        ("The best scene is in the kitchen.", "In the kitchen"),
        ("He based the plot on a true crime.", "On a true crime"),
        # out of an infinitive that is itself the event wanted or tried
        ("I want to see it in a theater.", "In a theater"),
        ("They tried to film it in one take.", "In one take"),
    ]:
        texts = {t for ts in rewrites(nlp, sentence).values() for t in ts}
        assert not any(t.startswith(bad) for t in texts), texts
    # no passive of a verb of having, measure or likeness
    for sentence in (
        "You have a twelve year old boy's dream movie.",
        "The sequel lacks the charm of the first film.",
        "The plot resembles a bad soap opera.",
    ):
        assert "passive" not in rewrites(nlp, sentence)
    assert "passive" in rewrites(nlp, "The studio cut the best scene.")
    # nor with a personal pronoun as its agent ("... was liked by me")
    for sentence in ("I also liked her spoiled cousin.", "You will love the soundtrack."):
        assert "passive" not in rewrites(nlp, sentence)
    # a predicate noun first only when it ends an affirmative copular clause: not negated,
    # not quantified, not a cleft already, nothing after it
    for sentence in (
        "It is not a good film.",
        "The movie isn't a comedy.",
        "This was no accident.",
        "It is the music that I remember.",
        "She's quite a gas, once you get to know her.",
        # a predicate that identifies (definite, possessive, a name), a subject naming a role
        "He is the purifier.",
        "This is his best performance.",
        "She is Emmie.",
        "The problem is a weak script.",
        # "there" and quantifiers are no subjects to put last
        "There are lots of scenes of filth.",
        "All of the acting is a joke.",
    ):
        assert "reverse_pseudo_cleft" not in rewrites(nlp, sentence), sentence
    # "S, I do not think" would turn the negation around
    assert "matrix_end" not in rewrites(nlp, "I do not think the remake improves on it.")
    assert "matrix_end" in rewrites(nlp, "I think the remake improves on it.")


def test_quoted_title_stays_whole(parse):
    sentence = 'We watched "The Long Night" at a small festival in Lyon.'
    for option in parse.parsed(sentence).options:
        assert '"The Long Night"' in option.text


def test_targets_move_the_phrase(parse):
    s = "The crew filmed the last chase in a disused quarry."
    front = parse.rewrite_many([(s, "disused quarry", s)], "front")[0]
    end = parse.rewrite_many([(s, "crew", s)], "end")[0]
    assert front.status == "rewritten" and edges(front.text, "disused quarry")[0] <= 2
    assert end.status == "rewritten" and edges(end.text, "crew")[1] <= 2
    assert front.kinds and end.kinds


def test_control_keeps_the_phrase_and_changes_the_sentence(parse):
    from homog.synth.keyphrase import relative_position

    s = "Honestly, the lead actor carries the film from start to finish."
    r = parse.rewrite_many([(s, "lead actor", s)], "control")[0]
    assert r.status == "rewritten" and r.text != s
    moved = relative_position(r.text, "lead actor") - relative_position(s, "lead actor")
    assert abs(moved) <= parse.control_tolerance


def test_bad_input_is_counted(parse):
    items = [
        ("", "x", ""),
        (" ".join(["word"] * 100) + ".", "word", ""),
        ("7/10 for the film!", "film", ""),
        ("Why would anyone film the chase in a quarry?", "quarry", ""),
    ]
    statuses = [r.status for r in parse.rewrite_many(items, "front")]
    assert statuses == ["empty", "too_long", "unparsed", "left_alone"]
    assert [r.text for r in parse.rewrite_many(items, "end")] == [i[0] for i in items]


class FakeFluency:
    """Scores by a table; everything else gets 0."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def score(self, texts):
        import numpy as np

        self.calls.append(list(texts))
        return np.array([self.table.get(t, 0.0) for t in texts])


def test_fluency_filter_takes_the_furthest_fluent_rewrite(nlp):
    s = "The crew filmed the last chase in a disused quarry."
    free = ParseRephraser(nlp=nlp, fluency=None)
    ranked = free.ranked(s, "quarry", "front")[1]
    assert len(ranked) >= 2
    # the best-placed rewrite reads far worse than the original: the next one is taken
    fake = FakeFluency({s: -3.0, ranked[0].text: -5.0, ranked[1].text: -3.2})
    checked = ParseRephraser(nlp=nlp, fluency=fake, threshold=0.5, n_candidates=2)
    r = checked.rewrite_many([(s, "quarry", s)], "front")[0]
    assert r.text == ranked[1].text and r.fluency == pytest.approx(-0.2)
    # nothing fluent enough: left as it is, counted as not_fluent
    worse = FakeFluency({s: 0.0, **{o.text: -9.0 for o in ranked}})
    r = ParseRephraser(nlp=nlp, fluency=worse, n_candidates=2).rewrite_many(
        [(s, "quarry", s)], "front"
    )[0]
    assert r.status == "not_fluent" and r.text == s


def test_noun_chunks_are_key_phrase_candidates(nlp):
    from homog.synth.rephrase.parsed import noun_chunks

    s = "The man the movie starts with in the opening sequence is the only reason the film won."
    # determiners dropped, pronoun-like heads ("this one", "everyone") skipped
    assert noun_chunks(nlp(s)) == ["man", "movie", "opening sequence", "only reason", "film"]
    assert noun_chunks(nlp("Even die-hard fans like myself should avoid this one!")) == [
        "die-hard fans"
    ]
    # a YAKE n-gram across constituents ("lost the old") reaches the front only; the noun
    # chunk "brother" reaches both edges (front: "My brother lost ...", end: "... by my
    # brother"), so it is chosen and counted
    s = "Sadly, my brother lost the old DVD of the show during the move last year."
    with_chunks = ParseRephraser(nlp=nlp, fluency=None)
    assert with_chunks.select_phrase(s, ["lost the old"], s) == "brother"
    for target, side in (("front", 0), ("end", 1)):
        best = with_chunks.ranked(s, "brother", target)[1][0]
        assert edges(best.text, "brother")[side] <= 2
    without = ParseRephraser(nlp=nlp, fluency=None, noun_chunks=False)
    assert without.select_phrase(s, ["lost the old"], s) == "lost the old"
    # the next choice once "brother" is excluded (its rewrites failed the fluency check)
    alt = with_chunks.alternative_phrase(s, ["lost the old"], s, frozenset({"brother"}))
    assert alt not in (None, "brother")
    every = frozenset(c.lower() for c in noun_chunks(nlp(s)))
    assert with_chunks.alternative_phrase(s, [], s, every) is None


def test_a_rewrite_short_of_the_edge_must_move_the_phrase_far_enough(nlp):
    """``min_shift``: a cleft of the subject moves "purely focused" a little toward the end
    (paraphrase without position); it is offered only when min_shift allows it."""
    from homog.synth.keyphrase import relative_position

    s = "The game would have been much better had it been purely focused on the Holy Grail."
    loose = ParseRephraser(nlp=nlp, fluency=None, min_shift=0.0)
    strict = ParseRephraser(nlp=nlp, fluency=None)  # the default, 0.2
    orig = relative_position(s, "purely focused")
    short = [
        o.text
        for o in loose.ranked(s, "purely focused", "end")[1]
        if edges(o.text, "purely focused")[1] > 2
        and relative_position(o.text, "purely focused") - orig < 0.2
    ]
    assert short, "expected a small move toward the end"
    kept = {o.text for o in strict.ranked(s, "purely focused", "end")[1]}
    assert not kept & set(short)
    for text in kept:  # what remains reaches the edge or moves the phrase 0.2 or more
        far = relative_position(text, "purely focused") - orig >= 0.2
        assert edges(text, "purely focused")[1] <= 2 or far


def test_phrase_from_an_earlier_sentence_comes_last(nlp):
    """A phrase whose words already occur in an earlier sentence would be found there first
    (by a reader, and by the position measure), so it loses to any other phrase, even one
    that reaches fewer edges; a mere substring ("brothers") is no earlier occurrence."""
    s = "Sadly, my brother lost the old DVD of the show during the move last year."
    rp = ParseRephraser(nlp=nlp, fluency=None)
    assert rp.select_phrase(s, ["lost the old"], s) == "brother"
    text = "My brother likes the show. " + s
    chosen = rp.select_phrase(s, ["lost the old"], text)
    assert chosen != "brother"
    text = "My brothers like the show. " + s
    assert rp.select_phrase(s, ["lost the old"], text) == "brother"
    # when every option occurred earlier, the usual ranking still picks one
    only = ParseRephraser(nlp=nlp, fluency=None, noun_chunks=False)
    text = "My brother lost the old DVD. " + s
    assert only.select_phrase(s, ["lost the old", "brother"], text) == "brother"


def test_retry_takes_another_phrase_when_every_rewrite_reads_badly(nlp):
    """The synth stage's second try: the chosen phrase's front and end rewrites all fail the
    fluency check, so the next phrase is tried, and kept because it reaches an edge."""
    import numpy as np

    from homog.synth.rephrase import TARGETS
    from homog.synth.variants import Sentences
    from homog.synth.variants_build import _at_edges, retry_phrases
    from homog.text.sentences import split_sentences

    s = "The crew filmed the last chase in a disused quarry near Leeds."
    free = ParseRephraser(nlp=nlp, fluency=None)
    first = free.select_phrase(s, ["last chase"], s)
    bad = {o.text for t in ("front", "end") for o in free.ranked(s, first, t)[1]}

    class Picky:  # every rewrite that moves the first phrase reads badly
        def score(self, texts):
            return np.array([-9.0 if t in bad else 0.0 for t in texts])

    checked = ParseRephraser(nlp=nlp, fluency=Picky())
    doc = Sentences(s, split_sentences(s), [first], [["last chase"]])
    results = {t: checked.rewrite_many([(s, first, s)], t) for t in TARGETS}
    assert {results[t][0].status for t in ("front", "end")} == {"not_fluent"}
    assert _at_edges(results, 0, first) == 0
    assert retry_phrases([(doc, 0)], results, checked) == {"tried": 1, "changed": 1}
    second = doc.phrases[0]
    assert second != first and _at_edges(results, 0, second) >= 1
    # nothing left to try: counted, nothing changed
    assert retry_phrases([], {t: [] for t in TARGETS}, checked) == {"tried": 0, "changed": 0}


def test_fragment_items_are_reordered(parse):
    """A list or fragment without a subject (real reviews have many) is no clause; its items
    move instead, the conjunction staying before the last item."""
    s = "Really heartwarming, and definitely recommended."
    assert parse.parsed(s).status == "ok"
    front = parse.rewrite_many([(s, "definitely recommended", s)], "front")[0]
    assert front.text == "Definitely recommended, and really heartwarming."
    assert front.kinds == ("fragment_swap",)
    s = "Great acting, great story, and a brilliant score!"
    end = parse.rewrite_many([(s, "great acting", s)], "end")[0]
    assert end.text == "Great story, a brilliant score, and great acting!"
    control = parse.rewrite_many([(s, "brilliant score", s)], "control")[0]
    assert control.status == "rewritten" and control.text.endswith("a brilliant score!")
    # a clause the reader cannot follow is no list: nothing to reorder, counted as unparsed
    for s in (
        "There is a lot of heart in this movie, a lot of wit to.",
        "A well made movie, one which I will always remember, and watch again.",
    ):
        assert parse.parsed(s).status == "unparsed" and not parse.parsed(s).options


def test_adjunct_objects_are_not_dislocated(parse):
    """The object of a time adjunct or a fixed phrase is no argument: "The move, my brother
    lost the DVD during it" and "The end, ... in it" are not offered."""
    for s in (
        "In the end, the studio released the final cut of the film in a few small theaters.",
        "Sadly, my brother lost the old DVD of the show during the move last year.",
    ):
        texts = [o.text for o in parse.parsed(s).options]
        assert texts and not [t for t in texts if t.startswith(("The end", "The move"))]
        assert not [t for t in texts if "during it" in t or "during them" in t]


def test_missing_model_says_how_to_install():
    with pytest.raises(HomogError, match="pip install --require-hashes"):
        load_parser("xx_no_such_model")


def test_registered():
    assert rephraser_class("parse") is ParseRephraser
    with pytest.raises(HomogError, match="parse"):
        make_rephraser("nope")


def test_a_plural_looking_title_keeps_its_capital_and_takes_it(nlp):
    """ "Little Fires" is one film: displaced, its first word keeps its capital although the
    tagger reads it as an adjective, and its pronoun agrees with "is"."""
    found = rewrites(nlp, "Little Fires is a warm coming-of-age story.")
    assert "A warm coming-of-age story is what Little Fires is." in found["reverse_pseudo_cleft"]
    assert "As for Little Fires, it is a warm coming-of-age story." in found["as_for"]
    # a plural subject with a plural verb stays "they"
    assert "As for the songs, they are lovely." in rewrites(nlp, "The songs are lovely.")["as_for"]
    # a determiner before a name is lower-cased as usual
    assert (
        "A fun ride is what the Matrix is."
        in rewrites(nlp, "The Matrix is a fun ride.")["reverse_pseudo_cleft"]
    )


def test_a_name_the_tagger_missed_gets_its_capital_back_from_the_review(parse):
    """spaCy's small model tags "Lumet" and "Emory" at a sentence start as nouns, so the
    rendering lower-cases them when they move; the review, which writes them capitalised in
    mid-sentence and never in lower case, shows they are names."""
    s = "Lumet was at his zenith in the 1970's with films like Network."
    review = "Director Sidney Lumet made a deal with the Devil. " + s
    end = parse.rewrite_many([(s, "the 1970's", review)], "end")[0]
    assert end.status == "rewritten"
    assert end.text == "It was films like Network that Lumet was at his zenith in the 1970's with."
    s2 = "Emory bids a tearful farewell to his wife and kids."
    front = parse.rewrite_many([(s2, "a tearful farewell", "Later, Emory leaves. " + s2)], "front")
    assert front[0].text == "A tearful farewell is bid by Emory to his wife and kids."
    # no review, or one that also writes the word in lower case: the tagger's reading stands
    alone = parse.rewrite_many([(s2, "a tearful farewell", s2)], "front")[0]
    assert alone.text == "A tearful farewell is bid by emory to his wife and kids."
    both = parse.rewrite_many(
        [(s2, "a tearful farewell", "Then Emory, whom emory fans love, leaves. " + s2)], "front"
    )
    assert both[0].text == "A tearful farewell is bid by emory to his wife and kids."
    # a capital after a colon is no sign of a name, nor is any stop word (a real review:
    # "... and Dark City: These really ought to be added. ... These people did ...")
    s3 = "These people did an incredible job!"
    review = "Blade Runner and Dark City: These really ought to be added. " + s3
    done = parse.rewrite_many([(s3, "an incredible job", review)], "front")[0]
    assert done.text == "An incredible job was done by these people!"
