"""Issue 40: every sentence of the position family followed through the layers.

Token spans from character spans (left out, never guessed), and the per-sentence metrics of
extraction against an independent computation from HF's output_hidden_states and
output_attentions on a tiny random model, with layer 0 identical across variants."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY, extract_config

from homog.extract import run_extract
from homog.extract.sentences import SENT_HIDDEN, sentence_tokens
from homog.stats.settings import StatsSettings
from homog.synth.position import choose_ctrl, join, move, sentence_spans, target_index

SENTENCES = [
    [
        "The film opens slowly.",
        "Its music is lovely.",
        "The acting felt stiff to me.",
        "Still, I would watch it again.",
    ],
    [
        "A bold plot.",
        "Weak ending though.",
        "Great cast overall.",
        "Too long by half.",
        "Worth it.",
    ],
    ["Nothing happens.", "Then everything happens at once.", "I laughed twice."],
]


def family_texts() -> pd.DataFrame:
    """original, key_first, key_last, key_control and the same-place control's ctrl_first,
    ctrl_mid, ctrl_last of each review (key = sentence 1, control: the last sentence moved
    to the front; the same-place control: synth's choice), with synth's spans."""
    rows = []
    for k, ss in enumerate(SENTENCES):
        n = len(ss)
        ctrl = choose_ctrl([len(x.split()) for x in ss], 1)
        orders = {
            "original": list(range(n)),
            "key_first": move(n, 1, 0),
            "key_last": move(n, 1, n - 1),
            "key_control": move(n, n - 1, 0),
            "ctrl_first": move(n, ctrl, 0),
            "ctrl_mid": move(n, ctrl, target_index(0.5, n)),
            "ctrl_last": move(n, ctrl, n - 1),
        }
        for variant, order in orders.items():
            rows.append(
                {
                    "variant": variant,
                    "sample_id": f"r{k}",
                    "text": join([ss[i] for i in order]),
                    "key_index": order.index(1),
                    "sentence_spans": json.dumps(sentence_spans(ss, order)),
                    "control_sentence": n - 1,
                    "ctrl_sentence": ctrl,
                }
            )
    return pd.DataFrame(rows)


def test_synth_spans_cover_each_sentence_with_its_space():
    ss = SENTENCES[1]
    order = move(len(ss), 3, 0)
    text = join([ss[i] for i in order])
    spans = sentence_spans(ss, order)
    assert [s for s, _, _ in spans] == order
    assert "".join(text[a:b] for _, a, b in spans) == text
    for i, a, b in spans:
        assert text[a:b] == " " + ss[i]


def test_token_spans_leave_out_straddling_and_truncated_sentences():
    # tokens: [special] " ab" " c" "d." (crosses into sentence 2) " e"
    offsets = [(0, 0), (0, 3), (3, 5), (5, 8), (8, 10)]
    special = np.array([True, False, False, False, False])
    spans = [(0, 0, 6), (1, 6, 10)]
    found, left = sentence_tokens(offsets, special, spans, kept=5)
    assert found == [] and left["straddle"] == 2
    spans = [(0, 0, 5), (1, 5, 10)]
    found, left = sentence_tokens(offsets, special, spans, kept=5)
    assert found == [(0, 0, 1, 3), (1, 1, 3, 5)] and not left
    found, left = sentence_tokens(offsets, special, spans, kept=4)
    assert found == [(0, 0, 1, 3)] and left["truncated"] == 1


def _erank(x: np.ndarray) -> float:
    s = np.linalg.svd(x, compute_uv=False)
    s = s[s > s[0] * 1e-7]
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def _cos(x: np.ndarray, ref: np.ndarray) -> float:
    return float((x @ ref / (np.linalg.norm(x, axis=1) * np.linalg.norm(ref))).mean())


@pytest.mark.parametrize("impl", ["eager", "blockwise"])
def test_sentence_metrics_match_output_hidden_states(tiny, tmp_path, impl):
    """Every followed sentence's metrics == an independent numpy computation from HF's
    hidden states and attention weights (to 1e-6), and layer 0 agrees across variants."""
    texts = family_texts()
    cfg = extract_config(attention_impl=impl, peer_metrics=False, token_sets=())
    loaded = tiny if impl == "eager" else None
    records = run_extract(
        "tiny",
        TINY,
        texts,
        cfg,
        ["none"],
        tmp_path,
        loaded=loaded,
        show_progress=False,
        log=lambda _m: None,
    )
    sent = records[0]["sentences"]
    n_sent = sum(len(ss) for ss in SENTENCES) * 7
    assert sent["sentences"] == n_sent and sent["kept"] == n_sent, sent
    got = pd.read_parquet(tmp_path / "none" / "sentence_metrics.parquet")
    assert set(got["metric"]) == {*SENT_HIDDEN, "sent_attn_in"}
    idx = got.set_index(["variant", "sample_id", "sentence", "layer", "metric"])["value"]
    tok = tiny.tokenizer
    for row in texts.itertuples():
        enc = tok(
            row.text,
            return_tensors="pt",
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        offsets = enc.pop("offset_mapping")[0].numpy()
        special = enc.pop("special_tokens_mask")[0].bool().numpy()
        with torch.no_grad():
            hf = tiny.model(**enc, output_hidden_states=True, output_attentions=True)
        n = offsets.shape[0]
        for sent_i, a, b in json.loads(row.sentence_spans):
            inside = np.flatnonzero((offsets[:, 0] >= a) & (offsets[:, 1] <= b) & ~special)
            for layer, h in enumerate(hf.hidden_states):
                x = h[0].double().numpy()
                metric_x = x[~special]
                s = x[inside]
                centred = s - s.mean(0)
                want = {
                    "sent_cos_centroid": _cos(s, metric_x.mean(0)),
                    "sent_cos_first": _cos(s, metric_x[0]),
                    "sent_erank": _erank(s),
                    "sent_erank_c": _erank(centred) if len(s) > 1 else np.nan,
                    "sent_norm": float(np.linalg.norm(s, axis=1).mean()),
                }
                for metric, value in want.items():
                    have = idx[(row.variant, row.sample_id, sent_i, layer, metric)]
                    # cosines lie in [-1, 1]: 1e-6 absolute near 0 (float32 forward of a
                    # padded batch against a single text)
                    atol = 1e-6 if metric.startswith("sent_cos") else 1e-9
                    where = f"{row.variant} {sent_i} {layer} {metric}"
                    np.testing.assert_allclose(have, value, rtol=1e-6, atol=atol, err_msg=where)
            for layer, att in enumerate(hf.attentions, start=1):
                w = att[0].double().numpy()  # (H, n, n), causal
                per_query = w.sum(1) / (n - np.arange(n))  # (H, n): mean over queries i >= j
                want = per_query[:, inside].mean()
                have = idx[(row.variant, row.sample_id, sent_i, layer, "sent_attn_in")]
                np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-9)
    # the layer-0 control: a sentence's own tokens and the text's multiset never change
    layer0 = got[
        (got["layer"] == 0)
        & got["metric"].isin(["sent_erank", "sent_erank_c", "sent_norm", "sent_cos_centroid"])
    ]
    spread = layer0.groupby(["sample_id", "sentence", "metric"])["value"].agg(["min", "max"])
    rel = (spread["max"] - spread["min"]).abs() / spread["max"].abs().clip(lower=1e-12)
    assert rel.max() < 1e-6
    # the flags: one key and one control sentence per text
    one = got[(got["layer"] == 0) & (got["metric"] == "sent_norm")]
    assert (one.groupby(["variant", "sample_id"])["is_key"].sum() == 1).all()
    assert (one.groupby(["variant", "sample_id"])["is_control"].sum() == 1).all()
    assert (one.groupby(["variant", "sample_id"])["is_ctrl"].sum() == 1).all()
    # the same-place control sits where the key sentence sits in the matching key variant
    for ctrl, moved in (("ctrl_first", "key_first"), ("ctrl_last", "key_last")):
        c = one[(one["variant"] == ctrl) & one["is_ctrl"]].set_index("sample_id")["sent_index"]
        k = one[(one["variant"] == moved) & one["is_key"]].set_index("sample_id")["sent_index"]
        assert c.sort_index().equals(k.sort_index())
    # and every variant keeps the original's token multiset
    tok = tiny.tokenizer
    bag = {(r.variant, r.sample_id): sorted(tok(r.text)["input_ids"]) for r in texts.itertuples()}
    assert all(b == bag[("original", s)] for (v, s), b in bag.items())
    key_first = one[(one["variant"] == "key_first") & one["is_key"]]
    assert (key_first["sent_index"] == 0).all() and (key_first["rel_position"] == 0).all()


def test_a_sentence_whose_tokens_change_is_left_out(tiny, tmp_path):
    """A family text whose sentence is spelt differently from the original's is not
    followed (its ids differ), and run.json counts it."""
    texts = family_texts()
    bad = (texts["variant"] == "key_last") & (texts["sample_id"] == "r0")
    ss = list(SENTENCES[0])
    ss[0] = ss[0].replace("opens", "begins")  # same length in characters? no: respan
    order = move(len(ss), 1, len(ss) - 1)
    texts.loc[bad, "text"] = join([ss[i] for i in order])
    texts.loc[bad, "sentence_spans"] = json.dumps(sentence_spans(ss, order))
    cfg = extract_config(peer_metrics=False, token_sets=())
    records = run_extract(
        "tiny",
        TINY,
        texts,
        cfg,
        ["none"],
        tmp_path,
        loaded=tiny,
        show_progress=False,
        log=lambda _m: None,
    )
    sent = records[0]["sentences"]
    assert sent["tokens_differ"] == 1 and sent["kept"] == sent["sentences"] - 1
    got = pd.read_parquet(tmp_path / "none" / "sentence_metrics.parquet")
    r0 = got[(got["variant"] == "key_last") & (got["sample_id"] == "r0")]
    assert 0 not in set(r0["sentence"]) and {1, 2, 3} <= set(r0["sentence"])


def synthetic_frame(n: int = 12, seed: int = 0) -> pd.DataFrame:
    """sentence_metrics rows of n reviews of 5 sentences, 3 layers, one metric: the key
    sentence (1) and the control sentence (4, moved to the front) with known values."""
    rng = np.random.default_rng(seed)
    orders = {
        "original": [0, 1, 2, 3, 4],
        "key_first": [1, 0, 2, 3, 4],
        "key_mid": [0, 2, 1, 3, 4],
        "key_last": [0, 2, 3, 4, 1],
        "key_control": [4, 0, 1, 2, 3],
    }
    rows = []
    for r in range(n):
        base = rng.normal(size=5)
        for v, order in orders.items():
            for k, sent in enumerate(order):
                for layer in range(3):
                    # layer 0: no position effect; deeper: value falls with position k
                    value = base[sent] + (0.0 if layer == 0 else -0.5 * k * layer)
                    rows.append(
                        (
                            v,
                            f"r{r}",
                            sent,
                            k,
                            k / 4,
                            3,
                            sent == 1,
                            sent == 4,
                            layer,
                            "m",
                            value + 0.01 * rng.normal(),
                        )
                    )
    cols = [
        "variant",
        "sample_id",
        "sentence",
        "sent_index",
        "rel_position",
        "n_tokens",
        "is_key",
        "is_control",
        "layer",
        "metric",
        "value",
    ]
    return pd.DataFrame(rows, columns=cols).assign(is_ctrl=False)  # no ctrl_* variants here


def deep_frame(n: int, metric: str) -> pd.DataFrame:
    """synthetic_frame over 7 layers (so that the depth bands exist), as ``metric``."""
    frame = synthetic_frame(n=n)
    frame = pd.concat(
        [frame.assign(layer=frame["layer"] * 3 + k) for k in range(3)], ignore_index=True
    ).drop_duplicates(["variant", "sample_id", "sentence", "layer"])
    return frame.assign(metric=metric)


def small_stats(n: int, basis: str = "sd") -> StatsSettings:
    """Stats settings with n bootstrap draws and n sign flips."""
    return StatsSettings(n_boot=n, ci=0.95, test="sign_flip", n_perm=n, sesoi_basis=basis)


def test_sentence_contrasts_pair_within_sentence():
    from homog.stats.sentences import run_sentence_contrasts, sentence_dose

    frame = synthetic_frame()
    out = run_sentence_contrasts(frame, "run", small_stats(200))
    rows = out[out["band"].isna()].set_index(["sentence", "variant_a", "variant_b", "layer"])
    # by hand at layer 2: the key sentence moves 1 -> 0 (first), 1 -> 4 (last), 1 -> 2 (mid)
    wide = frame[frame["layer"] == 2].pivot_table(
        index=["sample_id"], columns=["variant", "sentence"], values="value"
    )
    key = {v: wide[(v, 1)] for v in ("original", "key_first", "key_mid", "key_last")}
    ctrl = {v: wide[(v, 4)] for v in ("original", "key_control")}
    want = {
        ("key", "key_first", "original"): (key["key_first"] - key["original"]).mean(),
        ("key", "key_last", "original"): (key["key_last"] - key["original"]).mean(),
        ("key", "key_ends", "key_mid"): (
            (key["key_first"] + key["key_last"]) / 2 - key["key_mid"]
        ).mean(),
        ("control", "key_control", "original"): (ctrl["key_control"] - ctrl["original"]).mean(),
        # the control moved towards the start, so the key's far move is key_first
        ("key - control", "key_far", "original"): (
            (key["key_first"] - key["original"]) - (ctrl["key_control"] - ctrl["original"])
        ).mean(),
    }
    for (sentence, va, vb), value in want.items():
        assert rows.loc[(sentence, va, vb, 2), "mean_diff"] == pytest.approx(value, abs=1e-12)
    assert rows.loc[("key", "key_first", "original", 2), "mean_diff"] == pytest.approx(
        1.0, abs=0.05
    )
    # layer 0 carries no position effect (the control of the design), and the band rows exist
    assert abs(rows.loc[("key - control", "key_far", "original", 0), "mean_diff"]) < 0.05
    assert {"layer0", "final"} <= set(out["band"].dropna())
    dose = sentence_dose(frame)
    late = dose[dose["layer"] == 2].set_index("bin")["value"]
    assert late.is_monotonic_decreasing  # the planted fall with position
    assert dose[dose["layer"] == 0]["value"].abs().max() < 0.05


def test_report_section_gives_verdicts_and_the_layer0_control(tmp_path):
    """The planted effect (value falls with position) reads as a position effect and a
    U-shape per band with a verdict; layer 0 is the control row; the figure is drawn."""

    from homog.report.document import to_html
    from homog.report.sentences_view import sentence_line, sentences_section, verdict_rows
    from homog.stats.sentences import run_sentence_contrasts

    frame = deep_frame(16, "sent_cos_centroid")  # a primary metric
    sc = run_sentence_contrasts(frame, "r1", small_stats(200))
    runs = pd.DataFrame({"run_id": ["r1"], "model": ["m"], "intervention": ["none"]})
    rows = verdict_rows(sc, runs)
    fam = rows[~rows["control"]]
    assert set(fam["question"]) == {"position effect", "U-shape"}
    late = fam[(fam["question"] == "position effect") & (fam["band"] == "final")].iloc[0]
    # the key moves 1 place to the front (+0.5 per layer unit), the control 4 (+2): -1.5 each
    assert late["effect"] < 0 and late["verdict"] == "supported"
    ctl = rows[rows["control"]]
    assert set(ctl["band"]) == {"layer0"} and ctl["effect"].abs().max() < 0.05
    assert "m (16 reviews): position effect" in sentence_line(rows).markdown
    curve = (
        frame.groupby(["variant", "is_key", "is_control", "layer", "metric"])
        .agg(value=("value", "mean"), position=("rel_position", "mean"), n=("value", "size"))
        .reset_index()
        .assign(model="m")
    )
    sec = sentences_section(sc, curve, runs, tmp_path, 0.05)
    assert len(sec.figures) == 1 and sec.figures[0][0].exists()
    assert "Where position acts" in to_html("t", "", [sec])
    empty = sentences_section(pd.DataFrame(), pd.DataFrame(), runs, tmp_path, 0.05)
    assert "No sentence contrasts" in empty.paragraphs[0]


def test_layer_summary_holds_the_key_sentence_curves(tmp_path):
    """homog load's layer_summary carries the key sentence's sent_* means, so compare, plot
    and the TUI show a sentence metric per layer and variant."""
    import duckdb

    from homog.schema.summary import materialize_layer_summary
    from homog.schema.tables import TABLES, create_schema

    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    create_schema(con)
    con.execute("INSERT INTO runs (run_id, model, n_layers) VALUES ('r', 'm', 2)")
    con.execute("INSERT INTO layer_metrics VALUES ('r', 'original', 's1', 0, 'erank', 3.0)")
    values = [
        ("original", "s1", 1, 0.2),
        ("original", "s2", 1, 0.4),
        ("original", "s1", 0, 9.0),
        ("key_first", "s1", 1, 0.5),
    ]
    rows = [
        ("r", v, s, sent, 0, 0.0, 3, sent == 1, False, 1, "sent_attn_in", value)
        for v, s, sent, value in values
    ]
    cols = [c for c in TABLES["sentence_metrics"].names if c != "is_ctrl"]
    con.executemany(
        f"INSERT INTO sentence_metrics ({', '.join(cols)}) VALUES ({', '.join(['?'] * 12)})", rows
    )
    materialize_layer_summary(con)
    got = con.execute(
        "SELECT variant, n, mean FROM layer_summary WHERE metric = 'sent_attn_in' ORDER BY 1"
    ).fetchall()
    assert got == [("key_first", 1, 0.5), ("original", 2, pytest.approx(0.3))]
    assert con.execute("SELECT count(*) FROM layer_summary WHERE metric = 'erank'").fetchone()[0]


def test_sentences_page_writes_its_block(tmp_path):
    """python -m homog.report.sentences_page fills the page's marked block from a database
    (sentence_contrasts and sentence_metrics) and writes the figure beside it; a rerun
    replaces the block, leaving the rest of the page."""

    import duckdb

    from homog.report.sentences_page import END, START, main
    from homog.schema.tables import TABLES, create_schema
    from homog.stats.sentences import run_sentence_contrasts

    frame = deep_frame(10, "sent_attn_in")
    sc = run_sentence_contrasts(frame, "r1", small_stats(100))
    db = tmp_path / "s.duckdb"
    con = duckdb.connect(str(db))
    create_schema(con)
    con.execute(
        "INSERT INTO runs (run_id, model, intervention, n_layers) VALUES ('r1', 'm', 'none', 8)"
    )
    con.register("sm", frame.assign(run_id="r1")[TABLES["sentence_metrics"].names])
    con.execute("INSERT INTO sentence_metrics BY NAME SELECT * FROM sm")
    con.register("sc", sc.astype(object).where(sc.notna(), None))
    con.execute("INSERT INTO sentence_contrasts BY NAME SELECT * FROM sc")
    con.close()
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\nbefore\n\n{START}\nold\n{END}\n\nafter\n")
    for _ in range(2):
        assert main(["--db", str(db), "--page", str(page), "--figures", str(tmp_path / "f")]) == 0
    text = page.read_text()
    assert text.count(START) == 1 and "old" not in text and text.endswith("after\n")
    assert "### Where position acts" in text and "Followed: m: 10 reviews" in text
    assert "position effect" in text and (tmp_path / "f" / "sentences__m.png").exists()


def real_family(n_reviews: int = 4) -> pd.DataFrame:
    """The position family (homog.synth.position) of the first real IMDB reviews with 4 to
    12 sentences and at most ~120 words: key sentence 1, with synth's joining and spans."""
    from conftest import IMDB_SAMPLE

    from homog.synth.position import family_orders
    from homog.text.sentences import split_sentences

    rows = []
    with open(IMDB_SAMPLE) as fh:
        for line in fh:
            text = json.loads(line)["text"]
            ss = [text[a:b] for a, b in split_sentences(text)]
            if not 4 <= len(ss) <= 12 or len(text.split()) > 120:
                continue
            fam = family_orders([len(s) for s in ss], 1, [0, 0.5, 1])
            sid = f"imdb{len(rows) // 5}"
            orders = {"original": list(range(len(ss))), **fam.orders}
            for variant, order in orders.items():
                rows.append(
                    {
                        "variant": variant,
                        "sample_id": sid,
                        "text": join([ss[i] for i in order]),
                        "key_index": order.index(1),
                        "sentence_spans": json.dumps(sentence_spans(ss, order)),
                        "control_sentence": fam.control_sentence,
                    }
                )
            if len(rows) >= 5 * n_reviews:
                return pd.DataFrame(rows)
    raise AssertionError("too few short reviews in the sample")


@pytest.mark.parametrize("key", ["smollm2-135m", "gemma3-270m"])
def test_layer0_control_on_real_reviews(key, tmp_path):
    """On real reviews with each embedded model: at least 98 % of the sentences are
    followed, and at layer 0 sent_erank, sent_norm and sent_cos_centroid of every followed
    sentence equal the original's within 1e-6 relative (issue 40's control)."""
    import yaml
    from conftest import ROOT

    texts = real_family()
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    cfg = extract_config(max_tokens=256, peer_metrics=False, token_sets=())
    records = run_extract(
        key,
        params["models"][key]["source"],
        texts,
        cfg,
        ["none"],
        tmp_path,
        show_progress=False,
        log=lambda _m: None,
    )
    sent = records[0]["sentences"]
    assert sent["kept"] >= 0.98 * sent["sentences"], sent
    got = pd.read_parquet(tmp_path / "none" / "sentence_metrics.parquet")
    l0 = got[
        (got["layer"] == 0) & got["metric"].isin(["sent_erank", "sent_norm", "sent_cos_centroid"])
    ]
    orig = l0[l0["variant"] == "original"].set_index(["sample_id", "sentence", "metric"])
    moved = l0[l0["variant"] != "original"].set_index(["sample_id", "sentence", "metric"])
    ref = orig["value"].reindex(moved.index)
    assert ref.notna().all()
    rel = (moved["value"] - ref).abs() / ref.abs()
    assert rel.max() < 1e-6, rel.max()
    # and deeper, the moved key sentence does change (the control has something to control)
    deep = got[
        (got["layer"] == got["layer"].max())
        & got["is_key"]
        & (got["metric"] == "sent_cos_centroid")
    ]
    assert deep.groupby("sample_id")["value"].agg(lambda s: s.max() - s.min()).max() > 1e-4


def test_report_of_a_run_without_some_variants(demo_db_factory, tmp_path):
    """A run that covers only some of the texts' variants (the sentence study extracts the
    position family alone) still gets its report: no attention heatmap is asked for a
    variant the run lacks (it raised 'unknown variant front')."""
    import shutil

    import duckdb

    from homog.report.build import build_report

    db = tmp_path / "d.duckdb"
    shutil.copy(demo_db_factory(2, 8), db)
    con = duckdb.connect(str(db))
    run = con.execute("SELECT min(run_id) FROM runs").fetchone()[0]
    con.execute("DELETE FROM attention_profile WHERE variant = 'front' AND run_id = ?", [run])
    con.close()
    out = build_report(db, tmp_path / "r.html")
    assert "Where position acts" in out.read_text()


def test_compare_shows_the_key_sentence_with_its_paired_cis(demo_db_factory):
    """homog compare --metric sent_attn_in: the key sentence's curve per variant, each
    variant's difference from the original with the CI of sentence_contrasts."""
    from click.testing import CliRunner

    from homog.cli import main

    db = str(demo_db_factory(2, 8))
    res = CliRunner().invoke(
        main, ["compare", "--db", db, "--metric", "sent_attn_in", "--layers", "1-3", "--wide"]
    )
    assert res.exit_code == 0, res.output
    assert "key_first - orig" in res.output and "[" in res.output
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("2 "))
    # key_first, key_mid, key_last carry CIs; key_control and ctrl_first / ctrl_mid /
    # ctrl_last move the control sentence (the key sentence barely moves there, and the table
    # pairs the control sentence instead): the four without
    assert line.count("[") == 3 and line.count("(no CI)") == 4
    bad = CliRunner().invoke(main, ["compare", "--db", db, "--metric", "sent_attn_inn"])
    assert bad.exit_code != 0 and "sent_attn_in" in bad.output  # the valid names list it


