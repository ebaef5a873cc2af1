"""The positional-encoding lab beside arXiv 2505.13027: accuracy over seeds with its spread,
the paper's number, and, where they differ, how this lab's setup differs from the paper's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from homog.report.document import Section, Table
from homog.report.figures import ablation_figure

# Accuracy reported by arXiv 2505.13027 (test split, %): (encoding, task) -> accuracy
PAPER_POSENC = {
    ("rope", "distance"): 92.64,
    ("rope", "count"): 69.43,
    ("mla", "distance"): 88.34,
    ("mla", "count"): 97.41,
    ("nope", "count"): 77.69,
}
PAPER_SETUP = (
    "6 layers, 16 heads, d_model 256, FFN 512, sequences up to 120 tokens padded to 128, "
    "batch 512, 100 epochs (docs/design.md)"
)
POSENC_SQL = (
    "SELECT pe, task, avg(accuracy) AS accuracy, stddev_samp(accuracy) AS sd, "
    "min(accuracy) AS lo, max(accuracy) AS hi, count(*) AS seeds, max(epochs) AS epochs, "
    "max(n_params) AS n_params FROM posenc_results WHERE split = 'test' "
    "GROUP BY pe, task ORDER BY pe, task"
)
# a difference from the paper worth a sentence: more than this many points, and more than
# two SDs over seeds when there are several
DIFF_POINTS = 2.0


def setup_text(config: dict[str, Any] | None, frame: pd.DataFrame) -> str:
    """This lab's setup in words: the resolved preset when known, else what the database
    records (epochs, parameters)."""
    if config is not None:
        m, t, c = config["model"], config["train"], config["count"]
        d = config["distance"]
        return (
            f"preset `{config['preset']}`: {m['n_layer']} layers, {m['n_head']} heads, "
            f"d_model {m['n_embd']}, FFN {m['d_ff']}, sequences of {d['seq_len']} (distance) / "
            f"{c['seq_len']} (count) tokens, {d['n_samples']} / {c['n_samples']} samples, "
            f"batch {t['batch_size']}, {t['epochs']} epochs"
        )
    epochs = sorted(set(frame["epochs"].dropna().astype(int)))
    sizes = sorted(set(frame["n_params"].dropna().astype(int)))
    epochs = "-".join(map(str, dict.fromkeys([epochs[0], epochs[-1]]))) if epochs else ""
    params = "-".join(f"{p:,}" for p in dict.fromkeys([sizes[0], sizes[-1]])) if sizes else ""
    return (
        f"a preset this report cannot name (no params file): {epochs or 'n/a'} epochs, "
        f"{params or 'n/a'} parameters"
    )


def posenc_rows(frame: pd.DataFrame) -> tuple[list[list[Any]], list[str]]:
    """Table rows (accuracies in %) and the 'rope count: 95.1 vs 69.43' list of differences."""
    rows, differ = [], []
    for r in frame.itertuples():
        acc = 100 * float(r.accuracy)
        sd = 100 * float(r.sd) if r.sd is not None and math.isfinite(float(r.sd)) else math.nan
        paper = PAPER_POSENC.get((r.pe, r.task))
        rows.append(
            [
                r.pe,
                r.task,
                acc,
                sd,
                100 * float(r.lo),
                100 * float(r.hi),
                int(r.seeds),
                paper,
                None if paper is None else acc - paper,
            ]
        )
        if paper is not None:
            gap = abs(acc - paper)
            if gap > DIFF_POINTS and (math.isnan(sd) or gap > 2 * sd):
                differ.append(f"{r.pe} {r.task} {acc:.1f}% vs {paper:g}%")
    return rows, differ


def posenc_section(
    posenc: pd.DataFrame, ablation: pd.DataFrame, figdir: Path, config: dict[str, Any] | None
) -> Section:
    """The accuracy table beside the paper's, one sentence on the setup where they differ, and
    the head-ablation figures."""
    sec = Section("Positional-encoding lab (arXiv 2505.13027)")
    if posenc.empty:
        sec.paragraphs.append("No posenc_results in the database.")
        return sec
    rows, differ = posenc_rows(posenc)
    sec.tables.append(
        Table(
            [
                "encoding",
                "task",
                "test accuracy % (mean)",
                "SD over seeds",
                "min",
                "max",
                "seeds",
                "paper %",
                "difference (points)",
            ],
            rows,
            "test accuracy over seeds, beside the paper's numbers where it gives them",
        )
    )
    if differ:
        sec.after.append(
            f"Where this lab differs from the paper ({'; '.join(differ)}), the setups differ: "
            f"this lab trained {setup_text(config, posenc)}, the paper {PAPER_SETUP}; so these "
            "numbers test the encodings at a smaller scale, not the paper's exact figures."
        )
    if (posenc["seeds"] < 2).any():
        sec.after.append(
            "Rows with one seed have no spread (SD n/a): run more seeds (posenc.train.seeds) "
            "before reading a difference between encodings."
        )
    for task in sorted(set(ablation["task"])) if not ablation.empty else []:
        rows_t = ablation[ablation["task"] == task].to_dict("records")
        path = ablation_figure(rows_t, task, figdir / f"ablation_{task}.png")
        sec.figures.append((path, f"Head ablation, {task} task (mean accuracy drop over seeds)"))
    return sec
