"""The synth stage end to end, its BERTScore check, selection, report and bad input.

BERTScore is checked against an independent computation; the IMDB acceptance run and the llm
rephraser (embedded SmolLM2) run the whole stage.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from conftest import IMDB_SAMPLE, ROOT, project_params

from homog.cli import main
from homog.corpus.stage import build_corpus
from homog.errors import HomogError
from homog.synth import TEXT_COLUMNS, VARIANTS, Sentences, assemble, build_synth, select
from homog.synth.bertscore import Scorer, passes, resolve_backbone, separation
from homog.text.sentences import split_sentences


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    return Scorer("embedded:all-minilm-l6-v2", num_layers=6)


# the fluency check and its audit with a tiny random LM (fast); its threshold lets all pass
TEST_FLUENCY = {
    "model": "random:tiny-llama",
    "audit_model": "random:tiny-llama",
    "threshold": 100.0,
    "audit_sentences": 20,
}


def params_for(tmp_path: Path, corpus: dict | None = None, synth: dict | None = None) -> dict:
    params = project_params()
    params["synth"]["fluency"].update(TEST_FLUENCY)
    params["corpus"].update(corpus or {})
    for key, value in (synth or {}).items():
        if isinstance(value, dict):
            params["synth"].setdefault(key, {}).update(value)
        else:
            params["synth"][key] = value
    return params


def run_stage(tmp_path: Path, params: dict, scorer=None) -> tuple[dict, pd.DataFrame]:
    build_corpus(params, out=tmp_path / "corpus.parquet")
    report = build_synth(
        params,
        corpus_path=tmp_path / "corpus.parquet",
        out_dir=tmp_path / "synth",
        scorer=scorer,
        show_progress=False,
    )
    return report, pd.read_parquet(tmp_path / "synth" / "texts.parquet")


def test_assemble_replaces_sentences_in_place():
    text = "One two three.  Four five six! Seven."
    doc = Sentences(text, split_sentences(text), ["two", None, "seven"])
    assert assemble(doc, {0: "Three two one."}) == "Three two one.  Four five six! Seven."
    assert assemble(doc, {}) == text
    assert doc.keyed == [0, 2]


def test_bertscore_matches_independent_computation(scorer):
    """F1 from bert-score equals greedy cosine matching of MiniLM layer-6 token vectors."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    cand, ref = (
        "The songs are wonderful, but the plot is thin.",
        "The plot is thin, but the songs are wonderful.",
    )
    path, layers = resolve_backbone("embedded:all-minilm-l6-v2")
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)

    def vectors(text: str) -> torch.Tensor:
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states[layers][0]
        hidden = hidden / hidden.norm(dim=-1, keepdim=True)
        return hidden, enc["input_ids"][0]

    (c, cid), (r, rid) = vectors(cand), vectors(ref)
    sim = c @ r.T
    special = {tok.cls_token_id, tok.sep_token_id}
    wc = torch.tensor([0.0 if int(i) in special else 1.0 for i in cid])
    wr = torch.tensor([0.0 if int(i) in special else 1.0 for i in rid])
    p = (sim.max(dim=1).values * wc).sum() / wc.sum()
    r_ = (sim.max(dim=0).values * wr).sum() / wr.sum()
    expected = float(2 * p * r_ / (p + r_))
    got = scorer.f1([cand, "An unrelated sentence about cooking pasta."], [ref, ref])
    assert got[0] == pytest.approx(expected, abs=1e-5)
    assert got[1] < got[0] - 0.1


def long_review(n: int = 60) -> str:
    """A made-up review of about 20 tokens per sentence, ``n`` sentences."""
    moods = ["quiet", "loud", "tired", "brave", "clumsy", "gentle"]
    things = ["pilot", "singer", "farmer", "baker", "sailor"]
    places = ["harbour", "station", "church", "mill", "bridge", "market", "school"]
    return " ".join(
        f"In scene {i} the {moods[i % 6]} {things[i % 5]} waits near the old "
        f"{places[i % 7]} for a while."
        for i in range(n)
    )


