"""The demo database's newer rows: the probe tables (``probe_metrics``, ``lm_sentiment``),
the U-shape's band contrasts (``key_ends - key_mid``) and the sentence tables
(``sentence_metrics``, ``sentence_contrasts``), a few synthetic rows per run, so the docs'
example queries and the report's sections have data to show.

The numbers are made up (seeded), like the rest of :mod:`homog.store.demo`.
"""

from __future__ import annotations

import duckdb
import numpy as np

VARIANTS = ("original", "key_first")


def fill_probe(con: duckdb.DuckDBPyConnection, *, seed: int, n_layers: int = 4) -> None:
    """probe_metrics (probe accuracy and margin per layer, zero-shot accuracy and AUC, one
    slope) and lm_sentiment (four texts per variant) for every model of ``runs``."""
    rng = np.random.default_rng(seed)
    rows = con.execute("SELECT DISTINCT model FROM runs ORDER BY model").fetchall()
    models = [m for (m,) in rows]
    metrics, answers = [], []
    for model in models:
        for variant in VARIANTS:
            for layer in range(n_layers + 1):
                acc = float(min(0.95, 0.5 + 0.1 * layer + rng.normal(0, 0.02)))
                for metric, value in (("accuracy", acc), ("margin", 2 * acc - 1)):
                    metrics.append((model, "none", "train_original", "level", None, variant,
                                    layer, None, metric, value, value - 0.05, value + 0.05, None,
                                    None, 40, None))  # fmt: skip
            zs = float(0.7 + rng.normal(0, 0.02))
            metrics.append((model, "none", "zero_shot", "level", None, variant, None, None,
                            "accuracy", zs, zs - 0.1, zs + 0.1, None, None, 40, None))  # fmt: skip
            auc = zs + 0.08  # the log-odds' ROC AUC against the label
            metrics.append((model, "none", "zero_shot", "level", None, variant, None, None,
                            "lm_auc", auc, auc - 0.08, auc + 0.07, None, None, 40,
                            None))  # fmt: skip
            for i, label in enumerate(("pos", "neg", "pos", "neg")):
                odds = float(rng.normal(0.5 if label == "pos" else -0.5, 0.5))
                margin = odds if label == "pos" else -odds
                answers.append((model, "none", variant, f"s{i:04d}", label, odds, margin,
                                margin > 0, 60, False))  # fmt: skip
        # level rows have no verdict columns (family, sesoi, sesoi_basis, eq_ci_low, eq_ci_high)
        metrics = [m + (None,) * 5 if len(m) == 16 else m for m in metrics]
        metrics.append((model, "none", "train_original", "slope", "original", None, None, "late",
                        "probe_margin_per_erank", 0.01, -0.02, 0.04, 0.5, 0.9, 40, "equivalent",
                        "primary", 0.05, "0.1 x the original's mean |margin| (demo)", -0.015,
                        0.035))  # fmt: skip
    con.executemany(f"INSERT INTO probe_metrics VALUES ({', '.join(['?'] * 21)})", metrics)
    con.executemany(f"INSERT INTO lm_sentiment VALUES ({', '.join(['?'] * 10)})", answers)


