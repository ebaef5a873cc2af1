"""Claim 2 of the claims table: homogenization is progressive and fastest in the middle layers.

Per unchanged run and per metric of ``erank`` and its token sets present in ``layer_metrics``
(original variant), two rows:

- "late - early (original)": per text, the late band's mean minus the early band's mean
  (bands of :func:`homog.stats.bands.band_of_layers`: layers 1..L-1), its mean, the stats
  stage's
  bootstrap CI and paired test (``stats.test``); claimed sign -1. Its p enters the model's
  family Holm (report/claims.py).
- "steepest fall (original)": the layer l in 2..L-1 where the mean curve falls most from
  l - 1 (the steps into layer 1 and into the final-norm output L are left out: the first
  starts from the position-free embeddings, the second is a normalisation, not a layer), with
  a percentile bootstrap interval over texts (the same seeded resamples). A layer index has
  no margin, so the row is descriptive (no verdict word, as every row without a SESOI); its
  note says where the interval lies: in the middle band, outside it or straddling it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from homog.claims import Tag
from homog.metrics.registry import difference_unit, token_set_of
from homog.report.claims_rows import Claim
from homog.stats.adjusted import raw_size
from homog.stats.bands import band_of_layers
from homog.stats.paired_tests import bootstrap_ci, paired_p, resample_counts
from homog.stats.verdicts import DESCRIPTIVE

PROGRESSION_METRICS = ("erank", "erank__no_sink", "erank__standardized")


def steepest_fall(wide: pd.DataFrame, layers: list[int], *, n_boot: int, ci: float, seed: int):
    """(layer, low, high) of the steepest mean fall into ``layers`` (each l from l - 1), with a
    percentile bootstrap interval over the rows (texts) of ``wide`` [text x layer]."""
    values = wide.to_numpy(dtype=float)
    cols = list(wide.columns)
    into = np.array([cols.index(x) for x in layers])
    steps = values[:, into] - values[:, into - 1]  # [n, k]
    point = layers[int(np.argmin(steps.mean(axis=0)))]
    n = steps.shape[0]
    w = resample_counts(n, n_boot, seed)  # [B, n]
    boot = np.array(layers)[np.argmin(w @ steps, axis=1)]
    half = (1.0 - ci) / 2.0
    low, high = np.quantile(boot, [half, 1 - half], method="inverted_cdf")
    return point, int(low), int(high)


def progression_claims(
    layer_metrics: pd.DataFrame,
    runs: pd.DataFrame,
    alpha: float,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    test: str = "sign_flip",
    n_perm: int = 10000,
    sesoi: float = 0.1,
) -> list[Claim]:
    """Claim 2's rows (verdicts of the progression rows are set by the family Holm;
    ``sesoi``: ``stats.sesoi``, the share of the original's early-band between-text SD that is
    the progression's margin)."""
    rows: list[Claim] = []
    unchanged = runs[runs["intervention"].fillna("none") == "none"]
    for run in unchanged.itertuples():
        for metric in PROGRESSION_METRICS:
            wide = original_wide(layer_metrics, run.run_id, metric)
            if wide is not None:
                rows.extend(
                    metric_claims(
                        wide,
                        run.model,
                        metric,
                        n_boot=n_boot,
                        ci=ci,
                        seed=seed,
                        test=test,
                        n_perm=n_perm,
                        sesoi=sesoi,
                        alpha=alpha,
                    )
                )
    return rows


def original_wide(layer_metrics: pd.DataFrame, run_id: str, metric: str) -> pd.DataFrame | None:
    """One run's original-variant values of ``metric`` as [text x layer], complete texts only
    (None when the run has none)."""
    m = layer_metrics[
        (layer_metrics["run_id"] == run_id)
        & (layer_metrics["variant"] == "original")
        & (layer_metrics["metric"] == metric)
    ]
    if m.empty:
        return None
    return m.pivot_table(index="sample_id", columns="layer", values="value").dropna()


def band_place(middle: list[int], low: int, high: int) -> str:
    """Where the interval [low, high] lies against the ``middle`` band's layers, in words."""
    return (
        "in the middle band"
        if middle[0] <= low and high <= middle[-1]
        else "outside the middle band"
        if high < middle[0] or low > middle[-1]
        else "straddling the middle band"
    )


