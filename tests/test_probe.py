"""The probe stage (homog.probe, issue 41): probes find a planted signal and nothing in shuffled
labels, folds never split a review, the position family's layer-0 outputs equal the
original's on real reviews, the zero-shot log-odds equal transformers' own, and the stage's
files load into the database."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import IMDB_SAMPLE, TINY

from homog.config import ExtractConfig, parse_params
from homog.config.probe import ProbeConfig
from homog.probe import fit as probe_fit
from homog.probe.cost import cost_slopes, fe_slope
from homog.probe.fit import assign_folds, probe_texts
from homog.probe.summary import summarise
from homog.probe.view import report_data
from homog.stats.settings import StatsSettings

FIT = dict(cs=ProbeConfig().c, seed=0)  # the default probe


def planted(n: int = 80, d: int = 32, layers: int = 3, signal: float = 5.0, seed: int = 0):
    """Vectors of n reviews x (original, key_first) with the label in feature 1 at every layer
    but 0 (layer 0: noise only)."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    rows = []
    for variant in ("original", "key_first"):
        x = rng.normal(size=(n, layers, d))
        x[:, 1:, 1] += signal * (y[:, None] - 0.5)
        rows.append((np.full(n, variant), np.array([f"r{i:03d}" for i in range(n)]), y, x))
    variants, ids, ys, xs = (np.concatenate(c) for c in zip(*rows, strict=True))
    return xs, variants, ids, ys


def accuracy(frame: pd.DataFrame) -> pd.Series:
    return frame.groupby(["scheme", "variant", "layer"])["correct"].mean()


def test_probe_finds_a_planted_signal_and_nothing_in_shuffled_labels():
    x, variants, ids, y = planted()
    orig = variants == "original"
    folds = assign_folds(ids[orig], y[orig], 5, seed=0)
    acc = accuracy(probe_texts(x, variants, ids, y, folds, **FIT))
    assert (acc.xs(1, level="layer") > 0.9).all() and (acc.xs(2, level="layer") > 0.9).all()
    assert (acc.xs(0, level="layer") < 0.75).all()  # layer 0 holds no signal
    # shuffled labels (the same permutation for every text of a review): chance
    perm = dict(zip(ids[orig], np.random.default_rng(1).permutation(y[orig]), strict=True))
    y_shuffled = np.array([perm[s] for s in ids])
    folds = assign_folds(ids[orig], y_shuffled[orig], 5, seed=0)
    acc = accuracy(probe_texts(x, variants, ids, y_shuffled, folds, **FIT))
    assert abs(acc.mean() - 0.5) < 0.1 and (acc < 0.75).all()


def test_grouped_folds_never_put_a_review_in_train_and_test(monkeypatch):
    x, variants, ids, y = planted(n=40, layers=1)
    x[:, 0, 0] = [int(s[1:]) for s in ids]  # the review's number, to read back the test rows
    seen = []

    def record(x_train, y_train, groups_train, x_test, **kw):  # x: [rows, layers, d]
        seen.append((set(groups_train), {f"r{int(v):03d}" for v in x_test[:, 0, 0]}))
        return np.zeros(x_test.shape[:2])

    monkeypatch.setattr(probe_fit, "fit_layers", record)  # one call per fold: every layer
    orig = variants == "original"
    folds = assign_folds(ids[orig], y[orig], 4, seed=3)
    assert sorted(set(folds.values())) == [0, 1, 2, 3]
    out = probe_texts(x, variants, ids, y, folds)
    assert len(seen) == 4 * (1 + 2)  # train_original + per_variant x 2 variants, 4 folds each
    for train, test in seen:
        assert train and test and not train & test
    # every text of a review is in its fold, in both schemes and both variants
    assert (out.groupby("sample_id")["fold"].nunique() == 1).all()
    # the labels are balanced across folds (stratified)
    per_fold = pd.Series(folds).groupby(pd.Series(folds)).size()
    assert per_fold.min() == per_fold.max() == 10


