"""Rephrasers: rewrite a sentence so its key phrase comes first, last, or stays where it is.

One interface (``Rephraser``) with two implementations:

- ``RuleRephraser`` (default, offline, deterministic): parses the sentence into clauses and
  moves whole clauses (see "Rule rewrites" below); a sentence it cannot rewrite safely is left
  as it is and counted.
- ``LLMRephraser``: asks an instruct LM to rewrite the sentence with the phrase at its
  beginning or end; the output is checked (the phrase must be at the asked position) and
  retried with sampling, then rejected (sentence left as is, counted).

Targets: ``front`` (key phrase as early as possible), ``end`` (as late as possible),
``control`` (the same kind of rewrite, but the key phrase keeps its relative position as
closely as possible: the rule rephraser picks the clause move that changes the phrase's
relative position least, typically a move of clauses that do not hold the phrase, and gives up
when every move shifts it by more than ``control_tolerance``). Positions are
``homog.keyphrase.relative_position``.

Rule rewrites. The sentence (final punctuation and a leading connective such as "But",
"And", "Still", "Then" set aside; the connective stays first) is split into *units* (main
clauses) at semicolons, spaced dashes and ", and|but|yet|or|nor|so" (not a ", and" that closes
a list such as "cities, languages, and politics", nor one whose second part has no subject of
its own: "I loved it, and was moved"), and at a comma-less " and|but " followed by I, he, she,
we or they when the part before it reads as a clause (four words or more with a verb cue, not
ending in a pronoun or a short prepositional phrase: "My wife and I loved it" and "with my
wife and I" are not split). A unit may have an *intro* (a leading subordinate, prepositional
or participle phrase, a sentence adverb such as "Sadly" or "Unfortunately for him", followed by
a comma; or a fixed opener such as "All in all" or "In the end" even without its comma) and a
*trail* (", because|although|while|with|especially ...", or "because|although|unless ..."
without a comma). The moves are:
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
(end) wins if it improves on the original. Sentences with quotes or brackets are never
touched. Capitalisation is fixed (the new first word is capitalised; the old first word is
lower-cased unless it looks like a name or "I") and the final punctuation stays at the end.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any

from homog.io import HomogError
from homog.keyphrase import phrase_span, relative_position, words

TARGETS = ("front", "end", "control")

COORDINATORS = ("and", "but", "yet", "or", "nor", "so")
SUBORDINATORS = (
    "because",
    "although",
    "though",
    "while",
    "whereas",
    "since",
    "unless",
    "even though",
    "even if",
    "when",
    "if",
    "once",
    "until",
    "before",
    "after",
)
TRAIL_PREPOSITIONS = (
    "with",
    "without",
    "especially",
    "thanks to",
    "despite",
    "during",
    "throughout",
    "particularly",
    "except",
)
INTRO_PREPOSITIONS = (
    "by",
    "in",
    "on",
    "at",
    "for",
    "with",
    "without",
    "during",
    "after",
    "before",
    "from",
    "despite",
    "throughout",
    "unlike",
    "like",
    "besides",
    "within",
    "under",
    "over",
    "beyond",
    "thanks to",
    "as",
    "apart from",
    "for all",
    "of course",
    "in fact",
    "at times",
    "to be honest",
    "to be fair",
    "to me",
    "all in all",
    "even so",
    "that said",
    "then again",
    "needless to say",
    "in short",
    "all told",
)
INTRO_ADVERBS = (
    "however",
    "still",
    "overall",
    "instead",
    "meanwhile",
    "otherwise",
    "yes",
    "sadly",
    "honestly",
    "frankly",
    "unfortunately",
    "fortunately",
    "admittedly",
    "ultimately",
    "basically",
    "personally",
    "strangely",
    "surprisingly",
    "clearly",
    "obviously",
    "finally",
    "anyway",
    "luckily",
    "happily",
    "oddly",
    "weirdly",
    "eventually",
    "later",
    "indeed",
    "alas",
    "granted",
)
# A clause-final phrase opened by one of these may be fronted ("X, P ..." -> "P ..., x").
# Not "by" (passive agents), "of", "to" or "about" (complements that cannot stand first).
FRONTABLE_PREPOSITIONS = (
    "with",
    "without",
    "during",
    "despite",
    "throughout",
    "thanks to",
    "in",
    "on",
    "at",
    "for",
    "from",
    "after",
    "before",
    "since",
    "among",
    "across",
    "behind",
    "beyond",
    "inside",
    "outside",
    "under",
    "until",
    "because of",
)
# A prepositional phrase right after one of these words is its complement, which cannot be
# fronted ("looking for a film" -> *"For a film, ... looking"); forms of "be" for all of them.
_BE = "is are was were be been being am isn't aren't wasn't weren't 's 're 'm"
SELECTED_BY = {
    "for": "look looks looked looking wait waits waited waiting search searched searching ask "
    "asks asked asking pay paid care cared fall falls fell go goes went going hope hoped "
    "known famous responsible nominated thanks thank apologise apologize account accounts "
    "stand stands stood home",
    "in": "set starred stars star starring believe believes believed result results resulted "
    "interested involved engaged participate participated succeed succeeded lies lie lay "
    "cast shot filmed",
    "on": "based focus focuses focused focusing rely relies relied depend depends depended "
    "count insist insisted comment commented hooked keen cheat cheats cheated cheating "
    "spent spend spends",
    "at": "look looks looked looking laugh laughs laughed laughing stare stared staring aimed "
    "aim good bad arrive arrived arrives",
    "from": "suffer suffers suffered suffering differ differs differed come comes came "
    "derived adapted apart far different away",
    "with": "deal deals dealt cope compared filled packed familiar associated fell love obsessed "
    "stuck stick sticks along up together flirts flirt flirted",
    "into": "turn turns turned",
}
# Words that show a prepositional phrase goes on into a clause (it must not be fronted then).
CLAUSE_WORDS = frozenset(
    """it he she they i we you is are was were be been isn't wasn't aren't weren't it's that
    which who whom whose what where when and but or if than as""".split()
)
# Subordinators that open a movable trail even without a comma ("X because Y").
BARE_SUBORDINATORS = ("because", "although", "even though", "whereas", "unless")
# Words that may be lower-cased when they stop being the first word of a sentence.
COMMON_STARTS = frozenset(
    """the a an it its it's this that these those there here he she they we you his her their
    our my your some every each all most many much more even by in on at for with without
    after before although though while when if because since once what who how why no not
    one two both such so then also still yet but and or nor despite during throughout thanks
    especially from as like unlike overall however sadly honestly frankly unfortunately
    fortunately admittedly ultimately instead meanwhile otherwise yes only just any another
    nothing everything something nobody everyone someone people viewers fans parents kids
    children save go watch read avoid see skip anyway luckily happily oddly weirdly eventually
    later to that indeed alas granted""".split()
)

# A clause-final time adverbial that can open the clause instead.
_TIME_ADVERBIAL = re.compile(
    r"\s((?:last|this|next) (?:night|week|weekend|month|year|summer|winter|spring|autumn|"
    r"time)|(?:(?:a few|a couple of|several|many|some|two|three|four|five|ten|twenty|\d+) )?"
    r"(?:years|months|weeks|days|decades) ago|yesterday|today|tonight|recently|nowadays|"
    r"these days|back then|later on)$",
    re.IGNORECASE,
)
# Words that tie a phrase to a relative or subordinate clause, after which an adverbial's
# attachment would be ambiguous.
_SUBCLAUSE_WORDS = frozenset(
    "that which who whom whose where when if because than as what how while".split()
)
# Subject pronouns after a comma-less "and"/"but" open a new clause; verb cues in the part
# before show that it is a clause, not a noun phrase ("my wife and I").
_SUBJECTS = frozenset("i he she we they".split())
_VERB_CUES = frozenset(
    """is are was were be been am has have had do does did can could will would should may
    might must isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't
    it's i'm i've i'd he's she's they're we're""".split()
)
# Words that open a verb phrase rather than a clause after ", and" (besides _VERB_CUES).
_SUBJECT_LESS = frozenset("may might must then also still even just never not".split())
_OBJECT_PRONOUNS = frozenset("i he she we they you me him us them".split())
_SHORT_PREPOSITIONS = frozenset("with for to between of by from like than and or".split())

# Sentence adverbs are recognised by these endings (eight letters or more, as in _lower_first).
LY_ENDINGS = (
    "ally",
    "ously",
    "ively",
    "fully",
    "ately",
    "ently",
    "antly",
    "ibly",
    "ably",
    "edly",
    "ingly",
)
# Openers that are intros even without their comma ("All in all this is ..."); the rewrite
# adds the comma.
BARE_INTROS = (
    "all in all",
    "in the end",
    "in fact",
    "of course",
    "at first",
    "at times",
    "in short",
    "once again",
    "to be honest",
    "in my opinion",
)
# Connectives that open a sentence and stay first whatever moves behind them.
LEADS = ("and", "but", "still", "also", "yet", "plus", "then", "or")
# After these a clause-final adverb describes the subject ("looks silly"), not the action.
_LINKING = frozenset(
    "seem seems seemed look looks looked feel feels felt sound sounds sounded become becomes "
    "became get gets got remain remains remained".split()
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


@dataclass(frozen=True)
class Rewrite:
    """A rewritten sentence and what happened: rewritten | at_target | left_alone | rejected."""

    text: str
    status: str


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
    if len(ws) < 4 or ws[-1] in _OBJECT_PRONOUNS or _SHORT_PREPOSITIONS & set(ws[-3:]):
        return False
    cue = any(w in _VERB_CUES or w in _SUBJECTS or (len(w) > 4 and w.endswith("ed")) for w in ws)
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
        if word and (after_first in _VERB_CUES or after_first in _SUBJECT_LESS):
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
    m_time = _TIME_ADVERBIAL.search(main)
    if m_time:
        head = main[: m_time.start()]
        hw = words(head)
        if len(hw) >= 3 and hw[-1] not in FRONTABLE_PREPOSITIONS + ("of", "than", "as", "like"):
            if not _SUBCLAUSE_WORDS & set(hw) and "," not in head:
                return Unit(main=head, intro=m_time.group(1), trail=unit.trail)
    head, _, last = main.rpartition(" ")
    hw = words(head)
    if _is_adverb(last) and len(hw) >= 3 and "," not in head:
        linked = (_LINKING | frozenset(_BE.split())) & set(hw[-2:])  # "looks (very) silly"
        if not linked and not _SUBCLAUSE_WORDS & set(hw):
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
        if "," in head or _SUBCLAUSE_WORDS & set(hw) or "love" in hw[-2:]:
            break  # the phrase may belong to a subordinate clause, or be "in love with ..."
        # Two-word phrases only with a name or number ("in Toronto", "in 1995").
        two = len(phrase.split()) == 2 and len(hw) >= 4 and phrase.split()[1][:1].isupper()
        two = two or (len(phrase.split()) == 2 and len(hw) >= 4 and phrase.split()[1].isdigit())
        if len(hw) < 3 or (len(phrase.split()) < 3 and not two):
            continue
        prep = m.group(1).lower().split()[0]
        if hw[-1] in _BE.split() or hw[-1] in SELECTED_BY.get(prep, "").split():
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


def choose(
    sentence: str,
    phrase: str,
    target: str,
    options: list[tuple[str, int]],
    *,
    control_tolerance: float = 0.15,
    at_target: float = 0.15,
) -> Rewrite:
    """Pick the best of ``options`` (from ``candidates``) for ``target`` (pure).

    front/end: the option with the smallest/largest relative position of ``phrase``, if it
    improves on the original (ties: fewer moves first). control: the option whose position is
    closest to the original's, if within ``control_tolerance``. Otherwise the sentence is
    returned unchanged with status ``at_target`` (front/end, already within ``at_target`` of
    the extreme) or ``left_alone``.
    """
    if target not in TARGETS:
        raise HomogError(f"unknown rephrase target {target!r}; use one of {TARGETS}")
    orig = relative_position(sentence, phrase)
    if orig is None:
        return Rewrite(sentence, "left_alone")
    scored = [
        (pos, moves, text)
        for text, moves in options
        if (pos := relative_position(text, phrase)) is not None
    ]
    if target == "control":
        best = min(scored, key=lambda s: (abs(s[0] - orig), s[1]), default=None)
        if best is not None and abs(best[0] - orig) <= control_tolerance:
            return Rewrite(best[2], "rewritten")
        return Rewrite(sentence, "left_alone")
    sign = 1.0 if target == "front" else -1.0
    best = min(scored, key=lambda s: (sign * s[0], s[1]), default=None)
    if best is not None and sign * best[0] < sign * orig - 1e-9:
        return Rewrite(best[2], "rewritten")
    extreme = orig if target == "front" else 1.0 - orig
    return Rewrite(sentence, "at_target" if extreme <= at_target else "left_alone")


class Rephraser(ABC):
    """Rewrites (sentence, key phrase) pairs for a target in ``TARGETS``."""

    name: str = "base"

    def select_phrase(self, sentence: str, options: list[str], context: str = "") -> str:
        """The key phrase to use among ranked ``options`` (default: the best-ranked)."""
        return options[0]

    @abstractmethod
    def rewrite_many(
        self, items: list[tuple[str, str, str]], target: str, on_done: Any = None
    ) -> list[Rewrite]:
        """Rewrite (sentence, phrase, context) items for ``target``; one Rewrite per item.

        ``on_done(k)`` (optional) is called after each k finished items, for progress bars.
        """


class RuleRephraser(Rephraser):
    """Deterministic clause reordering (module docstring); offline and fast."""

    name = "rule"

    def __init__(self, control_tolerance: float = 0.15, depth: int = 2) -> None:
        self.control_tolerance = control_tolerance
        self.depth = depth

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


PROMPTS = {
    "front": (
        'Rewrite the sentence so that it begins with the exact words "{phrase}". Keep its '
        "meaning and all of its information; change the order of words, not the words. "
        "Reply with the rewritten sentence only.\nSentence: {sentence}"
    ),
    "end": (
        'Rewrite the sentence so that it ends with the exact words "{phrase}". Keep its '
        "meaning and all of its information; change the order of words, not the words. "
        "Reply with the rewritten sentence only.\nSentence: {sentence}"
    ),
    "control": (
        "Rewrite the sentence by changing the order of its clauses or words, keeping its "
        'meaning, and keep the exact words "{phrase}" where they are in the sentence. '
        "Reply with the rewritten sentence only.\nSentence: {sentence}"
    ),
}


def position_ok(
    original: str,
    rewritten: str,
    phrase: str,
    target: str,
    *,
    slack_words: int = 2,
    control_tolerance: float = 0.15,
) -> bool:
    """Is ``phrase`` at the asked position in ``rewritten``? (used to check LLM output).

    front: the phrase starts within the first ``slack_words`` + 1 words; end: it ends within
    the last ``slack_words`` + 1 words; control: the text changed and the relative position
    moved by at most ``control_tolerance``.
    """
    span = phrase_span(rewritten, phrase)
    if span is None:
        return False
    i, k, n = span
    if target == "front":
        return i <= slack_words
    if target == "end":
        return n - (i + k) <= slack_words
    orig, new = relative_position(original, phrase), relative_position(rewritten, phrase)
    return (
        rewritten.strip() != original.strip()
        and orig is not None
        and new is not None
        and abs(orig - new) <= control_tolerance
    )


def clean_generation(text: str) -> str:
    """First non-empty line of a model reply, without a 'Sentence:' label or wrapping quotes."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    line = lines[0] if lines else ""
    line = re.sub(r"^(rewritten sentence|sentence|answer)\s*:\s*", "", line, flags=re.I)
    if len(line) >= 2 and line[0] in "\"'\u201c" and line[-1] in "\"'\u201d":
        line = line[1:-1].strip()
    return line