def metric_claims(
    wide: pd.DataFrame,
    model: str,
    metric: str,
    *,
    n_boot: int,
    ci: float,
    seed: int,
    test: str,
    n_perm: int,
    sesoi: float = 0.1,
    alpha: float = 0.05,
) -> list[Claim]:
    """Claim 2's two rows for one run and metric from its [text x layer] frame ``wide``: the
    late - early change and the steepest fall (none without an early band or two texts)."""
    bands = band_of_layers(list(wide.columns))
    if "early" not in bands or len(wide) < 2:
        return []
    d = (wide[bands["late"]].mean(axis=1) - wide[bands["early"]].mean(axis=1)).to_numpy()
    low, high = bootstrap_ci(d[None, :], n_boot=n_boot, ci=ci, seed=seed)
    eq = bootstrap_ci(d[None, :], n_boot=n_boot, ci=1 - 2 * alpha, seed=seed)
    inner = [x for x in wide.columns if 1 < x < max(wide.columns)]
    point, s_low, s_high = steepest_fall(wide, inner, n_boot=n_boot, ci=ci, seed=seed)
    middle = bands["middle"]
    where = band_place(middle, s_low, s_high)
    common = {
        "model": model,
        "claim": Tag.PROGRESSION,
        "metric": metric,
        "n": int(d.size),
        "token_set": token_set_of(metric),
    }
    progressive = _progressive_row(
        common,
        wide,
        bands,
        d,
        (float(low[0]), float(high[0])),
        note=f"steepest fall at layer {point} [{s_low}, {s_high}], {where} "
        f"(layers {middle[0]}-{middle[-1]})",
        test=test,
        n_perm=n_perm,
        seed=seed,
        margin=_margin(wide, bands, sesoi),
    )
    progressive.eq_ci_low, progressive.eq_ci_high = float(eq[0][0]), float(eq[1][0])
    steepest = Claim(
        **common,
        statement=f"the steepest fall of {metric} lies in the middle layers",
        comparison="steepest fall (original)",
        scope=f"middle band: layers {middle[0]}-{middle[-1]}",
        effect=float(point),
        ci_low=float(s_low),
        ci_high=float(s_high),
        p_holm=math.nan,
        verdict=DESCRIPTIVE,
        note=f"layer where the mean curve falls most from the layer before "
        f"(layers 2..L-1), {ci:.0%} bootstrap interval over texts: {where}",
        unit="layer index",
        band="middle",
        sesoi_basis="none: a layer index (descriptive; the note says where its interval lies)",
    )
    return [progressive, steepest]


def _progressive_row(
    common: dict[str, Any],
    wide: pd.DataFrame,
    bands: dict[str, list[int]],
    d: np.ndarray,
    interval: tuple[float, float],
    *,
    note: str,
    test: str,
    n_perm: int,
    seed: int,
    margin: tuple[float, str] = (math.nan, ""),
) -> Claim:
    """The "late - early (original)" row of the per-text changes ``d`` and their interval."""
    metric = common["metric"]
    size = raw_size(d[None, :])
    return Claim(
        **common,
        statement=f"homogenization is progressive ({metric} falls from the early "
        "to the late layers)",
        comparison="late - early (original)",
        scope=f"layers {bands['early'][0]}-{bands['early'][-1]} vs "
        f"{bands['late'][0]}-{bands['late'][-1]}",
        effect=float(d.mean()),
        ci_low=interval[0],
        ci_high=interval[1],
        p_holm=math.nan,
        verdict="",
        note=note,
        raw_effect=float(d.mean()),
        dz=float(size["effect"][0] / size["sd"][0]) if size["sd"][0] > 0 else math.nan,
        baseline_mean=float(wide[bands["early"]].mean(axis=1).mean()),
        pct_of_baseline=100 * float(d.mean()) / float(wide[bands["early"]].mean(axis=1).mean()),
        unit=difference_unit(metric),
        p_value=float(paired_p(d[None, :], test=test, n_perm=n_perm, seed=seed)[0]),
        band="late - early",
        sign=-1,
        sesoi=margin[0],
        sesoi_basis=margin[1],
    )


def _margin(wide: pd.DataFrame, bands: dict[str, list[int]], factor: float) -> tuple[float, str]:
    """The progression's SESOI: ``factor`` x the original's between-text SD at the early
    band (the depth change cannot be its own yardstick), with its basis text."""
    sd = float(wide[bands["early"]].mean(axis=1).std(ddof=1))
    return factor * sd, f"{factor:g} x the original's between-text SD at the early band ({sd:.3g})"