def test_layer_curves_of_a_sentence_metric_carry_its_p_values(demo_db_factory):
    """The TUI's curves (query.layer_curves) of a sent_* metric mark the layers where the key
    sentence differs from its original place, from sentence_contrasts."""
    from homog.store.query import connect, layer_curves

    con = connect(demo_db_factory(2, 8))
    rows = layer_curves(con, "sent_attn_in")
    got = [r["p_holm_vs_original"] for r in rows if r["variant"] == "key_first"]
    assert got and all(p is not None for p in got)
    assert all(r["p_holm_vs_original"] is None for r in rows if r["variant"] == "original")


def test_dose_view_sql_equals_sentence_dose(tmp_path):
    """The report's dose view (DuckDB) is homog.stats.sentences.sentence_dose (pandas)."""
    import duckdb

    from homog.report.sentences_view import DOSE_SQL
    from homog.schema.tables import TABLES, create_schema
    from homog.stats.sentences import sentence_dose

    frame = deep_frame(6, "sent_attn_in").assign(run_id="r1")
    con = duckdb.connect(str(tmp_path / "d.duckdb"))
    create_schema(con)
    con.execute("INSERT INTO runs (run_id, model, intervention) VALUES ('r1', 'm', 'none')")
    con.register("f", frame[TABLES["sentence_metrics"].names])
    con.execute("INSERT INTO sentence_metrics BY NAME SELECT * FROM f")
    got = con.execute(DOSE_SQL).df().set_index(["metric", "layer", "bin"])
    want = sentence_dose(frame).set_index(["metric", "layer", "bin"])
    assert len(got) == len(want)
    np.testing.assert_allclose(got["value"], want.loc[got.index, "value"], atol=1e-12)
    assert (got["n"].to_numpy() == want.loc[got.index, "n"].to_numpy()).all()


