"""``homog report``: read the database (read-only), compute the claims, draw, write atomically."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from homog import __version__
from homog.config import Params
from homog.errors import HomogError
from homog.io import atomic_path, check_target, remove_stale
from homog.report.claims import claims_table
from homog.report.document import Section, Table, to_html, to_markdown

FORMATS = ("html", "md")
REPORT_TABLES = ("runs", "layer_metrics", "contrasts", "texts", "mauve_scores", "posenc_results",
                 "head_ablation", "attention_profile")  # fmt: skip
# erank__no_sink / erank__standardized: does the effect survive without sink tokens and rogue
# dimensions (extract.token_sets); sink_rate: where the attention sinks form (when present)
CURVE_METRICS = (
    "erank",
    "erank__no_sink",
    "erank__standardized",
    "mev",
    "attn_first",
    "sink_rate",
    "resultant_length",
)
# Accuracy reported by arXiv 2505.13027 (test split, %): (encoding, task) -> accuracy
PAPER_POSENC = {
    ("rope", "distance"): 92.64,
    ("rope", "count"): 69.43,
    ("mla", "distance"): 88.34,
    ("mla", "count"): 97.41,
    ("nope", "count"): 77.69,
}
CLAIM_COLUMNS = [
    "claim", "statement", "scope", "effect", "ci_low", "ci_high", "p_holm", "n", "verdict",
    "note",
]  # fmt: skip


def _frame(con: Any, sql: str) -> pd.DataFrame:
    return con.execute(sql).fetch_df()


def _tables(con: Any) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def read_inputs(con: Any) -> dict[str, pd.DataFrame]:
    """The frames the report needs, read with plain SELECTs (empty frames when absent)."""
    tables = _tables(con)

    def get(table: str, sql: str) -> pd.DataFrame:
        return _frame(con, sql) if table in tables else pd.DataFrame()

    return {
        "runs": get("runs", "SELECT * FROM runs ORDER BY model, intervention, run_id"),
        "contrasts": get("contrasts", "SELECT * FROM contrasts"),
        "erank": get(
            "layer_metrics",
            "SELECT run_id, variant, sample_id, layer, metric, value FROM layer_metrics "
            "WHERE metric = 'erank' AND variant = 'original'",
        ),
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
        "posenc": get(
            "posenc_results",
            "SELECT pe, task, avg(accuracy) AS accuracy, count(*) AS seeds FROM posenc_results "
            "WHERE split = 'test' GROUP BY pe, task ORDER BY pe, task",
        ),
        "ablation": get(
            "head_ablation",
            "SELECT pe, task, layer, head, avg(drop) AS drop FROM head_ablation "
            "GROUP BY pe, task, layer, head ORDER BY pe, task, layer, head",
        ),
    }


TEST_NAMES = {
    "sign_flip": "paired sign-flip permutation test of the mean",
    "wilcoxon": "Wilcoxon signed-rank",
}


def claims_section(
    claims: pd.DataFrame, alpha: float, *, ci: float = 0.95, test: str = "sign_flip"
) -> Section:
    sec = Section(
        "Claims of arXiv 2508.17126",
        paragraphs=[
            "One row per claim, model and scope. effect: the mean paired difference over texts "
            "(a - b; for claim 4 the number of layers where the metric separates the variants "
            f"in the claimed direction); CI: {ci:.0%} percentile bootstrap; p_holm: "
            f"{TEST_NAMES[test]}, Holm-corrected within its family. Verdicts at alpha = {alpha:g}: "
            "supported (p_holm < alpha and the claimed sign), reversed (p_holm < alpha, the "
            "other sign), not supported (otherwise). Rows marked (no_sink) or (standardized) "
            "repeat claim 1 on the token sets without sink tokens or with standardized "
            "features: does the effect survive?",
        ],
    )
    if claims.empty:
        sec.paragraphs.append("No contrasts in the database: run `homog stats` and `homog load`.")
    for model, cm in claims.groupby("model", sort=False):
        rows = cm[CLAIM_COLUMNS].astype(object).where(cm[CLAIM_COLUMNS].notna(), None)
        sec.tables.append(
            Table(CLAIM_COLUMNS, rows.values.tolist(), caption=model, verdict_column="verdict")
        )
    return sec


def manipulation_section(texts: pd.DataFrame, synth_report: dict[str, Any] | None) -> Section:
    sec = Section(
        "Manipulation strength",
        paragraphs=[
            "How far the variants moved the key phrases, and how much they paraphrased: the "
            "texts table of the database, and the synth stage's report.json when present."
        ],
    )
    if not texts.empty:
        sec.tables.append(
            Table(
                ["dataset", "variant", "texts", "mean BERTScore F1"],
                texts[["dataset", "variant", "n_texts", "bertscore_f1"]].values.tolist(),
            )
        )
    if synth_report:
        flat = _flatten(synth_report)
        sec.tables.append(
            Table(["synth report key", "value"], [[k, v] for k, v in flat], "synth report.json")
        )
    return sec


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        out: list[tuple[str, Any]] = []
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, list):
        return [(prefix, ", ".join(map(str, obj[:20])) + (" ..." if len(obj) > 20 else ""))]
    return [(prefix, obj)]


def posenc_section(posenc: pd.DataFrame, ablation: pd.DataFrame, figdir: Path) -> Section:
    from homog.report.figures import ablation_figure

    sec = Section("Positional-encoding lab (arXiv 2505.13027)")
    if posenc.empty:
        sec.paragraphs.append("No posenc_results in the database.")
        return sec
    rows = [
        [r.pe, r.task, 100 * r.accuracy, PAPER_POSENC.get((r.pe, r.task)), int(r.seeds)]
        for r in posenc.itertuples()
    ]
    sec.tables.append(
        Table(["encoding", "task", "test accuracy %", "paper %", "seeds"], rows,
              "mean test accuracy over seeds, beside the paper's numbers where it gives them")
    )  # fmt: skip
    for task in sorted(set(ablation["task"])) if not ablation.empty else []:
        rows_t = ablation[ablation["task"] == task].to_dict("records")
        path = ablation_figure(rows_t, task, figdir / f"ablation_{task}.png")
        sec.figures.append((path, f"Head ablation, {task} task (mean accuracy drop over seeds)"))
    return sec


def figure_sections(
    con: Any, runs: pd.DataFrame, mauve: pd.DataFrame, figdir: Path
) -> list[Section]:
    """Layer curves with CIs, MAUVE, and the attention heatmaps (two per row)."""
    from homog.plot import attention_heatmap_figure, layer_curves_figure
    from homog.report.figures import mauve_figure
    from homog.store.query import attention_profile, layer_curves, metrics

    curves = Section("Layer curves")
    present = set(metrics(con)) if not runs.empty else set()
    for metric in CURVE_METRICS:
        if metric in present:
            rows = layer_curves(con, metric)
            path = layer_curves_figure(rows, metric, figdir / f"curves_{metric}.png")
            curves.figures.append((path, f"{metric} per layer, mean over texts with 95% CI"))
    if not mauve.empty:
        path = mauve_figure(mauve.to_dict("records"), figdir / "mauve.png")
        curves.figures.append((path, "MAUVE between consecutive layers (unchanged runs)"))
    heat = Section("Attention by key position", figure_width=48)
    for run in runs[runs["intervention"].fillna("none") == "none"].itertuples():
        for variant in ("original", "front"):
            rows = attention_profile(con, run.run_id, variant)
            if rows:
                path = figdir / f"attention_{run.model}_{variant}.png".replace("/", "_")
                title = f"{run.model}, {variant}"
                attention_heatmap_figure(rows, path, title=title)
                heat.figures.append((path, f"{title}: mean over heads and texts (log colour)"))
    return [curves, heat]


def provenance_section(runs: pd.DataFrame, db: Path, command: str) -> Section:
    sec = Section("Provenance", code=command)
    cols = ["run_id", "model", "model_source", "intervention", "dtype", "device", "n_layers",
            "homog_version", "created_at"]  # fmt: skip
    if not runs.empty:
        have = [c for c in cols if c in runs.columns]
        sec.tables.append(Table(have, runs[have].astype(str).values.tolist(), "runs"))
        versions, extract = {}, {}
        for cj in runs.get("config_json", pd.Series(dtype=str)).dropna():
            try:
                conf = json.loads(cj)
            except json.JSONDecodeError:
                continue
            versions.update(conf.get("versions") or {})
            extract = extract or conf.get("extract") or {}
        if versions:
            sec.tables.append(Table(["package", "version"], sorted(versions.items()), "versions"))
        if extract:
            sec.tables.append(
                Table(["extract param", "value"], sorted(extract.items()), "extraction params")
            )
    sec.paragraphs.append(f"Database: {db}. homog {__version__}. Rebuild this report with:")
    return sec


def build_report(
    db_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    fmt: str = "html",
    params: Params | None = None,
    synth_report: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the report for the database ``db_path`` to ``out`` (HTML or Markdown).

    The database is opened read-only. ``params`` gives alpha and the bootstrap settings
    (``stats:``, top-level seed; defaults otherwise); ``synth_report`` a synth report.json to
    include. HTML embeds every figure; Markdown writes ``<out stem>_files/*.png`` beside it.
    Both are written atomically. Raises HomogError for a missing or unreadable database or
    an unknown format.
    """
    from homog.store.query import connect

    if fmt not in FORMATS:
        raise HomogError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
    params = params or Params()
    out = _check_out(Path(out), fmt)
    db = Path(db_path)
    con = connect(db)
    try:
        _check_schema(con, db)
        data = read_inputs(con)
        st = params.stats
        claims = (
            claims_table(data["contrasts"], data["runs"], data["erank"], alpha=st.alpha,
                         n_boot=st.n_boot, ci=st.ci, seed=params.seed, test=st.test,
                         n_perm=st.n_perm)
            if not data["contrasts"].empty and not data["runs"].empty
            else pd.DataFrame(columns=["model", *CLAIM_COLUMNS])
        )  # fmt: skip
        synth = None
        if synth_report is not None and Path(synth_report).exists():
            synth = json.loads(Path(synth_report).read_text())
        command = f"homog report --db {db} -o {out}" + (" --format md" if fmt == "md" else "")
        # the pid in the name: a killed report's folder is removed by the next report
        remove_stale(tempfile.gettempdir(), r"^homog-report-(\d+)-[A-Za-z0-9_]+$")
        with tempfile.TemporaryDirectory(prefix=f"homog-report-{os.getpid()}-") as tmp:
            figdir = Path(tmp)
            sections = [
                claims_section(claims, st.alpha, ci=st.ci, test=st.test),
                manipulation_section(data["texts"], synth),
                *figure_sections(con, data["runs"], data["mauve"], figdir),
                posenc_section(data["posenc"], data["ablation"], figdir),
                provenance_section(data["runs"], db, command),
            ]
            title = "homog report: token homogenization under positional bias"
            n_models = data["runs"]["model"].nunique() if len(data["runs"]) else 0
            intro = (
                f"{len(data['runs'])} runs of {n_models} models from {db}. Each claim of the "
                "paper is checked per model with the contrasts that `homog stats` computed."
            )
            _write(out, fmt, title, intro, sections, figdir)
    finally:
        con.close()
    return out


