"""The ``stats`` stage: read the runs' layer_metrics, write contrasts, dose-response, metrics.

The computation is in :mod:`homog.stats.contrasts` (paired contrasts),
:mod:`homog.stats.contrast_rows`
(length adjustment, layer-0 control, TOST) and :mod:`homog.stats.dose` (the position family's
dose-response); this module reads and writes the files (docs/design.md, docs/statistics.md).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from homog.config import Params, as_params
from homog.extract import TOKEN_COUNT
from homog.io import HomogError, atomic_path, read_output, write_json
from homog.layout import Layout, find_runs
from homog.stats.combos import texts_identity
from homog.stats.contrasts import (
    NOT_CONTRASTED,
    finish_contrasts,
    intervention_contrasts,
    run_contrasts,
)
from homog.stats.intervention_cost import write_cost
from homog.stats.intervention_doses import intervention_doses
from homog.stats.primary_names import check_primary


def _read_metrics(run_dir: Path) -> pd.DataFrame:
    path = run_dir / "layer_metrics.parquet"
    if not path.exists():
        raise HomogError(f"{path} is missing; rerun `dvc repro` (extract stage)")
    columns = ["variant", "sample_id", "layer", "metric", "value"]
    fix = "rerun `homog extract` for its model (or `dvc repro`)"
    frame = read_output(path, lambda p: pd.read_parquet(p, columns=columns), fix)
    keep = ~frame["metric"].isin(NOT_CONTRASTED) | (frame["metric"] == TOKEN_COUNT)
    return frame[keep]  # the token counts adjust the contrasts; they are not contrasted


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _quiet(message: str) -> None:  # the contrasts already warned about the same run
    pass


def unchanged_run(
    run: dict[str, Any], runs: Sequence[dict[str, Any]], log: Callable[[str], None] = _warn
) -> dict[str, Any] | None:
    """The unchanged (``none``) run an intervention run is compared with, or None.

    Runs pair only when they agree on everything but the intervention: the same model and the
    same ``pair_key`` (a hash of the model source, the result-changing extract options and
    the texts; run.json has it since issue 16). A run without a pair_key (written by an older
    homog) is never paired: nothing shows that its texts and options match, so a stale
    directory left by an interrupted re-extract cannot be compared with a new run. Each
    refusal is logged with what to rerun.
    """
    where = f"{run['model']}/{run.get('intervention')} run {str(run['run_id'])[:12]}"
    key = run.get("pair_key")
    if key is None:
        log(
            f"{where}: run.json has no pair_key (an older homog wrote it), so it is not compared "
            f"with an unchanged run; rerun `homog extract --model {run['model']}`"
        )
        return None
    for r in runs:
        if (
            r["model"] == run["model"]
            and r.get("intervention", "none") == "none"
            and r.get("pair_key") == key
        ):
            return r
    log(
        f"{where}: no unchanged (none) run with the same texts and extract options (stale "
        f"output of other params?); not compared; rerun `homog extract --model {run['model']}`"
    )
    return None


def read_runs(
    params: Params, root: str | Path = "."
) -> tuple[list[tuple[dict[str, Any], Path]], dict[str, pd.DataFrame]]:
    """(runs, run_id -> layer_metrics frame) of the interventions of ``extract.interventions``.

    Raises HomogError when there is no extracted run.
    """
    runs = find_runs(params.models, root, interventions=params.extract.interventions)
    if not runs:
        raise HomogError(
            "no extracted runs under data/extract/<model>/ for the models in params.yaml; "
            "run `dvc repro` (or `homog extract --model KEY`) first"
        )
    return runs, {r["run_id"]: _read_metrics(d) for r, d in runs}


def compute_all(
    params: Params | Mapping[str, Any],
    root: str | Path = ".",
    log: Callable[[str], None] = _warn,
    *,
    read: tuple[list[tuple[dict[str, Any], Path]], dict[str, pd.DataFrame]] | None = None,
) -> pd.DataFrame:
    """All contrasts of all runs named by params (variant pairs and intervention vs none).

    Reads only the interventions of ``extract.interventions``; an intervention run is
    compared with the unchanged run of the same config (:func:`unchanged_run`). ``read``:
    what :func:`read_runs` returned, when the caller already has it (read once).
    """
    from homog.progress import progress

    params = as_params(params)
    opts = {
        "n_boot": params.stats.n_boot,
        "ci": params.stats.ci,
        "seed": params.seed,
        "test": params.stats.test,
        "n_perm": params.stats.n_perm,
        "sesoi": params.stats.sesoi,
        "sesoi_basis": params.stats.sesoi_basis,
        "sesoi_pin": params.stats.sesoi_pin,
        "alpha": params.stats.alpha,
    }
    runs, frames = read or read_runs(params, root)
    ids = texts_identity(Layout(Path(root)).texts)
    found = set().union(*(set(f["metric"].unique()) for f in frames.values()))
    missing = [m for m in params.stats.mixed_metrics if m not in found]
    if missing:
        log(
            f"stats.mixed_metrics names {', '.join(missing)}, which no run has: no mixed model "
            f"for them (metrics of the runs: {', '.join(sorted(found)[:12])} ...)"
        )
    parts = []
    with progress() as bar:
        task = bar.add_task("stats", total=len(runs))
        for run, _ in runs:
            parts.append(
                run_contrasts(
                    frames[run["run_id"]], run["run_id"], **opts,
                    mixed_metrics=params.stats.mixed_metrics, text_ids=ids,
                )
            )  # fmt: skip
            if run.get("intervention", "none") != "none":
                base = unchanged_run(run, [r for r, _ in runs], log)
                if base is not None:
                    parts.append(
                        intervention_contrasts(
                            frames[run["run_id"]],
                            frames[base["run_id"]],
                            run["run_id"],
                            base["run_id"],
                            **opts,
                        )
                    )
            bar.advance(task)
    return finish_contrasts([p for p in parts if not p.empty])


def headline(
    contrasts: pd.DataFrame,
    runs: list[dict[str, Any]],
    summaries: pd.DataFrame,
    mauve: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Headline numbers for ``dvc metrics show`` (nested dict, one entry per model run).

    Per unchanged run (intervention none) of each model: erank and mev at the last layer per
    variant, the late-band erank differences front/end/control vs original with Holm p, the
    length-adjusted difference and the layer-0 difference beside them, the
    number of layers where front vs original is significant at ``alpha``, and mean MAUVE per
    variant. Intervention runs add their late-band erank difference vs the unchanged run.
    """
    out: dict[str, Any] = {}
    by_id = {r["run_id"]: r for r in runs}
    for run_id, run in by_id.items():
        key = (
            run["model"]
            if run.get("intervention", "none") == "none"
            else f"{run['model']}:{run['intervention']}"
        )
        entry: dict[str, Any] = {}
        s = summaries[summaries["run_id"] == run_id]
        for metric in ("erank", "mev"):
            sm = s[s["metric"] == metric]
            if not sm.empty:
                last = sm[sm["layer"] == sm["layer"].max()]
                entry[f"{metric}_last"] = {
                    v: round(float(m), 6)
                    for v, m in zip(last["variant"], last["mean"], strict=True)
                }
        c = contrasts[(contrasts["run_id"] == run_id) & (contrasts["metric"] == "erank")]
        late = c[(c["band"] == "late") & c["baseline_run_id"].isna()]
        for _, row in late.iterrows():
            entry[f"erank_late_{row['variant_a']}_vs_{row['variant_b']}"] = {
                "mean_diff": _r(row["mean_diff"]),
                "p_holm": _r(row["p_holm"]),
                # at zero added tokens (null where the token counts do not differ)
                "adj_diff": _r(row["adj_diff"]) if row.get("adjusted") else None,
                "layer0_diff": _r(row["layer0_diff"]),
            }
        fo = c[
            (c["variant_a"] == "front")
            & (c["variant_b"] == "original")
            & c["band"].isna()
            & c["baseline_run_id"].isna()
        ]
        if not fo.empty:
            entry["erank_front_vs_original_sig_layers"] = int((fo["p_holm"] < alpha).sum())
        iv = c[(c["band"] == "late") & c["baseline_run_id"].notna()]
        for _, row in iv.iterrows():
            entry[f"erank_late_{row['variant_a']}_vs_unchanged"] = {
                "mean_diff": _r(row["mean_diff"]),
                "p_holm": _r(row["p_holm"]),
            }
        if mauve is not None and not mauve.empty:
            mv = mauve[mauve["run_id"] == run_id]
            if not mv.empty:
                entry["mauve_mean"] = {
                    v: _r(m) for v, m in mv.groupby("variant")["mauve"].mean().items()
                }
        out[key] = entry
    return out


