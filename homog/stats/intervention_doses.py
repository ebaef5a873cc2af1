"""The graded interventions' dose-response (docs/interventions.md, "Analysis"): the table
``intervention_doses``.

For one unchanged run and its graded runs (the same pair_key; homog.interventions names them)
every family (``sink_bias``, ``homogenize``) has two arms, the kind and its control, each a
dose series that shares the identity at dose 0 (the ``kind:0`` run, else the unchanged run).
On the texts every dose of both arms holds (variant ``original`` by default), per band
(``late``: the mean over the late band's layers; ``final``: the last layer):

- ``slope`` rows: per text, the least-squares slope of the outcome (erank) on the
  manipulated quantity across the arm's doses (the manipulation as it landed): x = the
  text's measured ``attn_first`` in the sink arm, ``attn_ctrl_token`` (the attention on the
  control's own biased token) in sink_bias's control arm, x = alpha for homogenize; the row is
  the mean over texts, its bootstrap CI and sign-flip p over texts. Arm ``sink_bias -
  control`` (resp. ``homogenize - control``) is the per-text difference of the two slopes:
  the pre-registered primary endpoint, family ``primary`` (Holm over its rows), verdict by
  ``homog.stats.verdicts.row_verdict`` against the claimed sign (``claimed_sign``: erank falls
  as the manipulated quantity rises; ``reversed`` is a rise). Its SESOI is the outcome's at the
  band by the project's margin rule (``band_margins``: homog.stats.margins with
  ``stats.sesoi_basis``, sd by default), per unit of the kind arm's range of x over its doses
  (every slope row of a band, both arms and their difference, so they compare);
- ``dose`` rows: per arm and dose, the outcome at that dose minus at dose 0, family
  ``exploratory``, SESOI the outcome's; and the arm's manipulated x likewise, family
  ``manipulation`` (the check that the dose moved what it should; in no Holm family).

The checks of the sink_bias series (identity, monotonicity) are ``homog.stats.dose_checks``'s.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from homog.claims import EXPLORATORY, PRIMARY
from homog.config import Params
from homog.interventions import parse
from homog.stats.bands import band_of_layers, pivot_metrics
from homog.stats.dose_checks import check_lines, check_rows, homogenize_check_rows
from homog.stats.dose_fit import within_slopes
from homog.stats.paired_tests import bootstrap_ci, holm, paired_p
from homog.stats.settings import StatsSettings
from homog.stats.verdicts import row_verdict

COLUMNS = [
    "run_id",
    "family",
    "arm",
    "kind",
    "band",
    "metric",
    "x_metric",
    "dose",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
    "n",
    "verdict",
    "family_holm",
    "sesoi",
    "sesoi_basis",
    "eq_ci_low",
    "eq_ci_high",
]
X_METRIC = {"sink_bias": "attn_first", "homogenize": "dose"}
# the control arm's x where it is not the kind's: the attention on the control's own token
CONTROL_X = {"sink_bias": "attn_ctrl_token"}
OUTCOMES = ("erank",)
BANDS = ("late", "final")
MANIPULATION = "manipulation"


def _band_values(frame: pd.DataFrame, variant: str, metric: str, bands: dict) -> pd.DataFrame:
    """[band x sample_id] means of ``metric`` over each band's layers."""
    wide = pivot_metrics(frame[(frame["variant"] == variant) & (frame["metric"] == metric)])
    table = wide.get((variant, metric))
    if table is None:
        return pd.DataFrame()
    return pd.DataFrame(
        {b: table.reindex(ls).mean(axis=0, skipna=False) for b, ls in bands.items()}
    ).T


def arms_of(base: dict, graded: Mapping[str, pd.DataFrame], base_frame: pd.DataFrame) -> dict:
    """family -> arm ("kind", "control") -> {dose: frame}; dose 0 of both arms is the
    ``kind:0`` run when there is one, else the unchanged run."""
    out: dict[str, dict[str, dict[float, pd.DataFrame]]] = {}
    for name, frame in graded.items():
        iv = parse(name)
        arm = "control" if iv.is_control else "kind"
        out.setdefault(iv.family, {"kind": {}, "control": {}})[arm][float(iv.dose or 0.0)] = frame
    for arms in out.values():
        zero = arms["kind"].get(0.0, base_frame)
        for arm in arms.values():
            arm.setdefault(0.0, zero)
    return out


