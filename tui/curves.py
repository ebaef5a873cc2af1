"""Compare's data, UI-free: the query its worker runs (the layer curves and the contrasts
against the original) and the names of a metric in each token set.
"""

from __future__ import annotations

from typing import Any

from homog.metrics.registry import base_metric, metric_name, split_metric
from tui.core import as_rows
from tui.messages import CurveKey, CurvesLoaded

# a metric name in each token set: the registry's grammar (<metric>__<set>)
split_token_set = split_metric


def with_token_set(metric: str, token_set: str) -> str:
    """The name of ``metric`` in ``token_set`` ('erank', 'no_sink' -> 'erank__no_sink')."""
    return metric_name(base_metric(metric), token_set)


CONTRASTS_SQL = """
    SELECT run_id, variant_a, variant_b, layer, mean_diff, ci_low, ci_high, p_value, p_holm,
           band, baseline_run_id, n
    FROM contrasts
    WHERE metric = ? AND run_id IN (SELECT unnest(?)) AND band IS NULL
      AND baseline_run_id IS NULL AND variant_b = 'original'
"""


def fetch_curves(con: Any, key: CurveKey, generation: int = 0) -> CurvesLoaded:
    """Worker body: the layer curves of every variant for (metric, run_ids), a lookup on the
    materialised ``layer_summary``, and the per-layer contrasts against the original (for the
    differences view and the floor of p). ``generation`` travels back with the result (a
    result from before a reload is dropped)."""
    from homog.store import layer_curves

    metric, run_ids = key
    rows = layer_curves(con, metric, run_ids=list(run_ids))
    try:
        cur = con.execute(CONTRASTS_SQL, [metric, list(run_ids)])
        cols = [d[0] for d in cur.description]
        contrasts = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    except Exception:  # noqa: BLE001 - a database without contrasts: curves only
        contrasts = []
    return CurvesLoaded(key, as_rows(rows), generation, contrasts)
