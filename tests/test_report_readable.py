"""homog report for a reader new to the paper: summary paragraphs that match the claim rows,
a glossary of every variant present, the manipulation table from the synth measures (present
or absent), the provenance naming what is missing, significance marks inside the data, the
position figures, and a Markdown page whose numbers equal the database's.

The database is built as the pipeline builds one (synthetic extract outputs, then the real
``stats`` and ``load`` stages), with the position family (key_*) beside the paper's variants.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import save_run

from homog.cli import main
from homog.errors import HomogError
from homog.layout import Layout
from homog.report.build import build_report
from homog.report.claims_view import COLUMNS, claim_group, summary_section, table_cells, tally
from homog.report.document import fmt
from homog.report.glossary import VARIANTS
from homog.report.manipulation import manipulation_section
from homog.report.posenc_view import posenc_section
from homog.report.position import layer0_rows

N_TEXTS, N_LAYERS = 16, 8
# erank shift per variant (key_* by their position: a designed dose-response of +2 per unit)
SHIFT = {
    "original": 0.0,
    "front": -2.0,
    "end": 0.6,
    "control": 0.0,
    "key_first": 0.0,
    "key_mid": 1.0,
    "key_last": 2.0,
    "key_control": 0.0,
    "ctrl_first": 0.0,
    "ctrl_mid": 0.0,
    "ctrl_last": 0.0,
}
LEXICAL = {"control": 1.0}  # a layer-0 difference: words, not position


def write_run(layout: Layout, model: str, intervention: str, rng) -> None:
    rows = []
    base = 30 - 2.0 * np.arange(N_LAYERS + 1)
    for variant, shift in SHIFT.items():
        for s in range(N_TEXTS):
            erank = base + rng.normal(0, 0.4, N_LAYERS + 1)
            erank[1:] += shift
            erank[0] += LEXICAL.get(variant, 0.0)
            for layer in range(N_LAYERS + 1):
                sid = f"s{s:03d}"
                rows.append((variant, sid, layer, "erank", erank[layer]))
                rows.append((variant, sid, layer, "erank__no_sink", erank[layer] + 1.0))
                rows.append((variant, sid, layer, "mev", 0.2 + rng.normal(0, 0.01)))
                if layer:
                    rows.append((variant, sid, layer, "attn_first", 0.3 + rng.normal(0, 0.02)))
                    # a rate near 0, as sink_rate is on real models: marks must stay >= 0
                    rate = 0.02 + (0.02 if variant == "front" else 0.0) + rng.normal(0, 0.002)
                    rows.append((variant, sid, layer, "sink_rate", max(rate, 0.0)))
    frame = pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])
    save_run(layout, model, intervention, frame, N_LAYERS)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from homog.stats.stage import stats_stage
    from homog.store import load

    root = tmp_path_factory.mktemp("readable")
    layout = Layout(root)
    rng = np.random.default_rng(1)
    for model in ("m1", "m2"):
        write_run(layout, model, "none", rng)
    texts = pd.DataFrame(
        [
            {
                "dataset": "demo",
                "variant": v,
                "sample_id": f"s{s:03d}",
                "text": f"text {s} {v}",
                "label": "pos",
                "keyphrase": "plot",
                "bertscore_f1": 1.0 if v == "original" else float(rng.uniform(0.9, 1.0)),
            }
            for v in SHIFT
            for s in range(N_TEXTS)
        ]
    )
    # the key sentence's place, as synth writes it: the family's own, the original's 0.41
    where = {
        "original": 0.41,
        "key_first": 0.0,
        "key_mid": 0.5,
        "key_last": 1.0,
        "key_control": 0.41,
    }
    texts["key_position"] = texts["variant"].map(where).astype(float)
    layout.texts.parent.mkdir(parents=True)
    texts.to_parquet(layout.texts, index=False)
    params = {
        "models": {m: {"source": "random:tiny-llama"} for m in ("m1", "m2")},
        "stats": {"n_boot": 200},
        "extract": {"interventions": ["none"]},
        "posenc": {"encodings": []},
    }
    stats_stage(params, root)
    load(params, layout.db(), root)
    return root


SYNTH = {
    "rephraser": "parse",
    "texts_in": 20,
    "texts_kept": 16,
    "dropped": {"no_keyphrase": 3, "not_rewritten": 1},
    "bertscore_f1": {"front": 0.95, "end": 0.96, "control": 0.97},
    "fluency": {"front": {"median": -0.12}, "end": {"median": -0.08}},
    "fluency_audit": {"front": {"median": -0.2}},
    "timings": {"parse": 1.5, "total": 9.0},
    "manipulation": {
        "per_model": {
            "m1": {
                "front": {
                    "token_change_mean": 4.25,
                    "token_change_zero_share": 0.1,
                    "multiset_equal_share": 0.05,
                },
                "key_first": {
                    "token_change_mean": 0.0,
                    "token_change_zero_share": 1.0,
                    "multiset_equal_share": 0.9875,
                },
            },
        },
        "key_sentence": {
            "original": {
                "start_token_share_mean": 0.41,
                "shift_mean": 0.0,
                "already_first_share": 0.3125,
                "already_last_share": 0.25,
            },
            "key_first": {
                "start_token_share_mean": 0.0,
                "shift_mean": -0.41,
                "already_first_share": 0.3125,
                "already_last_share": 0.25,
            },
            "key_mid": {
                "start_token_share_mean": 0.47,
                "shift_mean": 0.06,
                "already_first_share": 0.3125,
                "already_last_share": 0.25,
            },
            "key_last": {
                "start_token_share_mean": 0.83,
                "shift_mean": 0.42,
                "already_first_share": 0.3125,
                "already_last_share": 0.25,
            },
        },
        "edges": {
            "front": {
                "start_share": 0.6061,
                "end_share": 0.31,
                "start_share_original": 0.4512,
                "end_share_original": 0.41,
                "start_shift": 0.1549,
                "end_shift": -0.1,
            },
            "end": {
                "start_share": 0.33,
                "end_share": 0.6071,
                "start_share_original": 0.4512,
                "end_share_original": 0.41,
                "start_shift": -0.1212,
                "end_shift": 0.1971,
            },
        },
        "length_match": {  # as homog.synth.lengthmatch.length_report writes it
            "enabled": True,
            "models": ["m1"],
            "texts_in": 20,
            "texts_kept": 16,
            "texts_kept_share": 0.8,
            "text_reverts": {"rewrites": 0, "texts": 0},
            "control_kind_distance": 0.4427,
            "variants": {
                "front": {
                    "rewritten": 6,
                    "length_mismatch": 10,
                    "kept_share": 0.375,
                    "sentence_status": {"rewritten": 6, "length_mismatch": 10},
                    "token_change": {"m1": {"distribution": {"0": 6}, "mean": 0.0}},
                    "kinds": {"clause_swap": 0.6667, "adverbial_front": 0.3333},
                },
            },
        },
    },
}


def frames(db: Path) -> dict[str, pd.DataFrame]:
    from homog.report.build import read_inputs

    with duckdb.connect(str(db), read_only=True) as con:
        return read_inputs(con)


def claims_frame(project) -> pd.DataFrame:
    from homog.report.claims import claims_table

    f = frames(Layout(project).db())
    return claims_table(
        f["contrasts"], f["runs"], f["erank"], n_boot=200, separability=f["separability"]
    )


def with_new_columns(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims frame as the extended Claim gives it: new columns and verdict words."""
    c = claims.copy()
    c["raw_effect"] = c["effect"] + 0.5
    c["adjusted"] = True
    c["dz"] = c["effect"] / 2
    c["pct_of_baseline"] = 100 * c["effect"] / 30
    c["unit"] = "effective dimensions"
    c["p_tost"] = 0.5
    c["layer0_effect"] = 0.25
    c["lexical_confound"] = c["comparison"].str.startswith("control")
    c["rel_layer0_effect"] = c["effect"] - 0.25
    c["rel_layer0_ci_low"] = c["ci_low"] - 0.25
    c["rel_layer0_ci_high"] = c["ci_high"] - 0.25
    c["verdict"] = c["verdict"].replace({"not supported": "inconclusive"})
    c.loc[c.index[:2], "verdict"] = "equivalent to no effect"
    return c


