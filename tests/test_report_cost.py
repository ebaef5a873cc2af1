"""The report's "Does homogenization cost anything?" section, from a probe_metrics frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from homog.report.cost import cost_line, cost_section

COLUMNS = [
    "model",
    "intervention",
    "scheme",
    "kind",
    "baseline",
    "variant",
    "layer",
    "band",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
    "n",
    "verdict",
]
VERDICT = ["family", "sesoi", "sesoi_basis", "eq_ci_low", "eq_ci_high"]  # issue 41's columns


def probe_metrics() -> pd.DataFrame:
    rows = []
    for model, best in (("m1", 3), ("m2", 1)):
        for variant in ("original", "key_first"):
            for layer in range(5):
                acc = 0.9 if layer == best else 0.6
                for metric, value in (("accuracy", acc), ("margin", acc - 0.5)):
                    rows.append(
                        (
                            model,
                            "none",
                            "train_original",
                            "level",
                            None,
                            variant,
                            layer,
                            None,
                            metric,
                            value,
                            value - 0.1,
                            value + 0.1,
                            np.nan,
                            np.nan,
                            40,
                            None,
                        )
                    )
            rows.append(
                (
                    model,
                    "none",
                    "zero_shot",
                    "level",
                    None,
                    variant,
                    np.nan,
                    None,
                    "accuracy",
                    0.7,
                    0.6,
                    0.8,
                    np.nan,
                    np.nan,
                    40,
                    None,
                )
            )
            rows.append(
                (
                    model,
                    "none",
                    "zero_shot",
                    "level",
                    None,
                    variant,
                    np.nan,
                    None,
                    "margin",
                    1.2,
                    0.9,
                    1.5,
                    np.nan,
                    np.nan,
                    40,
                    None,
                )
            )
            if model == "m1":  # m2 has no AUC rows (a table loaded before lm_auc existed)
                rows.append(
                    (
                        model,
                        "none",
                        "zero_shot",
                        "level",
                        None,
                        variant,
                        np.nan,
                        None,
                        "lm_auc",
                        0.75,
                        0.65,
                        0.85,
                        np.nan,
                        np.nan,
                        40,
                        None,
                    )
                )
        rows = [r + (None, np.nan, None, np.nan, np.nan) if len(r) == 16 else r for r in rows]
        rows.append(
            (
                model,
                "none",
                "train_original",
                "diff",
                "original",
                "key_first",
                0,
                None,
                "margin",
                0.0,
                0.0,
                0.0,
                1.0,
                np.nan,
                40,
                "equivalent",
                "control",
                0.05,
                "basis",
                0.0,
                0.0,
            )
        )
        rows.append(
            (
                model,
                "none",
                "train_original",
                "diff",
                "original",
                "key_first",
                3,
                None,
                "margin",
                0.2,
                0.1,
                0.3,
                0.001,
                0.01,
                40,
                "supported",
                "exploratory",
                0.05,
                "basis",
                0.12,
                0.28,
            )
        )
        rows.append(
            (
                model,
                "none",
                "train_original",
                "slope",
                "original",
                None,
                np.nan,
                "late",
                "probe_margin_per_erank",
                0.01,
                -0.02,
                0.04,
                0.5,
                0.9,
                40,
                "equivalent",
                "primary",
                0.05,
                "basis",
                -0.015,
                0.035,
            )
        )
    return pd.DataFrame(rows, columns=COLUMNS + VERDICT)


def test_cost_section_reads_best_layer_lm_and_slopes(tmp_path: Path):
    pm = probe_metrics()
    line = cost_line(pm).markdown
    assert "m1: probe best at layer 3, accuracy 0.9 [0.8, 1]" in line
    assert "m2: probe best at layer 1" in line and "slopes on erank: 1 equivalent" in line
    sec = cost_section(pm, tmp_path)
    lm, slopes, diffs = sec.tables
    assert len(lm.rows) == 4 and {r[3] for r in lm.rows} == {0.7}
    assert lm.columns[6:9] == ["AUC", "AUC CI low", "AUC CI high"]
    assert [r[6:9] for r in lm.rows if r[0] == "m1"] == [[0.75, 0.65, 0.85]] * 2
    assert all(np.isnan(r[6:9]).all() for r in lm.rows if r[0] == "m2")
    assert lm.columns[9:12] == ["margin", "margin CI low", "margin CI high"]
    assert {tuple(r[9:12]) for r in lm.rows} == {(1.2, 0.9, 1.5)}
    assert [r[-1] for r in slopes.rows] == ["equivalent", "equivalent"]
    assert slopes.columns[7] == "SESOI" and [r[7] for r in slopes.rows] == [0.05, 0.05]
    # the differences' verdicts tallied per family: the layer-0 control apart
    assert diffs.columns[:6] == ["model", "baseline", "scheme", "grain", "metric", "family"]
    tally = {(r[0], r[5]): r[7] for r in diffs.rows}
    assert tally[("m1", "control")] == "1 equivalent"
    assert tally[("m1", "exploratory")] == "1 supported"
    assert any("largest |difference|" in p and "is 0 " in p for p in sec.paragraphs)
    ((path, _),) = sec.figures
    assert path.exists() and path.stat().st_size > 1000


def test_cost_section_without_probe_tables_says_what_to_run(tmp_path: Path):
    sec = cost_section(pd.DataFrame(columns=COLUMNS), tmp_path)
    assert "homog probe --model KEY" in sec.paragraphs[0] and not sec.figures
    assert cost_line(pd.DataFrame(columns=COLUMNS)) is None


def test_slope_precision_says_how_far_the_cis_are_from_the_margin():
    from homog.report.cost import slope_precision

    slopes = pd.DataFrame(
        {
            "verdict": ["inconclusive", "inconclusive", "equivalent"],
            "sesoi": [0.01, 0.02, 0.05],
            "eq_ci_low": [-0.02, -0.01, -0.01],
            "eq_ci_high": [0.02, 0.03, 0.01],
        }
    )
    text = slope_precision(slopes)
    # widths 0.04 and 0.04 against 2 x sesoi 0.02 and 0.04: 2x and 1x; (2)^2 = 4x the reviews
    assert "2 inconclusive slopes" in text and "1 to 2 times as wide" in text
    assert "about 4 times as many reviews" in text
    assert slope_precision(slopes.assign(verdict="equivalent")) is None
    assert slope_precision(slopes.drop(columns="sesoi")) is None


def test_cost_section_reads_a_table_loaded_before_the_verdict_columns(tmp_path: Path):
    """A probe_metrics table from before issue 41 (16 columns, the old verdict words): the
    section still shows its tables, with the SESOI empty and no tally."""
    old = probe_metrics()[COLUMNS]
    sec = cost_section(old, tmp_path)
    lm, slopes = sec.tables
    assert [r[-1] for r in slopes.rows] == ["equivalent", "equivalent"]
    assert all(np.isnan(r[7]) for r in slopes.rows)
    assert not any(p.startswith("Precision") for p in sec.paragraphs)
    assert "slopes on erank: 1 equivalent" in cost_line(old).markdown


def test_the_margin_words_follow_stats_sesoi(tmp_path: Path):
    """With stats.sesoi 0.3 the section names 0.3, never "a tenth" (its rows' basis texts
    carry the factor the probe stage applied)."""
    from homog.report.document import to_markdown

    pm = probe_metrics()
    pm["sesoi_basis"] = pm["sesoi_basis"].where(
        pm["sesoi_basis"].isna(), "0.3 x the baseline's mean |margin| (0.4)"
    )
    text = to_markdown("t", "", [cost_section(pm, tmp_path)], "f")
    assert "a tenth" not in text and text.count("SESOI: 0.3 x the") >= 2
    assert "SESOI: 0.3 x the margin per" in cost_line(pm).markdown
    pm["sesoi_basis"] = pm["sesoi_basis"].str.replace("0.3 x", "0.1 x")
    assert "SESOI: a tenth of the margin per" in cost_line(pm).markdown
