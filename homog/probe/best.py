"""The probe's best layer, with an accuracy it was not chosen on (docs/probe.md).

Picking the layer of highest out-of-fold accuracy and reporting that accuracy reads the same
numbers twice: the maximum of many noisy accuracies is biased upward. Here each outer fold's
texts are scored at the layer that reads the *other* folds' originals best (highest mean
accuracy; ties to the higher mean margin, then the lower layer), so no text's accuracy took
part in choosing its layer. Pure: the probe's per-text frame in, rows out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from homog.stats.paired_tests import bootstrap_ci
from homog.stats.settings import StatsSettings

BEST_METRIC = "best_accuracy"


def _choose(correct: Any, margin: Any) -> int:
    """The layer of highest mean accuracy over the rows of ``correct`` [text x layer]; ties to
    the higher mean margin, then the lower layer."""
    acc, mar = correct.mean(axis=0), margin.mean(axis=0)
    order = sorted(correct.columns, key=lambda la: (-acc[la], -mar[la], la))
    return int(order[0])


def crossfit_rows(probe: Any, settings: StatsSettings) -> list[dict[str, Any]]:
    """Per intervention one ``best_accuracy`` level row of the originals under
    ``train_original``: value the accuracy of each text at the layer chosen on the other
    folds, with its bootstrap CI over reviews; ``layer`` the layer most folds chose."""
    sel = probe[(probe["scheme"] == "train_original") & (probe["variant"] == "original")]
    rows = []
    for iv, g in sel.groupby("intervention", sort=True):
        correct = g.pivot_table(index="sample_id", columns="layer", values="correct").dropna()
        margin = g.pivot_table(index="sample_id", columns="layer", values="margin")
        margin = margin.reindex(index=correct.index, columns=correct.columns)
        fold = g.groupby("sample_id")["fold"].first().reindex(correct.index).to_numpy()
        folds = sorted(set(fold))
        if len(folds) < 2 or correct.empty:
            continue
        chosen = {f: _choose(correct[fold != f], margin[fold != f]) for f in folds}
        got = np.array([correct.iloc[i][chosen[f]] for i, f in enumerate(fold)], dtype=float)
        low, high = bootstrap_ci(
            got[None, :], n_boot=settings.n_boot, ci=settings.ci, seed=settings.seed
        )
        layers = list(chosen.values())
        rows.append(
            {
                "intervention": iv,
                "scheme": "train_original",
                "variant": "original",
                "kind": "level",
                "metric": BEST_METRIC,
                "layer": max(set(layers), key=lambda la: (layers.count(la), -la)),
                "value": float(got.mean()),
                "ci_low": float(low[0]),
                "ci_high": float(high[0]),
                "n": len(got),
            }
        )
    return rows
