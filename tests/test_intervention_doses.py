"""The graded interventions' dose-response table (homog.stats.intervention_doses) on frames
whose slopes are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from homog.config import parse_params
from homog.stats.dose_checks import IDENTITY_TOLERANCE
from homog.stats.intervention_doses import claimed_sign, intervention_doses
from homog.stats.settings import StatsSettings

LAYERS = range(0, 9)  # final = 8, late band = layers 6, 7
SAMPLES = [f"t{i}" for i in range(12)]


def frame(attn: np.ndarray, erank: np.ndarray, ctrl: np.ndarray | None = None) -> pd.DataFrame:
    """layer_metrics rows: attn_first, erank (and attn_ctrl_token) per text, the same at
    every layer."""
    rows = []
    for i, s in enumerate(SAMPLES):
        for layer in LAYERS:
            # erank falls with depth (the SESOI's early-to-late change), shifted by the dose
            rows.append(("original", s, layer, "erank", erank[i] + 20 - layer))
            rows.append(("original", s, layer, "attn_first", attn[i]))
            if ctrl is not None:
                rows.append(("original", s, layer, "attn_ctrl_token", ctrl[i]))
    return pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])


def planted(zero_run: bool, seed: int = 0) -> tuple[list[dict], dict]:
    """Runs and frames whose slopes are known. Sink arm: attn_first moves by 0.1 per dose,
    erank by -3 per unit of attn_first; control: its own token's attn_ctrl_token moves by
    0.05 per dose (attn_first by 0.01), erank by -1 per unit of attn_ctrl_token: primary = -2.
    ``zero_run``: a sink_bias:0 run (with attn_ctrl_token) is dose 0, else the unchanged run
    (without it) stands in."""
    rng = np.random.default_rng(seed)
    noise = lambda: rng.normal(0, 0.01, len(SAMPLES))  # noqa: E731
    base_attn = rng.uniform(0.4, 0.6, len(SAMPLES))
    base_ctrl = rng.uniform(0.02, 0.05, len(SAMPLES))
    base_erank = rng.normal(0, 1.0, len(SAMPLES))  # the between-text SD of the outcome
    runs, frames = [{"run_id": "base", "model": "m", "intervention": "none"}], {}
    frames["base"] = frame(base_attn, base_erank)
    doses = (-2.0, 0.0, 2.0) if zero_run else (-2.0, 2.0)
    for dose in doses:
        for name in ("sink_bias", "sink_bias_control"):
            if dose == 0 and name == "sink_bias_control":
                continue
            if name == "sink_bias":
                a, c = base_attn + 0.1 * dose, base_ctrl - 0.01 * dose
                erank = base_erank - 3.0 * (a - base_attn) + noise() * (dose != 0)
            else:
                a, c = base_attn - 0.01 * dose, base_ctrl + 0.05 * dose
                erank = base_erank - 1.0 * (c - base_ctrl) + noise()
            run_id = f"{name}:{dose:g}"
            frames[run_id] = frame(a, erank, c)
            runs.append({"run_id": run_id, "model": "m", "intervention": run_id})
    return runs, frames


def test_slopes_and_primary_endpoint_recover_known_slopes():
    runs, frames = planted(zero_run=True)
    params = parse_params({"stats": {"n_boot": 200, "n_perm": 200}})
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    slope = out[out["kind"] == "slope"].set_index(["arm", "band"])
    assert slope.loc[("sink_bias", "final"), "value"] == pytest.approx(-3.0, abs=0.05)
    assert slope.loc[("sink_bias", "final"), "x_metric"] == "attn_first"
    # the control's slope is on its own token's attention, not on attn_first
    assert slope.loc[("control", "late"), "value"] == pytest.approx(-1.0, abs=0.05)
    assert slope.loc[("control", "late"), "x_metric"] == "attn_ctrl_token"
    primary = slope.loc[("sink_bias - control", "final")]
    assert primary["value"] == pytest.approx(-2.0, abs=0.05)
    assert primary["family_holm"] == "primary" and primary["verdict"] == "supported"
    assert primary["ci_low"] < -1.9 and primary["ci_high"] > -2.1 or primary["ci_high"] < 0
    dose = out[(out["kind"] == "dose") & (out["arm"] == "sink_bias") & (out["band"] == "final")]
    dose = dose[dose["metric"] == "erank"]
    assert sorted(dose["dose"]) == [-2.0, 2.0]
    got = dose.set_index("dose")["value"]
    assert got[2.0] == pytest.approx(-3 * 0.2, abs=0.02)  # erank at +2 minus at the identity
    assert set(out["family_holm"]) == {"primary", "exploratory", "manipulation", "check"}
    # each arm's manipulation rows report its own x
    check = out[out["family_holm"] == "manipulation"].set_index(["arm", "band", "dose"])
    assert check.loc[("control", "final", 2.0), "metric"] == "attn_ctrl_token"
    assert check.loc[("control", "final", 2.0), "value"] == pytest.approx(0.1)
    assert check.loc[("sink_bias", "final", 2.0), "metric"] == "attn_first"
    assert check.loc[("sink_bias", "final", 2.0), "value"] == pytest.approx(0.2)


def test_verdicts_read_the_claimed_sign_erank_falls_as_the_dose_concentrates():
    """The planted series with erank turned upside down (every frame's erank negated): the
    sink arm's erank now rises with attention, so the primary endpoint (+2) is reversed, not
    supported; erank moves against the claim at beta = +2 (up) and at -2 (down)."""
    runs, frames = planted(zero_run=True)
    for f in frames.values():
        f.loc[f["metric"] == "erank", "value"] *= -1
    params = parse_params({"stats": {"n_boot": 200, "n_perm": 200}})
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    slope = out[out["kind"] == "slope"].set_index(["arm", "band"])
    primary = slope.loc[("sink_bias - control", "final")]
    assert primary["value"] == pytest.approx(2.0, abs=0.05) and primary["verdict"] == "reversed"
    assert slope.loc[("sink_bias", "final"), "verdict"] != "supported"
    dose = out[(out["kind"] == "dose") & (out["arm"] == "sink_bias") & (out["band"] == "final")]
    dose = dose[dose["metric"] == "erank"].set_index("dose")
    assert dose.loc[2.0, "value"] > 0 and dose.loc[-2.0, "value"] < 0
    assert "supported" not in set(dose["verdict"])
    # against dose 0 the claim follows the dose: beta > 0 and alpha concentrate, beta < 0
    # (-inf included) takes attention from the sink
    assert [claimed_sign("dose", d) for d in (2.0, 0.2, -2.0, -math.inf)] == [-1, -1, 1, 1]
    assert claimed_sign("slope", math.nan) == -1


def test_fewer_than_ten_texts_read_no_verdict(monkeypatch):
    """The rule of every table (homog.stats.verdicts.MIN_PAIRS): a dose series on 8 texts (a
    small extract.dose_texts draw) has its numbers and no verdict word."""
    monkeypatch.setitem(globals(), "SAMPLES", SAMPLES[:8])
    runs, frames = planted(zero_run=True)
    params = parse_params({"stats": {"n_boot": 200, "n_perm": 200}})
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    tested = out[out["p_value"].notna()]
    assert len(tested) and set(tested["n"]) == {8}
    assert set(tested["verdict"]) == {"too few pairs"}


@pytest.mark.parametrize("basis", ["sd", "depth"])
def test_slope_margins_follow_the_projects_margin_rule(basis):
    """SESOI = stats.sesoi x the unchanged run's between-text SD at the band (sd; depth: its
    early-to-late change, which is above that SD here), per unit of the sink arm's range of
    attn_first (0.4) for every slope, the control's (attn_ctrl_token: 0.2) too."""
    runs, frames = planted(zero_run=True)
    params = parse_params({"stats": {"n_boot": 50, "n_perm": 50, "sesoi_basis": basis}})
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    base = frames["base"]
    final = base[(base["metric"] == "erank") & (base["layer"] == 8)]["value"]
    sd = float(final.std(ddof=1))
    depth = (20 - np.mean([1, 2])) - (20 - np.mean([6, 7]))  # early minus late band, erank
    want = 0.1 * (sd if basis == "sd" else depth)
    slope = out[(out["kind"] == "slope") & (out["band"] == "final")].set_index("arm")
    assert slope.loc["sink_bias", "sesoi"] == pytest.approx(want / 0.4)  # attn_first: 0.4
    assert slope.loc["control", "sesoi"] == pytest.approx(want / 0.4)
    assert "the control arm's range of its x: 0.2" in slope.loc["control", "sesoi_basis"]
    assert slope.loc["sink_bias - control", "sesoi"] == pytest.approx(want / 0.4)
    words = "between-text SD at the final layer" if basis == "sd" else "early-to-late change"
    assert all(words in t for t in slope["sesoi_basis"])
    doses = out[(out["kind"] == "dose") & (out["metric"] == "erank") & (out["band"] == "final")]
    assert np.allclose(doses["sesoi"], want)