def _stack(
    series: dict[float, pd.DataFrame], variant: str, metric: str, bands: dict, samples: list[str]
) -> np.ndarray:
    """[V, G, n] band values of ``metric`` at each dose (sorted), texts ``samples``."""
    return np.stack(
        [
            _band_values(series[d], variant, metric, bands)
            .reindex(index=list(bands), columns=samples)
            .to_numpy(float)
            for d in sorted(series)
        ]
    )


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n,) per-text least-squares slopes of y on x, each [V, n] (NaN where x is constant)."""
    sxy, sxx, used = within_slopes(x, y[:, None, :])
    return np.where(used[0], sxy[0] / np.where(used[0], sxx[0], 1.0), math.nan)


def _row(diffs: np.ndarray, key: dict, settings: StatsSettings, sesoi: float, basis: str) -> dict:
    """One row: the mean of ``diffs`` (n,) over texts, its CI, equivalence CI and p."""
    d = diffs[np.isfinite(diffs)]
    out = {**key, "n": len(d), "sesoi": sesoi, "sesoi_basis": basis}
    if len(d) < 2:
        return {**out, "value": float(np.mean(d)) if len(d) else math.nan}
    n_boot, seed = settings.n_boot, settings.seed
    low, high = bootstrap_ci(d[None], n_boot=n_boot, ci=settings.ci, seed=seed)
    eq_low, eq_high = bootstrap_ci(d[None], n_boot=n_boot, ci=1 - 2 * settings.alpha, seed=seed)
    p = paired_p(d[None], test=settings.test, n_perm=settings.n_perm, seed=seed)
    return {
        **out,
        "value": float(d.mean()),
        "ci_low": float(low[0]),
        "ci_high": float(high[0]),
        "eq_ci_low": float(eq_low[0]),
        "eq_ci_high": float(eq_high[0]),
        "p_value": float(p[0]),
    }


def _dose_rows(
    key: dict,
    bands: list[str],
    doses: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    settings: StatsSettings,
    margins: Mapping[str, tuple[float, str]],
) -> list[dict]:
    """Each dose's change of the outcome ``y`` [V, G, n] against dose 0, per band (SESOI and
    basis text: ``margins[band]``); and of the manipulated ``x`` (no SESOI) unless x is the
    dose itself or dose 0 has none."""
    rows = []
    zero = list(doses).index(0.0)
    for gi, band in enumerate(bands):
        sesoi, basis = margins[band]
        for di, dose in enumerate(doses):
            if dose == 0.0:
                continue
            k = {**key, "band": band, "dose": dose}
            rows.append(_row(y[di, gi] - y[zero, gi], k, settings, sesoi, basis))
            if k["x_metric"] != "dose" and np.isfinite(x[zero, gi]).any():
                k = {**k, "metric": k["x_metric"]}  # the manipulation as it landed
                rows.append(_row(x[di, gi] - x[zero, gi], k, settings, math.nan, ""))
    return rows


def x_metric_of(family: str, arm: str) -> str:
    """The arm's manipulated quantity: ``attn_first`` for the sink arm, the attention on its
    own biased token (``attn_ctrl_token``) for sink_bias's control, the dose for homogenize."""
    return CONTROL_X.get(family, X_METRIC[family]) if arm == "control" else X_METRIC[family]


def _shared_samples(arms: dict, variant: str) -> list[str]:
    sets = [
        set(f.loc[f["variant"] == variant, "sample_id"]) for a in arms.values() for f in a.values()
    ]
    return sorted(set.intersection(*sets))


def _arm_x(series: dict, x_name: str, variant: str, bands: dict, samples: list, shape) -> tuple:
    """(x [V, G, n], note): the arm's x at each dose; where dose 0's run lacks ``x_name`` (an
    unchanged run standing in for dose 0 has no attn_ctrl_token) x there is NaN, so the slopes
    use the other doses and no manipulation row is made, and ``note`` says so."""
    doses = np.array(sorted(series), dtype=float)
    if x_name == "dose":
        x = np.where(np.isinf(doses), np.nan, doses)[:, None, None]
        return np.broadcast_to(x, shape).copy(), ""
    x = _stack(series, variant, x_name, bands, samples)
    if x_name in set(series[0.0]["metric"]):
        return x, ""
    note = f"; {x_name} without dose 0 (no kind:0 run measured it: add 0 to the dose grid)"
    log(note[2:])
    return x, note


