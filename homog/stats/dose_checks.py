"""The dose series' checks (docs/interventions.md, "Checks"), per unchanged run. Of sink_bias:

- **identity**: the largest relative difference |a - b| / max(|a|, |b|, s_m) (0 where all
  are 0; NaN on both sides is equal, on one side infinite) over every ``layer_metrics`` value
  the ``sink_bias:0`` run and the unchanged run share: the same variant, sample_id, layer and
  metric, so their shared texts (``attn_ctrl_token`` is the dose-0 run's alone). s_m is the
  largest |value| of the metric over those rows: a value near 0 (``attn_last`` ~1e-3) is
  read on its metric's scale, where float32's rounding is. It holds at
  <= ``IDENTITY_TOLERANCE``. No ``sink_bias:0`` run: no identity row.
- **monotonicity**: at how many attention layers from the onset (``extract.sink_bias_onset``)
  on the mean over the shared texts of the arm's x (``attn_first`` in the sink arm,
  ``attn_ctrl_token`` in the control's) rises strictly with beta, over the doses that
  measured it.

Of homogenize (``homogenize_check_rows``): the identity of ``homogenize:0`` with the unchanged
run, and at how many hidden layers from the homogenized one (``extract.homogenize_layer``) on
the mean erank over the shared texts falls strictly with alpha.

All are rows of ``intervention_doses`` (kind ``identity`` / ``monotone``, family_holm
``check``, no verdict: value against sesoi, resp. value of n) and one line each per model
(``check_lines``): ``homog stats`` logs them and the report's section prints them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from homog.interventions import resolve_layer

# A graded run on ``extract.dose_texts`` batches its texts otherwise than the unchanged run, so
# float32 rounds otherwise: on real reviews that floor was 4.5e-7 on the metric's scale
# (attn_last, whose values are all under 0.005), a few float32 epsilons (1.2e-7); 1e-5 leaves
# 20 times that, and an edit that acts at dose 0 moves values by 1e-3 and more
# (docs/interventions.md, "Checks")
IDENTITY_TOLERANCE = 1e-5
CHECK = "check"
KEYS = ["variant", "sample_id", "layer", "metric"]


def identity_difference(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, int]:
    """(largest relative difference, number of values compared) of the ``layer_metrics``
    values ``a`` and ``b`` share (module docstring); (NaN, 0) when they share none."""
    both = a[[*KEYS, "value"]].merge(b[[*KEYS, "value"]], on=KEYS, suffixes=("_a", "_b"))
    if both.empty:
        return math.nan, 0
    x, y = both["value_a"].to_numpy(float), both["value_b"].to_numpy(float)
    size = np.fmax(np.abs(x), np.abs(y))  # NaN only where both are
    of_metric = pd.Series(size).groupby(both["metric"].to_numpy()).transform("max")
    scale = np.fmax(size, of_metric.to_numpy(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(scale > 0, np.abs(x - y) / np.where(scale > 0, scale, 1.0), 0.0)
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    rel = np.where(nan_x & nan_y, 0.0, np.where(nan_x | nan_y, np.inf, rel))
    return float(rel.max()), len(both)


def monotone_layers(
    series: Mapping[float, pd.DataFrame],
    metric: str,
    samples: list[str],
    onset: int,
    variant: str = "original",
    falls: bool = False,
) -> tuple[int, list[int], list[float]]:
    """(how many layers, the layers >= ``onset``, the doses used): the layers where the mean of
    ``metric`` over ``samples`` rises strictly with the dose (``falls``: falls strictly), over
    the doses of ``series`` that hold ``metric``; a layer some such dose lacks is not
    monotone."""
    means = {}
    for dose in sorted(series):
        f = series[dose]
        f = f[(f["variant"] == variant) & (f["metric"] == metric) & (f["layer"] >= onset)]
        if not f.empty:
            means[dose] = f[f["sample_id"].isin(samples)].groupby("layer")["value"].mean()
    if not means:
        return 0, [], []
    table = pd.DataFrame(means).sort_index()  # [layer x dose]
    values = table.to_numpy(float)
    steps = np.diff(values, axis=1) * (-1 if falls else 1)
    rising = (steps > 0).all(axis=1) & np.isfinite(values).all(axis=1)
    return int(rising.sum()), [int(x) for x in table.index], list(means)


def identity_row(family: str, zero: pd.DataFrame, base_frame: pd.DataFrame, run_id: str) -> dict:
    """The identity check of ``family``'s dose-0 run ``zero`` against the unchanged run."""
    value, n = identity_difference(zero, base_frame)
    return {
        "run_id": run_id,
        "family": family,
        "family_holm": CHECK,
        "arm": family,
        "kind": "identity",
        "band": "all",
        "metric": "layer_metrics",
        "x_metric": "",
        "dose": 0.0,
        "value": value,
        "n": n,
        "sesoi": IDENTITY_TOLERANCE,
        "sesoi_basis": "largest |a - b| / max(|a|, |b|) over the layer_metrics values "
        f"{family}:0 and the unchanged run share; the identity holds at <= "
        f"{IDENTITY_TOLERANCE:g}",
    }


def _identity_and_layer(
    family: str,
    arms: Mapping[str, Mapping[float, pd.DataFrame]],
    base_frame: pd.DataFrame,
    run_id: str,
    layer_value: int | str,
    name: str,
) -> tuple[list[dict], int, int]:
    """([the identity row when dose 0 is a run of its own], the first layer the monotonicity
    reads (``name``'s value resolved), the run's last layer)."""
    zero = arms["kind"].get(0.0)
    rows = []
    if zero is not None and zero is not base_frame:
        rows.append(identity_row(family, zero, base_frame, run_id))
    n_layers = int(base_frame["layer"].max())
    return rows, resolve_layer(layer_value, n_layers, name, n_layers), n_layers


