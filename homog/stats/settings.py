"""The stats computations' one settings object: the ``stats:`` section of params.yaml with the
top-level seed, built once per stage (:meth:`StatsSettings.of`) and passed down to every
contrast, dose and cost row (docs/statistics.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from homog.config.stats import StatsConfig
from homog.stats.bands import band_of_layers
from homog.stats.margins import Margin, margin_of


@dataclass(frozen=True)
class StatsSettings:
    """The bootstrap, test and margin settings of the stats rows.

    The defaults are ``StatsConfig``'s, except ``mixed_metrics``: a computation called in code
    fits no mixed model unless asked (a fit costs seconds per band); the stage passes
    ``stats.mixed_metrics``. Values are checked by ``StatsConfig``, which :meth:`of` reads.
    """

    n_boot: int = StatsConfig.n_boot
    ci: float = StatsConfig.ci
    seed: int = 0
    test: str = StatsConfig.test
    n_perm: int = StatsConfig.n_perm
    alpha: float = StatsConfig.alpha
    sesoi: float = StatsConfig.sesoi
    sesoi_basis: str = StatsConfig.sesoi_basis
    sesoi_pin: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    mixed_metrics: tuple[str, ...] = ()
    separability_perm: int = StatsConfig.separability_perm
    cost_margin: float = StatsConfig.cost_margin
    cost_accuracy_margin: float = StatsConfig.cost_accuracy_margin

    @classmethod
    def of(cls, params: Any) -> StatsSettings:
        """The settings of ``params`` (a ``Params``): its ``stats:`` section and ``seed``."""
        st = params.stats
        return cls(
            n_boot=st.n_boot,
            ci=st.ci,
            seed=params.seed,
            test=st.test,
            n_perm=st.n_perm,
            alpha=st.alpha,
            sesoi=st.sesoi,
            sesoi_basis=st.sesoi_basis,
            sesoi_pin=st.sesoi_pin,
            mixed_metrics=tuple(st.mixed_metrics),
            separability_perm=st.separability_perm,
            cost_margin=st.cost_margin,
            cost_accuracy_margin=st.cost_accuracy_margin,
        )

    def margin(
        self,
        table: pd.DataFrame | None,
        bands: dict[str, list[int]] | None = None,
        who: str = "the original's",
        metric: str = "",
        *,
        basis: str | None = None,
        pinned: bool = True,
    ) -> Margin:
        """The SESOI rule (:func:`homog.stats.margins.margin_of`, ``stats.sesoi``) of
        ``who``'s [layer x sample_id] ``table`` of ``metric``, over ``bands`` (default: the
        bands of the table's layers). ``basis`` replaces ``stats.sesoi_basis``; ``pinned``
        False leaves ``stats.sesoi_pin`` out."""
        if bands is None:
            bands = band_of_layers(list(table.index)) if table is not None else {}
        pins = self.sesoi_pin if pinned else None
        return margin_of(self.sesoi, basis or self.sesoi_basis, table, bands, who, metric, pins)
