"""Key phrases, sentence splitting, relative positions and the rephrasers.

The rule rephraser runs on hand-written sentences, including ones it must leave alone.
"""

from __future__ import annotations

import pytest

from homog import config
from homog.errors import HomogError
from homog.synth.keyphrase import YakeExtractor, make_extractor, phrase_span, relative_position
from homog.synth.rephrase import (
    REPHRASERS,
    Rephraser,
    choose,
    make_rephraser,
    position_ok,
    rephraser_class,
)
from homog.synth.rephrase.llm import clean_generation
from homog.synth.rephrase.rule import RuleRephraser, candidates, parse_sentence
from homog.text.sentences import split_sentences

RULE = RuleRephraser()


def rewrite(sentence: str, phrase: str, target: str) -> tuple[str, str]:
    r = RULE.rewrite(sentence, phrase, target, context=sentence)
    return r.text, r.status


def test_relative_position_definition():
    # 6 words, phrase of 2 words at word i: position i / (6 - 2).
    s = "alpha beta gamma delta epsilon zeta."
    assert relative_position(s, "alpha beta") == 0.0
    assert relative_position(s, "epsilon zeta") == 1.0
    assert relative_position(s, "gamma delta") == 0.5
    assert relative_position(s, "Beta Gamma") == 0.25  # case-insensitive
    assert relative_position(s, "omega") is None
    assert relative_position("Great film.", "great film") is None  # whole sentence
    assert phrase_span("It's a don't-miss film", "don't miss") == (2, 2, 5)


def test_split_sentences_keeps_abbreviations_and_gaps():
    text = "Mr. Smith liked it. So did Dr. J. Jones!  Really? yes, really."
    spans = split_sentences(text)
    got = [text[a:b] for a, b in spans]
    assert got == ["Mr. Smith liked it.", "So did Dr. J. Jones!", "Really? yes, really."]


def test_split_sentences_lower_case_openings():
    """Reviews often open a sentence in lower case: a lone "." splits before it, "..", "?",
    a closing quote and abbreviations (U.S., e.g.) do not."""
    text = (
        "It was pointless. every episode ends badly. Like the Avon Lady.. and lost big time. "
        'Shown in the U.S. and Canada, e.g. the long cut. "Great." he said. Élan vital.'
    )
    got = [text[a:b] for a, b in split_sentences(text)]
    assert got == [
        "It was pointless.",
        "every episode ends badly.",
        "Like the Avon Lady.. and lost big time.",
        "Shown in the U.S. and Canada, e.g. the long cut.",
        '"Great." he said.',
        "Élan vital.",
    ]


def test_yake_extractor_returns_phrases_found_in_text():
    ex = make_extractor("yake", ngram=2)
    phrases = ex.extract("The lighthouse keeper plays chess with a stubborn ghost.", 3)
    assert 1 <= len(phrases) <= 3
    for p in phrases:
        assert phrase_span("The lighthouse keeper plays chess with a stubborn ghost.", p)
        assert len(p.split()) <= 2
    assert YakeExtractor().extract("!!! ...", 3) == []
    with pytest.raises(HomogError, match="unknown key-phrase extractor"):
        make_extractor("keybert")