def _check_out(out: Path, fmt: str) -> Path:
    """The report's path (a symlink followed), checked before any work: a device, FIFO or
    directory there, a file in the way or an unwritable directory is a HomogError."""
    from homog.layout import writable_dir

    out = check_target(out, what="report")
    if fmt == "md":
        check_target(out.with_name(f"{out.stem}_files"), directory=True, what="report figures")
    writable_dir(out.parent, what="report")
    return out


def _check_schema(con: Any, db: Path) -> None:
    from homog.store.schema import schema_problems

    problems = schema_problems(con, REPORT_TABLES)
    if problems:
        raise HomogError(
            f"{db} is not a homog database the report can read: {'; '.join(problems)}. Rebuild "
            "it with `homog load` (or pass --db with the database `homog load` built)"
        )


def _write(out: Path, fmt: str, title: str, intro: str, sections: list[Section], figdir: Path):
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "html":
        text = to_html(title, intro, sections)
        with atomic_path(out) as tmp:
            tmp.write_text(text)
        return
    files = out.with_name(f"{out.stem}_files")
    with atomic_path(files, directory=True) as tmpdir:
        for sec in sections:
            for path, _ in sec.figures:
                shutil.copy(path, tmpdir / Path(path).name)
    text = to_markdown(title, intro, sections, files.name)
    with atomic_path(out) as tmp:
        tmp.write_text(text)
