"""``homog report``: read the database (read-only), compute the claims, draw, write atomically."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from homog.claims import PRIMARY
from homog.config import Params
from homog.errors import HomogError
from homog.io import atomic_path, remove_stale
from homog.owned import HTML_MARK, MD_MARK, mark_dir
from homog.plot import attention_heatmap_figure, layer_curves_figure
from homog.posenc.presets import resolve
from homog.report.answer import answer_section
from homog.report.claims_view import claims_section, summary_section
from homog.report.concentration import concentration_section
from homog.report.cost import cost_section
from homog.report.document import Section, to_html, to_markdown
from homog.report.figures import mauve_figure
from homog.report.glossary import VARIANTS, glossary_section
from homog.report.inputs import claims_of, read_inputs, tables_of
from homog.report.manipulation import manipulation_section
from homog.report.posenc_view import posenc_section
from homog.report.position import position_section
from homog.report.power import power_section
from homog.report.provenance import gather, provenance_sections, shown
from homog.report.sensitivity import sensitivity_section
from homog.report.sentences_view import sentence_line, sentences_section, verdict_rows
from homog.report.targets import (
    check_format,
    check_out,
    figure_link,
    figures_dir_for,
    rebuild_command,
)
from homog.schema.tables import schema_problems
from homog.stats.dose_checks import family_check_lines
from homog.store.bundle import bundle_provenance
from homog.store.current import left_out
from homog.store.query import (
    attention_profile,
    connect,
    difference_curves,
    layer_curves,
    summary_names,
)

REPORT_TABLES = (
    "runs",
    "layer_metrics",
    "contrasts",
    "texts",
    "mauve_scores",
    "posenc_results",
    "head_ablation",
    "attention_profile",
)
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
TITLE = "homog report: token homogenization under positional bias"
# the dose-response figures drawn: the primary endpoints' metrics, or every metric's
DOSE_FIGURES = ("primary", "all")


def figure_sections(
    con: Any, runs: pd.DataFrame, mauve: pd.DataFrame, figdir: Path, variants: list[str]
) -> list[Section]:
    """Layer curves with CIs, MAUVE, and the attention heatmaps (two per row)."""
    curves = Section(
        "Layer curves",
        paragraphs=[
            "Each metric per layer, mean over texts with its 95% CI (shaded). A dot on a "
            "variant's curve marks a layer where it differs from the original (Holm p < 0.05, "
            "the stats stage's per-layer contrasts)."
        ],
    )
    present = set(summary_names(con)[0]) if not runs.empty else set()
    for metric in CURVE_METRICS:
        if metric in present:
            rows = layer_curves(con, metric)
            # the difference view: a 1 % difference is invisible between raw curves
            diff = difference_curves(con, rows, metric)
            if diff:
                path = layer_curves_figure(
                    diff, metric, figdir / f"curves_{metric}.png", difference=True
                )
                caption = (
                    f"{metric} per layer: each variant minus the original, paired per "
                    "text, with its 95% CI (raw curves: homog plot --raw)"
                )
            else:
                path = layer_curves_figure(rows, metric, figdir / f"curves_{metric}.png")
                caption = f"{metric} per layer, mean over texts with 95% CI"
            curves.figures.append((path, caption))
    if not mauve.empty:
        path = mauve_figure(mauve.to_dict("records"), figdir / "mauve.png")
        curves.figures.append((path, "MAUVE between consecutive layers (unchanged runs)"))
    heat = Section("Attention by key position", figure_width=48)
    if not curves.figures:
        curves.paragraphs.append("No layer metrics in the database.")
    profiles = "attention_profile" in tables_of(con)
    for run in runs[runs["intervention"].fillna("none") == "none"].itertuples():
        # the variants this run has profiles of (a run may cover some of the texts' variants,
        # e.g. the position family only)
        have = (
            {
                r[0]
                for r in con.execute(
                    "SELECT DISTINCT variant FROM attention_profile WHERE run_id = ?", [run.run_id]
                ).fetchall()
            }
            if profiles
            else set()
        )
        for variant in [
            v for v in ("original", "front", "key_first", "key_last") if v in variants and v in have
        ]:
            rows = attention_profile(con, run.run_id, variant)
            if rows:
                path = figdir / f"attention_{run.model}_{variant}.png".replace("/", "_")
                title = f"{run.model}, {variant}"
                attention_heatmap_figure(rows, path, title=title)
                heat.figures.append((path, f"{title}: mean over heads and texts (log colour)"))
    if not heat.figures:
        heat.paragraphs.append("No attention profiles in the database.")
    return [curves, heat]


def _variants(con: Any, data: dict[str, pd.DataFrame]) -> list[str]:
    """Every variant the database holds (texts and contrasts), in the glossary's order."""
    seen = set(data["texts"]["variant"]) if not data["texts"].empty else set()
    if not data["contrasts"].empty:
        sides = set(data["contrasts"]["variant_a"]) | set(data["contrasts"]["variant_b"])
        # a side that is a difference ("key_first - key_mid") names two variants
        seen |= {v.strip() for side in sides for v in str(side).split(" - ")}
    if "layer_metrics" in tables_of(con):  # the summary's names (a bundle has no raw rows)
        seen |= set(summary_names(con)[1])
    return [v for v in VARIANTS if v in seen] + sorted(seen - set(VARIANTS))