def test_bertscore_scores_past_the_encoder_window(scorer):
    """A change after token 512 lowers F1 (bert-score alone truncates and returns 1.0)."""
    ref = long_review()
    assert len(scorer.encoder.tokenizer(ref)["input_ids"]) > 900
    cut = ref.rindex("In scene 55")
    cand = ref[:cut] + "Then it turns into a cooking show about pasta, and nobody cares."
    before, same = scorer.windowed, scorer.identical
    f1 = scorer.f1([cand, ref, "A short line."], [ref, ref, "A short line."])
    assert f1[1] == 1.0 and f1[2] == 1.0  # identical pairs: exactly 1, not embedded
    assert f1[0] < 0.995
    assert scorer.windowed - before == 1 and scorer.identical - same == 2
    scorer.reuse = False  # the path before the reuse embeds an identical pair: F1 1 +- 1e-6
    try:
        assert scorer.f1(["A short line."], ["A short line."])[0] == pytest.approx(1.0, abs=1e-6)
        assert scorer.identical - same == 2
    finally:
        scorer.reuse = True
    # one window covers a short pair: the windowed path equals bert-score there
    a, b = "The songs are wonderful, but the plot is thin.", "The plot is thin, but the songs are."
    assert scorer._windowed(a, b) == pytest.approx(float(scorer.f1([a], [b])[0]), abs=1e-5)


class EditScorer:
    """A stand-in for BERTScore: 1 - 0.01 x the word edit distance of the texts."""

    def f1(self, candidates, references):
        from homog.synth.report import word_edit_distance

        return np.array(
            [
                1 - 0.01 * word_edit_distance(c, r)
                for c, r in zip(candidates, references, strict=True)
            ]
        )


def reverted_variants(rewrites: dict[int, str]):
    """Variants of one three-sentence text whose ``end`` rewrote ``rewrites``."""
    from homog.synth.stage import Variants, mean_position

    text = "Alpha beta gamma. Delta epsilon zeta eta. Theta iota kappa."
    doc = Sentences(text, split_sentences(text), ["gamma", "eta", "kappa"])
    edits = {"end": {"s": dict(rewrites)}}
    table = pd.DataFrame(
        [
            {
                "dataset": "d",
                "variant": v,
                "sample_id": "s",
                "label": "pos",
                "keyphrase": "",
                "text": assemble(doc, e),
                "position": mean_position(doc, e),
                "n_keyed": 3,
                "n_rewritten": len(e),
            }
            for v, e in (("original", {}), ("end", edits["end"]["s"]))
        ]
    )
    table["bertscore_f1"] = EditScorer().f1(list(table["text"]), [text] * 2)
    rows = pd.DataFrame(
        [
            {
                "sample_id": "s",
                "variant": "end",
                "sentence": i,
                "phrase": doc.phrases[i],
                "original": doc.sentence(i),
                "text": rewrites.get(i, doc.sentence(i)),
                "status": "rewritten" if i in rewrites else "at_target",
                "kinds": "k",
                "fluency": None,
            }
            for i in range(3)
        ]
    )
    status = {"end": {"rewritten": len(rewrites), "at_target": 3 - len(rewrites)}}
    return Variants(table, 3, 3, status, rows, docs={"s": doc}, edits=edits)


