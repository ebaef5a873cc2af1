"""MAUVE: the torch fast path agrees with mauve-text's faiss path given the same clustering."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from homog.config import as_params
from homog.io import HomogError
from homog.mauve import (
    MauveConfig,
    _pca_batch,
    consecutive_layer_mauve,
    mauve_faiss,
    mauve_from_labels,
    mauve_stage,
    mauve_torch_batch,
)

# Given identical cluster assignments the two paths run the same histogram and divergence-curve
# code, so they must agree to rounding; on real data their k-means solutions may differ a little.
SAME_CLUSTERING_TOL = 1e-9
REAL_DATA_TOL = 0.05


class FixedKmeans:
    """Stands in for faiss.Kmeans inside mauve-text: assigns the labels the test chose."""

    labels: np.ndarray = np.zeros(0, dtype=np.int64)

    def __init__(self, *args, **kwargs):
        self.index = self

    def train(self, data):
        assert len(data) == len(self.labels)

    def search(self, data, k):
        return np.zeros((len(data), 1)), self.labels.reshape(-1, 1)


@pytest.mark.parametrize("skew", [0.0, 0.3, 0.8])
def test_paths_agree_on_the_same_clustering(monkeypatch, skew):
    """Identical cluster assignments fed to both paths -> the same score (to rounding)."""
    import importlib

    import homog.mauve as hm

    # `mauve.compute_mauve` the attribute is the function; the module is in sys.modules.
    cm = importlib.import_module("mauve.compute_mauve")

    k, n = 6, 120
    rng = np.random.default_rng(int(skew * 10))
    p, q = rng.normal(size=(n, 16)), rng.normal(size=(n, 16))
    lp, lq = rng.integers(0, k, n), rng.integers(0, k, n)
    lq[: int(skew * n)] = 0
    both = np.concatenate([lq, lp])  # mauve-text stacks [q; p]
    monkeypatch.setattr(FixedKmeans, "labels", both)
    monkeypatch.setattr(cm.faiss, "Kmeans", FixedKmeans)
    monkeypatch.setattr(
        hm, "kmeans_torch", lambda x, k, **kw: __import__("torch").as_tensor(both)[None]
    )
    cfg = MauveConfig(kmeans_max_clusters=k)
    assert cfg.n_clusters(n) == k
    reference = mauve_faiss(p, q, cfg)  # mauve.compute_mauve itself, with these labels
    fast = mauve_torch_batch(p[None], q[None], cfg)[0]
    assert fast == pytest.approx(reference, abs=SAME_CLUSTERING_TOL)
    assert mauve_from_labels(lp, lq, k) == pytest.approx(reference, abs=SAME_CLUSTERING_TOL)
    if skew == 0.8:
        assert reference < 0.5  # the test would be vacuous if every score were ~1


def test_torch_kmeans_recovers_separated_clusters():
    """On unambiguous data the torch k-means finds the true partition (up to relabelling)."""
    import torch

    from homog.mauve import kmeans_torch

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(5, 8)) * 10
    truth = rng.integers(0, 5, 300)
    x = centers[truth] + rng.normal(size=(300, 8)) * 0.01
    labels = kmeans_torch(torch.as_tensor(x[None], dtype=torch.float32), 5, n_redo=5, seed=1)[
        0
    ].numpy()
    pairs = set(zip(truth.tolist(), labels.tolist(), strict=True))
    assert len(pairs) == 5


def test_pca_matches_sklearn():
    import torch
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import normalize

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 60, 40)).astype(np.float32) @ rng.normal(size=(40, 40)).astype(
        np.float32
    )
    got = _pca_batch(torch.as_tensor(x), 0.9).numpy()
    for b in range(2):
        z = normalize(x[b])
        pca = PCA().fit(z)
        keep = int(np.argmax(np.cumsum(pca.explained_variance_ratio_) >= 0.9)) + 1
        want = pca.transform(z)[:, :keep]
        assert np.allclose(np.abs(got[b, :, :keep]), np.abs(want), atol=1e-4)
        assert np.allclose(got[b, :, keep:], 0)


def drifting_tokens(n_layers=5, s=160, d=48, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=(n_layers + 1, s, d)).astype(np.float32)
    steps[:, :, :4] *= 6  # a few dominant directions, like real hidden states
    return np.cumsum(steps, axis=0)


def test_paths_agree_on_drifting_vectors():
    tokens = drifting_tokens()
    cfg = dict(max_points=160, kmeans_num_redo=3, kmeans_max_iter=200)
    faiss_scores = consecutive_layer_mauve(tokens, MauveConfig(path="faiss", **cfg))
    torch_scores = consecutive_layer_mauve(tokens, MauveConfig(path="torch", **cfg))
    assert faiss_scores.shape == (5,)
    assert np.abs(faiss_scores - torch_scores).max() < REAL_DATA_TOL


def test_bad_config_and_input():
    with pytest.raises(HomogError, match="mauve.path"):
        as_params({"mauve": {"path": "gpu"}})
    with pytest.raises(HomogError, match="unknown key.*pca.*valid mauve keys"):
        as_params({"mauve": {"pca": 1}})
    with pytest.raises(HomogError, match="too small"):
        consecutive_layer_mauve(np.zeros((1, 10, 4)), MauveConfig())


def test_stage_writes_one_row_per_layer_pair(tmp_path):
    d = tmp_path / "data" / "extract" / "m1" / "none"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": "r1"}))
    tok = drifting_tokens(n_layers=3, s=40, d=8).astype(np.float16)
    np.savez(d / "vectors.npz", tokens__original=tok, tokens__front=tok[::-1].copy())
    params = {
        "models": {"m1": {"source": "random:tiny-llama"}},
        "mauve": {"max_points": 40, "kmeans_num_redo": 1},
        "extract": {"device": "cpu"},
    }
    mauve_stage(params, "m1", root=tmp_path)
    out = pd.read_parquet(tmp_path / "data" / "mauve" / "m1.parquet")
    assert len(out) == 2 * 3 and set(out["variant"]) == {"original", "front"}
    assert out["mauve"].between(0, 1).all() and (out["run_id"] == "r1").all()
    with pytest.raises(HomogError, match="unknown model"):
        mauve_stage(params, "m2", root=tmp_path)
