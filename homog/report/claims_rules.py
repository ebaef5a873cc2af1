"""The rules one claim row is judged by: its verdict against a margin (:func:`row_verdict`:
the claims table's and the sensitivity table's) and the lexical-confound flag
(:func:`lexical`). homog.report.claims applies them to every row."""

from __future__ import annotations

import math

from homog.report.claims_rows import Claim
from homog.stats.paired_tests import NUMERIC_TOLERANCE
from homog.stats.verdicts import judge


def row_verdict(r: Claim, sesoi: float, alpha: float) -> str:
    """The verdict of claim row ``r`` against the margin ``sesoi`` (its own, or another
    setting's: the sensitivity table), centred on the row's null."""
    z = r.null
    return judge(
        r.effect - z,
        (r.ci_low - z, r.ci_high - z),
        (r.eq_ci_low - z, r.eq_ci_high - z),
        sesoi,
        r.p_holm,
        alpha,
        r.sign or None,
        r.n,
        r.p_tost,
    )


# A layer-0 difference below NUMERIC_TOLERANCE of the original's level is rounding, not words.
# The stats stage sets such per-text differences to 0 (homog.stats.paired_tests); this guard
# keeps the rounding in an older database's rows from being marked.
def lexical(rows: list[Claim], alpha: float) -> None:
    """Set ``lexical_confound``: the contrast's layer-0 difference has p < alpha and is larger
    than rounding (``NUMERIC_TOLERANCE`` times the original's mean, at least 1)."""
    for r in rows:
        scale = abs(r.baseline_mean) if math.isfinite(r.baseline_mean) else 1.0
        real = abs(r.layer0_effect) > NUMERIC_TOLERANCE * max(1.0, scale)
        r.lexical_confound = bool(math.isfinite(r.layer0_p) and r.layer0_p < alpha and real)