def test_revert_puts_back_the_largest_edit_first_until_the_text_passes():
    from homog.synth.repair import revert_failing
    from homog.synth.stage import rebuild

    rw = {0: "Gamma beta alpha.", 1: "It is eta that delta epsilon zeta has."}
    v = reverted_variants(rw)
    # word edits 2 (sentence 0) and 5 (sentence 1): F1 0.93 fails 0.95; without 1 it is 0.98
    assert v.table.loc[1, "bertscore_f1"] == pytest.approx(0.93)
    out = revert_failing(v, EditScorer(), 0.95, 10, rebuild=rebuild)
    assert out["reverted"] == {"end": 1} and out["repaired"] == {"end": 1}
    assert out["failing"] == {"end": 1} and out["rounds"] == 1
    assert v.edits["end"]["s"] == {0: "Gamma beta alpha."}
    end = v.table.loc[1]
    assert end["text"] == "Gamma beta alpha. Delta epsilon zeta eta. Theta iota kappa."
    assert end["n_rewritten"] == 1 and end["bertscore_f1"] == pytest.approx(0.98)
    row = v.rewrites.loc[1]
    assert row["status"] == "reverted" and row["text"] == row["original"]
    assert v.status["end"] == {"rewritten": 1, "reverted": 1, "at_target": 1}
    # a stricter threshold: both rewrites go back (then the text is the original, F1 = 1)
    v = reverted_variants(rw)
    out = revert_failing(v, EditScorer(), 0.99, 10, rebuild=rebuild)
    assert out["reverted"] == {"end": 2} and out["rounds"] == 2 and out["repaired"] == {"end": 1}
    assert v.table.loc[1, "text"] == v.table.loc[0, "text"] and v.table.loc[1, "n_rewritten"] == 0
    # max_reverts caps the rounds; 0 reverts nothing
    v = reverted_variants(rw)
    out = revert_failing(v, EditScorer(), 0.99, 1, rebuild=rebuild)
    assert out["reverted"] == {"end": 1} and out["repaired"] == {"end": 0}
    v = reverted_variants(rw)
    assert revert_failing(v, EditScorer(), 0.99, 0, rebuild=rebuild)["reverted"] == {"end": 0}
    assert v.edits["end"]["s"] == rw


def test_unchanged_windows_are_embedded_once(scorer):
    """A change in a long text's last window re-embeds only the windows that hold it, and the
    cached windows give the same F1 as embedding everything afresh."""
    ref = long_review()
    cut = ref.rindex("In scene 58")
    cand = ref[:cut] + "Then it turns into a cooking show about pasta, and nobody cares."
    scorer._windows.clear()
    scorer._embedded.clear()
    scorer._embed(ref)
    n_ref = len(scorer._windows)
    cached = scorer._windowed(cand, ref)
    ids = scorer.encoder.tokenizer(ref, add_special_tokens=False)["input_ids"]
    changed_at = len(scorer.encoder.tokenizer(ref[:cut], add_special_tokens=False)["input_ids"])
    width, stride = scorer.max_length - 2, scorer.window_stride
    last = len(ids) - width
    starts = sorted({*range(0, last + 1, stride), last})
    assert n_ref == len(starts) >= 3
    # only the windows that reach the changed tail are new (the last one here)
    assert len(scorer._windows) - n_ref == sum(a + width > changed_at - 2 for a in starts) == 1
    scorer._windows.clear()
    scorer._embedded.clear()
    assert scorer._windowed(cand, ref) == pytest.approx(cached, abs=1e-7)


