"""The ``stats:`` section of params.yaml: paired contrasts, their tests and the equivalence
margin (docs/statistics.md).

Its own module, imported by ``homog.config`` (``Params.stats``), like the posenc, probe and
synth sections. The stats stage (``homog stats``, ``homog.stats``) and the probe's summaries
read it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from homog.config.primary import PrimaryConfig
from homog.validate import check as _check

# stats.test: the paired tests of homog.stats.paired_tests
TESTS: tuple[str, ...] = ("sign_flip", "wilcoxon")
# stats.n_boot / n_perm: the bootstrap and the sign-flip test hold a [draws, texts] matrix
MAX_DRAWS = 1_000_000


@dataclass(frozen=True)
class StatsConfig:
    """``stats:``: paired contrasts with bootstrap CIs and Holm-corrected paired tests."""

    n_boot: int = 2000
    ci: float = 0.95
    alpha: float = 0.05
    test: str = "sign_flip"  # sign_flip (of the mean, like the CI) | wilcoxon
    n_perm: int = 10000  # sign vectors of the sign-flip test (exact when 2^n <= n_perm)
    # smallest effect of interest of the equivalence test, a share of what sesoi_basis names
    # (docs/statistics.md)
    sesoi: float = 0.1
    # what stats.sesoi scales (homog.stats.margins): sd (the original's between-text SD at the
    # row's scope) | depth (its homogenizing early-to-late change, where the metric homogenizes
    # monotonically, never below the SD basis)
    sesoi_basis: str = "sd"
    # metric -> scope (early, middle, late, final, layer0, or all) -> a fixed SESOI in the
    # metric's unit, replacing the basis for those rows (the report's provenance lists them)
    sesoi_pin: dict[str, dict[str, float]] = field(default_factory=dict)
    # label permutations of the separability classifier's p (homog.stats.separability); 0: no p
    separability_perm: int = 999
    # the homogenize cost table's margins (homog.stats.intervention_cost): the LM's zero-shot
    # margin in nats of log-odds, and its accuracy and AUC as shares
    cost_margin: float = 0.2
    cost_accuracy_margin: float = 0.02
    # metrics of the secondary mixed model per band (statsmodels MixedLM, ~2 s per fit at
    # 300 texts x 8 variants); [] turns it off
    mixed_metrics: tuple[str, ...] = (
        "erank",
        "erank__no_sink",
        "erank__standardized",
        "mev",
        "attn_first",
    )
    # the pre-registered primary endpoints: their own Holm family (homog.config.primary)
    primary: PrimaryConfig = field(default_factory=PrimaryConfig)

    def __post_init__(self) -> None:

        _check(0 < self.sesoi <= 2, f"stats.sesoi must lie in (0, 2], got {self.sesoi}")
        _check(
            self.sesoi_basis in ("depth", "sd"),
            f"stats.sesoi_basis must be one of depth, sd, got {self.sesoi_basis!r}",
        )
        _check_pins(self.sesoi_pin)
        _check(
            self.separability_perm >= 0,
            f"stats.separability_perm must be >= 0, got {self.separability_perm}",
        )

        for key in ("cost_margin", "cost_accuracy_margin"):
            value = getattr(self, key)
            _check(
                isinstance(value, (int, float)) and 0 < value < math.inf,
                f"stats.{key} must be a positive number, got {value!r}",
            )
        _check(
            self.test in TESTS, f"stats.test must be one of {', '.join(TESTS)}, got {self.test!r}"
        )
        _check(self.n_perm >= 1, f"stats.n_perm must be >= 1, got {self.n_perm}")
        _check(self.n_boot >= 1, f"stats.n_boot must be >= 1, got {self.n_boot}")
        _check(0 < self.ci < 1, f"stats.ci must lie in (0, 1), got {self.ci}")
        # below 0.5: the equivalence CI is the (1 - 2 alpha) interval
        _check(0 < self.alpha < 0.5, f"stats.alpha must lie in (0, 0.5), got {self.alpha}")
        _check_draws(self)


PIN_SCOPES = ("layer0", "early", "middle", "late", "final", "all")


def _check_pins(pins: Any) -> None:
    """stats.sesoi_pin: metric -> scope -> a positive finite number."""
    _check(
        isinstance(pins, Mapping),
        f"stats.sesoi_pin must be a mapping metric -> scope -> number, got {pins!r}",
    )
    for metric, scopes in pins.items():
        _check(
            isinstance(scopes, Mapping),
            f"stats.sesoi_pin.{metric} must map scopes ({', '.join(PIN_SCOPES)}) to numbers, "
            f"got {scopes!r}",
        )
        for scope, value in scopes.items():
            _check(
                scope in PIN_SCOPES,
                f"stats.sesoi_pin.{metric}: unknown scope {scope!r}; use one of "
                f"{', '.join(PIN_SCOPES)}",
            )
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            _check(
                ok and math.isfinite(value) and value > 0,
                f"stats.sesoi_pin.{metric}.{scope} must be a positive number (the SESOI in "
                f"the metric's unit), got {value!r}",
            )


def _check_draws(st: StatsConfig) -> None:
    """n_boot and n_perm between what a CI at ``ci`` and a p at ``alpha`` need
    and what memory allows (docs/guarantees.md)."""
    least = math.ceil(round(2 / (1 - st.ci), 6))  # one draw beyond each end of the CI
    _check(
        st.n_boot >= least,
        f"stats.n_boot must be >= {least} for a {st.ci:g} CI (2 / (1 - ci): one bootstrap draw "
        f"beyond each end), got {st.n_boot}; with fewer the CI is the span of a few draws (n_boot "
        "1: zero width). Use 1000 or more (default 2000)",
    )
    if st.test == "sign_flip":
        _check(
            1 / (st.n_perm + 1) < st.alpha,
            f"stats.n_perm must be >= {math.floor(1 / st.alpha + 1e-9)} at alpha {st.alpha:g}, got "
            f"{st.n_perm}: the smallest sign-flip p is 1 / (n_perm + 1), so no p could fall "
            "below alpha. Use 10000 (the default) or more",
        )
    for name in ("n_boot", "n_perm"):
        value = getattr(st, name)
        _check(
            value <= MAX_DRAWS,
            f"stats.{name} must be <= {MAX_DRAWS:,}, got {value:,}: it draws an {name} x texts "
            f"matrix of float64 (8 MB per text per million draws)",
        )