def monotone_row(
    family: str,
    arm: str,
    metric: str,
    run_id: str,
    span: tuple[int, int],
    k: int,
    n: int,
    basis: str,
) -> dict:
    """A monotonicity row: ``k`` of the ``n`` layers read in ``span`` (first, last) move with
    the dose."""
    return {
        "run_id": run_id,
        "family": family,
        "family_holm": CHECK,
        "arm": arm,
        "kind": "monotone",
        "band": f"layers {span[0]}-{span[1]}",
        "metric": metric,
        "x_metric": "dose",
        "dose": math.nan,
        "value": float(k),
        "n": n,
        "sesoi": math.nan,
        "sesoi_basis": basis,
    }


def check_rows(
    arms: Mapping[str, Mapping[float, pd.DataFrame]],
    base_frame: pd.DataFrame,
    run_id: str,
    onset_value: int | str,
    samples: list[str],
    x_of: Mapping[str, str],
    variant: str = "original",
) -> list[dict]:
    """The identity row (when dose 0 is a ``sink_bias:0`` run) and one monotonicity row per
    arm (``x_of``: arm -> its x) of the sink_bias family of one unchanged run."""
    rows, onset, n_layers = _identity_and_layer(
        "sink_bias", arms, base_frame, run_id, onset_value, "sink_bias_onset"
    )
    for arm, x in x_of.items():
        k, layers, doses = monotone_layers(arms[arm], x, samples, onset, variant)
        words = ", ".join(f"{d:g}" for d in doses)
        basis = (
            f"the attention layers from the onset ({onset}) on where the mean of {x} over "
            f"{len(samples)} texts rises strictly with beta ({words})"
        )
        arm_name = "sink_bias" if arm == "kind" else arm
        rows.append(
            monotone_row("sink_bias", arm_name, x, run_id, (onset, n_layers), k, len(layers), basis)
        )
    return rows


def homogenize_check_rows(
    arms: Mapping[str, Mapping[float, pd.DataFrame]],
    base_frame: pd.DataFrame,
    run_id: str,
    layer_value: int | str,
    samples: list[str],
    variant: str = "original",
) -> list[dict]:
    """The homogenize family's checks of one unchanged run: the identity of
    ``homogenize:0`` with it, and at how many hidden layers from the homogenized one
    (``extract.homogenize_layer``) on the mean erank over ``samples`` falls strictly with
    alpha (the manipulation makes the tokens alike where it acts and above)."""
    rows, at, n_layers = _identity_and_layer(
        "homogenize", arms, base_frame, run_id, layer_value, "homogenize_layer"
    )
    k, layers, doses = monotone_layers(arms["kind"], "erank", samples, at, variant, falls=True)
    words = ", ".join(f"{d:g}" for d in doses)
    basis = (
        f"the hidden layers from the homogenized one ({at}) on where the mean of erank over "
        f"{len(samples)} texts falls strictly with alpha ({words})"
    )
    rows.append(
        monotone_row(
            "homogenize", "homogenize", "erank", run_id, (at, n_layers), k, len(layers), basis
        )
    )
    return rows


def family_check_lines(doses: pd.DataFrame | None, family: str) -> list[str]:
    """``check_lines`` of one family's rows of the report's ``intervention_doses`` frame (its
    ``model`` column names the models); none without rows."""
    if doses is None or doses.empty or "family" not in doses:
        return []
    rows = doses[doses["family"] == family]
    return check_lines(rows, dict(zip(rows["run_id"], rows["model"], strict=True)))


def check_lines(doses: pd.DataFrame, model_of: Mapping[str, str]) -> list[str]:
    """One line per model and check (identity, monotonicity) from ``intervention_doses``'s
    check rows; ``model_of``: run_id -> model."""
    lines = []
    checks = doses[doses["family_holm"] == CHECK] if "family_holm" in doses else doses[:0]
    for run_id, rows in checks.groupby("run_id", sort=False):
        model = model_of.get(run_id, str(run_id)[:12])
        ident = rows[rows["kind"] == "identity"]
        for r in ident.itertuples():
            ok = "holds" if r.value <= r.sesoi else "FAILS"
            lines.append(
                f"{model}: identity {r.family}:0 = unchanged run: max relative difference "
                f"{r.value:.3g} over {int(r.n):,} shared layer_metrics values "
                f"(<= {r.sesoi:g}: {ok})"
            )
        mono = rows[(rows["kind"] == "monotone") & (rows["family"] == "homogenize")]
        for r in mono.itertuples():
            lines.append(
                f"{model}: {r.metric} falls with alpha, {r.band}: at {int(r.value)} of {int(r.n)}"
            )
        mono = rows[(rows["kind"] == "monotone") & (rows["family"] == "sink_bias")]
        mono = mono.sort_values("arm", key=lambda a: a != "sink_bias")
        if not mono.empty:
            parts = [
                f"{r.metric} ({'sink' if r.arm == 'sink_bias' else r.arm}) at "
                f"{int(r.value)} of {int(r.n)}"
                for r in mono.itertuples()
            ]
            lines.append(f"{model}: monotone in beta, {mono['band'].iloc[0]}: " + ", ".join(parts))
    return lines
