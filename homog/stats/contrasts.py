"""Paired statistics between variants and between intervention runs (the ``stats`` stage).

For each run, metric and layer, and each variant pair of VARIANT_PAIRS present in the run (the
paper's front, end, control vs original and front, end vs control; the position family's
key_first / key_mid / key_last / key_control pairs) the texts are paired by ``sample_id`` and
the difference ``a - b`` is summarised by its mean, a seeded percentile-bootstrap CI
(vectorised: one multinomial weight matrix for all layers), a two-sided p-value and Holm's
correction across the layers of the (run, metric, pair)
family. The p-value (``stats.test``) is by default a paired sign-flip permutation test of the
mean difference, the same statistic as the CI, so p and CI agree; ``wilcoxon`` (scipy's
signed-rank test, a test of the median/symmetry that can disagree with the CI of the mean on
skewed differences) is kept as an option. Rows of depth get the same treatment, Holm across
them: ``layer0`` (the embeddings), the depth bands (first 25 %, middle 50 %, last 25 % of the
layers between 0 and L; the per-text mean over the band's layers) and ``final`` (layer L).
Every row also gets the length-adjusted effect, size, equivalence test and layer-0 control of
:mod:`homog.stats.contrast_rows`, and band rows of ``stats.mixed_metrics`` the mixed model of
:mod:`homog.stats.mixed` (docs/statistics.md). An intervention run (``zero_pos``,
``shuffle_pos``) is compared with the unchanged
(``none``) run of the same model and config (the same ``pair_key``: everything but the
intervention), variant by variant (``baseline_run_id`` set); only the interventions that
``extract.interventions`` names are read.

Per-text differences within rounding (``homog.stats.paired_tests.NUMERIC_TOLERANCE``, 1e-9 of the
values) count as exact zeros (``paired_difference``): a reordering of the same tokens changes
layer 0 by ~1e-14, which must read as no difference, not as a significant one.
All-zero differences (a variant against itself, or a metric that does not move) have no
test statistic; they get ``p_value = 1.0`` and a CI of ``[0, 0]`` instead of NaN and a
warning. Pairs with a non-finite value on either side are dropped and the remaining count is
reported in ``n``; a group with fewer than 2 pairs gets NaN p-values and CIs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from homog.extract import TOKEN_COUNT
from homog.metrics.sets import N_REMOVED
from homog.schema.tables import TABLES
from homog.stats.combos import pair_identical, with_sides, without
from homog.stats.contrast_rows import extra_columns
from homog.stats.margins import Margin, margin_of
from homog.stats.mixed import MIXED_COLUMNS, band_effects
from homog.stats.paired_tests import bootstrap_ci, holm, paired_difference, paired_p
from homog.variants import CONTRAST_PLAN

# the pairs contrasted: the registry's plan (a derived side such as KEY_ENDS is formed per text
# by homog.stats.combos.with_sides)
VARIANT_PAIRS = CONTRAST_PLAN
BANDS = ("early", "middle", "late")
# Layer 0 (the token embeddings: no position in RoPE models, so a difference there is lexical)
# and layer L (the final-norm output) are rows of their own, outside the depth bands
ALL_BANDS = ("layer0", *BANDS, "final")
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
    d = paired_difference(a.to_numpy(dtype=float), b.to_numpy(dtype=float))  # [G, n]
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
    """The rows of depth of sorted ``layers``: ``layer0`` ([0], when present), ``final`` (the
    last layer L, when above 0) and, over the layers strictly between them, early (first 25 %),
    middle (50 %) and late (last 25 %).

    Band sizes are round(k/4) of the k interior layers (at least 1 when k >= 3); fewer than 3
    interior layers give no depth bands. Keys in the order of ALL_BANDS.
    """
    layers = sorted(set(layers))
    if not layers:
        return {}
    last = layers[-1]
    inner = [x for x in layers if 0 < x < last]
    out: dict[str, list[int]] = {"layer0": [0]} if layers[0] == 0 else {}
    n = len(inner)
    if n >= 3:
        q = max(1, round(n / 4))
        out.update(early=inner[:q], middle=inner[q : n - q], late=inner[n - q :])
    if last > 0:
        out["final"] = [last]
    return out


def pivot_metrics(frame: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
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


def pair_rows(
    side_a: pd.DataFrame,
    side_b: pd.DataFrame,
    meta: dict[str, Any],
    *,
    n_boot: int,
    ci: float,
    seed: int,
    test: str = "sign_flip",
    n_perm: int = 10000,
    tokens: tuple[pd.Series | None, pd.Series | None] = (None, None),
    baseline: pd.DataFrame | None = None,
    sesoi: float = 0.1,
    mixed: dict[str, dict[str, float]] | None = None,
    margin: Margin | None = None,
    alpha: float = 0.05,
) -> list[pd.DataFrame]:
    """The layer rows and the band rows of one contrast a - b, every column of the table.

    tokens: per-text metric-token counts of a and b; baseline: the original's [layer x
    sample_id] table (default: b's); mixed: band -> the mixed model's columns for this pair;
    margin, alpha: see :func:`homog.stats.contrast_rows.extra_columns`.
    """
    opts = {"n_boot": n_boot, "ci": ci, "seed": seed, "test": test, "n_perm": n_perm}
    a, b = side_a.align(side_b, join="inner")
    base = side_b if baseline is None else baseline.reindex(index=a.index)
    layer0 = (
        pd.Series(paired_difference(a.loc[0].to_numpy(), b.loc[0].to_numpy()), index=a.columns)
        if 0 in a.index
        else None
    )
    more = {"tokens_a": tokens[0], "tokens_b": tokens[1], "layer0": layer0}
    more.update(sesoi=sesoi, margin=margin, alpha=alpha)
    parts = []
    layer_rows = paired_contrasts(a, b, **opts)
    if not layer_rows.empty:
        extra = extra_columns(a, b, baseline=base, **more, **opts)
        parts.append(pd.concat([layer_rows, extra], axis=1).assign(band=None, **meta))
    bands = band_of_layers(list(a.index))
    if bands:
        ta, tb = _band_tables(a, bands), _band_tables(b, bands)
        band_rows = paired_contrasts(ta, tb, **opts)
        extra = extra_columns(ta, tb, baseline=_band_tables(base, bands), **more, **opts)
        band_rows = pd.concat([band_rows, extra], axis=1)
        band_rows = band_rows.rename(columns={"layer": "band"}).assign(layer=None, **meta)
        got = mixed or {}
        for col in MIXED_COLUMNS:
            band_rows[col] = [got.get(bd, {}).get(col, math.nan) for bd in band_rows["band"]]
        parts.append(band_rows)
    return parts


def _tokens(frame: pd.DataFrame) -> dict[str, pd.Series]:
    """variant -> sample_id -> metric-token count (the layer-0 TOKEN_COUNT rows)."""
    rows = frame[(frame["metric"] == TOKEN_COUNT) & (frame["layer"] == 0)]
    return {v: g.set_index("sample_id")["value"] for v, g in rows.groupby("variant")}


def _mixed(
    tables: dict[tuple[str, str], pd.DataFrame],
    tokens: dict[str, pd.Series],
    metric: str,
    pairs: Sequence[tuple[str, str]],
    ci: float,
) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """(a, b) -> band -> the mixed model's columns (one fit per band over every variant)."""
    variants = sorted(v for v, m in tables if m == metric)
    layers = sorted(set.intersection(*(set(tables[(v, metric)].index) for v in variants)))
    return band_effects(tables, tokens, metric, variants, band_of_layers(layers), pairs, ci)


def sesoi_of_table(
    factor: float, basis: str, table: pd.DataFrame, who: str, metric: str = "", pins=None
) -> Margin:
    """The SESOI rule (:func:`homog.stats.margins.margin_of`) of ``who``'s ``table`` of
    ``metric``, with its bands; ``pins``: ``stats.sesoi_pin``."""
    return margin_of(factor, basis, table, band_of_layers(list(table.index)), who, metric, pins)


def _who(variant: str) -> str:
    return "the original's" if variant == "original" else f"{variant}'s"


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
    sesoi: float = 0.1,
    sesoi_basis: str = "sd",
    alpha: float = 0.05,
    mixed_metrics: Sequence[str] = (),
    sesoi_pin: Mapping[str, Mapping[str, float]] | None = None,
    text_ids: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Contrasts between variants of one run.

    ``frame``: layer_metrics rows of the run (variant, sample_id, layer, metric, value); its
    TOKEN_COUNT rows, when present, adjust the contrasts for length. Pairs whose variants are
    absent are skipped; a side that is not a text (KEY_ENDS, "key_first - key_mid") is its
    per-text combination (:func:`homog.stats.combos.with_sides`). ``text_ids``
    (:func:`homog.stats.combos.text_ids` of the texts table): the reviews whose texts make a
    contrast cancel are left out of it and counted in ``n_identical`` (None: not checked,
    ``n_identical`` null).
    ``mixed_metrics``: the metrics whose band rows also get the secondary mixed model
    (homog.stats.mixed; ``stats.mixed_metrics``; KEY_ENDS is not a variant of the fit, so its
    columns are NaN). ``sesoi``, ``sesoi_basis``, ``sesoi_pin``: the smallest effect of
    interest (homog.stats.margins); ``alpha``: the equivalence CI is 1 - 2 alpha.
    Returns CONTRAST_COLUMNS rows.
    """
    opts = {"n_boot": n_boot, "ci": ci, "seed": seed, "test": test, "n_perm": n_perm}
    measured = pivot_metrics(frame[~frame["metric"].isin(NOT_CONTRASTED)])
    tables, tokens = with_sides(measured, _tokens(frame), pairs)
    identical = {p: pair_identical(*p, text_ids) for p in pairs}
    parts: list[pd.DataFrame] = []
    for metric in sorted({m for _, m in tables}):
        present = [(a, b) for a, b in pairs if (a, metric) in tables and (b, metric) in tables]
        fit = metric in mixed_metrics and present
        mixed = _mixed(measured, tokens, metric, present, ci) if fit else {}
        for va, vb in present:
            meta = {
                "run_id": run_id,
                "variant_a": va,
                "variant_b": vb,
                "metric": metric,
                "baseline_run_id": None,
            }
            ref = "original" if ("original", metric) in tables else vb
            a, b, n_same = without(tables[(va, metric)], tables[(vb, metric)], identical[(va, vb)])
            meta["n_identical"] = n_same if text_ids is not None else None
            parts += pair_rows(
                a,
                b,
                meta,
                **opts,
                tokens=(tokens.get(va), tokens.get(vb)),
                baseline=tables.get(("original", metric)),
                sesoi=sesoi,
                mixed=mixed.get((va, vb)),
                margin=sesoi_of_table(
                    sesoi, sesoi_basis, tables[(ref, metric)], _who(ref), metric, sesoi_pin
                ),
                alpha=alpha,
            )
    return finish_contrasts(parts)


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
    sesoi: float = 0.1,
    sesoi_basis: str = "sd",
    alpha: float = 0.05,
    sesoi_pin: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Contrasts of an intervention run against its unchanged run, variant by variant.

    ``mean_diff`` = intervention - unchanged over the same texts; variant_a = variant_b; the
    baseline columns describe the unchanged run, and the depth SESOI is the unchanged run's
    original's (that variant's when it has no original). No mixed model (one variant per side).
    """
    mine = pivot_metrics(frame[~frame["metric"].isin(NOT_CONTRASTED)])
    base = pivot_metrics(baseline[~baseline["metric"].isin(NOT_CONTRASTED)])
    tok_mine, tok_base = _tokens(frame), _tokens(baseline)
    parts: list[pd.DataFrame] = []
    for key in sorted(set(mine) & set(base)):
        variant, metric = key
        meta = {
            "run_id": run_id,
            "variant_a": variant,
            "variant_b": variant,
            "metric": metric,
            "baseline_run_id": baseline_run_id,
            "n_identical": 0,  # the same text on both sides, but another run
        }
        ref = "original" if ("original", metric) in base else variant
        who = f"the unchanged run's {ref}'s"
        parts += pair_rows(
            mine[key], base[key], meta, n_boot=n_boot, ci=ci, seed=seed, test=test,
            n_perm=n_perm, tokens=(tok_mine.get(variant), tok_base.get(variant)), sesoi=sesoi,
            margin=sesoi_of_table(sesoi, sesoi_basis, base[(ref, metric)], who, metric,
                                  sesoi_pin), alpha=alpha,
        )  # fmt: skip
    return finish_contrasts(parts)


def finish_contrasts(parts: list[pd.DataFrame]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in CONTRAST_COLUMNS})
    out = pd.concat(parts, ignore_index=True)[CONTRAST_COLUMNS]
    out["layer"] = out["layer"].astype("Int64")
    out["n"] = out["n"].astype("int64")
    out["n_identical"] = out["n_identical"].astype("Int64")
    out["adjusted"] = out["adjusted"].astype(bool)
    return out


# Per-text values that are indices or counts, not measurements: a mean difference of them
# means nothing, so stats does not contrast them (they stay in layer_metrics for SQL).
NOT_CONTRASTED = ("act_top1_pos", "act_top1_feature", N_REMOVED, TOKEN_COUNT)
