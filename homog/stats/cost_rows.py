"""The rows of the table ``intervention_cost`` (homog.stats.intervention_cost), pure: aligned
arrays in (``CostInputs``), rows out, then Holm and the verdicts (``finish``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from homog.claims import EXPLORATORY, PRIMARY
from homog.schema.stats_tables import INTERVENTION_COST
from homog.stats.classifier import weighted_auc
from homog.stats.paired_tests import bootstrap_ci, bootstrap_p, holm, paired_p, resample_counts
from homog.stats.settings import StatsSettings
from homog.stats.verdicts import row_verdict

COST_COLUMNS = [name for name, _ in INTERVENTION_COST]  # the table's (homog.schema)
FAMILY = "homogenize"
ARMS = (FAMILY, "control")
DIFF_ARM = f"{FAMILY} - control"
BANDS = ("final", "late")
MANIPULATION = "manipulation"
COST_SIGN = -1  # a cost: the margin, accuracy or AUC falls with the dose


@dataclass(frozen=True)
class CostInputs:
    """One unchanged run's dose series, aligned on its n shared texts: per arm the sorted
    doses [V] (both start at 0), the texts' margins [V, n] and erank [V, len(BANDS), n];
    ``positive`` [n] whether each text's label is the positive one."""

    doses: Mapping[str, np.ndarray]
    margin: Mapping[str, np.ndarray]
    erank: Mapping[str, np.ndarray]
    positive: np.ndarray


def _interval(draws: np.ndarray, ci: float) -> tuple[float, float]:
    """The percentile interval of the finite draws (a resample of one label has no AUC)."""
    finite = draws[np.isfinite(draws)]
    if not finite.size:
        return math.nan, math.nan
    low, high = np.quantile(finite, [(1 - ci) / 2, (1 + ci) / 2])
    return float(low), float(high)


def mean_row(d: np.ndarray, key: dict, settings: StatsSettings, sesoi: float, basis: str) -> dict:
    """A row of the mean of ``d`` (n,) over texts: its CI and, with a SESOI, the equivalence
    CI and the paired test's p (a level row, ``sesoi`` NaN, has neither). Non-finite values
    (a band the model has no layer for) are left out; ``n`` counts the rest."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    value = float(d.mean()) if len(d) else math.nan
    out = {**key, "value": value, "n": len(d), "sesoi": sesoi, "sesoi_basis": basis}
    if len(d) < 2:
        return out
    low, high = bootstrap_ci(d[None], n_boot=settings.n_boot, ci=settings.ci, seed=settings.seed)
    out.update(ci_low=float(low[0]), ci_high=float(high[0]))
    if math.isfinite(sesoi):
        eq = bootstrap_ci(
            d[None], n_boot=settings.n_boot, ci=1 - 2 * settings.alpha, seed=settings.seed
        )
        p = paired_p(d[None], test=settings.test, n_perm=settings.n_perm, seed=settings.seed)
        out.update(eq_ci_low=float(eq[0][0]), eq_ci_high=float(eq[1][0]), p_value=float(p[0]))
    return out


def auc_row(
    log_odds: np.ndarray,
    zero: np.ndarray | None,
    positive: np.ndarray,
    key: dict,
    settings: StatsSettings,
) -> dict:
    """The ROC AUC of ``log_odds`` (n,) against the labels, or (with ``zero``) its change
    against dose 0's, resampling the texts (the stats stage's draws): CI, and for a change
    the equivalence CI and a bootstrap p."""
    n = len(log_odds)
    y = positive.astype(int)
    ones = np.ones((1, n))
    counts = resample_counts(n, settings.n_boot, settings.seed)
    value, draws = weighted_auc(log_odds, y, ones)[0], weighted_auc(log_odds, y, counts)
    if zero is not None:
        value -= weighted_auc(zero, y, ones)[0]
        draws = draws - weighted_auc(zero, y, counts)
    low, high = _interval(draws, settings.ci)
    out = {**key, "value": float(value), "n": n, "ci_low": low, "ci_high": high}
    if zero is None:
        return {**out, "sesoi": math.nan, "sesoi_basis": ""}
    eq_low, eq_high = _interval(draws, 1 - 2 * settings.alpha)
    basis = "stats.cost_accuracy_margin (AUC)"
    return {
        **out,
        "eq_ci_low": eq_low,
        "eq_ci_high": eq_high,
        "p_value": bootstrap_p(draws),
        "sesoi": settings.cost_accuracy_margin,
        "sesoi_basis": basis,
    }


def text_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n,) per-text least-squares slopes of y [V, n] on the doses x [V]."""
    xc = x - x.mean()
    return (xc[:, None] * (y - y.mean(0))).sum(0) / (xc * xc).sum()


