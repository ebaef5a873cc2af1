"""The host pipeline (``homog.extract.host_spectra``) and the batched GPU solver's fallback,
on the CPU: the pipelined extraction equals the serial one bit for bit, the order of layers
and batches holds under a slow solver, at most one batch is in flight, the host copies stay
within their budget, and a missing cusolverDnXsyevBatched gives one clear warning."""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np
import pytest
import torch
from conftest import IMDB_SAMPLE, ROOT, extract_config
from test_attn_blockwise import synthetic_texts

import homog.metrics.eigensolver_gpu as eg
from homog.extract import Extractor, plan_samples
from homog.extract.batches import PendingBatch, run_batches
from homog.extract.host_spectra import HostSpectra, host_mode
from homog.extract.plan import make_batches
from homog.metrics.pending import PendingSpectra
from homog.metrics.sets import hidden_metric_names, hidden_metrics, hidden_pending

FIELDS = ("metrics", "heads", "profile", "pooled_mean", "pooled_last", "tokens", "top")


def extract(lm, texts, mode: str, batch_tokens: int = 120) -> list:
    """The BatchResults of ``texts`` in batches of ``batch_tokens`` under ``mode``."""
    plan = plan_samples(texts, 10, 2, 0, True)
    ex = Extractor(lm, extract_config(batch_tokens=batch_tokens), host_spectra=mode)
    try:
        assert ex.host_spectra == mode
        return run_batches(ex, make_batches(texts, batch_tokens), "none", plan)
    finally:
        ex.close()


def test_pipelined_extraction_equals_serial_bit_for_bit(tiny):
    """Three batches of the tiny LLaMA with every token set and peer metric: pipelined (the
    host solves batch i while batch i + 1's forward runs) equals serial exactly, and both
    equal the inline path (spectra solved in the hooks) to rounding."""
    texts = synthetic_texts([40, 33, 40, 7, 25, 40, 12, 38, 40, 3])
    serial = extract(tiny, texts, "serial")
    piped = extract(tiny, texts, "pipelined")
    inline = extract(tiny, texts, "inline")
    assert len(serial) == len(piped) == len(inline) >= 3
    for s, p, i in zip(serial, piped, inline, strict=True):
        np.testing.assert_array_equal(s.indices, p.indices)
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(s, name), getattr(p, name), err_msg=name)
        assert s.metrics.dtype == np.float64 and np.isfinite(s.metrics).mean() > 0.9
        np.testing.assert_allclose(s.metrics, i.metrics, rtol=1e-10, atol=1e-12)