def paragraph_of(section, label: str) -> str:
    return next(p for p in section.paragraphs if p.startswith(f"**{label}:"))


@pytest.mark.parametrize("extended", [False, True])
def test_claim_paragraphs_match_the_rows(project, extended):
    claims = claims_frame(project)
    claims = with_new_columns(claims) if extended else claims
    sec = summary_section(claims, 0.05)
    groups = claims.apply(claim_group, axis=1)
    assert set(groups) == {"1", "2", "3", "4", "5"}
    for group in set(groups):
        rows = claims[groups == group]
        text = paragraph_of(sec, f"Claim {group}")
        assert f"Tested with {len(rows)} rows on 2 model(s)" in text
        for model in ("m1", "m2"):
            # the per-model tally is the rows' verdicts, counted independently here
            counts = rows.loc[rows["model"] == model, "verdict"].value_counts().to_dict()
            said = re.search(rf"\b{model}: ([^.;]*)", text).group(1)
            parsed = {w: int(k) for k, w in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", said)}
            assert parsed == counts, (model, said)
        best = rows.loc[pd.to_numeric(rows["p_holm"]).idxmin()]
        if (rows["p_holm"] == best["p_holm"]).sum() == 1:
            assert f"{best['statement']}, {best['scope']}: {fmt(float(best['effect']))}" in text
        if extended and rows["lexical_confound"].any():
            k = int(rows["lexical_confound"].sum())
            assert f"Caveat: {k} row(s) carry the lexical-confound mark" in text
        assert "Units: " in text
    # the summary's first paragraph counts every claim row, the layer-0 controls aside
    rows = claims[claims["family"] != "control"]
    assert sec.paragraphs[0].startswith(f"{len(rows)} claim rows (layer-0 controls aside) on 2")
    assert tally(rows["verdict"]) in sec.paragraphs[0]


OLD_COLUMNS = [
    "model",
    "claim",
    "statement",
    "metric",
    "comparison",
    "scope",
    "effect",
    "ci_low",
    "ci_high",
    "p_holm",
    "n",
    "verdict",
    "note",
]


def test_claim_table_cells_show_na_for_absent_columns(project):
    claims = claims_frame(project)
    headers = list(COLUMNS)
    old = table_cells(claims[OLD_COLUMNS].iloc[0])  # a claims table before issue 29
    for h in ("dz", "% of original", "SESOI", "eq. CI", "family", "layer-0 diff", "beyond layer 0"):
        assert old[headers.index(h)] == "n/a"
    # without a length adjustment the effect is the raw difference
    assert old[headers.index("raw effect")] == claims.iloc[0]["effect"]
    assert summary_section(claims[OLD_COLUMNS], 0.05).paragraphs  # renders
    new_frame = with_new_columns(claims)
    row = new_frame[new_frame["lexical_confound"]].iloc[0]
    new = table_cells(row)
    assert new[headers.index("dz")] == pytest.approx(row["dz"])
    assert new[headers.index("raw effect")] == pytest.approx(row["raw_effect"])
    assert new[headers.index("verdict")].endswith("(lexical confound)")
    lo, hi = row["rel_layer0_ci_low"], row["rel_layer0_ci_high"]
    assert new[headers.index("beyond layer 0, CI")] == f"[{fmt(lo)}, {fmt(hi)}]"
    # a row whose new cells are empty (NaN / None / NA) is neither marked nor broken
    blank = new_frame.iloc[0].copy()
    blank["lexical_confound"], blank["token_set"], blank["dz"] = float("nan"), None, pd.NA
    blank["rel_layer0_ci_low"] = float("nan")
    cells = table_cells(blank)
    assert "lexical confound" not in cells[headers.index("verdict")]
    assert cells[headers.index("token set")] == "all"
    assert cells[headers.index("dz")] == "n/a"
    assert math.isnan(cells[headers.index("beyond layer 0, CI")])  # shown as a dash
    mixed = new_frame.astype(object)
    mixed.loc[mixed.index[0], "lexical_confound"] = None
    mixed.loc[mixed.index[1], "adjusted"] = float("nan")
    assert summary_section(mixed, 0.05).paragraphs  # renders


def md_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every Markdown table of the page by its caption line: a list of {header: cell}."""
    out, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ") and 2 <= i < len(lines) - 1 and lines[i + 1].startswith("|---"):
            caption = lines[i - 2].strip("*")
            headers = [h.strip() for h in line.strip("|").split(" | ")]
            rows = []
            for body in lines[i + 2 :]:
                if not body.startswith("| "):
                    break
                cells = [c.strip() for c in re.split(r"(?<!\\) \| ", body.strip()[2:-2])]
                rows.append(dict(zip(headers, cells, strict=True)))
            out[caption] = rows
    return out


def test_markdown_page_numbers_equal_the_database(project, tmp_path):
    from homog.stats.bands import band_of_layers

    db = Layout(project).db()
    page = tmp_path / "docs" / "results.md"
    synth = tmp_path / "report.json"
    synth.write_text(json.dumps(SYNTH))
    build_report(
        db,
        page,
        fmt="md",
        figures_dir=tmp_path / "docs" / "results",
        synth_report=synth,
        root=tmp_path,
    )
    text = page.read_text()
    # figures beside the page, linked relatively (as docs/results.md -> docs/results/*.png)
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links and all(link.startswith("results/") for link in links)
    assert all((page.parent / link).exists() for link in links)
    assert any("layer0_erank" in link for link in links)
    assert any("dose_erank" in link for link in links)
    tables = md_tables(text)
    checked = 0
    with duckdb.connect(str(db), read_only=True) as con:
        for caption in [c for c in tables if c.startswith("claim 1, ")]:
            model = caption.split(", ")[1]
            run = con.execute(
                "SELECT run_id FROM runs WHERE model = ? AND intervention = 'none'", [model]
            ).fetchone()[0]
            for row in tables[caption]:
                # the U-shape (key_ends - key_mid) and the key-specific differences of
                # differences are no variant - original row
                if row["claim"].startswith(("1u", "1k")):
                    continue
                a = row["statement"].split()[0]
                metric = row["statement"].split(" than ")[0].split()[-1]
                band = {"layer 0": "layer0", "final layer": "final"}.get(
                    row["scope"], row["scope"].split()[0]
                )
                want = (
                    con.execute(
                        "SELECT * FROM contrasts WHERE run_id = ? AND variant_a = ? AND "
                        "variant_b = 'original' AND metric = ? AND band = ? AND "
                        "baseline_run_id IS NULL",
                        [run, a, metric, band],
                    )
                    .fetch_df()
                    .iloc[0]
                )
                num = {
                    h: float(row[h])
                    for h in ("effect", "raw effect", "CI low", "CI high", "p_holm")
                }
                close = lambda g, w: g == pytest.approx(w, rel=5e-4, abs=1e-12)  # noqa: E731
                assert close(num["raw effect"], want["mean_diff"]), (row, want)
                assert int(row["n"]) == want["n"] == N_TEXTS
                # the effect and its CI: the raw ones, or the length-adjusted ones where a
                # newer stats stage adjusted this contrast
                pairs = [("mean_diff", "ci_low", "ci_high")]
                if "adj_diff" in want.index:
                    pairs.append(("adj_diff", "adj_ci_low", "adj_ci_high"))
                assert any(
                    close(num["effect"], want[e])
                    and close(num["CI low"], want[lo])
                    and close(num["CI high"], want[hi])
                    for e, lo, hi in pairs
                ), (row, want)
                if "p_value" in want.index:  # a family-wide Holm p is never below the raw p
                    assert num["p_holm"] >= float(want["p_value"]) * (1 - 5e-4)
                if "adj_diff" not in want.index:  # the stats stage's own Holm p
                    assert close(num["p_holm"], want["p_holm"])
                checked += 1
        # models x (front, end) x bands x (erank, erank__no_sink, mev), at least
        assert checked >= 2 * 2 * 3 * 3
        # claim 2's effect: late-band minus early-band erank of the original texts (numpy)
        for caption in [c for c in tables if c.startswith("claim 2, ")]:
            model = caption.split(", ")[1]
            m = (
                con.execute(
                    "SELECT sample_id, layer, value FROM layer_metrics WHERE metric = 'erank' AND "
                    "variant = 'original' AND run_id = ?",
                    [f"{model}-none"],
                )
                .fetch_df()
                .pivot(index="sample_id", columns="layer", values="value")
            )
            bands = band_of_layers(list(m.columns))
            d = m[bands["late"]].mean(axis=1) - m[bands["early"]].mean(axis=1)
            assert float(tables[caption][0]["effect"]) == pytest.approx(d.mean(), rel=5e-4)
        # manipulation: texts and mean BERTScore per variant from the texts table
        measures = {r["measure"]: r for r in tables["per variant"]}
        texts = con.execute(
            "SELECT variant, count(*), avg(bertscore_f1) FROM texts GROUP BY variant"
        ).fetchall()
        assert len(texts) == len(SHIFT)
        for variant, n, f1 in texts:
            assert int(measures["texts"][variant]) == n
            if f1 is not None:
                assert float(measures["mean BERTScore F1"][variant]) == pytest.approx(f1, 5e-4)


def test_glossary_lists_every_variant_present(project, tmp_path):
    db = Layout(project).db()
    page = build_report(db, tmp_path / "r.md", fmt="md", root=tmp_path)
    glossary = md_tables(page.read_text())["variants in the database"]
    listed = {r["variant"]: r["what it is"] for r in glossary}
    with duckdb.connect(str(db), read_only=True) as con:
        present = {
            v for (v,) in con.execute("SELECT DISTINCT variant FROM layer_metrics").fetchall()
        }
    # and key_ends, the stats stage's derived variant of the U-shape contrast (no text)
    assert present == set(SHIFT) and set(listed) == present | {"key_ends", "ctrl_ends"}
    for v in present | {"key_ends", "ctrl_ends"}:
        assert listed[v] == VARIANTS[v]
    assert listed["key_ends"].startswith("not a text")
    text = page.read_text()
    for word in ("no_sink", "equivalent", "negligible", "inconclusive", "lexical confound"):
        assert word in text


def test_manipulation_table_with_and_without_the_synth_measures():
    texts = pd.DataFrame(
        {
            "dataset": ["d"] * 3,
            "variant": ["original", "front", "end"],
            "n_texts": [16, 16, 16],
            "bertscore_f1": [1.0, 0.95, 0.96],
        }
    )
    sec = manipulation_section(texts, SYNTH)
    main_t = sec.tables[0]
    assert main_t.columns[:4] == ["measure", "original", "front", "end"]
    # measures as rows, variants as columns: rows[variant][measure]
    rows = {v: {r[0]: r[i] for r in main_t.rows} for i, v in enumerate(main_t.columns) if i}
    front = rows["front"]
    assert front["key phrase at sentence start"] == 0.6061
    assert front["original at start"] == 0.4512 and front["start shift"] == 0.1549
    assert front["fluency Δ median (filter)"] == -0.12
    assert rows["key_mid"]["key sentence start (share of tokens)"] == 0.47
    assert rows["key_last"]["key sentence shift"] == 0.42
    assert rows["original"]["key phrase at sentence start"] == 0.4512  # the baseline itself
    assert rows["original"]["start shift"] == "n/a"
    per_model = sec.tables[1]
    assert ["m1", "key_first", 0.0, 1.0, 0.9875] in per_model.rows
    assert sec.tables[2].rows == [
        ["front", 0.375, "6 / 10", "m1: 0: 6", "clause_swap 67%, adverbial_front 33%"]
    ]  # one row per variant, never one per key of the block (enabled, models, ...)
    assert main_t.columns == [
        "measure",
        "original",
        "front",
        "end",
        "control",
        "key_first",
        "key_mid",
        "key_last",
    ]
    assert rows["front"]["length-matched kept"] == 0.375
    assert "Length match: 80% of the texts kept; the control's move kinds are 0.44" in " ".join(
        sec.paragraphs
    )
    assert "Synth: 20 texts in, 16 kept" in " ".join(sec.paragraphs)
    # no Python dict reprs and no timings in any cell
    cells = [str(c) for t in sec.tables for r in t.rows for c in r]
    assert not any("{" in c for c in cells) and "total" not in " ".join(cells)
    # absent: the database's texts alone, and the report says the synth report is missing
    bare = manipulation_section(texts, None)
    assert [r[0] for r in bare.tables[0].rows] == ["texts", "mean BERTScore F1"]
    assert bare.tables[0].rows[0] == ["texts", 16, 16, 16]
    assert "No synth report.json was found" in " ".join(bare.paragraphs)
    # the older keys (keyphrase_edges at_front beside the original's)
    old = {
        "keyphrase_edges": {
            "original": {"at_front": 0.45, "at_end": 0.41},
            "front": {"at_front": 0.6, "at_end": 0.3},
        }
    }
    t = manipulation_section(texts, old).tables[0]
    front = {r[0]: r[t.columns.index("front")] for r in t.rows}
    assert front["original at start"] == 0.45 and front["start shift"] == pytest.approx(0.15)
    assert manipulation_section(pd.DataFrame(), None).tables == []


def test_significance_marks_stay_within_the_data(monkeypatch, tmp_path):
    import homog.plot as plot

    captured = []
    monkeypatch.setattr(plot, "save_figure", lambda fig, out: captured.append(fig) or Path(out))
    rows = []
    for variant, level in (("original", 0.0), ("front", 0.02)):
        for layer in range(1, 9):
            mean = level + 0.001 * layer  # a rate near 0, as sink_rate is on real models
            rows.append(
                {
                    "model": "m",
                    "run_id": "r",
                    "intervention": "none",
                    "variant": variant,
                    "layer": layer,
                    "mean": mean,
                    "ci_low": mean - 0.005,
                    "ci_high": mean + 0.005,
                    "p_holm_vs_original": 0.001 if variant == "front" else None,
                }
            )
    plot.layer_curves_figure(rows, "sink_rate", tmp_path / "s.png")
    ax = captured[0].axes[0]
    means = [r["mean"] for r in rows]
    marks = [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", None, "")]
    assert marks, "no significance marks drawn"
    ys = np.concatenate([np.asarray(ln.get_ydata(), dtype=float) for ln in marks])
    assert ys.min() >= min(means) and ys.max() <= max(means)
    assert len(ys) == 8  # every front layer is significant


def test_report_without_params_names_what_is_missing(project, tmp_path, monkeypatch):
    db = Layout(project).db()
    monkeypatch.chdir(tmp_path)  # no params.yaml, no dvc.lock, no git checkout, no data/
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", "--db", str(db), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "params.yaml not found" in text
    assert "data/synth/report.json not found" in text
    assert "dvc.lock" in text and "not a git checkout" in text
    assert "The answer" in text and "Glossary" in text
    # the answer comes first, then the paragraph per claim, the glossary and the tables
    h2 = [re.sub("<[^>]+>", "", h) for h in re.findall(r"<h2[^>]*>(.*?)</h2>", text)]
    assert h2[:7] == [
        "The answer",
        "Per claim",
        "Margin sensitivity",
        "How many reviews",
        "Glossary",
        "Manipulation strength",
        "Claims of arXiv 2508.17126 in detail",
    ]
    assert text.index("<strong>Key-specific edge effect</strong> (primary") < text.index(
        "<h2 id='per-claim'>"
    )
    assert text.index("claim rows (layer-0 controls aside) on 2") < text.index("<h2 id='glossary'>")


def test_figures_dir_must_be_the_reports_own(project, tmp_path):
    with pytest.raises(HomogError, match="would replace the directory"):
        build_report(Layout(project).db(), tmp_path / "r.md", fmt="md", figures_dir=tmp_path)


def test_layer0_rows_recomputed(project):
    db = Layout(project).db()
    f = frames(db)
    rows = layer0_rows(f["contrasts"], f["runs"], "erank")
    control0 = [
        r
        for r in rows
        if r["comparison"] == "control - original"
        and r["level"] == "layer 0"
        and r["model"] == "m1"
    ]
    with duckdb.connect(str(db), read_only=True) as con:
        lm = con.execute(
            "SELECT variant, sample_id, layer, value FROM layer_metrics WHERE metric = 'erank' "
            "AND run_id = 'm1-none'"
        ).fetch_df()
    w = lm[lm["layer"] == 0].pivot(index="sample_id", columns="variant", values="value")
    assert control0[0]["mean_diff"] == pytest.approx((w["control"] - w["original"]).mean())
    assert control0[0]["mean_diff"] == pytest.approx(1.0, abs=0.4)  # the designed lexical shift


def test_posenc_rows_give_spread_and_say_how_the_setups_differ(tmp_path):
    from homog.config.posenc_presets import PRESETS

    acc = {"rope": [0.95, 0.93, 0.97], "nope": [0.776, 0.777, 0.778]}
    frame = pd.DataFrame(
        [
            {
                "pe": pe,
                "task": "count",
                "accuracy": float(np.mean(v)),
                "sd": float(np.std(v, ddof=1)),
                "lo": min(v),
                "hi": max(v),
                "seeds": len(v),
                "epochs": 6,
                "n_params": 1000,
            }
            for pe, v in acc.items()
        ]
    )
    config = {**PRESETS["cpu"], "preset": "cpu"}
    sec = posenc_section(frame, pd.DataFrame(), tmp_path, config)
    rope = next(r for r in sec.tables[0].rows if r[0] == "rope")
    assert rope[2] == pytest.approx(95.0) and rope[3] == pytest.approx(2.0)
    assert (rope[4], rope[5], rope[6], rope[7]) == (
        pytest.approx(93.0),
        pytest.approx(97.0),
        3,
        69.43,
    )
    text = " ".join(sec.after)
    assert "rope count 95.0% vs 69.43%" in text and "preset `cpu`: 2 layers" in text
    assert "nope count" not in text  # within 2 points of the paper's 77.69: no sentence


def test_dose_response_table_of_the_stats_stage_is_shown(project, tmp_path, monkeypatch):
    """A database with the stats stage's dose_response table: the slopes as a table (values
    as stored) and the figure drawn by homog.plot's dose_response_figure."""
    import shutil

    import homog.report.position as position
    from homog.report.build import read_inputs
    from homog.report.position import position_section
    from homog.store.query import connect

    db = tmp_path / "dose.duckdb"
    shutil.copy(Layout(project).db(), db)
    slopes = [
        ("m1-none", "erank", band, "slope", None, None, 2.0 + i, 1.5 + i, 2.5 + i, 1e-3, 16, 15.0)
        for i, band in enumerate(("early", "middle", "late"))
    ] + [("m1-none", "mev", "late", "slope", None, None, 0.1, 0.0, 0.2, 0.5, 16, 1.0)]
    points = [
        (
            "m1-none",
            "erank",
            "late",
            "point",
            v,
            x,
            15 + 2 * x,
            14.9 + 2 * x,
            15.1 + 2 * x,
            None,
            16,
            None,
        )
        for v, x in (("key_first", 0.0), ("key_last", 1.0))
    ]
    with duckdb.connect(str(db)) as con:
        con.execute("DROP TABLE IF EXISTS dose_response")  # a newer load creates it empty
        con.execute(
            "CREATE TABLE dose_response (run_id VARCHAR, metric VARCHAR, band VARCHAR, kind "
            "VARCHAR, variant VARCHAR, key_position DOUBLE, value DOUBLE, ci_low DOUBLE, "
            "ci_high DOUBLE, p_value DOUBLE, n INTEGER, intercept DOUBLE)"
        )
        con.executemany(
            "INSERT INTO dose_response VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", slopes + points
        )
    drawn = []

    def fake(rows, metric, out):
        drawn.append((metric, len(rows)))
        Path(out).write_bytes(b"png")
        return Path(out)

    monkeypatch.setattr(position, "dose_response_figure", fake)
    con = connect(db)
    try:
        sec = position_section(con, read_inputs(con), list(SHIFT), tmp_path)
    finally:
        con.close()
    table = sec.tables[0]
    # model, metric, kind, band, value, CI low, CI high, SESOI, p_holm, n, verdict, unit
    assert [r[:7] + r[9:10] for r in table.rows] == [
        ["m1", "erank", "slope", band, 2.0 + i, 1.5 + i, 2.5 + i, 16]
        for i, band in enumerate(("early", "middle", "late"))
    ] + [["m1", "mev", "slope", "late", 0.1, 0.0, 0.2, 16]]
    # a table from before p_holm and the margin: n/a, and no verdict can be reached
    assert all(math.isnan(r[7]) and math.isnan(r[8]) for r in table.rows)
    assert {r[10] for r in table.rows} == {"descriptive"}
    assert drawn == [("erank", 5), ("mev", 1)]  # every metric's figure: no list given
    assert any("layer0_erank" in str(p) for p, _ in sec.figures)
    assert not any("--dose-figures" in p for p in sec.paragraphs)
    # the primary endpoints' metrics only: the table keeps every metric, a line names the rest
    drawn.clear()
    con = connect(db)
    try:
        sec = position_section(con, read_inputs(con), list(SHIFT), tmp_path, 0.05, ["mev"])
    finally:
        con.close()
    assert drawn == [("mev", 1)] and len(sec.tables[0].rows) == 4
    assert any("Figures: mev" in p and "--dose-figures all" in p for p in sec.paragraphs)