def family_rows(
    family: str,
    arms: dict,
    base_frame: pd.DataFrame,
    run_id: str,
    settings: StatsSettings,
    variant: str = "original",
) -> list:
    """The slope and dose rows of one family (module docstring)."""
    layers = sorted(base_frame["layer"].unique())
    bands = {b: ls for b, ls in band_of_layers(layers).items() if b in BANDS}
    samples = _shared_samples(arms, variant)
    if not bands or len(samples) < 2:
        return []
    rows: list[dict] = []
    for metric in OUTCOMES:
        base = pivot_metrics(base_frame[base_frame["metric"] == metric]).get((variant, metric))
        margins = band_margins(settings, base, layers, metric, bands)
        slopes, ranges, notes = {}, {}, {}
        for arm, series in arms.items():
            x_name = x_metric_of(family, arm)
            doses = np.array(sorted(series), dtype=float)
            y = _stack(series, variant, metric, bands, samples)  # [V, G, n]
            x, notes[arm] = _arm_x(series, x_name, variant, bands, samples, y.shape)
            slopes[arm] = np.stack([_slopes(x[:, g], y[:, g]) for g in range(len(bands))])
            ranges[arm] = _x_range(x)
            key = {"run_id": run_id, "family": family, "arm": arm, "kind": "dose"}
            key |= {"metric": metric, "x_metric": x_name}
            rows += _dose_rows(key, list(bands), doses, x, y, settings, margins)
        slopes[f"{family} - control"] = slopes["kind"] - slopes["control"]
        unit_x = x_metric_of(family, "kind")
        for arm, s in slopes.items():
            x_metric = x_metric_of(family, arm) if arm in ranges else _both(family)
            for gi, band in enumerate(bands):
                # one unit for every slope of a band, so the arms and their difference compare
                sesoi, note = margins[band]
                width = float(ranges["kind"][gi])
                unit = sesoi / width if width > 0 else math.nan
                key = {"run_id": run_id, "family": family, "arm": arm, "kind": "slope"}
                key |= {"band": band, "metric": metric, "x_metric": x_metric, "dose": math.nan}
                text = f"{note}, per the {family} arm's range of {unit_x} ({width:.3g})"
                if arm != "kind":
                    ctrl = float(ranges["control"][gi])
                    text += f"; the control arm's range of its x: {ctrl:.3g}"
                text += notes[arm] if arm in notes else notes["control"]
                rows.append(_row(s[gi], key, settings, unit, text))
    return rows


def _x_range(x: np.ndarray) -> np.ndarray:
    """(G,) the range over doses of x [V, G, n]'s mean over texts (doses without x left out)."""
    finite = np.isfinite(x)
    count = finite.sum(axis=2)
    means = np.where(finite, x, 0.0).sum(axis=2) / np.where(count > 0, count, 1)
    means = np.where(count > 0, means, np.nan)
    return np.fmax.reduce(means, axis=0) - np.fmin.reduce(means, axis=0)


def _both(family: str) -> str:
    """The x_metric of a slope difference: the two arms' x, when they differ."""
    kind, control = x_metric_of(family, "kind"), x_metric_of(family, "control")
    return kind if kind == control else f"{kind} vs {control}"


def claimed_sign(kind: str, dose: float) -> int:
    """The claimed direction of a row's effect: the manipulation homogenizes, so erank falls
    as the manipulated quantity rises (a slope: -1) and, against dose 0, in the dose's
    direction (sink_bias at beta < 0 takes attention from the sink: erank rises, +1;
    beta > 0 and every homogenize alpha: -1). ``supported`` is that fall beyond the margin,
    ``reversed`` a rise."""
    if kind == "slope":
        return -1
    return -1 if dose > 0 else 1