@pytest.mark.parametrize(
    ("sentence", "phrase", "target", "expected"),
    [
        # swap two coordinated clauses; capitalisation and the final "!" are fixed
        (
            "The plot is thin, but the songs are wonderful!",
            "songs are wonderful",
            "front",
            "The songs are wonderful, but the plot is thin!",
        ),
        (
            "The plot is thin, but the songs are wonderful.",
            "plot is thin",
            "end",
            "The songs are wonderful, but the plot is thin.",
        ),
        # "A, so B" keeps its causal meaning as "B, because A"
        (
            "The voice cast is warm, so the arguments feel real.",
            "arguments feel real",
            "front",
            "The arguments feel real, because the voice cast is warm.",
        ),
        # an intro clause goes behind its main clause
        (
            "Although the story slows in the middle, the payoff is worth the wait.",
            "story slows",
            "end",
            "The payoff is worth the wait, although the story slows in the middle.",
        ),
        # a trailing adjunct goes in front
        (
            "The script is sharp, with dialogue that snaps like a whip.",
            "dialogue that snaps",
            "front",
            "With dialogue that snaps like a whip, the script is sharp.",
        ),
        # a clause-final prepositional phrase is fronted; the name keeps its capital
        (
            "Mara Voss plays the keeper with remarkable restraint.",
            "remarkable restraint",
            "front",
            "With remarkable restraint, Mara Voss plays the keeper.",
        ),
        # semicolons and dashes join clauses too
        (
            "The sound is superb; the silence of space becomes a character.",
            "silence of space",
            "front",
            "The silence of space becomes a character; the sound is superb.",
        ),
        (
            "The cinematography is superb - the storms look like paintings.",
            "cinematography",
            "end",
            "The storms look like paintings - the cinematography is superb.",
        ),
    ],
)
def test_rule_rewrites(sentence, phrase, target, expected):
    text, status = rewrite(sentence, phrase, target)
    assert (text, status) == (expected, "rewritten")
    before, after = relative_position(sentence, phrase), relative_position(text, phrase)
    assert (after < before) if target == "front" else (after > before)


@pytest.mark.parametrize(
    ("sentence", "phrase", "target", "status"),
    [
        ("I really enjoyed this movie.", "enjoyed this movie", "front", "left_alone"),
        ("I really enjoyed this movie.", "enjoyed this movie", "end", "at_target"),
        # quotes and brackets are never touched
        (
            'He said "the film is great, and the cast is superb" to me.',
            "cast is superb",
            "front",
            "left_alone",
        ),
        (
            "The cast (and the crew) is great, but the plot is thin.",
            "plot is thin",
            "front",
            "left_alone",
        ),
        # a parenthetical is not a clause boundary; "of ..." is never fronted
        (
            "The captain, played by Tom Ashgrove, is a fascinating mix of courage and doubt.",
            "courage and doubt",
            "front",
            "left_alone",
        ),
        # a prepositional phrase that runs on into a clause is not fronted
        (
            "Apparently this is trying to be clever but in actual fact it isn't.",
            "actual fact",
            "front",
            "left_alone",
        ),
        # "in love" is too short to front
        ("The two of them fell in love.", "love", "front", "left_alone"),
    ],
)
def test_rule_leaves_unsafe_sentences_alone(sentence, phrase, target, status):
    text, got = rewrite(sentence, phrase, target)
    assert (text, got) == (sentence, status)


def test_lists_are_not_split_at_their_final_and():
    parsed = parse_sentence(
        "The world is rich, with cities, languages, and politics that feel real."
    )
    assert parsed is not None and len(parsed.units) == 1
    parsed = parse_sentence("Sadly, the plot is thin, and the songs are wonderful.")
    assert parsed is not None and len(parsed.units) == 2


def test_candidates_change_word_order():
    # fronting then un-fronting the same phrase only moves a comma: not a rewrite
    for text, _moves in candidates("Steel Horizon is a loud film with no real story at all."):
        assert text.rstrip(".") != "Steel Horizon is a loud film, with no real story at all"


def test_control_keeps_phrase_position():
    sentence = "Sadly, the plot is thin, and the songs are wonderful."
    text, status = rewrite(sentence, "songs are wonderful", "control")
    assert status == "rewritten" and text != sentence
    assert relative_position(text, "songs are wonderful") == pytest.approx(
        relative_position(sentence, "songs are wonderful")
    )
    # every move shifts the phrase by more than the tolerance: left alone
    text, status = rewrite(
        "The plot is thin, but the songs are wonderful.", "plot is thin", "control"
    )
    assert status == "left_alone"