def test_provenance_reads_git_dvc_lock_and_params(tmp_path):
    import subprocess

    import yaml

    from homog.config import Params
    from homog.report.provenance import gather, provenance_sections

    out = {"path": "data/synth/texts.parquet", "md5": "0123456789abcdef0123456789abcdef"}
    lock = {"schema": "2.0", "stages": {"synth": {"outs": [out]}}}

    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "dvc.lock"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    params = Params()
    prov = gather(
        pd.DataFrame(),
        tmp_path / "h.duckdb",
        "homog report",
        root=tmp_path,
        params=params,
        params_name="params.yaml",
        synth=SYNTH,
        synth_path=tmp_path / "report.json",
        n_original_texts=16,
    )
    assert prov.git_commit == head.strip() and prov.git_dirty is False
    assert prov.dvc_lock == [
        ["synth", "data/synth/texts.parquet", "0123456789abcdef0123456789abcdef"]
    ]
    assert prov.corpus["source"] == params.corpus.source and prov.corpus["n (requested)"] == 100
    assert prov.corpus["texts in the database (original variant)"] == 16
    assert prov.synth_params["rephraser"] == params.synth.rephraser
    assert prov.synth_params["bertscore.threshold"] == params.synth.bertscore.threshold
    assert prov.timings == {"parse": 1.5, "total": 9.0} and prov.missing == []
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({**lock, "schema": "2.1"}))
    dirty = gather(
        pd.DataFrame(),
        tmp_path / "h.duckdb",
        "c",
        root=tmp_path,
        params=None,
        params_name="my.yaml",
        synth=None,
        synth_path=None,
        n_original_texts=None,
    )
    assert dirty.git_dirty is True
    assert any("my.yaml not found" in m for m in dirty.missing)
    visible, details = provenance_sections(prov, pd.DataFrame())
    assert f"{head.strip()} (clean)" in visible.paragraphs[0]
    assert details.collapsed and any(t.caption == "dvc.lock" for t in details.tables)