def test_an_unchanged_run_as_dose_0_leaves_the_control_x_there_out_and_says_so(capsys):
    """Without a sink_bias:0 run the unchanged run (no attn_ctrl_token) is dose 0: the
    control's slope uses its other doses, it has no manipulation rows, and the basis text
    and the log say why."""
    runs, frames = planted(zero_run=False)
    params = parse_params({"stats": {"n_boot": 50, "n_perm": 50}})
    out = intervention_doses(params, StatsSettings.of(params), runs, frames, lambda r: runs[0])
    assert "attn_ctrl_token without dose 0" in capsys.readouterr().err
    slope = out[(out["kind"] == "slope") & (out["band"] == "final")].set_index("arm")
    assert slope.loc["control", "value"] == pytest.approx(-1.0, abs=0.05)
    assert slope.loc["control", "sesoi"] > 0  # its range over the doses that have x
    assert "without dose 0" in slope.loc["control", "sesoi_basis"]
    assert "without dose 0" in slope.loc["sink_bias - control", "sesoi_basis"]
    check = out[out["family_holm"] == "manipulation"]
    assert set(check["arm"]) == {"sink_bias"}


def test_report_section_has_the_answer_line_tables_and_one_figure_per_model(tmp_path):
    from homog.report.concentration import TITLE, concentration_section

    rows = []
    xs = {"sink_bias": "attn_first", "control": "attn_ctrl_token"}
    xs["sink_bias - control"] = "attn_first vs attn_ctrl_token"
    for model in ("m1", "m2"):
        for arm, x_metric in xs.items():
            rows.append(
                dict(
                    model=model,
                    run_id=f"base_{model}",
                    family="sink_bias",
                    family_holm="primary" if arm == "sink_bias - control" else "exploratory",
                    arm=arm,
                    kind="slope",
                    band="final",
                    metric="erank",
                    x_metric=x_metric,
                    dose=np.nan,
                    value=-2.0,
                    ci_low=-2.5,
                    ci_high=-1.5,
                    sesoi=0.3,
                    p_holm=0.001,
                    n=12,
                    verdict="supported",
                )
            )
            if arm == "sink_bias - control":
                continue
            for dose, metric, value in (
                (-2.0, x_metric, -0.3),
                (-2.0, "erank", 0.5),
                (2.0, x_metric, 0.1),
                (2.0, "erank", -0.2),
            ):
                rows.append(
                    dict(
                        model=model,
                        run_id=f"base_{model}",
                        family="sink_bias",
                        family_holm="manipulation" if metric == x_metric else "exploratory",
                        arm=arm,
                        kind="dose",
                        band="final",
                        metric=metric,
                        x_metric=x_metric,
                        dose=dose,
                        value=value,
                        ci_low=value - 0.1,
                        ci_high=value + 0.1,
                        sesoi=0.3,
                        p_holm=0.01,
                        n=12,
                        verdict="supported",
                    )
                )
    checks = dict(model="m1", run_id="base_m1", family="sink_bias", family_holm="check")
    rows.append(
        dict(
            checks,
            arm="sink_bias",
            kind="identity",
            metric="layer_metrics",
            value=0.0,
            n=120,
            sesoi=IDENTITY_TOLERANCE,
        )
    )
    for arm, x_metric in list(xs.items())[:2]:
        rows.append(
            dict(
                checks, arm=arm, kind="monotone", band="layers 2-4", metric=x_metric, value=3.0, n=3
            )
        )
    sec = concentration_section(pd.DataFrame(rows), tmp_path)
    assert sec.title == TITLE
    got = [p for p in sec.paragraphs if p.startswith("**Check.**")]
    assert len(got) == 2 and "m1: identity" in got[0]
    assert f"(<= {IDENTITY_TOLERANCE:g}: holds)" in got[0]
    assert "attn_first (sink) at 3 of 3, attn_ctrl_token (control) at 3 of 3" in got[1]
    assert not any("layer_metrics" in str(r) for t in sec.tables for r in t.rows)
    assert any("m1: final -2 [-2.5, -1.5], SESOI 0.3, supported" in p for p in sec.paragraphs)
    assert [p.name for p, _ in sec.figures] == ["concentration_m1.png", "concentration_m2.png"]
    assert all(p.stat().st_size > 0 for p, _ in sec.figures)
    assert concentration_section(pd.DataFrame(columns=["family"]), tmp_path) is None