def test_threshold_filter_and_counts():
    rows = []
    # sample a: all pass; b: control below threshold; c: end unchanged; d: no key phrase
    spec = {
        "a": (
            {"front": 0.95, "end": 0.93, "control": 0.97},
            {"front": 1, "end": 2, "control": 1},
            3,
        ),
        "b": (
            {"front": 0.95, "end": 0.93, "control": 0.80},
            {"front": 1, "end": 1, "control": 1},
            2,
        ),
        "c": ({"front": 0.99, "end": 1.0, "control": 1.0}, {"front": 1, "end": 0, "control": 0}, 2),
        "d": ({"front": 1.0, "end": 1.0, "control": 1.0}, {"front": 0, "end": 0, "control": 0}, 0),
    }
    for sid, (f1, rewritten, keyed) in spec.items():
        rows.append(
            {
                "sample_id": sid,
                "variant": "original",
                "bertscore_f1": 1.0,
                "n_rewritten": 0,
                "n_keyed": keyed,
            }
        )
        for v in ("front", "end", "control"):
            rows.append(
                {
                    "sample_id": sid,
                    "variant": v,
                    "bertscore_f1": f1[v],
                    "n_rewritten": rewritten[v],
                    "n_keyed": keyed,
                }
            )
    table = pd.DataFrame(rows)
    keep, counts = select(table, 0.9, require_rewrite="any")
    assert keep[keep].index.tolist() == ["a", "c"]
    assert counts["no_keyphrase"] == 1 and counts["below_threshold"]["control"] == 1
    assert counts["unchanged_per_variant"] == {"front": 0, "end": 1, "control": 1}
    keep, counts = select(table, 0.9, require_rewrite="all")
    assert keep[keep].index.tolist() == ["a"] and counts["not_rewritten"] == 1
    keep, _ = select(table, 0.79, require_rewrite="all")
    assert keep[keep].index.tolist() == ["a", "b"]
    with pytest.raises(HomogError, match="require_rewrite"):
        select(table, 0.9, require_rewrite="some")
    mask = passes({"front": np.array([0.95, 0.5]), "end": np.array([0.91, 0.99])}, 0.9)
    assert mask.tolist() == [True, False]
    sep = separation(np.array([0.95, 0.97, 0.99]), np.array([0.6, 0.65, 0.7]))
    assert sep["unrelated_p99"] < sep["midpoint"] < sep["rewrite_p01"]


