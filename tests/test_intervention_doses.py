"""The graded interventions' dose-response table (homog.stats.intervention_doses) on frames
whose slopes are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from homog.config import parse_params
from homog.stats.intervention_doses import intervention_doses

LAYERS = range(0, 9)  # final = 8, late band = layers 6, 7
SAMPLES = [f"t{i}" for i in range(12)]


def frame(attn: np.ndarray, erank: np.ndarray) -> pd.DataFrame:
    """layer_metrics rows: attn_first and erank per text, the same at every layer."""
    rows = []
    for i, s in enumerate(SAMPLES):
        for layer in LAYERS:
            # erank falls with depth (the SESOI's early-to-late change), shifted by the dose
            rows.append(("original", s, layer, "erank", erank[i] + 20 - layer))
            rows.append(("original", s, layer, "attn_first", attn[i]))
    return pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])


def test_slopes_and_primary_endpoint_recover_known_slopes():
    rng = np.random.default_rng(0)
    noise = lambda: rng.normal(0, 0.01, len(SAMPLES))  # noqa: E731
    base_attn = rng.uniform(0.4, 0.6, len(SAMPLES))
    runs, frames = [{"run_id": "base", "model": "m", "intervention": "none"}], {}
    frames["base"] = frame(base_attn, np.zeros(len(SAMPLES)))
    # sink arm: attn_first moves by 0.1 per dose, erank by -3 per unit attn_first (slope -3);
    # control: attn_first moves as much, erank by -1 per unit (slope -1): primary = -2
    for dose in (-2.0, 2.0):
        for name, slope in (("sink_bias", -3.0), ("sink_bias_control", -1.0)):
            a = base_attn + 0.1 * dose
            frames[f"{name}:{dose:g}"] = frame(a, slope * (a - base_attn) + noise())
            runs.append(
                {"run_id": f"{name}:{dose:g}", "model": "m", "intervention": f"{name}:{dose:g}"}
            )
    params = parse_params({"stats": {"n_boot": 200, "n_perm": 200}})
    out = intervention_doses(params, runs, frames, lambda r: runs[0])
    slope = out[out["kind"] == "slope"].set_index(["arm", "band"])
    assert slope.loc[("sink_bias", "final"), "value"] == pytest.approx(-3.0, abs=0.05)
    assert slope.loc[("control", "late"), "value"] == pytest.approx(-1.0, abs=0.05)
    primary = slope.loc[("sink_bias - control", "final")]
    assert primary["value"] == pytest.approx(-2.0, abs=0.05)
    assert primary["family_holm"] == "primary" and primary["verdict"] == "supported"
    assert primary["ci_low"] < -1.9 and primary["ci_high"] > -2.1 or primary["ci_high"] < 0
    # SESOI: 0.1 x the early-to-late change of erank per the sink arm's attn_first range (0.4)
    assert primary["sesoi"] > 0
    dose = out[(out["kind"] == "dose") & (out["arm"] == "sink_bias") & (out["band"] == "final")]
    dose = dose[dose["metric"] == "erank"]
    assert sorted(dose["dose"]) == [-2.0, 2.0]
    got = dose.set_index("dose")["value"]
    assert got[2.0] == pytest.approx(-3 * 0.2, abs=0.02)  # erank at +2 minus at the identity
    assert set(out["family_holm"]) == {"primary", "exploratory", "manipulation"}
    check = out[(out["metric"] == "attn_first") & (out["arm"] == "control")]
    assert check.set_index(["band", "dose"])["value"][("final", 2.0)] == pytest.approx(0.2)


def test_report_section_has_the_answer_line_tables_and_one_figure_per_model(tmp_path):
    from homog.report.concentration import TITLE, concentration_section

    rows = []
    for model in ("m1", "m2"):
        for arm in ("sink_bias", "control", "sink_bias - control"):
            rows.append(
                dict(
                    model=model,
                    family="sink_bias",
                    arm=arm,
                    kind="slope",
                    band="final",
                    metric="erank",
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
                (-2.0, "attn_first", -0.3),
                (-2.0, "erank", 0.5),
                (2.0, "attn_first", 0.1),
                (2.0, "erank", -0.2),
            ):
                rows.append(
                    dict(
                        model=model,
                        family="sink_bias",
                        arm=arm,
                        kind="dose",
                        band="final",
                        metric=metric,
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
    sec = concentration_section(pd.DataFrame(rows), tmp_path)
    assert sec.title == TITLE
    assert any("m1: -2 [-2.5, -1.5]" in p and "supported" in p for p in sec.paragraphs)
    assert [p.name for p, _ in sec.figures] == ["concentration_m1.png", "concentration_m2.png"]
    assert all(p.stat().st_size > 0 for p, _ in sec.figures)
    assert concentration_section(pd.DataFrame(columns=["family"]), tmp_path) is None