def test_deferred_layers_equal_the_inline_ones(tiny, monkeypatch):
    """``deferred`` (batched's mode: several layers' matrices solved in one call, here with
    HOMOG_CPU_EIGENSOLVER=torch so they are one stack each, and a cap of two layers) gives
    the inline metrics to rounding, each layer in its own slot; calls are fewer than layers."""
    import homog.extract.host_spectra as hs

    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
    monkeypatch.setattr(hs, "DEFER_BYTES", 1)  # flush at every layer ...
    texts = synthetic_texts([40, 33, 7, 25])
    inline = extract(tiny, texts, "inline")
    one = extract(tiny, texts, "deferred")
    calls = []
    real = hs.DeviceBatch.flush
    monkeypatch.setattr(hs.DeviceBatch, "flush", lambda self: calls.append(1) or real(self))
    monkeypatch.setattr(hs, "DEFER_BYTES", 2**40)  # ... or once per batch
    together = extract(tiny, texts, "deferred")
    assert len(calls) == len(together)
    for i, o, t in zip(inline, one, together, strict=True):
        np.testing.assert_allclose(o.metrics, i.metrics, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(t.metrics, i.metrics, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(t.pooled_mean, i.pooled_mean)


def test_stacked_layers_equal_the_inline_ones(tiny, monkeypatch):
    """``batched``'s layer stack (``LayerStack``: several layers' hidden-state metrics in one
    ``hidden_pending`` call) gives the inline metrics to rounding and every other output
    exactly, each layer in its own slot: with two layers per stack (a partial last one), all
    layers in one, and none (HOMOG_GPU_STACK_MIB=0: one call per layer, as before)."""
    import homog.extract.host_spectra as hs

    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
    monkeypatch.setattr("homog.extract.plan.PAD_SLACK", float("inf"))  # padded rows: one batch
    texts = synthetic_texts([40, 33, 7, 25])
    big = 200  # one batch: every stack has the same (B, n, d)
    inline = extract(tiny, texts, "inline", big)
    calls: list[list[int]] = []
    real = hs.LayerStack.flush

    def flush(self):
        calls.append(list(self.layers))
        real(self)

    monkeypatch.setattr(hs.LayerStack, "flush", flush)
    per_layer = len(texts) * 40 * tiny.model.config.hidden_size * 8  # one layer's float64 copy
    runs = {}
    for name, cap in [("two", 2 * per_layer), ("all", 2**40)]:
        monkeypatch.setattr(hs, "stack_bytes", lambda cap=cap: cap)
        calls.clear()
        runs[name] = extract(tiny, texts, "deferred", big)
        layers = [layer for call in calls for layer in call]
        assert layers == list(range(tiny.n_layers + 1))  # each layer once, in order
        sizes = [len(c) for c in calls if c]
        if name == "two":
            assert sizes == [2] * ((tiny.n_layers + 1) // 2) + [1] * ((tiny.n_layers + 1) % 2)
        else:
            assert sizes == [tiny.n_layers + 1]
    monkeypatch.undo()
    monkeypatch.setattr("homog.extract.plan.PAD_SLACK", float("inf"))
    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
    monkeypatch.setenv("HOMOG_GPU_STACK_MIB", "0")
    runs["none"] = extract(tiny, texts, "deferred", big)
    for name, run in runs.items():
        for got, want in zip(run, inline, strict=True):
            np.testing.assert_allclose(got.metrics, want.metrics, rtol=1e-12, atol=1e-14)
            for field in FIELDS[1:]:
                np.testing.assert_array_equal(
                    getattr(got, field), getattr(want, field), err_msg=f"{name}: {field}"
                )


def test_stacked_layers_name_the_layer_and_text_with_nan(tiny, monkeypatch):
    """NaN in one text's hidden states from layer 2 on: the stacked extraction names layer 2
    and that text, as the inline one does (never a later layer or another text)."""
    from homog.errors import HomogError

    monkeypatch.setattr("homog.extract.plan.PAD_SLACK", float("inf"))  # the 3 texts: one batch

    def poison(_module, _inputs, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = hidden.clone()
        hidden[1, 3, :] = float("nan")
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = tiny.layers[1].register_forward_hook(poison)  # block 1's output: hidden layer 2
    texts = synthetic_texts([40, 33, 7])
    try:
        messages = []
        for mode in ("inline", "deferred"):
            with pytest.raises(HomogError, match="NaN/inf in hidden states") as err:
                extract(tiny, texts, mode, 200)
            messages.append(str(err.value))
    finally:
        handle.remove()
    assert messages[0] == messages[1]
    assert "at layer 2 for text(s) v/t1 " in messages[1]


def test_a_bad_stack_size_is_named(tiny, monkeypatch):
    from homog.errors import HomogError

    monkeypatch.setenv("HOMOG_GPU_STACK_MIB", "lots")
    with pytest.raises(HomogError, match=r"HOMOG_GPU_STACK_MIB='lots' is not a whole number"):
        Extractor(tiny, extract_config(), host_spectra="deferred")


def test_order_holds_under_a_slow_solver_and_one_batch_is_in_flight(tiny, monkeypatch):
    """A solver that sleeps (longest for the first layer of each batch): the metrics still
    equal the serial run's exactly, layer by layer and batch by batch; batch i + 1's forward
    starts before batch i's spectra are solved (overlap), and batch i's result is complete
    before batch i + 2's forward starts (at most one batch in flight)."""
    texts = synthetic_texts([30, 30, 30, 30, 30, 30, 30, 30])
    serial = extract(tiny, texts, "serial", batch_tokens=60)
    log: list[tuple[str, int]] = []
    lock = threading.Lock()
    real_solve, real_start, real_result = (
        PendingSpectra.solve,
        Extractor.start_batch,
        PendingBatch.result,
    )
    count = {"solve": 0, "start": 0}
    layers = tiny.n_layers + 1

    def slow_solve(self):
        with lock:
            k = count["solve"]
            count["solve"] += 1
        time.sleep(0.15 if k % layers == 0 else 0.02)
        out = real_solve(self)
        with lock:
            log.append(("solved", k // layers))
        return out

    def start(self, *a, **kw):
        with lock:
            i = count["start"]
            count["start"] += 1
            log.append(("start", i))
        pending = real_start(self, *a, **kw)
        pending.index = i
        return pending

    def result(self):
        out = real_result(self)
        with lock:
            log.append(("done", self.index))
        return out

    monkeypatch.setattr(PendingSpectra, "solve", slow_solve)
    monkeypatch.setattr(Extractor, "start_batch", start)
    monkeypatch.setattr(PendingBatch, "result", result)
    piped = extract(tiny, texts, "pipelined", batch_tokens=60)
    assert len(piped) == 4 and count["solve"] == 4 * layers
    for s, p in zip(serial, piped, strict=True):
        np.testing.assert_array_equal(s.metrics, p.metrics)
    where = {event: k for k, event in enumerate(log)}
    last_solved = {b: max(k for k, e in enumerate(log) if e == ("solved", b)) for b in range(4)}
    for b in range(3):
        assert where[("start", b + 1)] < last_solved[b], log  # the host works beside it
    for b in range(2):
        assert where[("done", b)] < where[("start", b + 2)], log  # one batch in flight


def test_host_copies_stay_within_the_budget(monkeypatch):
    """With a budget of two layers' matrices, a third waits in ``submit`` until the host
    thread has solved one; one layer larger than the budget still goes through alone."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 2, 12, 16, dtype=torch.float64, generator=gen)
    mask = torch.ones(6, 2, 12, dtype=torch.bool)
    pendings = [hidden_pending(x[i], mask[i])[0] for i in range(6)]
    size = pendings[0].grams[0].numel() * 8
    names = hidden_metric_names()
    host = HostSpectra(names, pipelined=True, budget_bytes=2 * size)
    seen: list[int] = []
    real_solve = PendingSpectra.solve

    def slow_solve(self):
        seen.append(host._waiting)
        time.sleep(0.05)
        return real_solve(self)

    monkeypatch.setattr(PendingSpectra, "solve", slow_solve)
    try:
        futures = [host.submit(p) for p in pendings]
        got = [f.result() for f in futures]
    finally:
        host.close()
    assert max(seen) <= 2 * size and host._waiting == 0
    for i, g in enumerate(got):
        want = hidden_metrics(x[i], mask[i])[0]
        torch.testing.assert_close(g, torch.stack([want[m] for m in names], -1), rtol=0, atol=0)
    alone = HostSpectra(names, pipelined=False, budget_bytes=size // 2)
    try:
        assert alone.submit(pendings[0]).shape == (2, len(names))
    finally:
        alone.close()


def test_host_mode_follows_the_setting_on_a_gpu_only(monkeypatch):
    """HOMOG_GPU_EIGENSOLVER=host pipelines a GPU run, host-serial waits, batched (the
    default) solves several layers at once, device in each hook; on the CPU the spectra are
    always solved in the hooks."""
    pairs = [("host", "pipelined"), ("host-serial", "serial"), ("batched", "deferred")]
    for value, mode in [*pairs, ("device", "inline")]:
        monkeypatch.setenv("HOMOG_GPU_EIGENSOLVER", value)
        assert host_mode("cuda:0") == mode and host_mode("cpu") == "inline"
    monkeypatch.delenv("HOMOG_GPU_EIGENSOLVER")
    assert host_mode("cuda") == "deferred"
    with pytest.raises(ValueError, match="host_spectra='later'"):
        Extractor.__init__(object.__new__(Extractor), None, extract_config(), "later")


def missing(message: str):
    class Missing:
        name = "missing"

        def __init__(self):
            raise ModuleNotFoundError(message)

    return Missing


def test_batched_solver_falls_back_with_one_clear_warning(monkeypatch):
    """A torch whose cuSOLVER lacks cusolverDnXsyevBatched (simulated: no nvmath-python,
    and a libcusolver without the symbol): ``batched`` is unavailable, the message names the
    function, each binding's reason, the CUDA needed and the extra, and it is given once."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "cuda", "12.4")

    class OldLibrary:
        name = "ctypes"

        def __init__(self):
            raise eg.Unavailable("its libcusolver (version 11601) lacks it")

    monkeypatch.setattr(
        eg, "BINDINGS", {"nvmath": missing("No module named 'nvmath'"), "ctypes": OldLibrary}
    )
    eg._binding.cache_clear()
    eg.warn_fallback_once.cache_clear()
    try:
        assert not eg.batched_available()
        msg = eg.fallback_message()
        for part in (
            "HOMOG_GPU_EIGENSOLVER=batched",
            "cusolverDnXsyevBatched is not available",
            "nvmath: ModuleNotFoundError: No module named 'nvmath'",
            "ctypes: Unavailable: its libcusolver (version 11601) lacks it",
            "torch's eigvalsh (device) instead",
            "CUDA >= 12.6.2; torch has CUDA 12.4",
            "pip install homog[gpu]",
        ):
            assert part in msg, (part, msg)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                eg.warn_fallback_once()
        assert [str(w.message) for w in caught] == [msg]
        assert caught[0].category is RuntimeWarning
    finally:
        eg._binding.cache_clear()
        eg.warn_fallback_once.cache_clear()


def test_batched_solver_without_cuda_says_so():
    """On a CPU-only torch the batched solver is unavailable for that reason."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    eg._binding.cache_clear()
    assert not eg.batched_available()
    assert "torch has no CUDA device here" in eg.fallback_message()
    eg._binding.cache_clear()


def test_a_few_large_matrices_are_split_over_the_threads_bit_for_bit(monkeypatch):
    """Three 160 x 160 matrices on 4 threads (fewer than 2 per thread): each goes to a worker
    of its own (a GPU run's host thread gets one layer at a time), with the values of one
    call; small matrices stay in one call."""
    import homog.metrics.eigensolver as es

    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 160, 170, dtype=torch.float64, generator=gen)
    gram = x @ x.mT
    whole = es._eigvalsh_numpy(gram)
    threads: list[str] = []
    real = es._eigvalsh_numpy
    monkeypatch.setattr(
        es, "_eigvalsh_numpy", lambda g: threads.append(threading.current_thread().name) or real(g)
    )
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    torch.testing.assert_close(es.eigvalsh(gram), whole, rtol=0, atol=0)
    assert len(threads) == 3 and threading.current_thread().name not in threads
    threads.clear()
    es.eigvalsh(gram[:, :20, :20])
    assert threads == [threading.current_thread().name]


@pytest.mark.slow
@pytest.mark.skipif(not IMDB_SAMPLE.exists(), reason="no shared IMDB sample")
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_stacked_layers_on_real_reviews(model, monkeypatch):
    """Real reviews (up to 256 tokens) through both embedded models: the layer stack (two
    layers per stack) gives the inline metrics to rounding and the vectors and top
    activations exactly, gemma3's massive activations (beyond float16) included."""
    import pandas as pd

    import homog.extract.host_spectra as hs
    from homog.config import load_config
    from homog.corpus.stage import clean_text
    from homog.extract.plan import encode_texts
    from homog.models import load_model, resolve_source

    monkeypatch.setenv("HOMOG_CPU_EIGENSOLVER", "torch")
    raw = pd.read_json(IMDB_SAMPLE, lines=True)["text"].head(8).map(clean_text)
    df = pd.DataFrame(
        {"variant": "original", "sample_id": [f"r{i}" for i in range(8)], "text": raw}
    )
    params = load_config(ROOT / "params.yaml")
    lm = load_model(resolve_source(model, params.model_sources()), device="cpu", attention=True)
    texts = encode_texts(lm.tokenizer, df, 256)
    inline = extract(lm, texts, "inline", 2048)
    n = max(len(t.input_ids) for t in texts[:8])
    monkeypatch.setattr(hs, "stack_bytes", lambda: 2 * 8 * n * lm.model.config.hidden_size * 8)
    stacked = extract(lm, texts, "deferred", 2048)
    names = list(inline[0].metric_names)
    for got, want in zip(stacked, inline, strict=True):
        np.testing.assert_allclose(got.metrics, want.metrics, rtol=1e-9, atol=1e-12)
        for field in FIELDS[1:]:
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field), field)
    top1 = np.concatenate([r.metrics for r in inline])[..., names.index("act_top1")]
    if model == "gemma3-270m":
        assert top1.max() > float(torch.finfo(torch.float16).max)