def test_layer_curves_colour_every_variant_of_many_runs(monkeypatch, tmp_path):
    """The study's case: 8 variants and an extra one in two runs of two models (the colour
    list of unnamed variants ran out and the report stopped with StopIteration)."""
    import homog.plot as plot

    captured = []
    monkeypatch.setattr(plot, "save_figure", lambda fig, out: captured.append(fig) or Path(out))
    variants = [*plot.VARIANT_COLORS, "key_p25", "key_p75"]
    rows = [
        {
            "model": model,
            "run_id": f"{model}-{iv}",
            "intervention": iv,
            "variant": v,
            "layer": layer,
            "mean": 1.0 + layer,
            "ci_low": 0.5 + layer,
            "ci_high": 1.5 + layer,
        }
        for model in ("m1", "m2")
        for iv in ("none", "zero_pos")
        for v in variants
        for layer in range(4)
    ]
    plot.layer_curves_figure(rows, "erank", tmp_path / "c.png")
    lines = {ln.get_label(): ln.get_color() for ln in captured[0].axes[0].get_lines()}
    assert lines["key_p25"] != lines["key_p75"]
    assert lines["front"] == plot.VARIANT_COLORS["front"]


def test_family_without_dose_slopes_says_how_to_get_them(project, tmp_path):
    """A database loaded before the stats stage wrote dose_response: no second dose-response
    computation in the report, a paragraph naming the commands instead."""
    import shutil

    from homog.report.build import read_inputs
    from homog.report.position import position_section
    from homog.store.query import connect

    db = tmp_path / "old.duckdb"
    shutil.copy(Layout(project).db(), db)
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT count(*) FROM dose_response WHERE kind = 'slope'").fetchone()[0]
        con.execute("DROP TABLE dose_response")
    con = connect(db)
    try:
        sec = position_section(con, read_inputs(con), list(SHIFT), tmp_path)
    finally:
        con.close()
    assert any("run `homog stats` and `homog load` again" in p for p in sec.paragraphs)
    assert not any(Path(p).name.startswith("dose_") for p, _ in sec.figures) and not sec.tables


