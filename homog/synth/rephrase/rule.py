"""The rule rephraser: parse a sentence into clauses and move whole clauses or phrases.

Offline and deterministic (the default ``synth.rephraser``). The sentence (final punctuation
and a leading connective such as "But", "And", "Still", "Then" set aside; the connective stays
first) is split into *units* (main clauses) at semicolons, spaced dashes and
", and|but|yet|or|nor|so" (not a ", and" that closes a list such as "cities, languages, and
politics", nor one whose second part has no subject of its own: "I loved it, and was moved"),
and at a comma-less " and|but " followed by I, he, she, we or they when the part before it
reads as a clause (four words or more with a verb cue, not ending in a pronoun or a short
prepositional phrase: "My wife and I loved it" and "with my wife and I" are not split). A unit
may have an *intro* (a leading subordinate, prepositional or participle phrase, a sentence
adverb such as "Sadly" or "Unfortunately for him", followed by a comma; or a fixed opener such
as "All in all" or "In the end" even without its comma) and a *trail* (", because|although|
while|with|especially ...", or "because|although|unless ..." without a comma). The moves are:
  1. move a unit to the front or the end (the joiners keep their places: "A, but B" ->
     "B, but A"); "A, so B" becomes "B, because A" (the only rewording, which keeps the
     causal meaning);
  2. move a trail in front of its clause ("A, with B" -> "With B, A") or an intro behind it
     ("In the end, A" -> "A, in the end");
  3. front a clause-final prepositional phrase of three words or more (two when the second
     is a name or a number: "in Toronto", "in 1995") opened by with, without, during,
     despite, in, on, at, for, from, ... (not by, of, to, about): "X plays Y with great
     restraint" -> "With great restraint, X plays Y". The shortest such phrase of at most
     eight words is taken, never the complement of the word before it ("looking for a
     film", "based on a true story", "is in the house", "more than in ..."), and not from a
     clause with a comma or a relative/subordinate clause before the phrase;
  4. front a clause-final time adverbial ("I saw it last night" -> "Last night, I saw it";
     "... two years ago", "yesterday", "recently", "these days") or manner adverb of eight
     letters or more ("She plays it brilliantly" -> "Brilliantly, she plays it"; not after
     a form of "be" or a linking verb such as "looks"), under the same conditions.
Questions are never touched.
Up to two moves are combined; the candidate that puts the phrase earliest (front) or latest
(end) wins if it improves on the original; for ``control`` the move that changes the phrase's
relative position least wins, typically a move of clauses that do not hold the phrase, and the
sentence is left alone when every move shifts it by more than ``control_tolerance`` (see
``homog.synth.rephrase.choose``). Sentences with quotes or brackets are never touched.
Capitalisation is fixed (the new first word is capitalised; the old first word is lower-cased
unless it looks like a name or "I") and the final punctuation stays at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from homog.config import Params
from homog.config.synth import SynthConfig
from homog.synth.keyphrase import words
from homog.synth.rephrase import Rephraser, Rewrite, choose
from homog.synth.rephrase.lexicon import (
    BARE_INTROS,
    BARE_SUBORDINATORS,
    BE,
    CLAUSE_WORDS,
    COMMON_STARTS,
    FRONTABLE_PREPOSITIONS,
    INTRO_ADVERBS,
    INTRO_PREPOSITIONS,
    LEADS,
    LINKING,
    LY_ENDINGS,
    OBJECT_PRONOUNS,
    SELECTED_BY,
    SHORT_PREPOSITIONS,
    SUBCLAUSE_WORDS,
    SUBJECT_LESS,
    SUBJECTS,
    SUBORDINATORS,
    TIME_ADVERBIAL,
    TRAIL_PREPOSITIONS,
    VERB_CUES,
)

_UNSAFE_CHARS = set('"\u201c\u201d()[]{}')
_FINAL = re.compile(r"[\s.!?\u2026]*$")
_UNIT_BOUNDARY = re.compile(
    r"\s*;\s+|\s+(?:-{1,2}|\u2013|\u2014)\s+|,\s+(and|but|yet|or|nor|so)\s+"
    r"|\s+(and|but)\s+(?=(?:i|he|she|we|they)\s)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Unit:
    """A main clause with an optional leading intro and trailing trail (both comma-joined)."""

    main: str
    intro: str | None = None
    trail: str | None = None

    def render(self) -> str:
        return ", ".join(p for p in (self.intro, self.main, self.trail) if p)


@dataclass(frozen=True)
class Parsed:
    """A sentence as units joined by joiners (len(joiners) == len(units) - 1)."""

    units: tuple[Unit, ...]
    joiners: tuple[str, ...]
    final: str
    lead: str = ""

    def render(self) -> str:
        out = self.units[0].render()
        for joiner, unit in zip(self.joiners, self.units[1:], strict=True):
            out += joiner + unit.render()
        if self.lead:
            return f"{self.lead} {out}{self.final}"
        return _capitalise(out) + self.final


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _first_word(text: str) -> str:
    m = re.match(r"[\w']+", text)
    return m.group() if m else ""


def _starts_with(text: str, options: tuple[str, ...]) -> str | None:
    low = text.lower()
    for opt in sorted(options, key=len, reverse=True):
        if low.startswith(opt) and (len(low) == len(opt) or not low[len(opt)].isalnum()):
            return opt
    return None


def _lower_first(text: str, context: str) -> str:
    """Lower-case the first word unless it looks like a name (or is "I")."""
    word = _first_word(text)
    if not word or word == "I" or word.startswith("I'") or not word[0].isupper():
        return text
    low = word.lower()
    base = re.split(r"['\u2019]", low)[0]
    adverb = len(low) >= 8 and low.endswith("ly")
    if base in COMMON_STARTS or adverb or re.search(rf"\b{re.escape(low)}\b", context):
        return low + text[len(word) :]
    return text


def _split_intro(text: str) -> tuple[str | None, str]:
    """(intro, rest) when ``text`` opens with an intro phrase and a comma, else (None, text)."""
    if ", " in text:
        head, tail = text.split(", ", 1)
        # "Sadly, ..." / "Thankfully, ..." / "Unfortunately for him, ...".
        first_word = head.split()[0]
        single_adverb = (first_word.lower() in INTRO_ADVERBS or _is_adverb(first_word)) and (
            len(head.split()) == 1
            or (len(head.split()) <= 4 and head.split()[1].lower() in ("for", "enough"))
        )
        first = _first_word(head).lower()
        # "Set on a night train, it ..." / "Having seen it, I ...": participle openers.
        participle = len(head.split()) >= 2 and first.endswith(("ing", "ed")) and len(first) > 4
        if (
            _starts_with(head, SUBORDINATORS + INTRO_PREPOSITIONS) or single_adverb or participle
        ) and len(tail.split()) >= 2:
            return head, tail
    bare = _starts_with(text, BARE_INTROS)
    if bare and len(text[len(bare) :].split()) >= 3:
        return text[: len(bare)], text[len(bare) :].strip()
    return None, text


def _is_adverb(word: str) -> bool:
    """A sentence or manner adverb by its ending ("Thankfully", "brilliantly")."""
    low = word.lower()
    return low.isalpha() and len(low) >= 8 and low.endswith(LY_ENDINGS)


def _clause_before_bare_and(before: str) -> bool:
    """Does ``before`` read as a clause, so that a comma-less "and I ..." may split after it?"""
    ws = words(before)
    if len(ws) < 4 or ws[-1] in OBJECT_PRONOUNS or SHORT_PREPOSITIONS & set(ws[-3:]):
        return False
    cue = any(w in VERB_CUES or w in SUBJECTS or (len(w) > 4 and w.endswith("ed")) for w in ws)
    # A leading subordinate clause or phrase ("When I saw it, I ...") is an intro instead.
    opener = _starts_with(before, SUBORDINATORS + INTRO_PREPOSITIONS + BARE_INTROS)
    return cue and "," not in before and opener is None


def _split_unit(text: str) -> Unit:
    intro, rest = _split_intro(text)
    trail = None
    for m in re.finditer(r",\s+", rest):
        after = rest[m.end() :]
        if (
            _starts_with(after, SUBORDINATORS + TRAIL_PREPOSITIONS)
            and len(rest[: m.start()].split()) >= 2
        ):
            trail, rest = after, rest[: m.start()]
            break
    if trail is None:
        pattern = r"\s(" + "|".join(re.escape(w) for w in BARE_SUBORDINATORS) + r")\s"
        m2 = re.search(pattern, rest, flags=re.IGNORECASE)
        if m2 and len(rest[: m2.start()].split()) >= 3 and len(rest[m2.start() :].split()) >= 3:
            trail, rest = rest[m2.start() + 1 :], rest[: m2.start()]
    return Unit(main=rest, intro=intro, trail=trail)


def parse_sentence(sentence: str, context: str = "") -> Parsed | None:
    """Parse a sentence into units (see module docstring); None when it is not safe to touch.

    ``context`` (the whole text) helps decide whether the first word may be lower-cased.
    """
    sentence = sentence.strip()
    if not sentence or _UNSAFE_CHARS & set(sentence) or not sentence[0].isalnum():
        return None
    final = _FINAL.search(sentence).group()  # type: ignore[union-attr]
    body = sentence[: len(sentence) - len(final)]
    # Questions are left alone: moving a phrase out of one breaks the inversion.
    if not body or "?" in sentence:
        return None
    # A leading connective ("But the plot ...") stays first; the rest keeps its case.
    lead = _starts_with(body, LEADS)
    if lead and body[len(lead) : len(lead) + 1] == " " and len(body.split()) >= 5:
        lead, body = body[: len(lead)], body[len(lead) + 1 :]
    else:
        lead, body = "", _lower_first(body, context or sentence)
    pieces: list[str] = []
    joiners: list[str] = []
    start = 0
    for m in _UNIT_BOUNDARY.finditer(body):
        before = body[start : m.start()]
        word = (m.group(1) or "").lower()
        if m.group(2) and not _clause_before_bare_and(before):
            continue
        # ", and was heartbroken": a conjunct without its own subject is not a clause.
        after_first = _first_word(body[m.end() :]).lower()
        if word and (after_first in VERB_CUES or after_first in SUBJECT_LESS):
            continue
        if word == "and" or word == "or":
            # ", and" closing a list ("cities, languages, and politics") is not a boundary.
            # A list's items are short; clauses joined after an earlier comma are long.
            clause = _split_intro(before)[1]
            last_item = clause.rsplit(",", 1)[-1] if "," in clause else None
            if last_item is not None and len(last_item.split()) <= 4:
                continue
        if word == "so" and _first_word(body[m.end() :]).lower() in {"that", "much", "far"}:
            continue
        if len(before.split()) < 2 or len(body[m.end() :].split()) < 2:
            continue
        pieces.append(before)
        joiners.append(m.group())
        start = m.end()
    pieces.append(body[start:])
    units = tuple(_split_unit(p) for p in pieces)
    return Parsed(units=units, joiners=tuple(joiners), final=final, lead=lead)


def _moves(p: Parsed) -> list[Parsed]:
    """Every parse reachable by one move (see module docstring)."""
    out: list[Parsed] = []
    n = len(p.units)
    has_so = any(j.strip(" ,").lower() == "so" for j in p.joiners)
    if n == 2 and has_so:
        a, b = p.units
        if b.trail is None:
            out.append(replace(p, units=(replace(b, trail="because " + a.render()),), joiners=()))
    elif n >= 2 and not has_so:
        for k in range(n):
            rest = [u for i, u in enumerate(p.units) if i != k]
            for order in ([p.units[k], *rest], [*rest, p.units[k]]):
                if tuple(order) != p.units:
                    out.append(replace(p, units=tuple(order)))
    for k, unit in enumerate(p.units):
        new: Unit | None = None
        if unit.trail and not unit.intro:
            new = Unit(main=unit.main, intro=unit.trail)
        elif unit.intro and not unit.trail:
            new = Unit(main=unit.main, trail=unit.intro)
        elif not unit.intro:
            new = _front_final_phrase(unit)
        if new is not None:
            units = list(p.units)
            units[k] = new
            out.append(replace(p, units=tuple(units)))
    return out


def _front_final_phrase(unit: Unit) -> Unit | None:
    """The unit with its clause-final time adverbial or prepositional phrase fronted, or None.

    Prepositional phrases: the longest valid one (3..8 words, no comma, no clause inside it,
    not the complement of the word before it); at least three words stay behind.
    """
    main = unit.main
    m_time = TIME_ADVERBIAL.search(main)
    if m_time:
        head = main[: m_time.start()]
        hw = words(head)
        if len(hw) >= 3 and hw[-1] not in FRONTABLE_PREPOSITIONS + ("of", "than", "as", "like"):
            if not SUBCLAUSE_WORDS & set(hw) and "," not in head:
                return Unit(main=head, intro=m_time.group(1), trail=unit.trail)
    head, _, last = main.rpartition(" ")
    hw = words(head)
    if _is_adverb(last) and len(hw) >= 3 and "," not in head:
        linked = (LINKING | frozenset(BE.split())) & set(hw[-2:])  # "looks (very) silly"
        if not linked and not SUBCLAUSE_WORDS & set(hw):
            return Unit(main=head, intro=last, trail=unit.trail)
    pattern = r"\s(" + "|".join(re.escape(w) for w in FRONTABLE_PREPOSITIONS) + r")\s"
    for m in reversed(list(re.finditer(pattern, main, flags=re.IGNORECASE))):
        head, phrase = main[: m.start()], main[m.start() + 1 :]
        # A phrase with a clause in it ("in fact it isn't") or a comma stops the search, since
        # every longer phrase holds it too; "fell in love" is too short to front.
        if len(phrase.split()) > 8 or "," in phrase:
            break
        if set(re.findall(r"[\w']+", phrase.lower())) & CLAUSE_WORDS:
            break
        hw = words(head)
        if "," in head or SUBCLAUSE_WORDS & set(hw) or "love" in hw[-2:]:
            break  # the phrase may belong to a subordinate clause, or be "in love with ..."
        # Two-word phrases only with a name or number ("in Toronto", "in 1995").
        two = len(phrase.split()) == 2 and len(hw) >= 4 and phrase.split()[1][:1].isupper()
        two = two or (len(phrase.split()) == 2 and len(hw) >= 4 and phrase.split()[1].isdigit())
        if len(hw) < 3 or (len(phrase.split()) < 3 and not two):
            continue
        prep = m.group(1).lower().split()[0]
        if hw[-1] in BE.split() or hw[-1] in SELECTED_BY.get(prep, "").split():
            continue
        if hw[-1] in ("of", "than", "as", "kind", "sort", "like"):
            continue
        return Unit(main=head, intro=phrase, trail=unit.trail)
    return None


def candidates(sentence: str, context: str = "", depth: int = 2) -> list[tuple[str, int]]:
    """Distinct rewrites of ``sentence`` reachable in 1..depth moves, as (text, n_moves).

    Empty when the sentence cannot be parsed safely. The original is not included.
    """
    parsed = parse_sentence(sentence, context)
    if parsed is None:
        return []
    # A candidate must change the order of words: moves that undo each other, or only add or
    # drop a comma, are not rewrites.
    seen = {tuple(words(sentence))}
    out: list[tuple[str, int]] = []
    frontier = [parsed]
    for n_moves in range(1, depth + 1):
        nxt = []
        for p in frontier:
            for q in _moves(p):
                text = q.render()
                key = tuple(words(text))
                if key not in seen:
                    seen.add(key)
                    out.append((text, n_moves))
                    nxt.append(q)
        frontier = nxt
    return out


class RuleRephraser(Rephraser):
    """Deterministic clause reordering (module docstring); offline and fast."""

    name = "rule"

    def __init__(
        self, control_tolerance: float = SynthConfig.control_tolerance, depth: int = 2
    ) -> None:
        self.control_tolerance = control_tolerance
        self.depth = depth

    @classmethod
    def from_params(cls, params: Params) -> RuleRephraser:
        """The rule rephraser with ``synth.control_tolerance``."""
        return cls(control_tolerance=params.synth.control_tolerance)

    def rewrite(self, sentence: str, phrase: str, target: str, context: str = "") -> Rewrite:
        """Rewrite one sentence for ``target`` (see ``choose``)."""
        options = candidates(sentence, context, self.depth)
        return choose(sentence, phrase, target, options, control_tolerance=self.control_tolerance)

    def rewrite_many(
        self, items: list[tuple[str, str, str]], target: str, on_done: Any = None
    ) -> list[Rewrite]:
        out = []
        for sentence, phrase, context in items:
            out.append(self.rewrite(sentence, phrase, target, context))
            if on_done is not None:
                on_done(1)
        return out

    def select_phrase(self, sentence: str, options: list[str], context: str = "") -> str:
        """The best-ranked option that can be moved both ways, else one way, else the best."""
        cands = candidates(sentence, context, self.depth)

        def movable(phrase: str) -> int:
            return sum(
                choose(sentence, phrase, t, cands).status == "rewritten" for t in ("front", "end")
            )

        scores = [movable(p) for p in options]
        return options[scores.index(max(scores))]
