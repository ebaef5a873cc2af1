"""The token-preserving position family: a review's key sentence moved, every token kept.

Pure functions (no I/O, no tokenizer); ``homog.synth.position_stage`` applies them to the
corpus. For a review split into n sentences (``homog.synth.keyphrase.split_sentences``):

- **Joining.** Every text, the ``original`` included, is ``LEAD`` (one space) followed by its
  sentences joined by one space (``join``). Each sentence's own characters, capitals included,
  are kept as they are: a sentence is tokenized with the space before it the same way wherever
  it stands, so moving sentences keeps the token multiset. Without the leading space the text's
  first word is a different token ("Great" vs " Great") and the multiset changes whenever the
  first sentence changes; re-capitalising a moved sentence would change tokens too.
- **Key sentence** (``key_choice``): the sentence holding the review's most salient key phrase
  (``homog.synth.salience.Salience``, TF-IDF against the corpus, no position term) among the
  extractor's candidates of every sentence; ties go to the phrase that sorts first, then the
  earlier sentence.
- **Family members** (``family_orders``): for each position p in ``synth.position.positions``
  the key sentence moves to sentence index round(p * (n - 1)) (halves round up), the others
  keep their order; names: ``variant_name`` (0 -> key_first, 0.5 -> key_mid, 1 -> key_last,
  else key_p<100p>).
- **key_control** (``choose_control``): the family's largest move of the key sentence (in
  tokens of its start, signed; always to the first or the last place) sets a direction and a
  distance; a non-key sentence j is moved to the index d (any place on that side of it) that
  minimises |its start shift - that shift| + ``LENGTH_WEIGHT`` x |its length - the key
  sentence's| (tokens; ties to the earlier j, then the nearer d): the same distance first,
  similar length among near-equal distances. Moving only to the first or last place matched
  the distance in 26 % of 300 IMDB reviews (within 10 %) against 64 % for any place. When the
  key sentence sits at an edge and crosses the whole text, no other sentence can move as far:
  the control then falls short by about a sentence (the best any sentence can do).
- **Same-place control** (``choose_ctrl``, variants ctrl_first / ctrl_mid / ctrl_last): one
  non-key sentence per review, never the first (the originals' first place already carries
  the attention sink's share), interior (neither first nor last) where the review has one, the
  closest to the key sentence in token length (ties: the earlier). It moves to exactly the
  slot (sentence index ``target_index``) that key_first / key_mid / key_last give the key
  sentence, so (key at a place - key in the middle) - (control at that place - control in the
  middle) cancels what the place does to any sentence. Only a review of 3 sentences with the
  key sentence in the middle has no interior candidate: its last sentence is the control.
- A text needs ``MIN_SENTENCES`` (3) sentences: with 2, no non-key sentence can make the
  family's largest move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from homog.text.sentences import LEAD
from homog.variants import CTRL_NAMED, KEY_CONTROL, variant_name

MIN_SENTENCES = 3
# key_control's cost: a token of length difference weighs a quarter of a token of shift (on
# 300 IMDB reviews any weight from 0 to 0.5 gives a mean control / family ratio of 0.92;
# 0.25 keeps the moved sentence's length near the key sentence's)
LENGTH_WEIGHT = 0.25


def join(sentences: Sequence[str]) -> str:
    """LEAD + the sentences joined by one space (each kept exactly as it is)."""
    return LEAD + " ".join(sentences)


def target_index(p: float, n: int) -> int:
    """Sentence index for relative position p in [0, 1] among n sentences (halves round up)."""
    return min(n - 1, max(0, math.floor(p * (n - 1) + 0.5)))


def move(n: int, src: int, dst: int) -> list[int]:
    """The order of n sentences after moving sentence ``src`` to index ``dst``."""
    order = [i for i in range(n) if i != src]
    order.insert(dst, src)
    return order


def starts(lengths: Sequence[float], order: Sequence[int]) -> dict[int, float]:
    """sentence -> its start (the lengths of the sentences before it) in ``order``."""
    out, at = {}, 0.0
    for i in order:
        out[i] = at
        at += lengths[i]
    return out


@dataclass(frozen=True)
class KeyChoice:
    """The key sentence (index), its phrase and the phrase's salience."""

    sentence: int
    phrase: str
    score: float


def key_choice(
    candidates: Sequence[Sequence[str]], score: Callable[[str], float]
) -> KeyChoice | None:
    """The sentence whose candidate phrase has the highest ``score`` (the phrase's salience
    within the review); ties: the phrase that sorts first (lower-cased), then the earlier
    sentence. None when no sentence has a candidate with a positive score."""
    best: tuple[float, str, int, str] | None = None
    for i, phrases in enumerate(candidates):
        for phrase in phrases:
            s = score(phrase)
            if s <= 0:
                continue
            key = (-s, phrase.lower(), i, phrase)
            if best is None or key < best:
                best = key
    return None if best is None else KeyChoice(best[2], best[3], -best[0])


