"""The sink_bias series' checks (homog.stats.dose_checks): the identity of sink_bias:0 with
the unchanged run and the monotonicity of each arm's x in beta, on synthetic frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_intervention_doses import planted

from homog.config import parse_params
from homog.stats.dose_checks import (
    IDENTITY_TOLERANCE,
    check_lines,
    homogenize_check_rows,
    identity_difference,
    monotone_layers,
)
from homog.stats.intervention_doses import intervention_doses
from homog.stats.settings import StatsSettings

SAMPLES = ["a", "b", "c"]


def long(values: dict[int, list[float]], metric: str = "attn_first") -> pd.DataFrame:
    """layer -> per-text values as layer_metrics rows."""
    return pd.DataFrame(
        [
            ("original", s, layer, metric, v)
            for layer, vs in values.items()
            for s, v in zip(SAMPLES, vs, strict=True)
        ],
        columns=["variant", "sample_id", "layer", "metric", "value"],
    )


def test_identity_is_zero_for_equal_frames_and_sees_a_difference_on_the_metric_scale():
    base = long({1: [0.5, 0.25, 0.0], 2: [2.0, np.nan, 4.0]})
    same = base.copy()
    assert identity_difference(same, base) == (0.0, 6)  # 0 = 0 and NaN = NaN count as equal
    off = base.copy()
    off.loc[3, "value"] *= 1 + 1e-3  # layer 2, text a: 2.0 -> 2.002
    value, n = identity_difference(off, base)
    assert value == pytest.approx(2e-3 / 4.0) and n == 6  # on the metric's largest |value|, 4
    # rows only one side has (attn_ctrl_token, other texts) are not compared
    extra = pd.concat([same, long({1: [9.0, 9.0, 9.0]}, "attn_ctrl_token")])
    assert identity_difference(extra, base) == (0.0, 6)
    # float32 rounding on a value near 0 (attn_last ~1e-3 beside values ~0.05) is read on its
    # metric's scale, not its own: 2e-9 at 1e-3 is 2e-6 of the value, 4e-8 of the metric
    small = long({1: [1e-3, 0.05, 0.02]}, "attn_last")
    jitter = small.copy()
    jitter.loc[0, "value"] += 2e-9
    assert identity_difference(jitter, small)[0] == pytest.approx(2e-9 / 0.05)
    # each metric on its own scale: a large metric beside it does not hide its difference
    both = pd.concat([small, long({1: [1e3, 1e3, 1e3]}, "norm_mean")])
    moved = both.copy()
    moved.loc[0, "value"] += 1e-4
    assert identity_difference(moved, both)[0] == pytest.approx(1e-4 / 0.05)
    one_nan = base.copy()
    one_nan.loc[0, "value"] = np.nan
    assert identity_difference(one_nan, base)[0] == np.inf


def test_monotone_layers_counts_the_layers_where_the_mean_rises_strictly_with_beta():
    # layer 1 is before the onset; layer 2 rises; layer 3 dips at beta = 2; layer 4 is flat
    series = {
        -2.0: long({1: [9, 9, 9], 2: [0.1, 0.1, 0.1], 3: [0.1, 0.1, 0.1], 4: [0.3] * 3}),
        0.0: long({1: [0, 0, 0], 2: [0.2, 0.3, 0.1], 3: [0.5, 0.5, 0.5], 4: [0.3] * 3}),
        2.0: long({1: [1, 1, 1], 2: [0.6, 0.6, 0.6], 3: [0.4, 0.4, 0.4], 4: [0.3] * 3}),
    }
    k, layers, doses = monotone_layers(series, "attn_first", SAMPLES, onset=2)
    assert (k, layers, doses) == (1, [2, 3, 4], [-2.0, 0.0, 2.0])
    all_rise = {d: f.assign(value=f["value"] + d) for d, f in series.items()}
    all_rise = {d: f[f["layer"] == 2] for d, f in all_rise.items()}
    assert monotone_layers(all_rise, "attn_first", SAMPLES, onset=2)[:2] == (1, [2])


def test_the_checks_are_rows_of_the_table_and_lines_in_the_log(capsys):
    """Planted series: sink_bias:0 equals the unchanged run but for erank off by 1e-3 at one
    text; both arms' x rise with beta at every layer from the onset (middle: 4 of 8) on."""
    runs, frames = planted(zero_run=True)
    zero = frames["sink_bias:0"]
    sel = (zero["metric"] == "erank") & (zero["sample_id"] == "t0") & (zero["layer"] == 3)
    was = float(zero.loc[sel, "value"].iloc[0])
    zero.loc[sel, "value"] = zero.loc[sel, "value"] * (1 + 1e-3)
    largest = max(zero.loc[zero["metric"] == "erank", "value"].abs().max(), abs(was) * 1.001)
    params = parse_params({"stats": {"n_boot": 50, "n_perm": 50}})
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    err = capsys.readouterr().err
    ident = out[out["kind"] == "identity"].iloc[0]
    assert ident["value"] == pytest.approx(abs(was) * 1e-3 / largest)
    assert ident["value"] > IDENTITY_TOLERANCE
    assert "FAILS" in err and "m: identity" in err
    mono = out[out["kind"] == "monotone"].set_index("arm")
    assert mono.loc["sink_bias", "metric"] == "attn_first"
    assert mono.loc["control", "metric"] == "attn_ctrl_token"
    assert (mono["value"] == 5).all() and (mono["n"] == 5).all()  # layers 4..8
    assert "attn_ctrl_token (control) at 5 of 5" in err
    # the control's attn_ctrl_token falls with beta instead: 0 of 5 layers
    for name, f in frames.items():
        if name.startswith("sink_bias_control"):
            c = f["metric"] == "attn_ctrl_token"
            f.loc[c, "value"] = 0.5 - f.loc[c, "value"]
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    lines = check_lines(out, {"base": "m"})
    assert any("attn_ctrl_token (control) at 0 of 5" in x for x in lines)
    assert len(lines) == 2  # one identity line and one monotonicity line per model