def arm_rows(arm: str, inp: CostInputs, key: dict, settings: StatsSettings) -> list[dict]:
    """An arm's level, dose and manipulation rows."""
    doses, m, e = inp.doses[arm], inp.margin[arm], inp.erank[arm]
    signed = np.where(inp.positive, 1.0, -1.0)
    acc_note = "stats.cost_accuracy_margin"
    margin_note = "stats.cost_margin (nats of log-odds)"
    rows: list[dict] = []
    for v, dose in enumerate(doses):
        k = {**key, "arm": arm, "dose": float(dose), "kind": "level"}
        correct = (m[v] > 0).astype(float)
        rows += [
            mean_row(m[v], {**k, "metric": "lm_margin"}, settings, math.nan, ""),
            mean_row(correct, {**k, "metric": "lm_accuracy"}, settings, math.nan, ""),
            auc_row(signed * m[v], None, inp.positive, {**k, "metric": "lm_auc"}, settings),
        ]
        if v == 0:
            continue
        k = {**k, "kind": "dose"}
        rows += [
            mean_row(
                m[v] - m[0],
                {**k, "metric": "lm_margin"},
                settings,
                settings.cost_margin,
                margin_note,
            ),
            mean_row(
                correct - (m[0] > 0),
                {**k, "metric": "lm_accuracy"},
                settings,
                settings.cost_accuracy_margin,
                acc_note,
            ),
            auc_row(
                signed * m[v], signed * m[0], inp.positive, {**k, "metric": "lm_auc"}, settings
            ),
        ]
        for g, band in enumerate(BANDS):
            k2 = {**k, "kind": MANIPULATION, "metric": "erank", "band": band}
            if np.isfinite(e[v, g]).any():  # a model too shallow for a late band has none
                rows.append(mean_row(e[v, g] - e[0, g], k2, settings, math.nan, ""))
    return rows


def slope_rows(inp: CostInputs, key: dict, settings: StatsSettings) -> list[dict]:
    """The arms' per-text slopes of the margin on alpha and their difference (primary)."""
    slopes = {arm: text_slopes(inp.doses[arm], inp.margin[arm]) for arm in ARMS}
    slopes[DIFF_ARM] = slopes[FAMILY] - slopes["control"]
    span = float(np.ptp(inp.doses[FAMILY]))
    sesoi = settings.cost_margin / span if span > 0 else math.nan
    basis = f"stats.cost_margin ({settings.cost_margin:g} nats) per the range of alpha ({span:g})"
    return [
        mean_row(
            s, {**key, "arm": arm, "kind": "slope", "metric": "lm_margin"}, settings, sesoi, basis
        )
        for arm, s in slopes.items()
    ]


def cost_rows(inp: CostInputs, run_id: str, model: str, settings: StatsSettings) -> list[dict]:
    """Every row of one unchanged run (the module docstring), before Holm and verdicts."""
    key = {"run_id": run_id, "model": model, "family": FAMILY, "band": None, "dose": math.nan}
    rows = [r for arm in ARMS for r in arm_rows(arm, inp, key, settings)]
    return rows + slope_rows(inp, key, settings)


def finish(rows: list[dict], alpha: float) -> pd.DataFrame:
    """The table: Holm within the primary rows (the slope differences) and within the
    exploratory rows (the other tested rows), and every tested row's verdict."""
    frame = pd.DataFrame(rows).reindex(columns=COST_COLUMNS)
    if frame.empty:
        return frame
    tested = frame["p_value"].notna()
    primary = (frame["kind"] == "slope") & (frame["arm"] == DIFF_ARM)
    frame["family_holm"] = np.where(primary, PRIMARY, np.where(tested, EXPLORATORY, None))
    frame.loc[frame["kind"] == MANIPULATION, "family_holm"] = MANIPULATION
    for fam in (PRIMARY, EXPLORATORY):
        sel = (frame["family_holm"] == fam) & tested
        if sel.any():
            frame.loc[sel, "p_holm"] = holm(frame.loc[sel, "p_value"].to_numpy())
    frame["verdict"] = [
        row_verdict(r, alpha, COST_SIGN) if tested[i] else None
        for i, r in enumerate(frame.itertuples())
    ]
    return frame
