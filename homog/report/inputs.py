"""What the report reads: the frames of the database (one run per model and intervention) and
the claims computed from them; ``homog claims`` and the README's answer read the same."""

from __future__ import annotations

from typing import Any

import pandas as pd

from homog.config import Params
from homog.report.claims import claims_table
from homog.report.concentration import DOSES_SQL
from homog.report.cost_doses import COST_SQL
from homog.report.posenc_view import POSENC_SQL
from homog.report.sensitivity import with_sensitivity
from homog.report.sentences_view import CURVE_SQL as SENTENCE_CURVE_SQL
from homog.report.sentences_view import DOSE_SQL as SENTENCE_DOSE_SQL
from homog.stats.primary_names import check_primary
from homog.store.bundle import frame_sql
from homog.store.current import use_runs

CLAIM_COLUMNS = [
    "claim",
    "statement",
    "metric",
    "scope",
    "effect",
    "ci_low",
    "ci_high",
    "p_holm",
    "n",
    "verdict",
    "note",
]


# the per-text rows the claims compute from (claim 1's progression, bootstrapped over texts):
# a bundle (homog publish) keeps this slice of layer_metrics
ERANK_SQL = (
    "SELECT run_id, variant, sample_id, layer, metric, value FROM layer_metrics "
    "WHERE metric IN ('erank', 'erank__no_sink', 'erank__standardized') "
    "AND variant = 'original'"
)
# how many reviews, texts and sentences were followed through the layers, per model
FOLLOWED_SQL = (
    "SELECT r.model, count(DISTINCT s.sample_id) AS reviews, "
    "count(DISTINCT (s.variant, s.sample_id)) AS texts, "
    "count(DISTINCT (s.variant, s.sample_id, s.sentence)) AS sentences "
    "FROM sentence_metrics s JOIN runs r USING (run_id) GROUP BY r.model ORDER BY 1"
)
# what a bundle keeps of the per-text tables: slices (table -> rows) and the readers'
# aggregates (name -> (table, SELECT)), stored whole (homog.store.bundle)
BUNDLE_SLICES = {"layer_metrics": ERANK_SQL}
BUNDLE_FRAMES = {
    "sentence_curve": ("sentence_metrics", SENTENCE_CURVE_SQL),
    "sentence_dose": ("sentence_metrics", SENTENCE_DOSE_SQL),
    "sentence_followed": ("sentence_metrics", FOLLOWED_SQL),
}


def _frame(con: Any, sql: str) -> pd.DataFrame:
    return con.execute(sql).fetch_df()


def bundled(con: Any, name: str) -> pd.DataFrame:
    """The frame ``name`` of BUNDLE_FRAMES: a bundle's stored result, else its query."""
    return _frame(con, frame_sql(con, name, BUNDLE_FRAMES[name][1]))


def tables_of(con: Any) -> set[str]:
    """The names of the database's tables."""
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def read_inputs(con: Any) -> dict[str, pd.DataFrame]:
    """The frames the report needs, read with plain SELECTs (empty frames when absent), of
    one run per model and intervention (:func:`homog.store.current.use_runs`: the newest;
    the connection keeps seeing only those runs); ``older_runs``: the runs left out."""
    tables = tables_of(con)
    older = list(use_runs(con).older) if "runs" in tables else []
    columns = ["run_id", "model", "intervention", "created_at", "instead"]

    def get(table: str, sql: str) -> pd.DataFrame:
        return _frame(con, sql) if table in tables else pd.DataFrame()

    return {
        "older_runs": pd.DataFrame(older, columns=columns),
        "runs": get("runs", "SELECT * FROM runs ORDER BY model, intervention, run_id"),
        "contrasts": get("contrasts", "SELECT * FROM contrasts"),
        "erank": get("layer_metrics", ERANK_SQL),
        "texts": get(
            "texts",
            "SELECT dataset, variant, count(*) AS n_texts, avg(bertscore_f1) AS bertscore_f1 "
            "FROM texts GROUP BY dataset, variant ORDER BY dataset, variant",
        ),
        "mauve": get(
            "mauve_scores",
            "SELECT r.model, m.variant, m.layer, m.mauve FROM mauve_scores m "
            "JOIN runs r USING (run_id) WHERE coalesce(r.intervention, 'none') = 'none'",
        ),
        # claim 4's classifiers (the stats stage's separability table; absent in older databases)
        "separability": get("separability", "SELECT * FROM separability"),
        # the probe stage's table (Open Question 1; homog probe)
        "probe": get("probe_metrics", "SELECT * FROM probe_metrics"),
        "doses": get("intervention_doses", DOSES_SQL),  # homog.report.concentration
        "cost": get("intervention_cost", COST_SQL),  # homog.report.cost_doses
        # the moved sentence (homog.report.sentences_view)
        "sentences": get("sentence_contrasts", "SELECT * FROM sentence_contrasts"),
        "sentence_curve": bundled(con, "sentence_curve")
        if "sentence_metrics" in tables
        else pd.DataFrame(),
        "sentence_dose": bundled(con, "sentence_dose")
        if "sentence_metrics" in tables
        else pd.DataFrame(),
        "posenc": get("posenc_results", POSENC_SQL),
        "ablation": get(
            "head_ablation",
            "SELECT pe, task, layer, head, avg(drop) AS drop FROM head_ablation "
            "GROUP BY pe, task, layer, head ORDER BY pe, task, layer, head",
        ),
    }


def claims_of(data: dict[str, pd.DataFrame], params: Params) -> pd.DataFrame:
    """The claims frame of :func:`read_inputs`' frames with the ``stats:`` settings of
    ``params`` (the report's and the README answer's one source); an empty frame with the
    claims columns when the database has no contrasts or runs."""
    check_primary(params.stats.primary)
    if data["contrasts"].empty or data["runs"].empty:
        return pd.DataFrame(columns=["model", *CLAIM_COLUMNS])
    st = params.stats
    opts = {"alpha": st.alpha, "n_boot": st.n_boot, "ci": st.ci, "seed": params.seed}
    opts.update(test=st.test, n_perm=st.n_perm, primary=st.primary, sesoi=st.sesoi)
    tables = (data["contrasts"], data["runs"], data["erank"])
    frame = claims_table(*tables, separability=data["separability"], **opts)
    return with_sensitivity(frame, st.alpha, (st.sesoi_basis, st.sesoi))
