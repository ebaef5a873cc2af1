"""The word lists of the rule rephraser: connectives, prepositions, adverbs, verb cues.

``homog.synth.rephrase.rule`` reads them to find clause boundaries, intros, trails and
frontable phrases (its module docstring describes the rules). They are data, kept apart from
the parser so a list can grow without touching the rules that use it.
"""

from __future__ import annotations

import re

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
BE = "is are was were be been being am isn't aren't wasn't weren't 's 're 'm"
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
TIME_ADVERBIAL = re.compile(
    r"\s((?:last|this|next) (?:night|week|weekend|month|year|summer|winter|spring|autumn|"
    r"time)|(?:(?:a few|a couple of|several|many|some|two|three|four|five|ten|twenty|\d+) )?"
    r"(?:years|months|weeks|days|decades) ago|yesterday|today|tonight|recently|nowadays|"
    r"these days|back then|later on)$",
    re.IGNORECASE,
)
# Words that tie a phrase to a relative or subordinate clause, after which an adverbial's
# attachment would be ambiguous.
SUBCLAUSE_WORDS = frozenset(
    "that which who whom whose where when if because than as what how while".split()
)
# Subject pronouns after a comma-less "and"/"but" open a new clause; verb cues in the part
# before show that it is a clause, not a noun phrase ("my wife and I").
SUBJECTS = frozenset("i he she we they".split())
VERB_CUES = frozenset(
    """is are was were be been am has have had do does did can could will would should may
    might must isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't
    it's i'm i've i'd he's she's they're we're""".split()
)
# Words that open a verb phrase rather than a clause after ", and" (besides VERB_CUES).
SUBJECT_LESS = frozenset("may might must then also still even just never not".split())
OBJECT_PRONOUNS = frozenset("i he she we they you me him us them".split())
SHORT_PREPOSITIONS = frozenset("with for to between of by from like than and or".split())

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
LINKING = frozenset(
    "seem seems seemed look looks looked feel feels felt sound sounds sounded become becomes "
    "became get gets got remain remains remained".split()
)