def test_demo_synth_end_to_end(tmp_path, scorer):
    params = params_for(tmp_path, corpus={"n": 30})
    report, texts = run_stage(tmp_path, params, scorer)
    assert list(texts.columns) == TEXT_COLUMNS
    kept = texts["sample_id"].unique()
    assert report["texts_in"] == 30 and report["texts_kept"] == len(kept) >= 20
    family = ["key_first", "key_mid", "key_last", "key_control"]
    family += ["ctrl_first", "ctrl_mid", "ctrl_last"]  # the same-place controls
    assert (
        texts.groupby("sample_id")["variant"]
        .apply(lambda v: sorted(v) == sorted([*VARIANTS, *family]))
        .all()
    )
    assert list(pd.unique(texts["variant"])) == [*VARIANTS, *family]
    originals = texts[texts["variant"] == "original"]
    assert (originals["bertscore_f1"] == 1.0).all()
    paper = texts["variant"].isin(VARIANTS)
    assert (texts.loc[paper, "bertscore_f1"] >= report["threshold"]).all()
    assert texts.loc[~paper, "bertscore_f1"].isna().all()  # the family is exempt: null
    # every text starts with the one leading space; the family keeps every token
    assert texts["text"].str.match(r"^ \S").all()
    per_model = report["manipulation"]["per_model"]
    assert set(per_model) == {"smollm2-135m", "gemma3-270m"}
    for v in family:
        assert per_model["smollm2-135m"][v]["multiset_equal_share"] == 1.0
    assert texts.loc[paper & (texts["variant"] != "original"), "key_index"].isna().all()
    assert texts.loc[~paper | (texts["variant"] == "original"), "key_position"].between(0, 1).all()
    # the variants are rewrites of their original (the parse rephraser is the default)
    assert report["rephraser"] == "parse"
    sources, retries = report["keyphrase_sources"], report["phrase_retries"]
    assert sum(sources.values()) == report["keyphrase_sentences"]
    assert 0 <= retries["changed"] <= retries["tried"]
    wide = texts.pivot(index="sample_id", columns="variant", values="text")
    changed = (wide["front"] != wide["original"]) | (wide["end"] != wide["original"])
    assert changed.all()
    pos = report["keyphrase_position"]
    assert pos["front"] < pos["original"] - 0.1 < pos["end"] - 0.2
    assert abs(pos["control"] - pos["original"]) < 0.05
    assert set(report["rewrite_rate"]) == {"front", "end", "control"}
    # per-variant measures: edges, moves, changed texts, edit distance, kinds, fluency, audit
    edges = report["keyphrase_edges"]
    assert edges["front"]["at_front"] > edges["original"]["at_front"] + 0.15
    assert edges["end"]["at_end"] > edges["original"]["at_end"] + 0.2
    assert edges["control"]["moved"] <= 0.05
    # length-matched (the default): fewer controls keep the token count than before (0.7)
    assert report["texts_changed"]["control"] >= 0.6
    manip = report["manipulation"]
    for v in ("front", "end", "control"):
        for model in ("smollm2-135m", "gemma3-270m"):
            change = manip["length_match"]["variants"][v]["token_change"][model]
            assert change["distribution"] == {"0": report["texts_kept"]}
    assert manip["edges"]["front"]["start_shift"] > 0.05 < manip["edges"]["end"]["end_shift"]
    assert min(report["edit_distance"].values()) > 0
    rewritten = report["sentence_status"]["front"]["rewritten"]
    assert 0 < report["fluency"]["front"]["n"] <= rewritten
    assert sum(report["rewrite_kinds"]["front"].values()) >= report["fluency"]["front"]["n"]
    audit = report["fluency_audit"]
    assert audit["model"] == "random:tiny-llama" and audit["front"]["n"] == 20
    assert len(report["examples"]["end"]) == 20
    assert report["bertscore_windowed"] == 0
    phases = {
        "load",
        "parse",
        "keyphrases",
        "rewrite_front",
        "rewrite_end",
        "rewrite_control",
        "retry",
        "length_match",
        "budget",
        "bertscore",
        "revert",
        "position",
        "report",
        "audit",
        "write",
        "total",
    }
    assert set(report["timings"]) == phases == set(report["timings_cpu"])
    assert report["timings"]["total"] == pytest.approx(
        sum(v for k, v in report["timings"].items() if k != "total"), abs=0.05
    )
    assert len(report["load_average"]) == 3
    assert set(report["reverted"]) == {"reverted", "repaired", "failing", "rounds"}
    assert report["reverted"]["repaired"]["end"] <= report["reverted"]["failing"]["end"]
    lm = report["fluency_lm"]
    assert lm["model"] == "random:tiny-llama" and lm["texts"] > 0 and lm["tokens"] > lm["texts"]
    saved = json.loads((tmp_path / "synth" / "report.json").read_text())
    assert saved["texts_kept"] == report["texts_kept"]
    assert all(" | " in k or k for k in originals["keyphrase"])


def test_texts_without_key_phrase_are_counted(tmp_path, scorer):
    demo = pd.read_json(ROOT / "data/demo/reviews.jsonl", lines=True).head(4)
    blank = "and the of it is was to in that for on with as at by " * 3
    rows = pd.concat(
        [
            demo,
            pd.DataFrame(
                {"id": ["x1", "x2"], "text": [blank, blank + "a"], "label": ["pos", "neg"]}
            ),
        ]
    )
    rows.to_json(tmp_path / "mixed.jsonl", orient="records", lines=True)
    params = params_for(tmp_path, corpus={"source": f"file:{tmp_path / 'mixed.jsonl'}", "n": 6})
    report, texts = run_stage(tmp_path, params, scorer)
    assert report["dropped"]["no_keyphrase"] == 2
    assert set(texts["sample_id"]) <= set(demo["id"])
    assert (
        report["texts_kept"]
        + sum(v if isinstance(v, int) else max(v.values()) for v in report["dropped"].values())
        >= report["texts_in"]
    )