def finish(rows: list[dict], alpha: float) -> pd.DataFrame:
    """Holm within each family of rows (primary: the slope differences; exploratory: the
    rest) and every row's verdict."""
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    if frame.empty:
        return frame
    primary = (frame["kind"] == "slope") & frame["arm"].str.endswith(" - control")
    frame["family_holm"] = np.where(primary, PRIMARY, EXPLORATORY)
    # the manipulation check (attn_first per dose) is in no Holm family: its raw p stands
    check = frame["metric"] == frame["x_metric"]
    frame.loc[check, "family_holm"] = MANIPULATION
    frame.loc[check, "p_holm"] = frame.loc[check, "p_value"]
    for fam in (PRIMARY, EXPLORATORY):
        sel = (frame["family_holm"] == fam) & frame["p_value"].notna()
        if sel.any():
            frame.loc[sel, "p_holm"] = holm(frame.loc[sel, "p_value"].to_numpy())
    frame["verdict"] = [
        row_verdict(r, alpha, claimed_sign(r.kind, r.dose))
        if np.isfinite(r.p_value)
        else "inconclusive"
        for r in frame.itertuples()
    ]
    frame["arm"] = np.where(frame["arm"] == "kind", frame["family"], frame["arm"])
    return frame


def intervention_doses(
    params: Params,
    settings: StatsSettings,
    runs: list[dict],
    frames: Mapping[str, pd.DataFrame],
    base_of: Callable[[dict], dict | None],
) -> pd.DataFrame:
    """The ``intervention_doses`` table of every unchanged run that has graded runs
    (``base_of``: a graded run's unchanged run, homog.stats.runs.unchanged_run); ``params``
    gives the sink_bias onset of the checks."""
    graded: dict[str, dict[str, pd.DataFrame]] = {}
    bases: dict[str, dict] = {}
    for run in runs:
        if parse(run.get("intervention", "none")).kind.dose is None:
            continue
        base = base_of(run)
        if base is not None:
            bases[base["run_id"]] = base
            graded.setdefault(base["run_id"], {})[run["intervention"]] = frames[run["run_id"]]
    rows: list[dict] = []
    checks: list[dict] = []
    for run_id, named in graded.items():
        base_frame = frames[run_id]
        for family, arms in arms_of(bases[run_id], named, base_frame).items():
            if arms["kind"] and arms["control"] and len(arms["kind"]) >= 2:
                rows += family_rows(family, arms, base_frame, run_id, settings)
            if family == "sink_bias" and arms["kind"] and arms["control"]:
                samples = _shared_samples(arms, "original")
                x_of = {arm: x_metric_of(family, arm) for arm in arms}
                onset = params.extract.sink_bias_onset
                checks += check_rows(arms, base_frame, run_id, onset, samples, x_of)
            if family == "homogenize" and arms["kind"]:
                samples = _shared_samples(arms, "original")
                layer = params.extract.homogenize_layer
                checks += homogenize_check_rows(arms, base_frame, run_id, layer, samples)
    out = finish(rows, settings.alpha)
    if checks:
        extra = pd.DataFrame(checks).reindex(columns=COLUMNS)
        out = extra if out.empty else pd.concat([out, extra], ignore_index=True)
    for line in check_lines(out, {k: b.get("model", k) for k, b in bases.items()}):
        log(line)
    return out


def band_margins(
    settings: StatsSettings,
    base: pd.DataFrame | None,
    layers: list[int],
    metric: str,
    bands: Mapping[str, list[int]],
) -> dict[str, tuple[float, str]]:
    """Per band, the outcome's SESOI and its basis text by the project's rule
    (:meth:`StatsSettings.margin`: ``stats.sesoi`` x the unchanged run's between-text SD at
    the band under ``stats.sesoi_basis`` sd, the default; its homogenizing depth change under
    depth; ``stats.sesoi_pin``), on the unchanged run's [layer x sample_id] ``base``."""
    if base is None or base.empty:
        return {b: (math.nan, f"none: the unchanged run has no {metric}") for b in bands}
    rule = settings.margin(base, band_of_layers(layers), "the unchanged run's", metric)
    out = {}
    for band, ls in bands.items():
        sd = float(base.reindex(ls).mean(axis=0, skipna=False).std(ddof=1))
        out[band] = rule.of(band, sd)
    return out


def log(message: str) -> None:
    """A note of the analysis for the user (``homog stats`` prints it)."""
    print(f"intervention_doses: {message}", file=sys.stderr)