def _posenc_config(params: Params | None) -> dict[str, Any] | None:
    if params is None:
        return None
    try:
        return resolve(params.posenc)
    except HomogError:
        return None


def build_report(
    db_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    fmt: str = "html",
    params: Params | None = None,
    synth_report: str | os.PathLike[str] | None = None,
    figures_dir: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    params_name: str = "params.yaml",
    force: bool = False,
    dose_figures: str = "primary",
) -> Path:
    """Write the report for the database ``db_path`` to ``out`` (HTML or Markdown).

    The database is opened read-only. ``params`` gives alpha and the bootstrap settings
    (``stats:``, top-level seed) and the corpus/synth params for the provenance; None (no
    params file, named ``params_name``) uses the defaults and says so in the report.
    ``synth_report``: the synth report.json (a missing file is named in the report).
    ``root``: the project directory for the git commit and dvc.lock (default: the current
    directory). HTML embeds every figure; Markdown writes its figures to ``figures_dir``
    (default ``<out stem>_files``) and links them relative to the page. Both are written
    atomically. ``out`` ``-``: the HTML page on stdout (Markdown has figure files: refused).
    An existing page or figures folder that homog did not write (no generator mark in the
    page, no ``.homog-figures`` marker in the folder: :mod:`homog.owned`) is replaced only
    with ``force``. Raises HomogError for a missing or unreadable database, an unknown format,
    a figures directory that would replace the page's directory or hold the database, and a
    page or folder of the user's without ``force``. ``dose_figures``: ``primary`` (the
    dose-response figures of the primary endpoints' metrics; the table has every metric) or
    ``all``.
    """
    if dose_figures not in DOSE_FIGURES:
        raise HomogError(f"dose_figures {dose_figures!r}: use one of {', '.join(DOSE_FIGURES)}")
    stdout = check_format(fmt, out, figures_dir)
    out = Path(out)
    db = Path(db_path)
    files = figures_dir_for(out, figures_dir) if fmt == "md" else None
    out = out if stdout else check_out(out, files, force=force, db=db)
    known = params or Params()
    root = Path(root) if root is not None else Path.cwd()
    con = connect(db)
    try:
        _check_schema(con, db)
        data = read_inputs(con)
        claims = claims_of(data, known)
        synth_path = Path(synth_report) if synth_report is not None else None
        recorded, synth = _synth_of(db, synth_path)
        command = rebuild_command(db, out, files, stdout=stdout)
        prov = gather(
            data["runs"],
            db,
            command,
            root=root,
            params=params,
            params_name=params_name,
            synth=synth,
            synth_path=synth_path,
            n_original_texts=original_texts(data["texts"]),
            recorded=recorded,
        )
        variants = _variants(con, data)
        # the pid in the name: a killed report's folder is removed by the next report
        remove_stale(tempfile.gettempdir(), r"^homog-report-(\d+)-[A-Za-z0-9_]+$")
        with tempfile.TemporaryDirectory(prefix=f"homog-report-{os.getpid()}-") as tmp:
            sections = report_sections(
                con,
                data,
                claims,
                Path(tmp),
                variants=variants,
                stats=known.stats,
                params=params,
                synth=synth,
                prov=prov,
                dose_figures=dose_figures,
            )
            _write(out, fmt, TITLE, intro_of(data["runs"], db, data["older_runs"]), sections, files)
    finally:
        con.close()
    return out