def fill_u_shape(con: duckdb.DuckDBPyConnection, *, seed: int) -> None:
    """contrasts rows key_ends - key_mid of erank per unchanged run and band, with the margin
    columns (sesoi, sesoi_basis, eq_ci_low, eq_ci_high, baseline_sd, depth_change)."""
    from homog.stats.margins import scope_words

    rng = np.random.default_rng(seed + 1)
    runs = con.execute(
        "SELECT run_id FROM runs WHERE coalesce(intervention, 'none') = 'none' ORDER BY run_id"
    ).fetchall()
    rows = []
    for (run_id,) in runs:
        for band in ("layer0", "early", "middle", "late", "final"):
            d = 0.0 if band == "layer0" else float(rng.normal(0, 0.05))
            rows.append((run_id, "key_ends", "key_mid", None, "erank", d, d - 0.1, d + 0.1,
                         1.0 if band == "layer0" else 0.5, 1.0, band, None, 40, 2.0,
                         f"0.1 x the original's between-text SD {scope_words(band)} (20)",
                         d - 0.08, d + 0.08, 20.0, 20.0))  # fmt: skip
    con.executemany(
        "INSERT INTO contrasts (run_id, variant_a, variant_b, layer, metric, mean_diff, ci_low, "
        "ci_high, p_value, p_holm, band, baseline_run_id, n, sesoi, sesoi_basis, eq_ci_low, "
        "eq_ci_high, baseline_sd, depth_change) VALUES (" + ", ".join(["?"] * 19) + ")",
        rows,
    )


FAMILY = {"original": [0, 1, 2, 3, 4], "key_first": [1, 0, 2, 3, 4], "key_mid": [0, 2, 1, 3, 4],
          "key_last": [0, 2, 3, 4, 1], "key_control": [4, 0, 1, 2, 3]}  # fmt: skip


def fill_sentences(con: duckdb.DuckDBPyConnection, *, seed: int, n_texts: int = 8) -> None:
    """sentence_metrics of n_texts reviews of 5 sentences for the first two unchanged runs
    (key sentence 1, control sentence 4; two keep the demo quick to build), each value rising
    towards the edges with depth, and their sentence_contrasts (homog.stats.sentences, a small
    bootstrap)."""
    from types import SimpleNamespace

    import pandas as pd

    from homog.extract.sentences import SENT_HIDDEN
    from homog.stats.sentences import SENTENCE_CONTRAST_COLUMNS, run_sentence_contrasts

    rng = np.random.default_rng(seed + 2)
    runs = con.execute(
        "SELECT run_id, n_layers FROM runs WHERE coalesce(intervention, 'none') = 'none' "
        "ORDER BY run_id LIMIT 2"
    ).fetchall()
    stats = SimpleNamespace(n_boot=200, ci=0.95, test="sign_flip", n_perm=200, sesoi=0.1,
                            sesoi_basis="depth", alpha=0.05)  # fmt: skip
    for run_id, n_layers in runs:
        rows = []
        for t in range(n_texts):
            base = rng.normal(size=(5, len(SENT_HIDDEN) + 1))
            for variant, order in FAMILY.items():
                for k, sent in enumerate(order):
                    edge = abs(k - 2) / 2  # 0 in the middle, 1 at either end
                    for layer in range(int(n_layers) + 1):
                        depth = layer / n_layers
                        for j, metric in enumerate((*SENT_HIDDEN, "sent_attn_in")):
                            if metric == "sent_attn_in" and layer == 0:
                                continue
                            value = base[sent, j] * 0.1 + 0.5 + 0.2 * depth
                            if layer > 0:
                                value += 0.02 * edge * depth + 0.005 * rng.normal()
                            rows.append((run_id, variant, f"s{t:03d}", sent, k, k / 4, 6,
                                         sent == 1, sent == 4, layer, metric, value))  # fmt: skip
        frame = pd.DataFrame(rows, columns=["run_id", "variant", "sample_id", "sentence",
                                            "sent_index", "rel_position", "n_tokens", "is_key",
                                            "is_control", "layer", "metric", "value"])  # fmt: skip
        con.register("demo_sentences", frame)
        con.execute("INSERT INTO sentence_metrics BY NAME SELECT * FROM demo_sentences")
        con.unregister("demo_sentences")
        sc = run_sentence_contrasts(frame, run_id, stats=stats, seed=seed)
        sc = sc[SENTENCE_CONTRAST_COLUMNS].astype(object).where(sc.notna(), None)
        con.register("demo_sc", sc)
        con.execute("INSERT INTO sentence_contrasts BY NAME SELECT * FROM demo_sc")
        con.unregister("demo_sc")
