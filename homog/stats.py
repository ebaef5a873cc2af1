"""Paired statistics between variants and between intervention runs (the ``stats`` stage).

For each run, metric and layer, and each variant pair (front, end, control vs original; front,
end vs control) the texts are paired by ``sample_id`` and the difference ``a - b`` is summarised
by its mean, a seeded percentile-bootstrap CI (vectorised: one multinomial weight matrix for all
layers), a two-sided p-value and Holm's correction across the layers of the (run, metric, pair)
family. The p-value (``stats.test``) is by default a paired sign-flip permutation test of the
mean difference, the same statistic as the CI, so p and CI agree; ``wilcoxon`` (scipy's
signed-rank test, a test of the median/symmetry that can disagree with the CI of the mean on
skewed differences) is kept as an option. Depth bands (first 25 %, middle 50 %, last 25 % of a
metric's layers; the per-text mean over the band's layers) get the same treatment, Holm across
the three bands. An intervention run (``zero_pos``, ``shuffle_pos``) is compared with the unchanged
(``none``) run of the same model and config (the same ``pair_key``: everything but the
intervention), variant by variant (``baseline_run_id`` set); only the interventions that
``extract.interventions`` names are read.

All-zero differences (a variant against itself, or a metric that does not move) have no
test statistic; they get ``p_value = 1.0`` and a CI of ``[0, 0]`` instead of NaN and a
warning. Pairs with a non-finite value on either side are dropped and the remaining count is
reported in ``n``; a group with fewer than 2 pairs gets NaN p-values and CIs.
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
from homog.io import HomogError, atomic_path, read_output, write_json
from homog.layout import Layout, find_runs
from homog.metrics_sets import N_REMOVED
from homog.paired_tests import (  # noqa: F401 (re-exported for callers of homog.stats)
    TESTS,
    bootstrap_ci,
    holm,
    paired_p,
    sign_flip_p,
    wilcoxon_p,
)
from homog.store.schema import TABLES

VARIANT_PAIRS: tuple[tuple[str, str], ...] = (
    ("front", "original"),
    ("end", "original"),
    ("control", "original"),
    ("front", "control"),
    ("end", "control"),
)
BANDS = ("early", "middle", "late")
CONTRAST_COLUMNS = TABLES["contrasts"].names  # the store's schema is the one definition


def paired_contrasts(
    wide_a: pd.DataFrame,
    wide_b: pd.DataFrame,
    *,
    n_boot: int,
    ci: float,
    seed: int,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> pd.DataFrame:
    """Contrasts a - b for aligned tables [layer x sample_id] (one per side) of one metric.

    Returns one row per layer: layer, n, mean_diff, ci_low, ci_high, p_value (``test``, see
    :func:`paired_p`), p_holm (Holm across the layers given). Samples missing or non-finite on
    either side are dropped per layer.
    """
    a, b = wide_a.align(wide_b, join="inner")
    d = (a - b).to_numpy(dtype=float)  # [G, n]
    rows = []
    for i, layer in enumerate(a.index):
        di = d[i][np.isfinite(d[i])]
        row = {
            "layer": layer,
            "n": int(di.size),
            "mean_diff": math.nan,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "p_value": math.nan,
        }
        if di.size >= 1:
            row["mean_diff"] = float(di.mean())
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    complete = np.isfinite(d).all(axis=1) & (d.shape[1] >= 2)
    test_opts = {"test": test, "n_perm": n_perm, "seed": seed}
    if complete.any():
        low, high = bootstrap_ci(d[complete], n_boot=n_boot, ci=ci, seed=seed)
        out.loc[complete, "ci_low"] = low
        out.loc[complete, "ci_high"] = high
        out.loc[complete, "p_value"] = paired_p(d[complete], **test_opts)
    for i in np.flatnonzero(~complete):  # ragged rows (missing values): one at a time
        di = d[i][np.isfinite(d[i])]
        if di.size >= 2:
            low, high = bootstrap_ci(di[None, :], n_boot=n_boot, ci=ci, seed=seed)
            out.loc[i, ["ci_low", "ci_high"]] = [low[0], high[0]]
            out.loc[i, "p_value"] = paired_p(di[None, :], **test_opts)[0]
    # Exact zeros everywhere: the bootstrap already gives [0, 0] and the test p = 1.0.
    out["p_holm"] = holm(out["p_value"].to_numpy())
    return out


def band_of_layers(layers: Sequence[int]) -> dict[str, list[int]]:
    """Split sorted ``layers`` into early (first 25 %), middle (50 %) and late (last 25 %).

    Band sizes are round(n/4) (at least 1 when n >= 3); fewer than 3 layers gives no bands.
    """
    layers = sorted(layers)
    n = len(layers)
    if n < 3:
        return {}
    q = max(1, round(n / 4))
    return {"early": layers[:q], "middle": layers[q : n - q], "late": layers[n - q :]}


def _pivot(frame: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """(variant, metric) -> [layer x sample_id] table of values."""
    out = {}
    for (variant, metric), g in frame.groupby(["variant", "metric"], sort=True):
        wide = g.pivot_table(
            index="layer", columns="sample_id", values="value", aggfunc="first", dropna=False
        )
        out[(variant, metric)] = wide.sort_index()
    return out


def _band_tables(wide: pd.DataFrame, bands: dict[str, list[int]]) -> pd.DataFrame:
    """[band x sample_id] per-text means over each band's layers (NaN if any layer missing)."""
    return pd.DataFrame(
        {band: wide.loc[ls].mean(axis=0, skipna=False) for band, ls in bands.items()}
    ).T