def test_select_phrase_prefers_movable_candidates():
    sentence = "Paper Moons is lovely, and the colours glow like stained glass."
    # "Paper Moons" can only move to the end; "stained glass" both ways? it can move to front
    chosen = RULE.select_phrase(sentence, ["lovely", "stained glass"], sentence)
    assert chosen in ("lovely", "stained glass")
    assert RULE.select_phrase("I liked it a lot.", ["liked"], "I liked it a lot.") == "liked"


def test_choose_rejects_unknown_target_and_rephraser():
    with pytest.raises(HomogError, match="unknown rephrase target"):
        choose("A b c d.", "b", "middle", [])
    with pytest.raises(HomogError, match="unknown rephraser"):
        make_rephraser("t5")


def test_registry_names_every_configurable_rephraser():
    assert set(REPHRASERS) == set(config.REPHRASERS)
    for name in REPHRASERS:
        cls = rephraser_class(name)
        assert issubclass(cls, Rephraser) and cls.name == name
    rule = make_rephraser("rule", control_tolerance=0.05)
    assert isinstance(rule, RuleRephraser) and rule.control_tolerance == 0.05
    params = config.parse_params({"synth": {"control_tolerance": 0.3}})
    assert rephraser_class("rule").from_params(params).control_tolerance == 0.3


def test_position_ok_checks_llm_output():
    s = "The film is slow, but the ending is pure magic."
    assert position_ok(s, "Pure magic is the ending, but the film is slow.", "pure magic", "front")
    assert not position_ok(s, s, "pure magic", "front")
    assert position_ok(s, s, "pure magic", "end")
    assert not position_ok(s, "The ending is magic.", "pure magic", "end")  # phrase lost
    assert not position_ok(s, s, "film is slow", "control")  # unchanged is no control
    assert position_ok(
        s, "The film is slow, yet the ending is pure magic.", "film is slow", "control"
    )
    assert clean_generation('Sentence: "Pure magic ends it."\nmore') == "Pure magic ends it."


@pytest.mark.parametrize(
    ("sentence", "phrase", "target", "expected"),
    [
        # a comma-less "and I ..." after a full clause is a clause boundary
        (
            "The plot of Dust Road was a mess and I stopped caring halfway.",
            "stopped caring halfway",
            "front",
            "I stopped caring halfway and the plot of Dust Road was a mess.",
        ),
        # a leading connective stays first while the clauses behind it move
        (
            "But the pacing is slow, and the jokes fall flat.",
            "jokes fall flat",
            "front",
            "But the jokes fall flat, and the pacing is slow.",
        ),
        # a clause-final time adverbial is fronted
        (
            "I watched Glass Harbour with my brother last night.",
            "watched Glass Harbour",
            "end",
            "Last night, I watched Glass Harbour with my brother.",
        ),
        (
            "We rented the sequel two years ago.",
            "two years",
            "front",
            "Two years ago, we rented the sequel.",
        ),
        # a clause-final manner adverb is fronted
        (
            "Ines Marlow plays the widow brilliantly.",
            "brilliantly",
            "front",
            "Brilliantly, Ines Marlow plays the widow.",
        ),
        # a two-word phrase is fronted when it ends in a name or a number
        (
            "The whole crew shot the final scenes in Lisbon.",
            "Lisbon",
            "front",
            "In Lisbon, the whole crew shot the final scenes.",
        ),
        # sentence adverbs with a complement, and comma-less fixed openers, go to the end
        (
            "Unfortunately for the crew, the storm ruined the set.",
            "Unfortunately",
            "end",
            "The storm ruined the set, unfortunately for the crew.",
        ),
        (
            "All in all this is a charming little film.",
            "All in all",
            "end",
            "This is a charming little film, all in all.",
        ),
        (
            "Thankfully, the second half picks up speed.",
            "Thankfully",
            "end",
            "The second half picks up speed, thankfully.",
        ),
    ],
)
def test_new_rule_rewrites(sentence, phrase, target, expected):
    text, status = rewrite(sentence, phrase, target)
    assert (text, status) == (expected, "rewritten")
    before, after = relative_position(sentence, phrase), relative_position(text, phrase)
    assert (after < before) if target == "front" else (after > before)