def _r(x: Any) -> float | None:
    x = float(x)
    return round(x, 6) if math.isfinite(x) else None


def summarise(frame: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """Per (variant, metric, layer) mean over texts, with run_id."""
    g = frame[np.isfinite(frame["value"])].groupby(["variant", "metric", "layer"])["value"]
    return g.mean().rename("mean").reset_index().assign(run_id=run_id)


PLOT_METRICS = ("erank", "mev", "resultant_length", "attn_first")


def stats_stage(
    params: Params | Mapping[str, Any], root: str | Path = ".", out_dir: str | Path | None = None
) -> dict[str, int]:
    """The ``stats`` stage: writes ``data/stats/`` (contrasts.parquet, dose_response.parquet,
    metrics.json, plots/).

    ``dose_response.parquet``: the position family's slopes and points (:mod:`homog.stats.dose`)
    from the texts' ``key_position`` (an empty table when the texts have none).
    ``separability.parquet``: claim 4's classifier AUCs of the unchanged runs
    (:mod:`homog.stats.separability`).

    ``plots/<metric>__<model>.csv``: the unchanged run's layer curve of ``metric`` (PLOT_METRICS),
    columns layer, rel_depth and one per variant (DVC plots). Returns counts; the whole
    directory is replaced atomically. ``intervention_cost.parquet``: homog.stats.intervention_cost.
    """
    params = as_params(params)
    check_primary(params.stats.primary, params.synth.position)  # a typo fails here, first
    layout = Layout(Path(root))
    out_dir = Path(out_dir) if out_dir is not None else layout.stats_dir
    found, frames = read = read_runs(params, root)
    contrasts = compute_all(params, root, read=read)
    runs = [r for r, _ in found]
    summaries = pd.concat(
        [summarise(frames[r["run_id"]], r["run_id"]) for r in runs], ignore_index=True
    )
    mauve_parts = [read_output(p, pd.read_parquet, f"rerun `homog mauve --model {k}`")
                   for k in params.models if (p := layout.mauve(k)).exists()]  # fmt: skip
    mauve = pd.concat(mauve_parts, ignore_index=True) if mauve_parts else None
    dose = dose_tables(params, layout, found, frames)
    separable = separability_tables(params, runs, frames, layout.texts)
    sentences = sentence_contrasts_of_runs(params, found, texts_identity(layout.texts))
    graded = intervention_doses(params, runs, frames, lambda r: unchanged_run(r, runs, _quiet))
    with atomic_path(out_dir, directory=True) as tmp:
        contrasts.to_parquet(tmp / "contrasts.parquet", index=False)
        graded.to_parquet(tmp / "intervention_doses.parquet", index=False)
        cost = write_cost(
            tmp, params, layout.texts, found, frames, lambda r: unchanged_run(r, runs, _quiet)
        )
        sentences.to_parquet(tmp / "sentence_contrasts.parquet", index=False)
        dose.to_parquet(tmp / "dose_response.parquet", index=False)
        separable.to_parquet(tmp / "separability.parquet", index=False)
        write_json(
            tmp / "metrics.json",
            headline(contrasts, runs, summaries, mauve, params.stats.alpha),
        )
        (tmp / "plots").mkdir()
        meta = pd.DataFrame(runs).reindex(columns=["run_id", "model", "n_layers", "intervention"])
        meta["intervention"] = meta["intervention"].fillna("none")
        curves = summaries.merge(meta, on="run_id")
        curves = curves[curves["intervention"] == "none"]
        for (model, metric), cm in curves.groupby(["model", "metric"]):
            if metric not in PLOT_METRICS:
                continue
            wide = cm.pivot_table(
                index=["layer", "n_layers"], columns="variant", values="mean"
            ).reset_index()
            wide["rel_depth"] = wide["layer"] / wide["n_layers"]
            cols = ["layer", "rel_depth"] + [
                v for v in ("original", "front", "end", "control") if v in wide.columns
            ]
            wide[cols].to_csv(
                tmp / "plots" / f"{metric}__{model}.csv", index=False, float_format="%.6g"
            )
    return {"contrasts": len(contrasts), "dose_response": len(dose),
            "separability": len(separable), "sentence_contrasts": len(sentences),
            "intervention_doses": len(graded), "intervention_cost": cost,
            "runs": len(runs)}  # fmt: skip


def sentence_contrasts_of_runs(
    params: Params, found: list[tuple[dict[str, Any], Path]], ids: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The sentence_contrasts rows (homog.stats.sentences) of every run whose directory holds
    a sentence_metrics.parquet (an empty table when none does); ``ids``: the texts' identity
    (:func:`texts_identity`) for the identity pairs."""
    from homog.stats.sentences import SENTENCE_CONTRAST_COLUMNS, run_sentence_contrasts

    parts = []
    for run, run_dir in found:
        path = run_dir / "sentence_metrics.parquet"
        if path.exists():
            frame = read_output(
                path, pd.read_parquet, f"rerun `homog extract --model {run['model']}`"
            )
            parts.append(run_sentence_contrasts(frame, run["run_id"], stats=params.stats,
                                                seed=params.seed, text_ids=ids))  # fmt: skip
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=SENTENCE_CONTRAST_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def key_positions(path: Path) -> pd.DataFrame | None:
    """(variant, sample_id, key_position) of the texts table at ``path``; None when the file
    or the column (texts of a synth without the position family) is absent."""
    import pyarrow.parquet as pq

    if not path.exists() or "key_position" not in pq.read_schema(path).names:
        return None
    return pd.read_parquet(path, columns=["variant", "sample_id", "key_position"])


def dose_tables(
    params: Params, layout: Layout, found: Sequence[tuple[dict[str, Any], Path]], frames
) -> pd.DataFrame:
    """The dose-response rows of every run (:func:`homog.stats.dose.dose_response`)."""
    from homog.stats.dose import DOSE_COLUMNS, dose_response

    positions = key_positions(layout.texts)
    st = params.stats
    opts = {"n_boot": st.n_boot, "ci": st.ci, "seed": params.seed, "test": st.test,
            "n_perm": st.n_perm, "sesoi": st.sesoi, "sesoi_basis": st.sesoi_basis,
            "alpha": st.alpha, "exclude": NOT_CONTRASTED}  # fmt: skip
    runs = [r for r, _ in found]
    parts = []
    for r in runs:
        base = r if r.get("intervention", "none") == "none" else unchanged_run(r, runs, _quiet)
        ref = frames[base["run_id"]] if base is not None else None
        parts.append(dose_response(frames[r["run_id"]], positions, r["run_id"], **opts,
                                   reference=ref))  # fmt: skip
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in DOSE_COLUMNS})
    return pd.concat(parts, ignore_index=True)


def separability_tables(
    params: Params, runs: Sequence[dict[str, Any]], frames: Mapping[str, pd.DataFrame], texts=None
) -> pd.DataFrame:
    """The separability rows of every unchanged run (homog.stats.separability; ``texts``: the
    texts table, for the split by a changed first sentence)."""
    from homog.stats.contrasts import pivot_metrics
    from homog.stats.reordering import first_changes
    from homog.stats.separability import SEP_COLUMNS, SEP_METRICS, run_separability

    first = first_changes(texts) if texts is not None else None
    st = params.stats
    parts = []
    for r in runs:
        if r.get("intervention", "none") != "none":
            continue
        frame = frames[r["run_id"]]
        tables = pivot_metrics(frame[frame["metric"].isin(SEP_METRICS)])
        opts = {"n_boot": st.n_boot, "seed": params.seed, "ci": st.ci, "first_changed": first}
        parts.append(run_separability(tables, r["run_id"], n_perm=st.separability_perm, **opts))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SEP_COLUMNS})
    return pd.concat(parts, ignore_index=True)