def _contrast_rows(
    side_a: pd.DataFrame,
    side_b: pd.DataFrame,
    meta: dict[str, Any],
    *,
    n_boot: int,
    ci: float,
    seed: int,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> list[pd.DataFrame]:
    opts = {"n_boot": n_boot, "ci": ci, "seed": seed, "test": test, "n_perm": n_perm}
    layer_rows = paired_contrasts(side_a, side_b, **opts)
    parts = []
    if not layer_rows.empty:
        parts.append(layer_rows.assign(band=None, **meta))
    bands = band_of_layers(list(side_a.index.intersection(side_b.index)))
    if bands:
        band_rows = paired_contrasts(
            _band_tables(side_a, bands),
            _band_tables(side_b, bands),
            **opts,
        )
        band_rows = band_rows.rename(columns={"layer": "band"}).assign(layer=None, **meta)
        parts.append(band_rows)
    return parts


def run_contrasts(
    frame: pd.DataFrame,
    run_id: str,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    pairs: Sequence[tuple[str, str]] = VARIANT_PAIRS,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> pd.DataFrame:
    """Contrasts between variants of one run.

    ``frame``: layer_metrics rows of the run (variant, sample_id, layer, metric, value).
    Pairs whose variants are absent are skipped. Returns CONTRAST_COLUMNS rows.
    """
    opts = {"n_boot": n_boot, "ci": ci, "seed": seed, "test": test, "n_perm": n_perm}
    tables = _pivot(frame)
    metrics_ = sorted({m for _, m in tables})
    parts: list[pd.DataFrame] = []
    for metric in metrics_:
        for va, vb in pairs:
            if (va, metric) not in tables or (vb, metric) not in tables:
                continue
            meta = {
                "run_id": run_id,
                "variant_a": va,
                "variant_b": vb,
                "metric": metric,
                "baseline_run_id": None,
            }
            parts += _contrast_rows(tables[(va, metric)], tables[(vb, metric)], meta, **opts)
    return _finish(parts)


def intervention_contrasts(
    frame: pd.DataFrame,
    baseline: pd.DataFrame,
    run_id: str,
    baseline_run_id: str,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> pd.DataFrame:
    """Contrasts of an intervention run against its unchanged run, variant by variant.

    ``mean_diff`` = intervention - unchanged over the same texts; variant_a = variant_b.
    """
    mine, base = _pivot(frame), _pivot(baseline)
    parts: list[pd.DataFrame] = []
    for key in sorted(set(mine) & set(base)):
        variant, metric = key
        meta = {
            "run_id": run_id,
            "variant_a": variant,
            "variant_b": variant,
            "metric": metric,
            "baseline_run_id": baseline_run_id,
        }
        parts += _contrast_rows(
            mine[key], base[key], meta, n_boot=n_boot, ci=ci, seed=seed, test=test, n_perm=n_perm
        )
    return _finish(parts)


def _finish(parts: list[pd.DataFrame]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in CONTRAST_COLUMNS})
    out = pd.concat(parts, ignore_index=True)[CONTRAST_COLUMNS]
    out["layer"] = out["layer"].astype("Int64")
    out["n"] = out["n"].astype("int64")
    return out


# ---------------------------------------------------------------------------------------------
# The stage: files in, files out


# Per-text values that are indices or counts, not measurements: a mean difference of them
# means nothing, so stats does not contrast them (they stay in layer_metrics for SQL).
NOT_CONTRASTED = ("act_top1_pos", "act_top1_feature", N_REMOVED)


def _read_metrics(run_dir: Path) -> pd.DataFrame:
    path = run_dir / "layer_metrics.parquet"
    if not path.exists():
        raise HomogError(f"{path} is missing; rerun `dvc repro` (extract stage)")
    columns = ["variant", "sample_id", "layer", "metric", "value"]
    fix = "rerun `homog extract` for its model (or `dvc repro`)"
    frame = read_output(path, lambda p: pd.read_parquet(p, columns=columns), fix)
    return frame[~frame["metric"].isin(NOT_CONTRASTED)]


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


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
    }
    runs, frames = read or read_runs(params, root)
    parts = []
    with progress() as bar:
        task = bar.add_task("stats", total=len(runs))
        for run, _ in runs:
            parts.append(run_contrasts(frames[run["run_id"]], run["run_id"], **opts))
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
    return _finish([p for p in parts if not p.empty])


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
    """The ``stats`` stage: writes ``data/stats/`` (contrasts.parquet, metrics.json, plots/).

    ``plots/<metric>__<model>.csv``: the unchanged run's layer curve of ``metric`` (PLOT_METRICS),
    columns layer, rel_depth and one per variant (DVC plots). Returns counts.
    The whole directory is replaced atomically.
    """
    params = as_params(params)
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
    with atomic_path(out_dir, directory=True) as tmp:
        contrasts.to_parquet(tmp / "contrasts.parquet", index=False)
        write_json(
            tmp / "metrics.json",
            headline(contrasts, runs, summaries, mauve, params.stats.alpha),
        )
        (tmp / "plots").mkdir()
        meta = pd.DataFrame(
            [
                {
                    "run_id": r["run_id"],
                    "model": r["model"],
                    "n_layers": r.get("n_layers"),
                    "intervention": r.get("intervention", "none"),
                }
                for r in runs
            ]
        )
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
    return {"contrasts": len(contrasts), "runs": len(runs)}
