"""The demo database's newer rows: the probe tables (``probe_metrics``, ``lm_sentiment``),
the U-shape's band contrasts (``key_ends - key_mid``) and the sentence tables
(``sentence_metrics``, ``sentence_contrasts``), a few synthetic rows per run, so the docs'
example queries and the report's sections have data to show.

The numbers are made up (seeded), like the rest of :mod:`homog.store.demo`.
"""

from __future__ import annotations

import duckdb
import numpy as np

from homog.stats.margins import scope_words
from homog.stats.settings import StatsSettings

VARIANTS = ("original", "key_first")


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    """Insert ``rows`` (dicts by column name; a column left out is NULL) into ``table``."""
    import pandas as pd

    frame = pd.DataFrame(rows).astype(object)
    frame = frame.where(frame.notna(), None)
    con.register("demo_rows", frame)
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM demo_rows")
    con.unregister("demo_rows")


def _probe_levels(model: str, variant: str, rng: np.random.Generator, n_layers: int) -> list:
    """The level rows of one model and variant: probe accuracy and margin per layer, the
    zero-shot accuracy and AUC."""
    base = {"model": model, "intervention": "none", "kind": "level", "variant": variant, "n": 40}
    rows = []
    for layer in range(n_layers + 1):
        acc = float(min(0.95, 0.5 + 0.1 * layer + rng.normal(0, 0.02)))
        for metric, value in (("accuracy", acc), ("margin", 2 * acc - 1)):
            rows.append(
                {
                    **base,
                    "scheme": "train_original",
                    "layer": layer,
                    "metric": metric,
                    "value": value,
                    "ci_low": value - 0.05,
                    "ci_high": value + 0.05,
                }
            )
    zs = float(0.7 + rng.normal(0, 0.02))
    auc = zs + 0.08  # the log-odds' ROC AUC against the label
    for metric, value, low, high in (
        ("accuracy", zs, zs - 0.1, zs + 0.1),
        ("lm_auc", auc, auc - 0.08, auc + 0.07),
    ):
        rows.append(
            {
                **base,
                "scheme": "zero_shot",
                "metric": metric,
                "value": value,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return rows


def _answers(model: str, variant: str, rng: np.random.Generator) -> list[dict]:
    """Four zero-shot answers (lm_sentiment rows) of one model and variant."""
    rows = []
    for i, label in enumerate(("pos", "neg", "pos", "neg")):
        odds = float(rng.normal(0.5 if label == "pos" else -0.5, 0.5))
        margin = odds if label == "pos" else -odds
        rows.append(
            {
                "model": model,
                "intervention": "none",
                "variant": variant,
                "sample_id": f"s{i:04d}",
                "label": label,
                "log_odds": odds,
                "margin": margin,
                "correct": margin > 0,
                "n_prompt_tokens": 60,
                "truncated": False,
            }
        )
    return rows


def fill_probe(con: duckdb.DuckDBPyConnection, *, seed: int, n_layers: int = 4) -> None:
    """probe_metrics (probe accuracy and margin per layer, zero-shot accuracy and AUC, one
    slope) and lm_sentiment (four texts per variant) for every model of ``runs``."""
    rng = np.random.default_rng(seed)
    rows = con.execute("SELECT DISTINCT model FROM runs ORDER BY model").fetchall()
    metrics, answers = [], []
    for (model,) in rows:
        for variant in VARIANTS:
            metrics += _probe_levels(model, variant, rng, n_layers)
            answers += _answers(model, variant, rng)
        metrics.append(
            {
                "model": model,
                "intervention": "none",
                "scheme": "train_original",
                "kind": "slope",
                "baseline": "original",
                "band": "late",
                "metric": "probe_margin_per_erank",
                "value": 0.01,
                "ci_low": -0.02,
                "ci_high": 0.04,
                "p_value": 0.5,
                "p_holm": 0.9,
                "n": 40,
                "verdict": "equivalent",
                "family": "primary",
                "sesoi": 0.05,
                "sesoi_basis": "0.1 x the original's mean |margin| (demo)",
                "eq_ci_low": -0.015,
                "eq_ci_high": 0.035,
            }
        )
    _insert(con, "probe_metrics", metrics)
    _insert(con, "lm_sentiment", answers)


def fill_u_shape(con: duckdb.DuckDBPyConnection, *, seed: int) -> None:
    """contrasts rows key_ends - key_mid of erank per unchanged run and band, with the margin
    columns (sesoi, sesoi_basis, eq_ci_low, eq_ci_high, baseline_sd, depth_change)."""
    rng = np.random.default_rng(seed + 1)
    runs = con.execute(
        "SELECT run_id FROM runs WHERE coalesce(intervention, 'none') = 'none' ORDER BY run_id"
    ).fetchall()
    rows = []
    for (run_id,) in runs:
        for band in ("layer0", "early", "middle", "late", "final"):
            d = 0.0 if band == "layer0" else float(rng.normal(0, 0.05))
            rows.append(
                (
                    run_id,
                    "key_ends",
                    "key_mid",
                    None,
                    "erank",
                    d,
                    d - 0.1,
                    d + 0.1,
                    1.0 if band == "layer0" else 0.5,
                    1.0,
                    band,
                    None,
                    40,
                    2.0,
                    f"0.1 x the original's between-text SD {scope_words(band)} (20)",
                    d - 0.08,
                    d + 0.08,
                    20.0,
                    20.0,
                )
            )
    con.executemany(
        "INSERT INTO contrasts (run_id, variant_a, variant_b, layer, metric, mean_diff, ci_low, "
        "ci_high, p_value, p_holm, band, baseline_run_id, n, sesoi, sesoi_basis, eq_ci_low, "
        "eq_ci_high, baseline_sd, depth_change) VALUES (" + ", ".join(["?"] * 19) + ")",
        rows,
    )


# the position family's orders of 5 sentences: key sentence 1; sentence 4, which key_control
# moves as far as the key moves (is_control); sentence 3, the same-place control (an interior
# one, as synth picks it), which ctrl_* moves to the key sentence's places (is_ctrl)
FAMILY = {
    "original": [0, 1, 2, 3, 4],
    "key_first": [1, 0, 2, 3, 4],
    "key_mid": [0, 2, 1, 3, 4],
    "key_last": [0, 2, 3, 4, 1],
    "key_control": [4, 0, 1, 2, 3],
    "ctrl_first": [3, 0, 1, 2, 4],
    "ctrl_mid": [0, 1, 3, 2, 4],
    "ctrl_last": [0, 1, 2, 4, 3],
}
KEY, CONTROL, CTRL = 1, 4, 3


def fill_sentences(con: duckdb.DuckDBPyConnection, *, seed: int, n_texts: int = 8) -> None:
    """sentence_metrics of n_texts reviews of 5 sentences for the first two unchanged runs
    (FAMILY's orders; two keep the demo quick to build), each value rising
    towards the edges with depth, and their sentence_contrasts (homog.stats.sentences, a small
    bootstrap)."""
    import pandas as pd

    from homog.stats.sentences import SENTENCE_CONTRAST_COLUMNS, run_sentence_contrasts

    rng = np.random.default_rng(seed + 2)
    runs = con.execute(
        "SELECT run_id, n_layers FROM runs WHERE coalesce(intervention, 'none') = 'none' "
        "ORDER BY run_id LIMIT 2"
    ).fetchall()
    settings = StatsSettings(
        n_boot=200,
        ci=0.95,
        seed=seed,
        test="sign_flip",
        n_perm=200,
        sesoi=0.1,
        sesoi_basis="depth",
        alpha=0.05,
    )
    for run_id, n_layers in runs:
        frame = pd.DataFrame(_sentence_rows(run_id, int(n_layers), n_texts, rng))
        con.register("demo_sentences", frame)
        con.execute("INSERT INTO sentence_metrics BY NAME SELECT * FROM demo_sentences")
        con.unregister("demo_sentences")
        sc = run_sentence_contrasts(frame, run_id, settings)
        sc = sc[SENTENCE_CONTRAST_COLUMNS].astype(object).where(sc.notna(), None)
        con.register("demo_sc", sc)
        con.execute("INSERT INTO sentence_contrasts BY NAME SELECT * FROM demo_sc")
        con.unregister("demo_sc")


def _sentence_rows(run_id: str, n_layers: int, n_texts: int, rng: np.random.Generator) -> list:
    """sentence_metrics rows of ``n_texts`` reviews of 5 sentences in every family order:
    each value rising towards the edges with depth (FAMILY's orders)."""
    from homog.extract.sentences import SENT_HIDDEN

    rows = []
    for t in range(n_texts):
        base = rng.normal(size=(5, len(SENT_HIDDEN) + 1))
        for variant, order in FAMILY.items():
            for k, sent in enumerate(order):
                edge = abs(k - 2) / 2  # 0 in the middle, 1 at either end
                where = {
                    "run_id": run_id,
                    "variant": variant,
                    "sample_id": f"s{t:03d}",
                    "sentence": sent,
                    "sent_index": k,
                    "rel_position": k / 4,
                    "n_tokens": 6,
                    "is_key": sent == KEY,
                    "is_control": sent == CONTROL,
                    "is_ctrl": sent == CTRL,
                }
                for layer in range(n_layers + 1):
                    depth = layer / n_layers
                    for j, metric in enumerate((*SENT_HIDDEN, "sent_attn_in")):
                        if metric == "sent_attn_in" and layer == 0:
                            continue
                        value = base[sent, j] * 0.1 + 0.5 + 0.2 * depth
                        if layer > 0:
                            value += 0.02 * edge * depth + 0.005 * rng.normal()
                        rows.append({**where, "layer": layer, "metric": metric, "value": value})
    return rows
