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

from collections.abc import Sequence
from typing import Any

import pandas as pd

from homog.extract import TOKEN_COUNT
from homog.metrics.sets import N_REMOVED
from homog.schema.tables import TABLES
from homog.stats.bands import band_of_layers, pivot_metrics
from homog.stats.combos import pair_identical, with_sides, without
from homog.stats.margins import Margin
from homog.stats.mixed import band_effects
from homog.stats.pair_columns import Part, difference_stats, pair_parts, rows_frame
from homog.stats.paired_tests import paired_difference
from homog.stats.settings import StatsSettings
from homog.variants import CONTRAST_PLAN

# the pairs contrasted: the registry's plan (a derived side such as KEY_ENDS is formed per text
# by homog.stats.combos.with_sides)
VARIANT_PAIRS = CONTRAST_PLAN
CONTRAST_COLUMNS = TABLES["contrasts"].names  # the store's schema is the one definition


def paired_contrasts(
    wide_a: pd.DataFrame, wide_b: pd.DataFrame, settings: StatsSettings
) -> pd.DataFrame:
    """Contrasts a - b for aligned tables [layer x sample_id] (one per side) of one metric.

    Returns one row per layer: layer, n, mean_diff, ci_low, ci_high, p_value
    (``settings.test``, see :func:`paired_p`), p_holm (Holm across the layers given). Samples
    missing or non-finite on either side are dropped per layer.
    """
    a, b = wide_a.align(wide_b, join="inner")
    if a.index.empty:
        return pd.DataFrame()
    d = paired_difference(a.to_numpy(dtype=float), b.to_numpy(dtype=float))  # [G, n]
    return pd.DataFrame({"layer": list(a.index), **difference_stats(d, settings)})


def pair_rows(
    side_a: pd.DataFrame,
    side_b: pd.DataFrame,
    meta: dict[str, Any],
    settings: StatsSettings,
    margin: Margin,
    *,
    tokens: tuple[pd.Series | None, pd.Series | None] = (None, None),
    baseline: pd.DataFrame | None = None,
    mixed: dict[str, dict[str, float]] | None = None,
) -> list[Part]:
    """The layer rows and the band rows of one contrast a - b, every column of the table, as
    parts of :func:`homog.stats.pair_columns.rows_frame` (``meta``: the contrast's labels,
    the same for each of its rows).

    margin: the run and metric's SESOI rule (:meth:`StatsSettings.margin`); tokens: per-text
    metric-token counts of a and b; baseline: the original's [layer x sample_id] table
    (default: b's); mixed: band -> the mixed model's columns for this pair (see
    :func:`homog.stats.pair_columns.pair_parts`).
    """
    parts = pair_parts(
        side_a, side_b, settings, margin, tokens=tokens, baseline=baseline, mixed=mixed
    )
    return [{**part, **meta} for part in parts]


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


def _who(variant: str) -> str:
    return "the original's" if variant == "original" else f"{variant}'s"


def run_contrasts(
    frame: pd.DataFrame,
    run_id: str,
    settings: StatsSettings,
    *,
    pairs: Sequence[tuple[str, str]] = VARIANT_PAIRS,
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
    ``settings.mixed_metrics``: the metrics whose band rows also get the secondary mixed model
    (homog.stats.mixed; KEY_ENDS is not a variant of the fit, so its columns are NaN); the
    SESOI is :meth:`StatsSettings.margin` of the original's table (of ``b``'s without one).
    Returns CONTRAST_COLUMNS rows.
    """
    measured = pivot_metrics(frame[~frame["metric"].isin(NOT_CONTRASTED)])
    tables, tokens = with_sides(measured, _tokens(frame), pairs)
    identical = {p: pair_identical(*p, text_ids) for p in pairs}
    parts: list[Part] = []
    for metric in sorted({m for _, m in tables}):
        present = [(a, b) for a, b in pairs if (a, metric) in tables and (b, metric) in tables]
        fit = metric in settings.mixed_metrics and present
        mixed = _mixed(measured, tokens, metric, present, settings.ci) if fit else {}
        margins: dict[str, Margin] = {}
        for va, vb in present:
            meta = {
                "run_id": run_id,
                "variant_a": va,
                "variant_b": vb,
                "metric": metric,
                "baseline_run_id": None,
            }
            ref = "original" if ("original", metric) in tables else vb
            if ref not in margins:  # one rule per reference table: the pairs share it
                margins[ref] = settings.margin(tables[(ref, metric)], who=_who(ref), metric=metric)
            a, b, n_same = without(tables[(va, metric)], tables[(vb, metric)], identical[(va, vb)])
            meta["n_identical"] = n_same if text_ids is not None else None
            parts += pair_rows(
                a,
                b,
                meta,
                settings,
                margins[ref],
                tokens=(tokens.get(va), tokens.get(vb)),
                baseline=tables.get(("original", metric)),
                mixed=mixed.get((va, vb)),
            )
    return contrast_frame(parts)


def intervention_contrasts(
    frame: pd.DataFrame,
    baseline: pd.DataFrame,
    run_id: str,
    baseline_run_id: str,
    settings: StatsSettings,
) -> pd.DataFrame:
    """Contrasts of an intervention run against its unchanged run, variant by variant.

    ``mean_diff`` = intervention - unchanged over the same texts; variant_a = variant_b; the
    baseline columns describe the unchanged run, and the depth SESOI is the unchanged run's
    original's (that variant's when it has no original). No mixed model (one variant per side).
    """
    mine = pivot_metrics(frame[~frame["metric"].isin(NOT_CONTRASTED)])
    base = pivot_metrics(baseline[~baseline["metric"].isin(NOT_CONTRASTED)])
    tok_mine, tok_base = _tokens(frame), _tokens(baseline)
    parts: list[Part] = []
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
        margin = settings.margin(base[(ref, metric)], who=who, metric=metric)
        tokens = (tok_mine.get(variant), tok_base.get(variant))
        parts += pair_rows(mine[key], base[key], meta, settings, margin, tokens=tokens)
    return contrast_frame(parts)


def contrast_frame(parts: list[Part]) -> pd.DataFrame:
    """The contrasts table of :func:`pair_rows`' parts (CONTRAST_COLUMNS)."""
    return finish_contrasts([rows_frame(parts, CONTRAST_COLUMNS)] if parts else [])


def finish_contrasts(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One contrasts table of tables ``parts`` (CONTRAST_COLUMNS, the store's dtypes)."""
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