def test_the_homogenize_checks_read_the_identity_and_erank_falling_from_the_layer_on():
    """homogenize:0 equals the unchanged run; erank falls with alpha at layers 2 and 3 (the
    homogenized layer, 2, and the next) but not at 4, where alpha 1 rises again; layer 1,
    below the edit, is not read."""
    erank = lambda *by_layer: pd.concat(  # noqa: E731
        [long({i: [v] * 3}, "erank") for i, v in enumerate(by_layer)], ignore_index=True
    )
    base = erank(9.0, 8.0, 7.0, 6.0, 5.0)
    arms = {
        "kind": {0.0: base.copy(), 0.5: erank(9.0, 9.0, 6.0, 5.0, 4.0)},
        "control": {},
    }
    arms["kind"][1.0] = erank(9.0, 9.5, 5.0, 4.0, 4.5)
    rows = homogenize_check_rows(arms, base, "base", 2, SAMPLES)
    ident, mono = rows
    assert (ident["kind"], ident["family"], ident["value"], ident["n"]) == (
        "identity",
        "homogenize",
        0.0,
        15,
    )
    assert (mono["value"], mono["n"], mono["band"]) == (2.0, 3, "layers 2-4")
    lines = check_lines(pd.DataFrame(rows), {"base": "m"})
    assert lines == [
        "m: identity homogenize:0 = unchanged run: max relative difference 0 over 15 shared "
        "layer_metrics values (<= 1e-05: holds)",
        "m: erank falls with alpha, layers 2-4: at 2 of 3",
    ]
    # "middle" is L // 2 of the unchanged run's layers (4): layer 2 again
    assert homogenize_check_rows(arms, base, "base", "middle", SAMPLES)[1] == mono


def test_the_answer_carries_the_concentration_line_even_without_claim_rows():
    """On 22 real originals of gemma3-270m (graded runs only: no variant, no claim row of
    the answer's) the report's answer read "No claim rows: run homog stats and homog load"
    and left out the two primary endpoints it had. The sink_bias primary endpoint is an
    answer line, and a database of graded runs alone answers with its own lines."""
    import pandas as pd

    from homog.report.answer import full_answer

    doses = pd.DataFrame(
        [
            {
                "model": "m",
                "family": "sink_bias",
                "kind": "slope",
                "arm": "sink_bias - control",
                "band": "final",
                "value": -2.04,
                "ci_low": -6.41,
                "ci_high": 2.94,
                "sesoi": 1.57,
                "verdict": "inconclusive",
                "n": 22,
            },
            {
                "model": "m",
                "family": "sink_bias",
                "kind": "slope",
                "arm": "sink_bias",
                "band": "final",
                "value": -5.7,
                "ci_low": -6.4,
                "ci_high": -4.9,
                "sesoi": 1.57,
                "verdict": "supported",
                "n": 22,
            },
        ]
    )
    lines = full_answer(pd.DataFrame(), None, None, None, doses)
    assert len(lines) == 1 and lines[0].markdown.startswith("**Attention concentration**")
    assert "m: final -2.04 [-6.41, 2.94], SESOI 1.57, inconclusive (n = 22)" in lines[0].markdown
    assert full_answer(pd.DataFrame(), None, None, None, None) == []