def test_fixed_effects_slope_recovers_a_planted_slope():
    rng = np.random.default_rng(0)
    n, v = 50, 4
    review_effect = rng.normal(scale=5, size=n)
    variant_effect = rng.normal(scale=2, size=v)
    x = rng.normal(size=(n, v)) + review_effect[:, None]
    y = 0.7 * x + review_effect[:, None] * 3 + variant_effect[None, :]
    y += rng.normal(scale=0.1, size=(n, v))
    unit = np.repeat(np.arange(n), v).astype(str)
    cond = np.tile(np.arange(v), n).astype(str)
    assert fe_slope(y.ravel(), x.ravel(), unit, cond) == pytest.approx(0.7, abs=0.02)


def _frames():
    """Per-text probe, zero-shot and erank frames where the margin tracks erank within review."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(30):
        base = rng.normal(scale=3)
        for v in ("original", "key_first", "front"):
            for iv in ("none", "zero_pos"):
                for layer in range(6):
                    # erank falls with depth (the SESOI's scale), and under zero_pos
                    e = 30 + base + rng.normal() - 2 * layer - (5 if iv == "zero_pos" else 0)
                    rows.append((iv, v, f"s{s}", layer, e, 0.5 * e + rng.normal(scale=0.1)))
    f = pd.DataFrame(
        rows, columns=["intervention", "variant", "sample_id", "layer", "value", "margin"]
    )
    probe = f.assign(scheme="train_original")
    lm = f[f["layer"] == 5].drop(columns=["layer", "value"])
    return probe, lm, f[["intervention", "variant", "sample_id", "layer", "value"]]


def test_cost_slopes_give_the_planted_within_text_slope():
    probe, lm, erank = _frames()
    # 2,000 resamples: a bootstrap p is never below 2 / (B + 1), and Holm multiplies it by
    # the family's 8 slopes (with 200: 0.00995 x 8 = 0.08, which cannot pass 0.05)
    out = cost_slopes(probe, lm, erank, StatsSettings(n_boot=2000))
    probe_rows = out[out["outcome"] == "probe_margin"]
    assert set(probe_rows["band"]) == {"late", "final"}
    assert set(out["contrast"]) == {"variant", "zero_pos"}
    assert np.allclose(probe_rows["value"], 0.5, atol=0.05)
    # a cost (the claimed sign) far outside the margin: a tenth of the mean |margin| per the
    # original's early-to-late erank fall
    assert (probe_rows["verdict"] == "supported").all() and (
        probe_rows["family"] == "primary"
    ).all()
    assert (probe_rows["sesoi"] < 0.2).all()
    assert (probe_rows["ci_low"] < 0.5).all() and (probe_rows["ci_high"] > 0.5).all()
    assert cost_slopes(probe, lm, None, StatsSettings()).empty


def test_zero_shot_log_odds_equal_transformers_own_computation():
    """The probe's own pass, for a prompt with a prefix (the whole prompt tokenized as one
    string) and for the text-first default (the text's tokens, then the suffix's)."""
    import torch

    from homog.models import load_model
    from homog.probe.lm import build_prompt, label_token_ids, with_margin, zero_shot

    loaded = load_model(TINY, device="cpu", attention=False)
    tok = loaded.tokenizer
    df = pd.DataFrame(
        {
            "variant": ["original", "original", "front"],
            "sample_id": ["a", "b", "a"],
            "text": [
                " A fine film. I liked it a lot.",
                " Dull.",
                " I liked it a lot. A fine film.",
            ],
            "label": ["pos", "neg", "pos"],
        }
    )
    cfg = ExtractConfig(device="cpu", max_tokens=64)
    prefix = ProbeConfig(prompt="Review: {text}\nSentiment (positive or negative):")

    def prompt_ids(probe, text):
        if probe is prefix:
            return tok(build_prompt(probe.prompt, text))["input_ids"]
        suffix = probe.prompt.removeprefix("{text}")
        return tok(text)["input_ids"] + tok(suffix, add_special_tokens=False)["input_ids"]

    for probe in (prefix, ProbeConfig()):
        pos, neg = label_token_ids(tok, probe.positive_word, probe.negative_word)
        for intervention in ("none", "zero_pos"):
            got = zero_shot(loaded, df, cfg, probe, intervention)
            for i, text in enumerate(df["text"]):
                ids = torch.tensor([prompt_ids(probe, text)])
                n = ids.shape[1]
                positions = (
                    torch.zeros(1, n, dtype=torch.long) if intervention == "zero_pos" else None
                )
                mask = torch.ones_like(ids)
                with torch.no_grad():
                    out = loaded.model(input_ids=ids, attention_mask=mask, position_ids=positions)
                logits = out.logits[0, -1]
                lp = torch.log_softmax(logits.double(), -1)
                assert got["log_odds"][i] == pytest.approx(float(lp[pos] - lp[neg]), abs=1e-4)
                assert got["n_prompt_tokens"][i] == n
    margins = with_margin(got, "pos")
    assert np.allclose(
        margins["margin"], [got["log_odds"][0], -got["log_odds"][1], got["log_odds"][2]]
    )


def labelled_texts() -> pd.DataFrame:
    """12 labelled three-sentence reviews, each as the original and key_last (the key
    sentence, the second, moved to the end: the same tokens in another order)."""
    rows = []
    for i in range(12):
        lab = "pos" if i % 2 else "neg"
        s = [f"Film {i} is here.", f"It was {'good' if i % 2 else 'bad'}.", "The end came."]
        rows.append(("original", f"s{i}", " " + " ".join(s), lab))
        rows.append(("key_last", f"s{i}", " " + " ".join([s[0], s[2], s[1]]), lab))
    return pd.DataFrame(rows, columns=["variant", "sample_id", "text", "label"])


def test_stage_files_load_into_the_database(tmp_path):
    """run_probe on a tiny random model: the files, probe.json, and the two tables loaded."""
    import duckdb

    from homog.layout import Layout
    from homog.probe.features import up_to_date
    from homog.probe.stage import run_probe
    from homog.store import load

    df = labelled_texts()
    raw = {
        "models": {"tiny": {"source": TINY}},
        "extract": {"device": "cpu", "max_tokens": 32},
        "stats": {"n_boot": 100, "n_perm": 200},
        "probe": {"folds": 2},
    }
    params = parse_params(raw)
    layout = Layout(tmp_path)
    record = run_probe(
        params, "tiny", TINY, df, layout.probe_dir("tiny"), root=tmp_path, show_progress=False
    )
    saved = json.loads((layout.probe_dir("tiny") / "probe.json").read_text())
    assert saved["n_texts"] == {"none": 24, "zero_pos": 24}
    assert saved["pooled_bytes_per_1000_texts"]["none"] > 0 and record["s_per_100_texts"] > 0
    # float16 (L+1) x d per text plus the npy header, and the index and zero-shot tables
    assert saved["pooled_bytes"]["none"] == 24 * 4 * 64 * 2 + 128
    assert saved["features_bytes_per_1000_texts"] > saved["pooled_bytes_per_1000_texts"]["none"]
    assert saved["headline"]["layer0_max_abs_diff"] == 0.0
    assert set(saved["headline"]["lm_auc_original"]) == {"none", "zero_pos"}
    vectors = np.load(layout.pooled_vectors("tiny", "none"))
    assert vectors.dtype == np.float16 and vectors.shape[:2] == (24, 4)
    first = pd.read_parquet(layout.probe_metrics("tiny"))
    features = layout.probe_features("tiny")
    stamp = {f.name: f.stat().st_mtime_ns for f in features.iterdir()}
    # both steps again: the features are up to date, so only the fit reruns (the same rows)
    again = run_probe(
        params, "tiny", TINY, df, layout.probe_dir("tiny"), root=tmp_path, show_progress=False
    )
    assert {f.name: f.stat().st_mtime_ns for f in features.iterdir()} == stamp
    pd.testing.assert_frame_equal(pd.read_parquet(layout.probe_metrics("tiny")), first)
    assert again["forward_passes"] == record["forward_passes"] == 96  # 24 texts x 2 x 2
    # a new stats.n_boot: the fit step alone (no model, no texts), new CIs, the same values
    other = parse_params({**raw, "stats": {"n_boot": 60, "n_perm": 200}})
    run_probe(
        other, "tiny", "no-such-model", None, layout.probe_dir("tiny"), root=tmp_path, step="fit"
    )
    assert {f.name: f.stat().st_mtime_ns for f in features.iterdir()} == stamp
    refit = pd.read_parquet(layout.probe_metrics("tiny"))
    pd.testing.assert_series_equal(refit["value"], first["value"])
    assert not np.allclose(refit["ci_low"], first["ci_low"], equal_nan=True)
    # another prompt changes the features' fingerprint: step all reruns the forward passes
    assert not up_to_date(
        parse_params({**raw, "probe": {"folds": 2, "prompt": "{text} ok?"}}), TINY, df, features
    )
    assert up_to_date(parse_params({**raw, "probe": {"folds": 3, "c": [1.0]}}), TINY, df, features)
    run_probe(
        params, "tiny", TINY, df, layout.probe_dir("tiny"), root=tmp_path, show_progress=False
    )
    counts = load(raw, root=tmp_path, db_path=tmp_path / "h.duckdb")
    assert counts["lm_sentiment"] == 48 and counts["probe_metrics"] > 0
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    metrics = con.execute("SELECT * FROM probe_metrics").df()
    data = report_data(metrics)
    assert set(data["curves"]["variant"]) == {"original", "key_last"}
    # iv x variant x metric (accuracy, margin, lm_auc)
    assert len(data["best"]) == 1 and len(data["lm"]) == 2 * 2 * 3
    assert (data["layer0"]["abs_diff"] == 0).all()


def _family(text: str) -> dict[str, str] | None:
    """The position family of a review by naive sentence split (key sentence: the first)."""
    sents = [s for s in re.split(r"(?<=[.!?])\s+", text.replace("<br />", " ").strip()) if s]
    if len(sents) < 3:
        return None
    key, rest = sents[0], sents[1:]

    def join(order):
        return " " + " ".join(order)

    mid = len(sents) // 2
    return {
        "original": join(sents),
        "key_first": join(sents),
        "key_mid": join(rest[:mid] + [key] + rest[mid:]),
        "key_last": join(rest + [key]),
        "key_control": join([sents[-1], *sents[:-1]]),
    }


@pytest.mark.slow  # ~60 s on the loaded 2-core machine (the model's load and 80 texts)
@pytest.mark.skipif(not IMDB_SAMPLE.exists(), reason="no shared IMDB sample")
def test_position_family_layer0_probe_outputs_equal_the_originals_on_real_reviews():
    """smollm2-135m on 16 short real reviews: the position family's layer-0 pooled vectors
    are the original's (same tokens), so both schemes' probe margins equal it within 1e-6."""
    from homog.models import load_model
    from homog.probe.pooled import pooled_means

    loaded = load_model("embedded:smollm2-135m", device="cpu", attention=False)
    tok = loaded.tokenizer
    rows, per_label = [], {"pos": 0, "neg": 0}
    for line in IMDB_SAMPLE.read_text().split("\n")[:2000]:
        if not line.strip():
            continue
        r = json.loads(line)
        lab = "pos" if str(r["label"]) in ("1", "pos") else "neg"
        fam = _family(r["text"])
        if per_label[lab] >= 8 or fam is None or len(tok(fam["original"])["input_ids"]) > 90:
            continue
        counts = {v: sorted(tok(t)["input_ids"]) for v, t in fam.items()}
        if any(c != counts["original"] for c in counts.values()):
            continue
        per_label[lab] += 1
        rows += [(v, str(r["id"]), t, lab) for v, t in fam.items()]
        if min(per_label.values()) >= 8:
            break
    df = pd.DataFrame(rows, columns=["variant", "sample_id", "text", "label"])
    df = df.sort_values(["variant", "sample_id"]).reset_index(drop=True)
    cfg = ExtractConfig(device="cpu", max_tokens=128)
    pooled = pooled_means(loaded, df, cfg, "none")
    v = pooled["vectors"]
    orig = pooled["variant"] == "original"
    by_id = {s: i for i, s in enumerate(pooled["sample_id"][orig])}
    for variant in ("key_first", "key_mid", "key_last", "key_control"):
        rows_v = np.flatnonzero(pooled["variant"] == variant)
        match = np.flatnonzero(orig)[[by_id[s] for s in pooled["sample_id"][rows_v]]]
        assert np.array_equal(v[rows_v, 0], v[match, 0])  # layer 0: the same vector
        assert not np.array_equal(v[rows_v, -1], v[match, -1]) or variant == "key_first"
    y = (
        df.set_index(["variant", "sample_id"])
        .loc[list(zip(pooled["variant"], pooled["sample_id"], strict=True)), "label"]
        .to_numpy()
        == "pos"
    ).astype(int)
    folds = assign_folds(pooled["sample_id"][orig], y[orig], 4, seed=0)
    out = probe_texts(v, pooled["variant"], pooled["sample_id"], y, folds, layers=[0], **FIT)
    own = out[(out["scheme"] == "train_original") | (out["train_set"] == out["variant"])]
    wide = own.pivot_table(index=["scheme", "sample_id"], columns="variant", values="margin")
    for variant in ("key_first", "key_mid", "key_last", "key_control"):
        assert np.abs(wide[variant] - wide["original"]).max() <= 1e-6


def test_vectors_beyond_float16_are_an_error_naming_text_and_layer():
    from homog.errors import HomogError
    from homog.probe.pooled import to_stored

    vectors = np.zeros((2, 3, 4))
    vectors[1, 2, 0] = 1e6  # gemma3-270m's massive activations reach this size
    assert to_stored(vectors[:1], "float16", ["a"]).dtype == np.float16
    with pytest.raises(HomogError, match=r"b at layer 2 .*probe.vector_dtype: float32"):
        to_stored(vectors, "float16", ["a", "b"])
    assert to_stored(vectors, "float32", ["a", "b"])[1, 2, 0] == 1e6


def test_dvc_stages_write_the_layout_paths_and_load_reads_them(tmp_path):
    import dataclasses

    import yaml
    from conftest import ROOT

    from homog.layout import Layout
    from homog.probe.features import EXTRACT_FIELDS, PROBE_FIELDS
    from homog.store import collect_sources

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    features, fit = stages["probe_features"]["do"], stages["probe"]["do"]
    layout = Layout()
    assert features["outs"] == [str(layout.probe_features("${key}"))]
    assert set(fit["outs"]) == {
        str(p)
        for p in (
            layout.probe_metrics("${key}"),
            layout.lm_sentiment("${key}"),
            layout.probe_texts("${key}"),
            layout.probe_dir("${key}") / "probe.json",
        )
    }
    assert features["outs"][0] in fit["deps"] and "data/extract/${key}" in fit["deps"]
    assert "homog/probe" in fit["deps"] and "stats" in fit["params"]
    # the forward passes read no stats: setting and none of the fit's probe settings
    assert not any(p == "stats" or p.startswith("stats.") for p in features["params"])
    assert {p for p in features["params"] if p.startswith("extract.")} == {
        f"extract.{f}" for f in EXTRACT_FIELDS if f != "seed"
    }

    def probe_params(stage: dict) -> set[str]:
        return {p.split(".", 1)[1] for p in stage["params"] if p.startswith("probe.")}

    assert probe_params(features) == set(PROBE_FIELDS)
    # every probe: setting is read by one step or the other (a new one must be placed)
    fields = {f.name for f in dataclasses.fields(ProbeConfig)} - {"seed"}
    assert probe_params(features) | probe_params(fit) == fields
    tmp = Layout(tmp_path)
    for path in (tmp.probe_metrics("m"), tmp.lm_sentiment("m")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    src = collect_sources({"models": {"m": {"source": TINY}}}, tmp_path)
    assert src.files["probe_metrics"] == [tmp.probe_metrics("m")]
    assert src.files["lm_sentiment"] == [tmp.lm_sentiment("m")]


def _zero_shot(n: int, shift: float, seed: int, shuffle: bool = False) -> pd.DataFrame:
    """Zero-shot log-odds of n reviews x 2 variants: N(shift, 1) for the positive label,
    N(0, 1) for the negative (AUC Phi(shift / sqrt 2)); shuffle: the reviews' labels permuted
    (once per review, the same in both variants) after the log-odds were drawn."""
    rng = np.random.default_rng(seed)
    y = np.repeat([1, 0], n // 2)
    lab = rng.permutation(y) if shuffle else y
    ids = [f"r{i:03d}" for i in range(n)]
    frames = []
    for variant in ("original", "front"):
        odds = rng.normal(size=n) + shift * y
        frames.append(
            pd.DataFrame(
                {
                    "intervention": "none",
                    "variant": variant,
                    "sample_id": ids,
                    "label": np.where(lab == 1, "pos", "neg"),
                    "log_odds": odds,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def test_zero_shot_auc_finds_a_planted_signal_and_chance_in_shuffled_labels():
    from scipy.stats import norm
    from sklearn.metrics import roc_auc_score

    from homog.probe.lm import with_margin
    from homog.probe.summary import auc_rows, weighted_auc

    stats = StatsSettings(n_boot=1000, ci=0.95, alpha=0.05, test="sign_flip", n_perm=1000)
    known = norm.cdf(1.0 / np.sqrt(2))  # 0.760
    rows = pd.DataFrame(auc_rows(_zero_shot(400, 1.0, seed=0), "pos", stats))
    assert list(rows["variant"]) == ["front", "original"] and (rows["metric"] == "lm_auc").all()
    assert (rows["n"] == 400).all() and (rows["scheme"] == "zero_shot").all()
    assert np.allclose(rows["value"], known, atol=0.04)
    assert ((rows["ci_low"] < known) & (rows["ci_high"] > known)).all()
    assert ((rows["ci_high"] - rows["ci_low"]) < 0.15).all()
    # shuffled labels: chance; over 30 draws the 95% CIs hold 0.5 about 95% of the time
    shuffled = pd.concat(
        [
            pd.DataFrame(auc_rows(_zero_shot(400, 1.0, seed=k, shuffle=True), "pos", stats))
            for k in range(30)
        ]
    )
    holds = (shuffled["ci_low"] < 0.5) & (shuffled["ci_high"] > 0.5)
    assert holds.mean() >= 0.85 and abs(shuffled["value"].mean() - 0.5) < 0.02
    # the bootstrap's weighted AUC is scikit-learn's with sample weights, ties included
    rng = np.random.default_rng(2)
    y, s = rng.integers(0, 2, 200), np.round(rng.normal(size=200), 1)
    w = rng.integers(0, 3, size=(4, 200)).astype(float)
    assert np.allclose(weighted_auc(y, s, w), [roc_auc_score(y, s, sample_weight=x) for x in w])
    # through summarise: lm_auc level rows beside accuracy and margin, in no Holm family
    probe, _, _ = _frames()
    probe = probe.assign(train_set=probe["variant"], correct=probe["margin"] > 0, y=1)
    lm = with_margin(_zero_shot(40, 1.0, seed=3), "pos")
    out = summarise(probe.drop(columns="value"), lm, stats, positive_label="pos")
    auc = out[out["metric"] == "lm_auc"]
    assert len(auc) == 2 and (auc["kind"] == "level").all() and auc["p_holm"].isna().all()
    without = summarise(probe.drop(columns="value"), lm, stats)
    assert "lm_auc" not in set(without["metric"])
