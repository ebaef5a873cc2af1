"""The extract stage: exactness against HF hidden states, batching, interventions, resume,
bad input. Tiny random models for most tests; the embedded models only for exactness."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from click.testing import CliRunner
from conftest import ROOT, TINY, extract_config
from test_metrics_sets import assert_matches, numpy_reference

import homog.extract
from homog.cli import main
from homog.errors import HomogError
from homog.extract import (
    Extractor,
    encode_texts,
    make_batches,
    plan_samples,
    position_ids,
    run_extract,
)
from homog.extract.plan import PAD_SLACK, EncodedText
from homog.metrics.attention import TEXT_METRICS
from homog.metrics.sets import hidden_metric_names
from homog.metrics.spectra import METRIC_NAMES
from homog.models import load_model

WORDS = (
    "the movie was great and the acting superb but the plot felt thin while the music "
    "carried every long scene toward an ending nobody expected"
).split()


def make_texts(n: int = 6, variants=("original", "front"), seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        base = " ".join(rng.choice(WORDS, size=int(rng.integers(4, 40))))
        for v in variants:
            text = base if v == "original" else f"{v} {base}"
            rows.append(
                {
                    "dataset": "t",
                    "variant": v,
                    "sample_id": f"s{i:02d}",
                    "text": text,
                    "label": "pos",
                    "keyphrase": "great",
                    "bertscore_f1": 1.0,
                }
            )
    return pd.DataFrame(rows)


def run_tiny(loaded, texts, cfg, interventions, out, **kw) -> list[dict]:
    """run_extract of the tiny random model (already loaded as `loaded`), no progress bar."""
    return run_extract(
        "tiny",
        TINY,
        texts,
        cfg,
        interventions,
        out,
        loaded=loaded,
        show_progress=False,
        **kw,
    )


def read_outputs(path: Path) -> dict:
    out = {
        f: pd.read_parquet(path / f"{f}.parquet")
        for f in (
            "layer_metrics",
            "attention_profile",
            "attention_heads",
            "dataset_spectra",
            "massive_activations",
        )
    }
    with np.load(path / "vectors.npz") as z:
        out["vectors"] = {k: z[k] for k in z.files}
    return out


# --- exactness against an independent computation ----------------------------------------


def svd_reference(x: np.ndarray) -> dict[str, float]:
    s = np.linalg.svd(x, compute_uv=False)
    s = s[s > s[0] * 1e-7]
    p = s / s.sum()
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    return {
        "erank": float(np.exp(-(p * np.log(p)).sum())),
        "mev": float(s[0] ** 2 / (s**2).sum()),
        "resultant_length": float(np.linalg.norm(unit.mean(0))),
    }


@pytest.mark.parametrize("key", ["smollm2-135m", "gemma3-270m"])
def test_cli_matches_output_hidden_states(key, tmp_path):
    """`homog extract` == numpy SVD of HF output_hidden_states, per text and layer."""
    texts = make_texts(3, variants=("original",), seed=1)
    texts_path = tmp_path / "texts.parquet"
    texts.to_parquet(texts_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["extract"].update(max_tokens=64, device="cpu", dtype="float32", attention=True)
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "extract",
            "--model",
            key,
            "--params",
            str(params_path),
            "--texts",
            str(texts_path),
            "--out",
            str(out),
            "--intervention",
            "none",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    got = pd.read_parquet(out / "none" / "layer_metrics.parquet")
    got = got.set_index(["sample_id", "layer", "metric"])["value"]
    run = json.loads((out / "none" / "run.json").read_text())

    lm = load_model(params["models"][key]["source"], device="cpu", attention=True)
    assert run["n_layers"] == lm.n_layers and run["d_model"] == lm.d_model
    for sid, text in zip(texts["sample_id"], texts["text"], strict=True):
        enc = lm.tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
        special = enc.pop("special_tokens_mask")[0].bool().numpy()
        with torch.no_grad():
            hf = lm.model(**enc, output_hidden_states=True, output_attentions=True)
        assert len(hf.hidden_states) == lm.n_layers + 1
        top_pos = []
        for layer, h in enumerate(hf.hidden_states):
            x = h[0].double().numpy()[~special]
            for metric, value in svd_reference(x).items():
                assert got[(sid, layer, metric)] == pytest.approx(value, rel=1e-6, abs=1e-9), (
                    sid,
                    layer,
                    metric,
                )
            # the token sets, the peers' metrics and massive activations (issue 13)
            want = numpy_reference(h[0].numpy()[~special], np.flatnonzero(~special))
            have = {m: got[(sid, layer, m)] for m in want}
            assert_matches(have, want, 1e-4, (key, sid, layer))
            top_pos.append(int(want["act_top1_pos"]))
        eps = params["extract"].get("sink_epsilon", 0.3)
        for layer, a in enumerate(hf.attentions, start=1):
            heads = a[0].double().numpy()  # (H, n, n)
            sink = (heads[:, :, 0].mean(1) > eps).mean()
            assert got[(sid, layer, "sink_rate")] == pytest.approx(sink, abs=1e-12)
            j = top_pos[layer - 1]  # the block's input holds the massive activation
            massive = heads[:, j:, j].mean(1).mean()
            assert got[(sid, layer, "attn_massive")] == pytest.approx(massive, rel=1e-4)
            column = a[0].double().mean(1)  # (H, n): mean over query rows
            assert got[(sid, layer, "attn_first")] == pytest.approx(
                column[:, 0].mean().item(), rel=1e-5
            )
            assert got[(sid, layer, "attn_last")] == pytest.approx(
                column[:, -1].mean().item(), rel=1e-5, abs=1e-9
            )


# --- batching ------------------------------------------------------------------------------


def test_metrics_do_not_depend_on_batch(tiny):
    texts = make_texts(5)
    enc = encode_texts(tiny.tokenizer, texts, 64)
    cfg = extract_config()
    plan = plan_samples(enc, 1000, 10, 0, True)  # every token sampled
    ex = Extractor(tiny, cfg)
    try:
        together = ex.run_batch(enc, "none", plan)
        n_names = len(hidden_metric_names(cfg.token_sets, cfg.peer_metrics))
        assert together.metrics.shape == (len(enc), tiny.n_layers + 1, n_names)
        assert together.names[: len(METRIC_NAMES)] == list(METRIC_NAMES)
        for i, t in enumerate(enc):
            alone = ex.run_batch([t], "none", plan)
            np.testing.assert_allclose(alone.metrics[0], together.metrics[i], rtol=1e-5)
            np.testing.assert_allclose(alone.text_attn[0], together.text_attn[i], rtol=1e-4)
            np.testing.assert_array_equal(alone.top[0][..., :2], together.top[i][..., :2])
            np.testing.assert_allclose(alone.heads[0], together.heads[i], rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(alone.profile[0], together.profile[i], atol=1e-6)
            np.testing.assert_allclose(
                alone.pooled_mean[0].astype(float), together.pooled_mean[i].astype(float), atol=2e-3
            )
            rows = together.token_index == t.index
            np.testing.assert_allclose(
                alone.tokens.astype(float), together.tokens[:, rows].astype(float), atol=2e-3
            )
            # every token was sampled: the pooled vectors are their mean and the last one
            toks = together.tokens[:, rows].astype(float)
            np.testing.assert_allclose(
                together.pooled_mean[i].astype(float), toks.mean(1), atol=2e-3
            )
            np.testing.assert_allclose(
                together.pooled_last[i].astype(float), toks[:, -1], atol=2e-3
            )
    finally:
        ex.close()
    # hooks removed: the model runs as before
    assert not tiny.layers[0]._forward_hooks


def test_make_batches_respects_token_budget():
    enc = encode_texts(load_tokenizer(), make_texts(10), 64)
    batches = make_batches(enc, 100)
    assert sorted(t.index for b in batches for t in b) == list(range(len(enc)))
    for b in batches:
        longest = max(len(t.input_ids) for t in b)
        assert len(b) == 1 or len(b) * longest <= 100


def text_of(index: int, n: int) -> EncodedText:
    return EncodedText(index, "v", "s", np.arange(n), np.zeros(n, bool), False)


def test_make_batches_keeps_padding_small():
    """A few long texts among short ones (the demo's draw of 8: 55-68 tokens and 100, 110)
    form their own batch: padded tokens at most PAD_SLACK x the real ones, in budget."""
    lengths = [55, 56, 57, 59, 64, 68, 100, 110]
    enc = [text_of(i, n) for i, n in enumerate(lengths)]
    batches = make_batches(enc, 4096)
    assert [[len(t.input_ids) for t in b] for b in batches] == [lengths[:6], lengths[6:]]
    enc = [text_of(i, 10 + 3 * i) for i in range(40)]
    batches = make_batches(enc, 400)
    assert sorted(t.index for b in batches for t in b) == list(range(40))
    for b in batches:
        sizes = [len(t.input_ids) for t in b]
        assert len(b) * max(sizes) <= min(400, PAD_SLACK * sum(sizes)) or len(b) == 1


def load_tokenizer():
    from homog.models_gguf import embedded_tokenizer

    return embedded_tokenizer()


# --- interventions -------------------------------------------------------------------------


def test_position_ids():
    enc = encode_texts(load_tokenizer(), make_texts(2), 64)
    t = enc[0]
    n = len(t.input_ids)
    assert position_ids("none", t, n + 3, 0).tolist() == list(range(n + 3))
    assert not position_ids("zero_pos", t, n + 3, 0).any()
    shuffled = position_ids("shuffle_pos", t, n + 3, 0)
    assert sorted(shuffled[:n]) == list(range(n)) and shuffled[n:].tolist() == [n, n + 1, n + 2]
    assert shuffled[:n].tolist() != list(range(n))
    assert np.array_equal(shuffled, position_ids("shuffle_pos", t, n + 3, 0))
    assert not np.array_equal(shuffled, position_ids("shuffle_pos", t, n + 3, 1))
    with pytest.raises(HomogError, match="unknown intervention"):
        position_ids("rotate", t, n, 0)


def test_interventions_change_positions_only(tiny, tmp_path):
    texts = make_texts(4)
    recs = run_tiny(tiny, texts, extract_config(), ["none", "zero_pos", "shuffle_pos"], tmp_path)
    assert len({r["run_id"] for r in recs}) == 3
    lm = {
        iv: read_outputs(tmp_path / iv)["layer_metrics"].set_index(
            ["variant", "sample_id", "layer", "metric"]
        )["value"]
        for iv in ("none", "zero_pos", "shuffle_pos")
    }
    # the embedding layer does not see positions (RoPE acts inside attention)
    for iv in ("zero_pos", "shuffle_pos"):
        np.testing.assert_allclose(lm[iv].xs(0, level="layer"), lm["none"].xs(0, level="layer"))
        assert not np.allclose(lm[iv].xs(2, level="layer"), lm["none"].xs(2, level="layer"))
    # zero_pos keeps the causal mask: the last token is attended only by itself (mass 1/n^2
    # under uniform rows), never like a bidirectional model; the first token gets the most
    heads = read_outputs(tmp_path / "zero_pos")["attention_heads"]
    first = heads[heads.metric == "attn_first"]["mean"].to_numpy()
    last = heads[heads.metric == "attn_last"]["mean"].to_numpy()
    assert (first > last).all()
    # with all positions equal, RoPE is the identity: the result equals running the model
    # without rotary embeddings, i.e. the same model with position 0 everywhere by hand
    t = encode_texts(tiny.tokenizer, texts.iloc[:1], 64)[0]
    ids = torch.tensor(t.input_ids)[None]
    with torch.no_grad():
        hf = tiny.model(
            input_ids=ids,
            position_ids=torch.zeros_like(ids),
            attention_mask=torch.ones_like(ids),
            output_hidden_states=True,
        )
    x = hf.hidden_states[2][0].double().numpy()
    ref = svd_reference(x)
    assert lm["zero_pos"][(t.variant, t.sample_id, 2, "erank")] == pytest.approx(ref["erank"])


def test_zero_pos_keeps_the_causal_mask(tiny):
    """Under zero_pos a token still sees only its prefix: extending a text leaves the
    vectors of its first tokens unchanged at every layer."""
    texts = pd.DataFrame(
        {
            "variant": ["a", "b"],
            "sample_id": ["x", "x"],
            "text": ["the movie was great", "the movie was great and long"],
        }
    )
    enc = encode_texts(tiny.tokenizer, texts, 64)
    plan = plan_samples(enc, 1000, 10, 0, True)
    ex = Extractor(tiny, extract_config())
    try:
        for iv in ("zero_pos", "shuffle_pos"):
            res = ex.run_batch(enc, iv, plan)
            short = res.tokens[:, res.token_index == 0].astype(float)
            long = res.tokens[:, res.token_index == 1].astype(float)[:, : short.shape[1]]
            if iv == "zero_pos":
                np.testing.assert_allclose(short, long, atol=2e-3)
            else:  # shuffled positions differ between the two texts: the prefix changes
                assert not np.allclose(short[-1], long[-1], atol=2e-3)
    finally:
        ex.close()


# --- resume --------------------------------------------------------------------------------


def test_resume_after_interruption_gives_identical_output(tiny, tmp_path, monkeypatch):
    texts = make_texts(7)
    cfg = extract_config(shard_texts=3, batch_tokens=60)
    run_tiny(tiny, texts, cfg, ["shuffle_pos"], tmp_path / "a")

    calls = {"n": 0}
    original = Extractor.start_batch

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Extractor, "start_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_tiny(tiny, texts, cfg, ["shuffle_pos"], tmp_path / "b")
    assert not (tmp_path / "b" / "shuffle_pos").exists()  # nothing a next stage could read
    work = list((tmp_path / ".b.work").iterdir())
    assert len(work) == 1 and list(work[0].glob("shard_*.npz"))
    assert not list(work[0].glob(".*tmp"))  # the interrupted shard left no partial file
    monkeypatch.setattr(Extractor, "start_batch", original)
    done = len(list(work[0].glob("shard_*.npz")))
    logs = []
    run_tiny(tiny, texts, cfg, ["shuffle_pos"], tmp_path / "b", log=logs.append)
    assert any(f"{done} of" in m for m in logs)
    assert not (tmp_path / ".b.work").exists()  # work dir cleaned up
    a, b = read_outputs(tmp_path / "a/shuffle_pos"), read_outputs(tmp_path / "b/shuffle_pos")
    for name in ("layer_metrics", "attention_profile", "attention_heads", "dataset_spectra"):
        pd.testing.assert_frame_equal(a[name], b[name])
    assert a["vectors"].keys() == b["vectors"].keys()
    for k in a["vectors"]:
        np.testing.assert_array_equal(a["vectors"][k], b["vectors"][k])


# --- outputs -------------------------------------------------------------------------------


def test_output_contract(tiny, tmp_path):
    texts = make_texts(6, variants=("original", "front", "end", "control"))
    cfg = extract_config(sample_tokens=25, pooled_texts=4)
    (rec,) = run_tiny(tiny, texts, cfg, ["none"], tmp_path)
    out = read_outputs(tmp_path / "none")
    run = json.loads((tmp_path / "none" / "run.json").read_text())
    for key in (
        "run_id",
        "model",
        "model_source",
        "n_layers",
        "d_model",
        "n_heads",
        "dtype",
        "device",
        "intervention",
        "config_json",
        "homog_version",
        "created_at",
        "n_texts",
        "n_truncated",
        "timings",
    ):
        assert key in run
    assert json.loads(run["config_json"])["extract"]["max_tokens"] == 64
    L, H = tiny.n_layers, tiny.n_heads
    lm = out["layer_metrics"]
    assert list(lm.columns) == ["run_id", "variant", "sample_id", "layer", "metric", "value"]
    n_hidden = len(hidden_metric_names(cfg.token_sets, cfg.peer_metrics))
    # + one n_tokens row per text at layer 0 (issue 29)
    assert len(lm) == 24 * ((L + 1) * n_hidden + L * (3 + len(TEXT_METRICS)) + 1)
    assert lm[lm.metric == "attn_first"].layer.min() == 1
    ntok = lm[lm.metric == "n_tokens"].set_index(["variant", "sample_id"])
    assert len(ntok) == 24 and (ntok.layer == 0).all()
    enc = tiny.tokenizer(list(texts.text), add_special_tokens=True, return_special_tokens_mask=True)
    for (v, sid), ids, special in zip(
        zip(texts.variant, texts.sample_id, strict=True),
        enc["input_ids"],
        enc["special_tokens_mask"],
        strict=True,
    ):  # the metric tokens: after the 64-token cut, without the tokenizer's special tokens
        assert ntok.loc[(v, sid), "value"] == min(len(ids), 64) - sum(special[:64])
    prof = out["attention_profile"]
    assert list(prof.columns) == ["run_id", "variant", "layer", "head", "bin", "mass"]
    sums = prof.groupby(["variant", "layer", "head"])["mass"].sum()
    np.testing.assert_allclose(sums, 1.0, rtol=1e-5)
    heads = out["attention_heads"]
    assert set(heads.n) == {6} and len(heads) == 4 * L * H * 3
    spectra = out["dataset_spectra"]
    assert set(spectra.pooling) == {"mean", "last"} and spectra.value.notna().all()
    v = out["vectors"]
    for variant in ("original", "front", "end", "control"):
        assert v[f"tokens__{variant}"].shape == (L + 1, 25, tiny.d_model)
        assert v[f"tokens__{variant}"].dtype == np.float32
        assert v[f"pooled_mean__{variant}"].dtype == np.float32
        assert v[f"pooled_mean__{variant}"].shape == (L + 1, 4, tiny.d_model)
        assert len(v[f"sample_ids__{variant}"]) == 4
    # pooled vectors equal the mean of the text's metric tokens: check one against tokens
    assert rec["output_bytes"] < 3e6
    ma = out["massive_activations"]
    assert list(ma.columns) == [
        "run_id",
        "variant",
        "layer",
        "rank",
        "position",
        "feature",
        "token_id",
        "n",
        "share",
        "mean_abs",
        "max_abs",
        "sign",
    ]
    assert set(ma["rank"]) == {1, 2, 3} and ma.groupby(["variant", "layer"]).size().max() == 3
    assert (ma["n"] <= 6).all() and ma["mean_abs"].gt(0).all()


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "   \n\t "])
def test_empty_text_is_named(tiny, tmp_path, bad):
    texts = make_texts(3)
    texts.loc[2, "text"] = bad
    name = f"{texts.loc[2, 'variant']}/{texts.loc[2, 'sample_id']}"
    with pytest.raises(HomogError, match=name):
        run_tiny(tiny, texts, extract_config(), ["none"], tmp_path)


def test_bad_tables(tmp_path):
    from homog.extract import read_texts

    with pytest.raises(HomogError, match="lacks column"):
        read_texts(make_texts(2).drop(columns="sample_id"))
    with pytest.raises(HomogError, match="repeats"):
        read_texts(pd.concat([make_texts(2), make_texts(2)]))
    with pytest.raises(HomogError, match="empty"):
        read_texts(make_texts(2).iloc[:0])


def test_truncation_counted(tiny, tmp_path):
    texts = make_texts(4)
    logs = []
    (rec,) = run_tiny(
        tiny, texts, extract_config(max_tokens=8), ["none"], tmp_path, log=logs.append
    )
    n_long = sum(len(tiny.tokenizer(t)["input_ids"]) > 8 for t in texts["text"])
    assert rec["n_truncated"] == n_long > 0
    assert any(f"{n_long} of 8 texts truncated" in m for m in logs)
    lm = read_outputs(tmp_path / "none")["layer_metrics"]
    assert lm.sample_id.nunique() == 4  # truncated texts are kept, not dropped


def test_nan_in_hidden_states_names_the_text(tmp_path):
    lm = load_model(TINY, device="cpu")
    texts = make_texts(3)
    victim = texts.iloc[3]
    token = lm.tokenizer(victim["text"])["input_ids"][0]  # "front" prefix token
    with torch.no_grad():
        lm.embed.weight[token] = float("inf")
    with pytest.raises(HomogError, match=f"{victim['variant']}/{victim['sample_id']}"):
        run_tiny(lm, texts, extract_config(), ["none"], tmp_path)
    assert not (tmp_path / "none").exists()


def cli(args, tmp_path):
    return CliRunner().invoke(main, ["extract", "--params", str(ROOT / "params.yaml"), *args])


def test_cli_unknown_key_lists_valid_keys(tmp_path):
    result = cli(["--model", "llama-99b", "--out", str(tmp_path)], tmp_path)
    assert result.exit_code == 1
    assert "unknown model key 'llama-99b'" in result.output
    assert "smollm2-135m" in result.output and "gemma3-270m" in result.output


def test_cli_missing_path_and_texts(tmp_path):
    texts = tmp_path / "t.parquet"
    make_texts(2).to_parquet(texts)
    result = cli(
        ["--model", "hf:/no/such/model", "--texts", str(texts), "--out", str(tmp_path / "o")],
        tmp_path,
    )
    assert result.exit_code == 1 and "/no/such/model does not exist" in result.output
    result = cli(
        [
            *("--model", "random:tiny-llama", "--texts", str(tmp_path / "none.parquet")),
            *("--out", str(tmp_path / "o")),
        ],
        tmp_path,
    )
    assert result.exit_code == 1 and "none.parquet not found" in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a CPU machine")
def test_cli_cuda_absent(tmp_path):
    texts = tmp_path / "t.parquet"
    make_texts(2).to_parquet(texts)
    result = cli(
        [
            "--model",
            "random:tiny-llama",
            "--device",
            "cuda",
            "--texts",
            str(texts),
            "--out",
            str(tmp_path / "o"),
        ],
        tmp_path,
    )
    assert result.exit_code == 1 and "CUDA is not available" in result.output


def test_cli_runs_tiny_model(tmp_path):
    texts = tmp_path / "t.parquet"
    make_texts(3).to_parquet(texts)
    result = cli(
        [
            "--model",
            "random:tiny-gemma",
            "--device",
            "cpu",
            "--texts",
            str(texts),
            "--out",
            str(tmp_path / "o"),
            "--intervention",
            "zero_pos",
            "--no-progress",
        ],
        tmp_path,
    )
    assert result.exit_code == 0, result.output
    lm = pd.read_parquet(tmp_path / "o" / "zero_pos" / "layer_metrics.parquet")
    # twonn_id may be NaN at the embedding layer: repeated words are duplicate points there
    defined = (lm.metric != "mean_cosine") & ~(lm.metric.str.startswith("twonn") & (lm.layer == 0))
    assert lm.value[defined].map(math.isfinite).all()


# --- the package face ----------------------------------------------------------------------


def test_package_face_imports_no_torch():
    """`import homog.extract` (and the `homog extract` command module, which takes its
    option lists from it) pulls in neither torch nor Ray; heavy names resolve on first use."""
    code = textwrap.dedent(
        """
        import sys
        import homog.extract, homog.cli.extract
        from homog.extract import ENGINES, INTERVENTIONS, ExtractConfig, extract_runner
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "ray"))
        print("HEAVY", heavy)
        homog.extract.Extractor  # lazily imported now
        print("TORCH", "torch" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "HEAVY []" in out.stdout and "TORCH True" in out.stdout
    with pytest.raises(AttributeError, match="no_such_name"):
        homog.extract.no_such_name  # noqa: B018