def test_dose_summary_counts_what_survives_holm():
    from homog.report.position import dose_summary

    rows = [
        ("m1", "erank", "layer0", 0.0, 1.0),
        ("m1", "erank", "middle", 0.5, 0.2),
        ("m1", "attn_last", "final", 1e-4, 0.01),
        ("m1", "mev", "late", 0.002, 0.04),
        ("m1", "erank__no_sink", "layer0", -0.04, 0.3),
        ("m2", "erank", "layer0", 0.0, 1.0),
        ("m2", "erank", "late", -0.1, 0.9),
    ]
    slopes = pd.DataFrame(rows, columns=["model", "metric", "band", "value", "p_holm"])
    # each slope's CI +-40 % around it and a margin of a tenth of it: a significant slope's CI
    # lies beyond its margin (supported, undirected), the others are inconclusive
    size = slopes["value"].abs()
    slopes["ci_low"], slopes["ci_high"] = slopes["value"] - 0.4 * size, slopes["value"] + 0.4 * size
    slopes["sesoi"] = 0.1 * size.where(size > 0, 1.0)
    slopes["eq_ci_low"], slopes["eq_ci_high"] = slopes["ci_low"], slopes["ci_high"]
    text = dose_summary(slopes, 0.05)
    assert (
        "m1: slopes above layer 0: 2 supported, 1 inconclusive; beyond their margin: attn_last "
        "final +0.0001, mev late +0.002; erank and MEV: 1 supported, 1 inconclusive" in text
    )
    assert "m2: slopes above layer 0: 1 inconclusive; erank and MEV: 1 inconclusive" in text
    # with a margin, a significant slope inside it is negligible
    margin = slopes.assign(sesoi=0.01, eq_ci_low=-0.005, eq_ci_high=0.005)
    assert "mev late" not in dose_summary(margin, 0.05).split("m2:")[0].split("margin:")[-1]
    assert "2 negligible" in dose_summary(margin, 0.05)
    assert "first token changes with the order) lie within [0, 0]" in text
    old = dose_summary(slopes.assign(p_holm=float("nan")), 0.05)
    assert "no Holm p" in old