class LLMRephraser(Rephraser):
    """An instruct LM asked to move the phrase; outputs are checked, retried, or rejected.

    ``source`` is a model source for ``homog.models.load_model`` (``embedded:smollm2-135m``,
    ``hf:<id-or-dir>``). The first try is greedy; up to ``retries`` more tries sample with
    ``temperature``. A reply is accepted when ``position_ok`` holds and its length is within
    a factor of two of the original's; otherwise the sentence stays as it is (``rejected``).
    """

    name = "llm"

    def __init__(
        self,
        source: str,
        *,
        device: str = "auto",
        dtype: str = "float32",
        max_new_tokens: int = 64,
        retries: int = 2,
        temperature: float = 0.7,
        batch_size: int = 8,
        slack_words: int = 2,
        control_tolerance: float = 0.15,
        seed: int = 0,
    ) -> None:
        from homog.models import load_model

        self.loaded = load_model(source, dtype=dtype, device=device, attention=False, seed=seed)
        self.tokenizer = self.loaded.tokenizer
        self.model = self.loaded.model
        self.max_new_tokens = max_new_tokens
        self.retries = retries
        self.temperature = temperature
        self.batch_size = batch_size
        self.slack_words = slack_words
        self.control_tolerance = control_tolerance
        self.seed = seed

    def _prompt(self, sentence: str, phrase: str, target: str) -> str:
        content = PROMPTS[target].format(phrase=phrase, sentence=sentence)
        messages = [{"role": "user", "content": content}]
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        return content + "\nRewritten sentence:"

    def generate(self, prompts: list[str], *, sample: bool) -> list[str]:
        """Replies (decoded new tokens) for ``prompts``, one batch; left padding for decoding."""
        import torch

        tok = self.tokenizer
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = side
        enc = {k: v.to(self.loaded.input_device) for k, v in enc.items()}
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "pad_token_id": tok.pad_token_id,
            "do_sample": sample,
        }
        if sample:
            kwargs["temperature"] = self.temperature
        with torch.no_grad():
            out = self.model.generate(**enc, **kwargs)
        new = out[:, enc["input_ids"].shape[1] :]
        return tok.batch_decode(new, skip_special_tokens=True)

    def _accept(self, sentence: str, reply: str, phrase: str, target: str) -> bool:
        n_in, n_out = len(sentence.split()), len(reply.split())
        return n_in / 2 <= n_out <= n_in * 2 and position_ok(
            sentence,
            reply,
            phrase,
            target,
            slack_words=self.slack_words,
            control_tolerance=self.control_tolerance,
        )

    def rewrite_many(
        self, items: list[tuple[str, str, str]], target: str, on_done: Any = None
    ) -> list[Rewrite]:
        import torch

        if target not in TARGETS:
            raise HomogError(f"unknown rephrase target {target!r}; use one of {TARGETS}")
        torch.manual_seed(self.seed)
        results: list[Rewrite | None] = [None] * len(items)
        for start in range(0, len(items), self.batch_size):
            idx = list(range(start, min(start + self.batch_size, len(items))))
            for attempt in range(self.retries + 1):
                todo = [i for i in idx if results[i] is None]
                if not todo:
                    break
                prompts = [self._prompt(items[i][0], items[i][1], target) for i in todo]
                replies = self.generate(prompts, sample=attempt > 0)
                for i, reply in zip(todo, replies, strict=True):
                    text = clean_generation(reply)
                    if self._accept(items[i][0], text, items[i][1], target):
                        results[i] = Rewrite(text, "rewritten")
            for i in idx:
                if results[i] is None:
                    results[i] = Rewrite(items[i][0], "rejected")
            if on_done is not None:
                on_done(len(idx))
        return [r for r in results if r is not None]


def make_rephraser(name: str, **options: Any) -> Rephraser:
    """``rule`` or ``llm`` (options passed to the class); HomogError for another name."""
    if name == "rule":
        return RuleRephraser(**options)
    if name == "llm":
        return LLMRephraser(**options)
    raise HomogError(f"unknown rephraser {name!r}; use rule or llm (synth.rephraser)")
