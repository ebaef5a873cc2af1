"""The helpers of bench/peers.py and bench/cost_curves.py (issue 15 items 2 and 3).

Fast checks of the pieces whose numbers the benchmarks print: the peers' maths against a
direct numpy computation, the token windows, the agreement check, the peak-memory probe, and
the cost-curve table and plot. The end-to-end runs (fresh processes, real models) are slow.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import _bench_util  # noqa: E402
import _peer_tools  # noqa: E402
import cost_curves  # noqa: E402
import peers  # noqa: E402
from _peer_tools import METRICS, expert_maths, peer_maths  # noqa: E402


def _numpy_metrics(x: np.ndarray) -> tuple[float, float, float]:
    """erank, mev, resultant_length of one (n, d) matrix, straight from the definitions."""
    s = np.linalg.svd(x.astype(np.float64), compute_uv=False)
    p = s / s.sum()
    p = p[p > 0]
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    return (
        float(np.exp(-(p * np.log(p)).sum())),
        float(s[0] ** 2 / (s**2).sum()),
        float(np.linalg.norm(unit.mean(0))),
    )


def test_peer_maths_matches_the_definitions() -> None:
    rng = np.random.default_rng(0)
    b, n, d, heads, layers = 2, 7, 5, 3, 2
    hidden = [torch.from_numpy(rng.normal(size=(b, n, d)).astype(np.float32)) for _ in range(3)]
    # rank-1 layer: erank must be 1 and mev 1
    hidden[1][1] = torch.outer(torch.arange(1.0, n + 1), torch.ones(d))
    logits = rng.normal(size=(layers, b, heads, n, n))
    logits = np.where(np.tril(np.ones((n, n))) > 0, logits, -np.inf)
    attn = [torch.from_numpy(np.exp(a) / np.exp(a).sum(-1, keepdims=True)) for a in logits]
    out = peer_maths(hidden, attn)
    assert out["erank"].shape == (b, 3) and out["attn_first"].shape == (b, layers, heads)
    for layer, h in enumerate(hidden):
        for i in range(b):
            want = _numpy_metrics(h[i].numpy())
            got = [out[m][i, layer] for m in ("erank", "mev", "resultant_length")]
            np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(out["erank"][1, 1], 1.0, atol=1e-6)
    np.testing.assert_allclose(out["mev"][1, 1], 1.0, atol=1e-9)
    # attn_first = (1/n) sum_i A_i0, written as a loop
    for layer in range(layers):
        for i in range(b):
            for h in range(heads):
                want = sum(attn[layer][i, h, q, 0].item() for q in range(n)) / n
                assert out["attn_first"][i, layer, h] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("n", [7, 9])  # n <= d: the n x n Gram; n > d: the d x d one
def test_expert_maths_matches_the_per_text_loop(n: int) -> None:
    """The expert peer's batched Gram + eigvalsh equals peer_maths' per-text SVD loop."""
    rng = np.random.default_rng(1)
    b, d, heads, layers = 3, 8, 2, 3
    hidden = [torch.from_numpy(rng.normal(size=(b, n, d)).astype(np.float32)) for _ in range(4)]
    hidden[2][0] = torch.outer(torch.arange(1.0, n + 1), torch.ones(d))  # rank 1
    attn = [torch.from_numpy(rng.dirichlet(np.ones(n), size=(b, heads, n))) for _ in range(layers)]
    want = peer_maths(hidden, attn)
    got = {m: v.numpy() for m, v in expert_maths(hidden, attn).items()}
    for m in METRICS:
        assert got[m].shape == want[m].shape, m
        np.testing.assert_allclose(got[m], want[m], rtol=1e-9, atol=1e-6, err_msg=m)


def test_hf_fast_agrees_with_hf_on_a_random_llama() -> None:
    """The expert peer and hf on one tiny random model, same ids, in this process (CPU)."""
    import argparse

    args = argparse.Namespace(
        model="random:tiny-llama",
        params="params.yaml",
        dtype="float32",
        device="cpu",
        batch_tokens=64,
    )
    ids = np.random.default_rng(2).integers(3, 200, size=(3, 32))
    fast_work, _ = _peer_tools.hf_fast_work(args)
    ref_work, _ = _peer_tools.hf_work(args)
    fast, ref = fast_work(ids), ref_work(ids)
    rows, failures = peers.agreement({"hf": ref, "hf-fast": fast}, rtol=1e-6, atol=1e-9)
    assert not failures, failures
    assert {r["metric"] for r in rows} == set(METRICS)
    assert fast["erank"].shape == (3, ref["erank"].shape[1]) and fast["erank"].dtype == np.float64


class _WordTokenizer:
    """Token id = word length, separator "\\n\\n" -> [0]: enough to check the windows."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        assert add_special_tokens is False
        if text == "\n\n":
            return {"input_ids": [0]}
        return {"input_ids": [len(w) for w in text.split()]}


def test_token_windows_concatenate_reviews_in_order() -> None:
    reviews = ["a bb ccc", "dddd", "ee f gggggg hh", "x y"]
    ids = _bench_util.token_windows(_WordTokenizer(), reviews, n_texts=2, tokens=5)
    # text 0: "a bb ccc" + sep + "dddd" = [1,2,3,0,4]; text 1 starts at the next review
    assert ids.tolist() == [[1, 2, 3, 0, 4], [2, 1, 6, 2, 0]]
    assert ids.dtype == np.int64
    with pytest.raises(SystemExit, match="ran out after 1 texts"):
        _bench_util.token_windows(_WordTokenizer(), reviews, n_texts=2, tokens=9)