def _synth_of(db: Path, path: Path | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the bundle's recorded provenance or None, the synth report): a published bundle's own
    provenance, its synth report among it, comes before this directory's, so the page says
    where its numbers were made."""
    recorded = bundle_provenance(db)
    return recorded, recorded.get("synth") if recorded is not None else _read_synth(path)


def _read_synth(path: Path | None) -> dict[str, Any] | None:
    """The synth report.json (None when not given or missing); HomogError when not JSON."""
    if path is None or not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise HomogError(f"synth report {path} is not valid JSON: {exc}") from exc


def original_texts(texts: pd.DataFrame) -> int | None:
    """How many original texts the texts counts hold (None when it has no original row)."""
    originals = texts.loc[texts["variant"] == "original", "n_texts"] if len(texts) else None
    return int(originals.sum()) if originals is not None and len(originals) else None


def primary_metrics(claims: pd.DataFrame) -> list[str] | None:
    """The metrics of the primary endpoints' claim rows; None where the claims have none (a
    database from before the primary family: every metric is drawn, as then)."""
    if "family" not in claims.columns:
        return None
    names = claims.loc[claims["family"] == PRIMARY, "metric"].astype(str)
    return list(dict.fromkeys(names)) or None


def report_sections(
    con: Any,
    data: dict[str, pd.DataFrame],
    claims: pd.DataFrame,
    figdir: Path,
    *,
    variants: list[str],
    stats: Any,
    params: Params | None,
    synth: dict[str, Any] | None,
    prov: Any,
    dose_figures: str = "primary",
) -> list[Section]:
    """The page's sections in order (answer first, provenance last), figures in ``figdir``;
    ``dose_figures`` as :func:`build_report`'s."""
    runs, contrasts, alpha = data["runs"], data["contrasts"], stats.alpha
    metrics = sorted(set(contrasts["metric"])) if len(contrasts) else []
    interventions = list(dict.fromkeys(runs["intervention"].fillna("none"))) if len(runs) else []
    sentences = sentence_line(verdict_rows(data["sentences"], runs, alpha))
    roles = "layer0_effect" in claims.columns
    dose = data["sentence_dose"]
    return [
        answer_section(
            claims,
            figdir,
            probe=data["probe"],
            sentences=sentences,
            doses=data.get("cost"),
            concentration=data["doses"],
        ),
        summary_section(claims, alpha),
        sensitivity_section(claims, alpha, (stats.sesoi_basis, stats.sesoi)),
        power_section(claims),
        glossary_section(variants, interventions, metrics, layer_roles=roles),
        manipulation_section(data["texts"], synth),
        claims_section(claims, alpha, ci=stats.ci, test=stats.test),
        position_section(
            con,
            data,
            variants,
            figdir,
            alpha,
            None if dose_figures == "all" else primary_metrics(claims),
        ),
        sentences_section(
            data["sentences"], data["sentence_curve"], runs, figdir, alpha, dose=dose
        ),
        cost_section(
            data["probe"], figdir, data.get("cost"), family_check_lines(data["doses"], "homogenize")
        ),
        *filter(None, [concentration_section(data["doses"], figdir)]),
        *figure_sections(con, runs, data["mauve"], figdir, variants),
        posenc_section(data["posenc"], data["ablation"], figdir, _posenc_config(params)),
        *provenance_sections(prov, runs),
    ]


def intro_of(runs: pd.DataFrame, db: Path, older: pd.DataFrame | None = None) -> str:
    """The page's opening paragraph: the runs and models read (and the older runs of the same
    model and intervention left out), and the question asked."""
    n_models = runs["model"].nunique() if len(runs) else 0
    note = left_out(older.to_dict("records")) if older is not None else None
    return (
        f"{len(runs)} runs of {n_models} model(s) from {shown(db)}. "
        + (f"{note} " if note else "")
        + "Does "
        "positional bias drive token homogenization (arXiv 2508.17126)? Each claim is "
        "checked per model on paired texts; the answer comes first, then each claim, "
        "the glossary and every row."
    )


def _check_schema(con: Any, db: Path) -> None:
    # every table present, not only REPORT_TABLES: the report also reads probe_metrics,
    # separability, the sentence and dose tables, and an older one lacking a column must be
    # named here, not met as a KeyError mid-report
    problems = schema_problems(con)
    if problems:
        raise HomogError(
            f"{db} is not a homog database the report can read: {'; '.join(problems)}. Rebuild "
            "it with `homog load` (or pass --db with the database `homog load` built)"
        )


def _write(out: Path, fmt: str, title: str, intro: str, sections: list[Section], files):
    """Write the page (and the Markdown figures folder), each with homog's mark."""
    if fmt == "html":
        text = to_html(title, intro, sections)
        head = "<meta charset='utf-8'>"
        text = text.replace(head, head + HTML_MARK, 1)  # the generator mark: homog wrote it
        if str(out) == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp:
            tmp.write_text(text)
        return
    # the page's text first: the two renames below follow each other with nothing between
    text = MD_MARK + "\n" + to_markdown(title, intro, sections, figure_link(out, files))
    out.parent.mkdir(parents=True, exist_ok=True)
    files.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(files, directory=True) as tmpdir:
        mark_dir(tmpdir)
        for sec in sections:
            for path, _ in sec.figures:
                shutil.copy(path, tmpdir / Path(path).name)
    with atomic_path(out) as tmp:
        tmp.write_text(text)