def test_plot_draws_the_difference_view_by_default(demo_db_factory, tmp_path):
    """issue 42: layer curves are each variant minus the original (the contrasts' paired
    mean and CI) unless --raw; difference_curves carries the contrasts' own numbers."""
    from click.testing import CliRunner

    from homog.cli import main
    from homog.store.query import connect, difference_curves, layer_curves

    db = str(demo_db_factory(2, 8))
    con = connect(db)
    rows = layer_curves(con, "erank")
    diff = difference_curves(con, rows, "erank")
    assert diff and {r["variant"] for r in diff} <= {r["variant"] for r in rows} - {"original"}
    r = diff[0]
    want = con.execute(
        "SELECT mean_diff, ci_low, ci_high FROM contrasts WHERE run_id = ? AND variant_a = ? "
        "AND variant_b = 'original' AND layer = ? AND metric = 'erank' AND band IS NULL "
        "AND baseline_run_id IS NULL",
        [r["run_id"], r["variant"], r["layer"]],
    ).fetchone()
    assert (r["mean"], r["ci_low"], r["ci_high"]) == pytest.approx(want)
    con.close()
    for args in ([], ["--raw"]):
        out = tmp_path / f"e{len(args)}.png"
        res = CliRunner().invoke(
            main, ["plot", "--metric", "erank", "--db", db, "-o", str(out), *args]
        )
        assert res.exit_code == 0, res.output
        assert out.read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(
        main,
        [
            "plot",
            "--metric",
            "erank",
            "--db",
            db,
            "--variants",
            "original",
            "-o",
            str(tmp_path / "o.png"),
        ],
    )
    assert res.exit_code == 1 and "--raw" in res.output  # the original alone has no difference
