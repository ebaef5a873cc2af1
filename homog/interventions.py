"""The interventions: one registry of what a run changes in the model, and its name form.

An intervention is named ``kind`` (no dose: ``none``, ``zero_pos``, ``shuffle_pos``) or
``kind:dose`` (the graded ones: ``sink_bias:-2``, ``sink_bias_control:-2``,
``homogenize:0.2``, ``homogenize_control:0.2``). ``parse`` reads a name, checks the kind and
the dose's range and returns an ``Intervention`` whose ``name`` is the canonical spelling
(``sink_bias:-2.0`` becomes ``sink_bias:-2``): that string is the run's directory, enters its
run id and is ``runs.intervention`` in the store, so every dose is a run of its own that
``homog compare``, ``homog sql`` and the TUI tell apart.

Each kind declares, as pyvene's ``RepresentationConfig`` does for its interventions, *where*
it acts (``target``: the position ids fed to the model, the attention logits of the layers
from an onset on, or one block's output) and *what* it does (``definition``); the code that
acts is the extraction's (``homog.extract.edits``), keyed by the kind. This module is pure:
the CLI, the config, stats, the store and the report's glossary read it without torch.
docs/interventions.md describes each kind, its control and the choices (sink, onset layer,
homogenized layer).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from homog.errors import HomogError

POSITION_IDS, ATTENTION_LOGITS, BLOCK_OUTPUT = "position_ids", "attention_logits", "block_output"


@dataclass(frozen=True)
class Kind:
    """One kind of intervention: its name, where it acts, its dose and what it does."""

    name: str
    target: str  # POSITION_IDS | ATTENTION_LOGITS | BLOCK_OUTPUT
    definition: str
    dose: str | None = None  # the dose's symbol (beta, alpha); None: the kind takes none
    low: float = -math.inf  # the dose's range, both ends included
    high: float = math.inf
    control_of: str | None = None  # the kind this one is the matched control of


KINDS: tuple[Kind, ...] = (
    Kind("none", POSITION_IDS, "the unchanged model."),
    Kind(
        "zero_pos",
        POSITION_IDS,
        "position ids all 0: rotary/learned positions carry "
        "nothing, the causal mask stays (claim 5c compares it with the unchanged run on the "
        "original texts).",
    ),
    Kind(
        "shuffle_pos",
        POSITION_IDS,
        "a seeded permutation of the position ids over each text's real tokens.",
    ),
    Kind(
        "sink_bias",
        ATTENTION_LOGITS,
        "beta added to the attention logit of every query "
        "towards the sink (the sequence's first token) in every head of the attention layers "
        "from extract.sink_bias_onset on; the sink's own query is left alone; -inf masks the "
        "sink.",
        "beta",
        high=math.inf,
    ),
    Kind(
        "sink_bias_control",
        ATTENTION_LOGITS,
        "the same bias beta towards one interior "
        "token per text (seeded), not the sink: concentration on a token that is not the "
        "sink.",
        "beta",
        high=math.inf,
        control_of="sink_bias",
    ),
    Kind(
        "homogenize",
        BLOCK_OUTPUT,
        "at hidden layer extract.homogenize_layer every metric "
        "token but the sink moves towards the mean of the tokens up to it: "
        "h_i + alpha (m_i - h_i).",
        "alpha",
        0.0,
        1.0,
    ),
    Kind(
        "homogenize_control",
        BLOCK_OUTPUT,
        "every token moved by the same distance as "
        "homogenize:alpha moves it, along a seeded random direction orthogonal to "
        "(m_i - h_i): a disturbance of the same size that does not make tokens alike.",
        "alpha",
        0.0,
        1.0,
        control_of="homogenize",
    ),
)
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
# the names without a dose (the interventions every homog version knew)
PLAIN: tuple[str, ...] = tuple(k.name for k in KINDS if k.dose is None)
GRADED: tuple[str, ...] = tuple(k.name for k in KINDS if k.dose is not None)


@dataclass(frozen=True)
class Intervention:
    """A parsed intervention name: its kind and dose (None for a kind without one)."""

    kind: Kind
    dose: float | None = None

    @property
    def name(self) -> str:
        """The canonical name: ``kind`` or ``kind:dose`` (``format_dose``)."""
        return self.kind.name if self.dose is None else f"{self.kind.name}:{format_dose(self.dose)}"

    @property
    def target(self) -> str:
        return self.kind.target

    @property
    def is_control(self) -> bool:
        return self.kind.control_of is not None

    @property
    def family(self) -> str:
        """The graded kind a dose belongs to (``sink_bias`` for its control too)."""
        return self.kind.control_of or self.kind.name

    @property
    def is_identity(self) -> bool:
        """True when the run changes nothing (``none``, or a graded kind at dose 0)."""
        return self.kind.name == "none" or self.dose == 0.0

    def describe(self) -> str:
        """One sentence on what the run does (the report's glossary)."""
        if self.dose is None:
            return self.kind.definition
        return f"{self.kind.dose} = {format_dose(self.dose)}: {self.kind.definition}"


def format_dose(dose: float) -> str:
    """``-2.0`` -> ``-2``, ``0.2`` -> ``0.2``, ``-inf`` -> ``-inf`` (the shortest exact form)."""
    if math.isinf(dose):
        return "-inf" if dose < 0 else "inf"
    if dose == int(dose):
        return str(int(dose))
    return repr(float(dose))


def _dose(kind: Kind, text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise HomogError(
            f"intervention {name!r}: the dose {text!r} is not a number (e.g. "
            f"{kind.name}:{format_dose(max(kind.low, 0.0) if kind.low > -math.inf else -2.0)})"
        ) from None
    if math.isnan(value) or not kind.low <= value <= kind.high or value == math.inf:
        upper = "finite" if kind.high == math.inf else f"<= {format_dose(kind.high)}"
        lower = "-inf (masked)" if kind.low == -math.inf else format_dose(kind.low)
        raise HomogError(
            f"intervention {name!r}: {kind.dose} must be {upper} and >= {lower}, got {text}"
        )
    return value + 0.0  # -0.0 -> 0.0: one name per dose


def parse(name: str) -> Intervention:
    """The ``Intervention`` a name stands for; HomogError naming the bad part and the valid
    forms (an unknown kind, a dose on a kind without one, a missing or out-of-range dose)."""
    if not isinstance(name, str) or not name.strip():
        raise HomogError(f"intervention {name!r} is empty: use one of {', '.join(forms())}")
    kind_name, sep, dose = name.strip().partition(":")
    kind = BY_NAME.get(kind_name.strip())
    if kind is None:
        raise HomogError(f"unknown intervention {name!r}: use one of {', '.join(forms())}")
    if kind.dose is None:
        if sep:
            raise HomogError(
                f"intervention {name!r}: {kind.name} takes no dose; write {kind.name!r}"
            )
        return Intervention(kind)
    if not sep or not dose.strip():
        raise HomogError(
            f"intervention {name!r} needs a dose: {kind.name}:<{kind.dose}> "
            f"(e.g. {kind.name}:{'-2' if kind.low == -math.inf else '0.2'})"
        )
    return Intervention(kind, _dose(kind, dose.strip(), name))


def canonical(name: str) -> str:
    """The canonical spelling of a name (``parse``'s checks apply)."""
    return parse(name).name


def check_names(names: Iterable[str], where: str = "extract.interventions") -> tuple[str, ...]:
    """Canonical names, in order, without repeats; HomogError naming ``where`` and the bad name."""
    out: list[str] = []
    for name in names:
        try:
            iv = canonical(name)
        except HomogError as exc:
            raise HomogError(f"{where}: {exc}") from None
        if iv not in out:
            out.append(iv)
    return tuple(out)


def grid(kind: str, doses: Iterable[float | str]) -> list[str]:
    """The runs of a dose grid: ``kind:d`` for every dose and ``kind_control:d`` for every
    dose but 0 (the control at 0 is the same identity run as ``kind:0``)."""
    runs = [canonical(f"{kind}:{d}") for d in doses]
    control = f"{kind}_control"
    runs += [canonical(f"{control}:{d}") for d in doses if parse(f"{kind}:{d}").dose != 0.0]
    return runs


def forms() -> list[str]:
    """Every valid form, for error messages and help texts."""
    return [k.name if k.dose is None else f"{k.name}:<{k.dose}>" for k in KINDS]


def describe(name: str) -> str:
    """``parse(name).describe()``, or "not described here" for a name the registry does not
    know (a store built by another version)."""
    try:
        return parse(name).describe()
    except HomogError:
        return "not described here"


def resolve_layer(value: int | str, n_layers: int, what: str, highest: int) -> int:
    """``middle`` -> n_layers // 2 (at least 1); an int as it is. HomogError when it lies
    outside 1..highest."""
    layer = max(1, n_layers // 2) if value == "middle" else int(value)
    if not 1 <= layer <= highest:
        raise HomogError(
            f"extract.{what} is {value} but this model has layers 1..{highest} there "
            f"({n_layers} blocks): choose a layer in that range or middle"
        )
    return layer