@pytest.mark.parametrize(
    ("sentence", "phrase"),
    [
        # "my wife and I" is a subject, not two clauses
        ("My wife and I laughed at every single scene.", "laughed"),
        # a conjunct without its own subject is not a clause
        ("I loved the first season, and was heartbroken by the last.", "heartbroken"),
        # questions are never touched
        ("Did anyone in the studio watch it before release?", "studio"),
        ("Where are the people, apart from that one bunch of farmers?", "farmers"),
        # complements of the verb (or of "be") are not fronted
        ("The whole cast was looking for a better script.", "better script"),
        ("The whole story is based on a true crime.", "true crime"),
        ("The best scene of the film is in the kitchen.", "kitchen"),
        # "in love with ..." stays where it is
        ("The young doctor fell in love with the nurse.", "nurse"),
        # a phrase inside a relative or subordinate clause is not fronted
        ("Tom is the one who cheats on his wife.", "wife"),
        ("I thought that they could have spent more time on the boat.", "boat"),
        ("I missed the film in cinemas, as it only played on cable.", "cable"),
        # an adverb after a linking verb describes the subject
        ("The old castle looks extremely beautifully.", "castle"),
        # "than in ..." is a comparison, not an adverbial
        ("There is more footage in this film than in Blue Canyon.", "Blue Canyon"),
    ],
)
def test_new_rules_leave_unsafe_sentences_alone(sentence, phrase):
    for target in ("front", "end"):
        text, status = rewrite(sentence, phrase, target)
        assert text == sentence and status in ("left_alone", "at_target"), (target, text)
    assert candidates(sentence, sentence) == []


def test_control_moves_a_non_key_adverbial():
    # a non-key time adverbial moves; the key phrase stays within the tolerance
    sentence = (
        "The festival showed a restored print of the silent classic to a full house last night."
    )
    text, status = rewrite(sentence, "restored print", "control")
    assert (text, status) == (
        "Last night, the festival showed a restored print of the silent classic to a full house.",
        "rewritten",
    )
    before, after = (relative_position(t, "restored print") for t in (sentence, text))
    assert 0 < abs(after - before) <= 0.15


class _Fluency:
    """A fake fluency scorer: replies containing 'garbled' read much worse."""

    def delta(self, rewrites, originals):
        import numpy as np

        return np.array([-3.0 if "garbled" in r else -0.1 for r in rewrites])


def test_llm_front_reply_is_forced_to_begin_with_the_phrase():
    from homog.synth.rephrase.llm import LLMRephraser, forced_prefix

    llm = object.__new__(LLMRephraser)
    llm.tokenizer = type("Tok", (), {"chat_template": None})()
    llm.retries, llm.batch_size, llm.seed = 0, 8, 0
    llm.slack_words, llm.control_tolerance = 2, 0.15
    llm.fluency, llm.threshold = _Fluency(), 0.5
    prompts = []

    def generate(batch, *, sample):
        prompts.extend(batch)
        # the model only continues after the forced prefix
        return [" is what sinks the film, sadly.", " garbled garbled the the film."]

    llm.generate = generate
    s1 = "The film sinks under its wooden dialogue."
    items = [(s1, "wooden dialogue", s1), (s1, "wooden dialogue", s1)]
    out = llm.rewrite_many(items, "front")
    assert all(p.endswith("Wooden dialogue") for p in prompts)
    assert forced_prefix("wooden dialogue", "end") == ""
    assert out[0].status == "rewritten"
    assert out[0].text == "Wooden dialogue is what sinks the film, sadly."
    assert out[0].fluency == pytest.approx(-0.1)
    assert out[1].status == "rejected" and out[1].text == s1  # not fluent enough