def test_no_survivors_and_missing_corpus_fail(tmp_path, scorer):
    # F1 = 1 only for an unchanged text, and no rewrite is reverted: nothing survives
    no_survivor = {"bertscore": {"threshold": 1.0, "max_reverts": 0}}
    # issue 40 step 0: the position family needs no rewrite, so it keeps the reviews whose
    # rewrites all failed; only the paper's variants are empty
    params = params_for(tmp_path, corpus={"n": 4}, synth=no_survivor)
    report, texts = run_stage(tmp_path, params, scorer)
    assert report["texts_kept_paper"] == 0 and report["texts_kept"] == report["texts_kept_family"]
    assert report["texts_kept"] > 0
    assert not set(texts["variant"]) & {"front", "end", "control"}
    assert {e["kept_in"] for e in report["dropped_reviews"]} <= {"position_family", "none"}
    (tmp_path / "synth" / "texts.parquet").unlink()
    no_survivor["position"] = {"enabled": False}
    params = params_for(tmp_path, corpus={"n": 4}, synth=no_survivor)
    with pytest.raises(HomogError, match="no text survived synth"):
        run_stage(tmp_path, params, scorer)
    assert not (tmp_path / "synth" / "texts.parquet").exists()
    with pytest.raises(HomogError, match="run `homog corpus` first"):
        build_synth(params, corpus_path=tmp_path / "missing.parquet", scorer=scorer)
    with pytest.raises(HomogError, match="synth.rephraser: expected one of 'parse', 'rule'"):
        build_synth(
            params_for(tmp_path, synth={"rephraser": "magic"}),
            corpus_path=tmp_path / "corpus.parquet",
            scorer=scorer,
        )
    with pytest.raises(HomogError, match="unknown embedded BERTScore backbone"):
        resolve_backbone("embedded:nope")
    with pytest.raises(HomogError, match="baseline"):
        Scorer("embedded:all-minilm-l6-v2", rescale_with_baseline=True)


