"""The smallest effect of interest (SESOI) of every contrast row, fixed before the data are
judged (docs/statistics.md, "The smallest effect of interest"). Pure: numbers in, numbers and
words out.

One :class:`Margin` per run and metric, applied row by row (a layer, or a band: early,
middle, late, final, layer0) with the row's own between-text SD of the original:

- ``sd`` (the default): ``stats.sesoi`` x the original's between-text SD at the row's scope
  (the late band and the final layer each their own);
- ``depth``: ``stats.sesoi`` x |the original's early-band minus late-band mean|, only where
  the metric homogenizes monotonically over depth (its band means move early -> middle -> late
  in the direction the metric registry names for collapse); never below the SD basis (the
  floor that keeps a metric flat across depth from a collapsed margin); elsewhere the SD basis,
  and the row's basis text says why;
- ``stats.sesoi_pin``: a number per metric and scope (or ``all``) that replaces either rule.

Whatever the rule, no SESOI lies below ``FLOOR`` x the row's between-text SD; a raised one
says so. The basis text of every row names its rule, the number it scales and its scope.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from homog.metrics.registry import METRICS, base_metric

SESOI_BASES = ("sd", "depth")
FLOOR = 1e-3  # no SESOI below this share of the row's between-text SD
SCOPES = ("layer0", "early", "middle", "late", "final")


def scope_words(scope: object) -> str:
    """'at the late band', 'at the final layer', 'at layer 5' for a row's label."""
    if scope == "final":
        return "at the final layer"
    if scope == "layer0":
        return "at layer 0"
    if isinstance(scope, str):
        return f"at the {scope} band"
    return f"at layer {scope}"


def depth_change(table: pd.DataFrame | None, bands: dict[str, list[int]]) -> float:
    """|mean over texts of (early-band value - late-band value)| of a [layer x sample_id] table
    (``bands``: :func:`homog.stats.bands.band_of_layers` of its layers; texts with both bands
    finite), whatever its course in between (the probe's cost slopes scale by it). NaN when
    there is no early and late band or no such text."""
    if table is None or table.empty or "early" not in bands or "late" not in bands:
        return math.nan
    early = table.loc[bands["early"]].mean(axis=0, skipna=False).to_numpy(dtype=float)
    late = table.loc[bands["late"]].mean(axis=0, skipna=False).to_numpy(dtype=float)
    d = early - late
    d = d[np.isfinite(d)]
    return abs(float(d.mean())) if d.size else math.nan


def _direction(metric: str) -> int | None:
    base = base_metric(metric)
    return next((m.direction for m in METRICS if m.name == base), None)


def homogenizing_depth(
    table: pd.DataFrame | None, bands: dict[str, list[int]], metric: str, who: str
) -> tuple[float, str]:
    """(|mean over texts of early-band minus late-band value|, "") where the metric moves
    monotonically in its collapse direction over the early, middle and late bands of
    ``table`` ([layer x sample_id], ``who``'s values); else (NaN, why not, in words)."""
    if table is None or table.empty or "early" not in bands or "late" not in bands:
        return math.nan, "there is no early and late band"
    sign = _direction(metric)
    if sign is None:
        return math.nan, f"{metric} has no direction of collapse"
    names = [b for b in ("early", "middle", "late") if b in bands]
    means = [table.loc[bands[b]].mean(axis=0, skipna=False) for b in names]
    ok = pd.concat(means, axis=1).dropna()
    if ok.empty:
        return math.nan, "no text has every band"
    m = ok.mean(axis=0).to_numpy(dtype=float)
    steps = np.diff(m) * sign
    words = ", ".join(f"{b} {v:.3g}" for b, v in zip(names, m, strict=True))
    if not (steps > 0).all():
        return math.nan, f"{who} {metric} does not homogenize monotonically over depth ({words})"
    return abs(float((ok.iloc[:, 0] - ok.iloc[:, -1]).mean())), ""


@dataclass(frozen=True)
class Margin:
    """The SESOI rule of one run and metric (see the module doc). ``depth``: the homogenizing
    depth change (NaN where there is none, ``depth_note`` says why); ``pins``: scope (or
    ``all``) -> a pinned SESOI in the metric's unit."""

    factor: float = 0.1
    basis: str = "sd"
    who: str = "the original's"
    metric: str = ""
    depth: float = math.nan
    depth_note: str = ""
    pins: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.basis not in SESOI_BASES:
            raise ValueError(
                f"stats.sesoi_basis must be one of {', '.join(SESOI_BASES)}: {self.basis!r}"
            )

    def of(self, scope: object, sd: float) -> tuple[float, str]:
        """(SESOI, basis text) of a row at ``scope`` whose original has between-text SD ``sd``."""
        at = scope_words(scope)
        key = str(scope) if str(scope) in self.pins else "all"
        if key in self.pins:
            value = float(self.pins[key])
            text = f"pinned in params.yaml (stats.sesoi_pin {self.metric} {key}: {value:g}) {at}"
        elif self.basis == "depth" and math.isfinite(self.depth) and self.depth >= sd:
            value = self.factor * self.depth
            text = f"{self.factor:g} x {self.who} early-to-late change ({self.depth:.3g}) {at}"
        else:
            value = self.factor * sd
            text = f"{self.factor:g} x {self.who} between-text SD {at} ({sd:.3g})"
            if self.basis == "depth":
                why = (
                    f"below that SD, its floor, the early-to-late change ({self.depth:.3g})"
                    if math.isfinite(self.depth)
                    else f"{self.depth_note}, so the SD basis"
                )
                text += f"; {why}"
        floored = with_floor(value, sd)
        if floored != value:
            text += f"; raised to the floor {FLOOR:g} x that SD ({sd:.3g})"
        return floored, text


def with_floor(value: float, sd: float) -> float:
    """``value``, at least ``FLOOR`` x ``sd`` (where the SD is known and positive)."""
    return (
        max(value, FLOOR * sd) if math.isfinite(sd) and sd > 0 and math.isfinite(value) else value
    )


def margin_of(
    factor: float,
    basis: str,
    table: pd.DataFrame | None,
    bands: dict[str, list[int]],
    who: str = "the original's",
    metric: str = "",
    pins: Mapping[str, Mapping[str, float]] | None = None,
) -> Margin:
    """The :class:`Margin` of one run and metric: ``table`` is ``who``'s [layer x sample_id]
    values (the depth change), ``pins`` ``stats.sesoi_pin`` (metric -> scope -> value)."""
    depth, note = homogenizing_depth(table, bands, metric, who)
    return Margin(factor, basis, who, metric, depth, note, dict((pins or {}).get(metric, {})))


def sesoi_at(depth: float, sd: float, factor: float, basis: str) -> float:
    """The SESOI of a stored row (its ``depth_change`` and ``baseline_sd``) under ``factor``
    and ``basis``: the rule of :meth:`Margin.of` without pins (the sensitivity table)."""
    return Margin(factor, basis, depth=depth).of("", sd)[0]