def choose_control(
    lengths: Sequence[float], key: int, family_shift: float
) -> tuple[int, int] | None:
    """(sentence j, destination index) of key_control for a family whose largest key-sentence
    start shift is ``family_shift`` (tokens, signed: < 0 towards the start). j != key moves
    the same way (a destination before it when the shift is < 0, after it when > 0), chosen
    with its destination by the smallest |shift_j - family_shift| + LENGTH_WEIGHT
    |len_j - len_key| (ties: the earlier j, then the nearer destination). None ("no
    control") when no sentence can make such a move (fewer than MIN_SENTENCES, or a zero
    shift: the family moved nothing): the text leaves the family with reason ``no_control``."""
    n = len(lengths)
    if n < MIN_SENTENCES or family_shift == 0:
        return None
    step = -1 if family_shift < 0 else 1
    best: tuple[float, int, int] | None = None
    for j in range(n):
        if j == key:
            continue
        size = LENGTH_WEIGHT * abs(lengths[j] - lengths[key])
        shift = 0.0
        # moving j one place further passes one more sentence: its start moves by that length
        for dst in range(j + step, -1 if step < 0 else n, step):
            shift += step * lengths[dst]
            cost = abs(shift - family_shift) + size
            if best is None or cost < best[0]:
                best = (cost, j, dst)
    assert best is not None  # n >= 3: a sentence besides the key can move either way
    return best[1], best[2]


def choose_ctrl(lengths: Sequence[float], key: int) -> int | None:
    """The same-place control sentence (module doc): never ``key`` or the first sentence,
    interior where one exists, the closest in length to ``key`` (ties: the earlier); None
    for fewer than MIN_SENTENCES sentences."""
    n = len(lengths)
    if n < MIN_SENTENCES:
        return None
    pool = [j for j in range(1, n - 1) if j != key] or [j for j in (n - 1,) if j != key]
    return min(pool, key=lambda j: (abs(lengths[j] - lengths[key]), j)) if pool else None


@dataclass(frozen=True)
class Family:
    """One text's family: variant -> sentence order, the key sentence and the control's
    (None: no control move exists, and ``orders`` has no key_control), and the same-place
    control's sentence (``choose_ctrl``; None: no ctrl_* member)."""

    key: int
    orders: dict[str, list[int]]
    control_sentence: int | None
    ctrl_sentence: int | None = None

    def key_index(self, variant: str) -> int:
        """The key sentence's index in the variant's text (``original``: the key itself)."""
        return self.key if variant == "original" else self.orders[variant].index(self.key)


def family_orders(lengths: Sequence[float], key: int, positions: Sequence[float]) -> Family | None:
    """The orders of every family member for sentences of ``lengths`` (tokens) and key
    sentence ``key``; None for fewer than MIN_SENTENCES sentences. When no sentence can
    make a control move (every move is 0 tokens), the Family has no key_control and
    ``control_sentence`` None (:func:`family_problem` says ``no_control``)."""
    n = len(lengths)
    if n < MIN_SENTENCES:
        return None
    orders = {variant_name(p): move(n, key, target_index(p, n)) for p in positions}
    before = starts(lengths, range(n))[key]
    shifts = [starts(lengths, o)[key] - before for o in orders.values()]
    largest = max(shifts, key=abs)
    # positions such as [0] with the key already first (or [1] with it last): the control
    # moves as far as the key would to the other end
    for end in (n - 1, 0):
        if largest == 0:
            largest = starts(lengths, move(n, key, end))[key] - before
    control = choose_control(lengths, key, largest)
    if control is None:
        return Family(key, orders, None)
    j, dst = control
    orders[KEY_CONTROL] = move(n, j, dst)
    ctrl = choose_ctrl(lengths, key)
    for p in positions:
        if ctrl is not None and float(p) in CTRL_NAMED:
            orders[CTRL_NAMED[float(p)]] = move(n, ctrl, target_index(p, n))
    return Family(key, orders, j, ctrl)


def family_problem(sentences: Sequence[str], fam: Family) -> tuple[str, str] | None:
    """Why the text must leave the position family, as (reason, detail), or None.

    ``no_control``: no sentence can make the control move. ``no_move``: two members (the
    original included) have byte-identical texts from different sentence orders (a review of
    one sentence repeated, or a key sentence equal to another): their key_index values differ
    while the texts do not, so the dose-response would get moves that never happened. A member
    whose order is the original's (key_first when the key is already first) is a real
    observation at that position and stays."""
    if fam.control_sentence is None:
        return "no_control", "no sentence can move: every key-sentence move is 0 tokens"
    seen: dict[str, tuple[str, list[int]]] = {}
    members = [("original", list(range(len(sentences)))), *fam.orders.items()]
    for variant, order in members:
        text = join([sentences[i] for i in order])
        first = seen.setdefault(text, (variant, list(order)))
        if first[1] != list(order):
            return "no_move", (
                f"{variant}'s text is {first[0]}'s byte for byte (repeated sentences): a move "
                "on paper only"
            )
    return None


def sentence_spans(sentences: Sequence[str], order: Sequence[int]) -> list[list[int]]:
    """[[sentence index in the original, start, end], ...] of ``join`` of ``order``, in the
    text's order: character offsets of each sentence *with the space before it* (``LEAD`` or
    the joining space), since a sentence's first token carries that space (" Great")."""
    out, at = [], 0
    for i in order:
        end = at + 1 + len(sentences[i])
        out.append([int(i), at, end])
        at = end
    return out


def word_share(sentences: Sequence[str], order: Sequence[int], sentence: int) -> float:
    """The first word of ``sentence`` as a share of the text's whitespace words, in [0, 1)."""
    counts = [len(s.split()) for s in sentences]
    return starts(counts, order)[sentence] / sum(counts)
