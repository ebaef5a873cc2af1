"""The band claims' plan: (tag, statement, a, b, sign, metric) of claims 1, 1u, 1k, 3, 5a and
5b for the metrics and token sets the contrasts hold (homog.report.claims builds a row of each
at every band)."""

from __future__ import annotations

from homog.claims import Tag, row_tag
from homog.metrics.registry import SUFFIX_SETS, metric_name, token_set_of
from homog.variants import BIASED, CONTROL_OF, KEY_SPECIFIC, U_SHAPE, parse_contrast

# (metric, claimed sign of variant - original): lower erank / higher MEV under positional bias
CLAIM1_METRICS = (("erank", -1), ("mev", +1))


def _sets(base: str, present: set[str], metrics: list[str]) -> list[str]:
    """``base`` and its token-set variants (erank__no_sink, ...) that the contrasts hold."""
    names = [base, *(metric_name(base, s) for s in SUFFIX_SETS)]
    return [m for m in names if m in present and m in metrics]


def _tag(claim: str, metric: str) -> str:
    return row_tag(claim, token_set_of(metric))


def _claim1_specs(present: set[str], metrics: list[str]) -> list[tuple]:
    """(tag, statement, a, b, sign, metric) of claims 1, 1u and 1k."""
    specs: list[tuple] = []
    for base, sign in CLAIM1_METRICS:
        word = "lower" if sign < 0 else "higher"
        for metric in _sets(base, present, metrics):
            specs += [
                (
                    _tag(Tag.BIASED_VS_ORIGINAL, metric),
                    f"{v} has {word} {metric} than original",
                    v,
                    "original",
                    sign,
                    metric,
                )
                for v in BIASED
            ]
        for metric in _sets(base, present, metrics):
            a, b = U_SHAPE.split(" - ")
            specs.append(
                (
                    _tag(Tag.U_SHAPE, metric),
                    f"U-shape: the key sentence at the edges "
                    f"((key_first + key_last) / 2) has {word} {metric} than in the middle",
                    a,
                    b,
                    sign,
                    metric,
                )
            )
        for metric in _sets(base, present, metrics):
            for comp, where in zip(KEY_SPECIFIC, ("first", "last", "at the edges"), strict=True):
                a, b = parse_contrast(comp)  # type: ignore[misc]
                specs.append(
                    (
                        _tag(Tag.KEY_SPECIFIC, metric),
                        "key-specific: the key sentence "
                        f"{where} has {word} {metric} than in the middle, beyond what "
                        "the same places give a non-key sentence",
                        a,
                        b,
                        sign,
                        metric,
                    )
                )
    return specs


def band_specs(present: set[str], metrics: list[str]) -> list[tuple]:
    """(tag, statement, a, b, sign, metric) of claims 1, 1u, 3, 5a and 5b."""
    specs: list[tuple] = _claim1_specs(present, metrics)
    if "attn_first" in present:
        specs += [
            (
                Tag.FIRST_TOKEN,
                f"{v} puts more attention on the first token than original",
                v,
                "original",
                +1,
                "attn_first",
            )
            for v in BIASED
        ]
    for base, sign in CLAIM1_METRICS:
        if base not in present:
            continue
        specs += [
            (
                Tag.REORDERING,
                f"reordering effect: paraphrase alone changes {base} (control vs original)",
                "control",
                "original",
                None,
                base,
            ),
            (
                Tag.REORDERING,
                "reordering effect: moving a non-key sentence alone "
                f"changes {base} (key_control vs original)",
                "key_control",
                "original",
                None,
                base,
            ),
        ]
        word = "lower" if sign < 0 else "higher"
        for metric in _sets(base, present, metrics):
            for v in BIASED:
                c = CONTROL_OF[v]
                specs.append(
                    (
                        _tag(Tag.POSITION_EFFECT, metric),
                        f"position effect: {v} has {word} {metric} than {c}",
                        v,
                        c,
                        sign,
                        metric,
                    )
                )
    return specs