def test_token_windows_from_the_imdb_sample() -> None:
    if not _bench_util.IMDB_SAMPLE.exists():
        pytest.skip("shared IMDB sample absent")
    reviews = _bench_util.read_reviews(_bench_util.IMDB_SAMPLE)
    assert len(reviews) == 2000
    ids = _bench_util.token_windows(_WordTokenizer(), reviews, n_texts=3, tokens=600)
    assert ids.shape == (3, 600) and (ids[:, 0] > 0).all()


def test_agreement_flags_values_beyond_the_tolerance() -> None:
    ref = {m: np.array([[1.0, 2.0], [3.0, 4.0]]) for m in METRICS}
    close = {m: v * (1 + 1e-7) for m, v in ref.items()}
    far = {m: v.copy() for m, v in ref.items()}
    far["mev"][1, 0] = 3.01
    rows, failures = peers.agreement({"hf": ref, "a": close, "b": far}, rtol=1e-4, atol=1e-6)
    assert [r["ok"] for r in rows if r["tool"] == "a"] == ["yes"] * len(METRICS)
    assert len(failures) == 1 and failures[0].startswith("b mev")
    assert "(1, 0)" in failures[0]
    bad = next(r for r in rows if r["tool"] == "b" and r["metric"] == "mev")
    assert bad["max_abs_diff"] == pytest.approx(0.01) and bad["ok"] == "NO"


def test_peak_memory_sees_an_allocation_after_reset() -> None:
    peak = _bench_util.PeakMemory()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    del block
    peak.reset()
    if not peak.resettable:
        pytest.skip("/proc/self/clear_refs is not writable here")
    before = peak.rss_mib()
    _, figures = _bench_util.measure(lambda: np.ones(96 * 2**20 // 8).sum())
    assert figures["peak_rss_mib"] - before > 80
    assert figures["cpu_s"] >= 0 and figures["wall_s"] > 0


def _row(config: str, sweep: str, n: int, tokens: int, wall: float, cpu: float, mib: float):
    return {
        "config": config,
        "sweep": sweep,
        "threads": 1,
        "n_texts": n,
        "tokens": tokens,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": mib,
        "loaded_rss_mib": 500.0,
        "work_rss_mib": mib - 500.0,
        "status": "ok",
    }


def _curve_rows() -> list[dict]:
    return [
        _row("bare", "length", 1, 128, 1.0, 2.0, 600.0),
        _row("eager", "length", 1, 128, 1.5, 3.0, 900.0),
        _row("bare", "length", 1, 512, 3.0, 6.0, 700.0),
        _row("eager", "length", 1, 512, 4.0, 9.0, 1400.0),
        _row("bare", "count", 4, 512, 9.0, 18.0, 800.0),
        _row("eager", "count", 4, 512, 12.0, 27.0, 1600.0),
        {**_row("blockwise", "count", 4, 512, 0, 0, 0), "status": "not available"},
    ]


def test_cost_curve_table_ratios_and_csv(tmp_path: Path) -> None:
    rows = _curve_rows()
    table = cost_curves.table(rows)
    lines = table.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert "blockwise s" not in header  # no blockwise figures: no columns for them
    first = dict(zip(header, [c.strip() for c in lines[2].strip("|").split("|")], strict=True))
    assert first["eager/bare CPU"] == "1.5" and first["eager/bare MiB"] == "1.5"
    assert first["eager +MiB"] == "400"
    assert len(lines) == 2 + 3  # one row per (threads, texts, tokens)
    cost_curves.write_csv(tmp_path / "c.csv", rows)
    text = (tmp_path / "c.csv").read_text().splitlines()
    assert text[0].startswith("config,sweep,threads") and len(text) == 1 + len(rows)


@pytest.mark.slow  # matplotlib: a few seconds idle, ~40 s on the loaded 2-core machine
def test_cost_curve_plot_is_written(tmp_path: Path) -> None:
    path = tmp_path / "curves.png"
    cost_curves.plot(_curve_rows(), path, "test")
    assert path.stat().st_size > 10_000


def test_cost_curve_points_cover_both_sweeps() -> None:
    args = cost_curves.build_parser().parse_args(
        ["--lengths", "128,512", "--counts", "1,4", "--count-tokens", "512"]
    )
    pts = cost_curves.points(args)
    assert pts == [("length", 1, 128), ("length", 1, 512), ("count", 1, 512), ("count", 4, 512)]
    with pytest.raises(SystemExit, match="integers >= 1"):
        cost_curves._ints("0,4")


@pytest.mark.slow
def test_peers_end_to_end_on_a_random_llama(tmp_path: Path) -> None:
    """homog-min and hf in fresh processes on a random LLaMA agree, and the report is written."""
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "peers.py"),
            *("--model", "random:tiny-llama", "--n-texts", "2", "--tokens", "32"),
            *("--tools", "homog-min,hf", "--repeats", "1", "--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| homog-min | erank |" in proc.stdout and "NO |" not in proc.stdout
    assert (tmp_path / "peers.json").exists()


def test_table_cells_never_use_exponents_for_large_values():
    """999.7 MiB in g-format is '1e+03'; a table cell writes it whole."""
    assert _bench_util.fmt(999.7) == "1000" and _bench_util.fmt(12345.6) == "12346"
    assert _bench_util.fmt(3.14159) == "3.14" and _bench_util.fmt(1.5e-7) == "1.5e-07"
    assert _bench_util.fmt(None) == "-" and _bench_util.fmt(7) == "7"