def test_importing_synth_does_not_import_torch():
    code = (
        "import sys, homog.synth; light = 'pandas' not in sys.modules; "
        "import homog.synth.stage, homog.synth.bertscore, homog.synth.rephrase.rule, "
        "homog.synth.rephrase.llm, homog.synth.rephrase.parse, homog.synth.rephrase.moves, "
        "homog.synth.fluency, homog.synth.report; print(light, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_cli_synth(tmp_path):
    params = params_for(tmp_path, corpus={"n": 6})
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    runner = CliRunner()
    res = runner.invoke(
        main,
        [
            "synth",
            "--params",
            str(path),
            "--corpus",
            str(tmp_path / "none.parquet"),
            "--out",
            str(tmp_path / "s"),
        ],
    )
    assert res.exit_code == 1 and "homog corpus" in res.output
    corpus = tmp_path / "c.parquet"
    assert (
        runner.invoke(main, ["corpus", "--params", str(path), "--out", str(corpus)]).exit_code == 0
    )
    res = runner.invoke(
        main,
        ["synth", "--params", str(path), "--corpus", str(corpus), "--out", str(tmp_path / "s")],
    )
    assert res.exit_code == 0, res.output
    assert "mean key-phrase position" in res.output
    assert (tmp_path / "s" / "report.json").exists()


@pytest.mark.skipif(not IMDB_SAMPLE.exists(), reason="no shared IMDB sample")
def test_imdb_rule_synth_moves_key_phrases(tmp_path, scorer):
    """Acceptance: on real reviews the rule rephraser keeps most texts and moves the phrases.

    Without length matching: the rule rephraser's moves insert words (length-matched, it keeps
    about 40 % of these reviews; the parse rephraser is the length-matched default)."""
    params = params_for(
        tmp_path,
        corpus={"source": f"file:{IMDB_SAMPLE}", "n": 40},
        synth={"rephraser": "rule", "length_match": False},
    )
    report, texts = run_stage(tmp_path, params, scorer)
    # reviews cut to 128 tokens keep fewer sentences to rewrite (not_rewritten), and the
    # position family needs 3 sentences; every text in is kept or counted
    dropped = report["dropped"]
    assert report["texts_kept"] >= 0.5 * report["texts_in"]
    assert (
        report["texts_kept"]
        + dropped["not_rewritten"]
        + dropped["no_keyphrase"]
        + sum(dropped["position_family"].values())
        + max(dropped["below_threshold"].values())
        >= report["texts_in"]
    )
    pos = report["keyphrase_position"]
    assert pos["front"] < pos["original"] - 0.05
    assert pos["end"] > pos["original"] + 0.05
    assert abs(pos["control"] - pos["original"]) < 0.03
    for v in ("front", "end", "control"):
        assert report["bertscore_f1"][v] > 0.95
    assert not texts["text"].str.contains("<br").any()


def test_llm_rephraser_end_to_end_with_smollm2(tmp_path, scorer):
    """The llm rephraser runs the whole stage with the embedded SmolLM2 on two short texts."""
    import torch

    from homog.synth.rephrase import position_ok

    demo = pd.read_json(ROOT / "data/demo/reviews.jsonl", lines=True)
    short = demo.assign(n=demo["text"].str.split().map(len)).nsmallest(2, "n")
    short[["id", "text", "label"]].to_json(tmp_path / "two.jsonl", orient="records", lines=True)
    params = params_for(
        tmp_path,
        corpus={"source": f"file:{tmp_path / 'two.jsonl'}", "n": 2, "label_column": None},
        synth={
            "rephraser": "llm",
            "require_rewrite": "none",
            "llm": {"device": "cpu", "max_new_tokens": 24, "retries": 0, "batch_size": 16},
            "bertscore": {"threshold": 0.0},
        },
    )
    # One thread: on a busy 2-core machine two generation threads slow each other down ~10x.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        report, texts = run_stage(tmp_path, params, scorer)
    finally:
        torch.set_num_threads(threads)
    assert report["rephraser"] == "llm" and report["texts_kept"] == 2
    status = report["sentence_status"]
    for target in ("front", "end", "control"):
        assert sum(status[target].values()) == report["keyphrase_sentences"]
        assert set(status[target]) <= {"rewritten", "rejected"}
    # every accepted rewrite really has the phrase at the asked place
    wide = texts.pivot(index="sample_id", columns="variant", values="text")
    for sid, row in wide.iterrows():
        phrases = texts.loc[texts["sample_id"] == sid, "keyphrase"].iloc[0].split(" | ")
        orig = [row["original"][a:b] for a, b in split_sentences(row["original"])]
        for target in ("front", "end"):
            new = [row[target][a:b] for a, b in split_sentences(row[target])]
            if len(new) != len(orig):  # a reply may add a full stop: compare whole texts then
                continue
            for o, n in zip(orig, new, strict=True):
                if o != n:
                    assert any(position_ok(o, n, p, target) for p in phrases)


@pytest.mark.slow
@pytest.mark.skipif(not IMDB_SAMPLE.exists(), reason="no shared IMDB sample")
def test_imdb_parse_synth_reaches_the_edges(tmp_path, scorer):
    """Acceptance (issue 12) on 40 real reviews, parse rephraser without the LM check: the
    key phrases reach the edges, the control changes texts without moving them."""
    params = params_for(
        tmp_path,
        corpus={"source": f"file:{IMDB_SAMPLE}", "n": 40, "max_words": None},
        synth={"fluency": {"model": None, "audit_model": None}},
    )
    report, _texts = run_stage(tmp_path, params, scorer)
    edges = report["keyphrase_edges"]
    assert report["texts_kept"] >= 0.85 * report["texts_in"]
    assert edges["front"]["at_front"] >= 0.55 and edges["end"]["at_end"] >= 0.55
    assert edges["control"]["moved"] <= 0.05 and report["texts_changed"]["control"] >= 0.7