def test_clearest_row_breaks_a_p_tie_by_the_standardized_effect():
    """Rows tied at the permutation floor: the paragraph quotes the largest |dz| (erank's
    raw effect is larger only because its unit is), then the smaller p wins outright; a row
    with the lexical-confound mark is quoted only where every row has it."""
    from homog.report.claims_view import clearest_row

    rows = pd.DataFrame(
        {
            "metric": ["erank", "mev", "mean_cosine"],
            "p_holm": [0.0174, 0.0174, 0.0174],
            "effect": [-0.32, -0.004, 0.01],
            "dz": [-0.4, -1.3, 0.2],
        }
    )
    assert clearest_row(rows)["metric"] == "mev"
    rows.loc[2, "p_holm"] = 0.001
    assert clearest_row(rows)["metric"] == "mean_cosine"
    assert clearest_row(rows.drop(columns="dz").iloc[:2])["metric"] == "erank"
    rows["lexical_confound"] = [False, True, True]  # differs at layer 0 already: not quoted
    assert clearest_row(rows)["metric"] == "erank"
    rows["lexical_confound"] = [True, True, None]  # only marked rows, and one without a value
    assert clearest_row(rows)["metric"] == "mean_cosine"


def test_clearest_row_is_never_a_layer0_control():
    """On 19 real reviews claim 1's paragraph quoted a layer-0 control row, a rounding
    residue of -8.9e-17 with dz -0.67 and p 0.01 (the smallest p of the claim): a control is
    quoted only where the claim has nothing else."""
    from homog.report.claims_view import clearest_row

    rows = pd.DataFrame(
        {
            "metric": ["mev", "erank"],
            "scope": ["layer 0", "late layers"],
            "family": ["control", "primary"],
            "p_holm": [0.0101, 0.6],
            "effect": [-8.9e-17, 0.2],
            "dz": [-0.67, 0.1],
        }
    )
    assert clearest_row(rows)["scope"] == "late layers"
    assert clearest_row(rows.iloc[:1])["scope"] == "layer 0"


def test_the_dose_figures_default_to_the_primary_endpoints_metrics():
    """build_report's dose_figures='primary' reads the metrics of the claims' primary rows
    (in their order, once each); claims without the family draw every metric (None)."""
    from homog.report.build import primary_metrics

    claims = pd.DataFrame(
        {
            "metric": ["mev", "erank", "mev", "attn_first"],
            "family": ["primary", "primary", "primary", "exploratory"],
        }
    )
    assert primary_metrics(claims) == ["mev", "erank"]
    assert primary_metrics(claims.drop(columns="family")) is None
    assert primary_metrics(claims.assign(family="exploratory")) is None
