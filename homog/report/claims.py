"""The paper's claims as table rows: effect, CI, family-Holm p, equivalence test and a verdict.

Every row is computed from the store's tables (``contrasts``, ``runs``, ``layer_metrics``)
alone, so a reader can recompute it with SQL (docs/statistics.md gives every formula).

The effect a verdict reads is the length-adjusted one (``adj_*`` columns of ``contrasts``:
the intercept of the per-text regression of the difference on the token-count difference)
wherever the two variants' token counts differ, the raw mean paired difference otherwise.
Its p-value is Holm-corrected over the model's whole family of claim rows (claims x bands x
variants x token sets; claim 4's count rows aside, see below; the two readings of claim 3
are one test, counted once), and so is the TOST p-value of
equivalence to no effect within +-``sesoi`` (``stats.sesoi`` between-text SDs of the
original's metric). Verdicts at ``alpha``:

- **supported**: p_holm < alpha and the effect has the claimed sign (an undirected claim: any
  sign);
- **reversed**: p_holm < alpha with the other sign;
- **equivalent to no effect**: not significant, and the family-Holm TOST p < alpha (the CI of
  the effect lies within +-sesoi);
- **inconclusive**: neither (too noisy to tell).

Beside each verdict: ``lexical_confound`` is true when the same contrast differs at layer 0
(the position-free token embeddings; raw paired test p < alpha, not corrected, so the mark
errs towards caution; a difference within rounding, 1e-9 of the original's level, never
counts), and ``rel_layer0_*`` is the band's difference minus the layer-0 difference per text
(what the layers add on top of the lexical difference).

Claims (arXiv 2508.17126), per model, on the unchanged run (intervention ``none``) unless
said otherwise, each at layer 0, the early / middle / late bands of the layers between, and
the final-norm output (``final``):

1. front / end (and the token-preserving key_first / key_last) have lower erank and higher
   MEV than original; repeated on every token set present (``erank__no_sink``, ...);
2. homogenization is progressive (erank: late band - early band of the original < 0), and its
   steepest fall between consecutive layers (1..L-1) lies in the middle band (a second row:
   a bootstrap interval of that layer; supported when it lies in the middle band, reversed
   when wholly outside it); on ``erank`` and its token sets;
3. two readings of the paper: "3": the synthetic variants put MORE attention on the first
   token than original (``attn_first`` higher); "3 (summary)": the paper's summary, "lower
   average attention than original" (``attn_first`` lower);
4. the metrics separate original from biased text: the number of layers 1..L whose contrast
   is significant in the claimed direction, Holm over all of the model's claim-4 layer tests;
   supported / reversed by the majority of significant layers, equivalent when every layer is
   equivalent, inconclusive otherwise; p_holm is the smallest of the side the verdict reads;
5. open questions: 5a control / key_control vs original (rewriting or moving a sentence alone
   changes erank; undirected), 5b front / end vs control and key_first / key_last vs
   key_control (position, not paraphrase), 5c ``zero_pos`` vs unchanged (removing the
   positional signal raises erank).
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pandas as pd

from homog.paired_tests import NUMERIC_TOLERANCE, holm
from homog.report.claims_progression import progression_claims
from homog.report.claims_rows import (
    EQUIVALENT,
    INCONCLUSIVE,
    NOT_SUPPORTED,  # noqa: F401 (the old verdict, kept importable)
    REVERSED,
    SUPPORTED,
    Claim,
    decide,
    directional_verdict,  # noqa: F401
    token_set_of,
    undirected_verdict,  # noqa: F401
    unit_of,
)
from homog.stats import ALL_BANDS

BIASED = ("front", "end", "key_first", "key_last")
CONTROL_OF = {"front": "control", "end": "control", "key_first": "key_control",
              "key_last": "key_control"}  # fmt: skip
# (metric, claimed sign of variant - original): lower erank / higher MEV under positional bias
CLAIM1_METRICS = (("erank", -1), ("mev", +1))
SEPARATION_METRICS = ("erank", "mev", "resultant_length", "attn_first")
TOKEN_SETS = ("no_sink", "standardized")
SUMMARY_READING = "3 (summary)"  # claim 3 as the paper's summary states it
__all__ = ["Claim", "claims_table", "EQUIVALENT", "INCONCLUSIVE", "REVERSED", "SUPPORTED"]


def _unchanged_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["intervention"].fillna("none") == "none"]


def _rows(contrasts: pd.DataFrame, run_id: str, *, baseline: bool = False) -> pd.DataFrame:
    c = contrasts[contrasts["run_id"] == run_id]
    return c[c["baseline_run_id"].notna() if baseline else c["baseline_run_id"].isna()]


def _get(row: pd.Series, col: str, default=math.nan):
    return row[col] if col in row.index and pd.notna(row[col]) else default


def from_contrast(model: str, claim: str, statement: str, row: pd.Series, sign: int | None,
                  comparison: str | None = None) -> Claim:  # fmt: skip
    """A claim row from one contrasts row (verdict and p_holm are set by the family)."""
    adjusted = bool(_get(row, "adjusted", False))
    pre = "adj_" if adjusted else ""
    effect = float(row[f"{pre}diff" if adjusted else "mean_diff"])
    p = float(_get(row, "adj_p_value" if adjusted else "p_value"))
    base = float(_get(row, "baseline_mean"))
    metric = str(row["metric"])
    l0, l0p = float(_get(row, "layer0_diff")), float(_get(row, "layer0_p_value"))
    notes = []
    change = float(_get(row, "n_tokens_diff", 0.0))
    if adjusted:
        notes.append(
            f"length-adjusted (mean token change {change:+.2f}; "
            f"raw difference {float(row['mean_diff']):+.4g})"
        )
    elif abs(change) > 0:
        notes.append(
            f"token counts differ (mean change {change:+.2f}) by a constant or in too few "
            "texts to adjust for: raw difference"
        )
    if not math.isfinite(l0):
        notes.append("no layer-0 control for this metric")
    if math.isfinite(float(_get(row, "mm_diff"))):
        notes.append(
            f"mixed model: {float(row['mm_diff']):+.4g} "
            f"[{float(row['mm_ci_low']):+.4g}, {float(row['mm_ci_high']):+.4g}]"
        )
    band = str(row["band"])
    return Claim(
        model=model,
        claim=claim,
        statement=statement,
        metric=metric,
        comparison=comparison or f"{row['variant_a']} - {row['variant_b']}",
        scope="layer 0" if band == "layer0" else "final layer" if band == "final"
        else f"{band} layers",
        effect=effect,
        ci_low=float(_get(row, "adj_ci_low" if adjusted else "ci_low")),
        ci_high=float(_get(row, "adj_ci_high" if adjusted else "ci_high")),
        p_holm=math.nan,
        n=int(row["n"]),
        verdict="",
        note="; ".join(notes),
        raw_effect=float(row["mean_diff"]),
        adjusted=adjusted,
        dz=float(_get(row, "dz")),
        pct_of_baseline=100 * effect / base if base and math.isfinite(base) else math.nan,
        baseline_mean=base,
        unit=unit_of(metric),
        p_value=p,
        sesoi=float(_get(row, "sesoi")),
        p_tost=float(_get(row, "p_tost")),
        layer0_effect=l0,
        layer0_p=l0p,
        rel_layer0_effect=float(_get(row, "rel_layer0_diff")),
        rel_layer0_ci_low=float(_get(row, "rel_layer0_ci_low")),
        rel_layer0_ci_high=float(_get(row, "rel_layer0_ci_high")),
        token_set=token_set_of(metric),
        band=band,
        mm_effect=float(_get(row, "mm_diff")),
        mm_p=float(_get(row, "mm_p_value")),
        sign=0 if sign is None else sign,
    )  # fmt: skip


def _band_specs(present: set[str], metrics: list[str]) -> list[tuple]:
    """(tag, statement, a, b, sign, metric) of claims 1, 3, 5a and 5b."""
    specs: list[tuple] = []
    for base, sign in CLAIM1_METRICS:
        for metric in [base, *(f"{base}__{s}" for s in TOKEN_SETS)]:
            if metric not in present or metric not in metrics:
                continue
            word = "lower" if sign < 0 else "higher"
            tag = "1" if metric == base else f"1 ({metric.split('__')[1]})"
            specs += [(tag, f"{v} has {word} {metric} than original", v, "original", sign, metric)
                      for v in BIASED]  # fmt: skip
    if "attn_first" in present:
        for v in BIASED:
            specs.append(
                (
                    "3",
                    f"{v} puts more attention on the first token than original "
                    "(the claim as the paper states it)",
                    v,
                    "original",
                    +1,
                    "attn_first",
                )
            )
            specs.append(
                (
                    "3 (summary)",
                    f"{v} has lower average attention on the first token "
                    "than original (the paper's summary)",
                    v,
                    "original",
                    -1,
                    "attn_first",
                )
            )
    if "erank" in present:
        specs += [("5a", "paraphrase alone changes erank (control vs original)", "control",
                   "original", None, "erank"),
                  ("5a", "moving a non-key sentence alone changes erank (key_control vs "
                   "original)", "key_control", "original", None, "erank")]  # fmt: skip
        for v in BIASED:
            c = CONTROL_OF[v]
            specs.append(("5b", f"position, not rewriting: {v} has lower erank than {c}",
                          v, c, -1, "erank"))  # fmt: skip
    return specs


def band_claims(contrasts: pd.DataFrame, runs: pd.DataFrame, metrics: list[str]) -> list[Claim]:
    """Claims 1, 3 and 5a/5b at every band row (layer0 .. final) of every unchanged run."""
    out: list[Claim] = []
    present = set(contrasts["metric"])
    for run in _unchanged_runs(runs).itertuples():
        c = _rows(contrasts, run.run_id)
        c = c[c["band"].isin(ALL_BANDS)]
        index = {(r.variant_a, r.variant_b, r.metric, r.band): i for i, r in
                 zip(c.index, c.itertuples(), strict=True)}  # fmt: skip
        for tag, statement, a, b, sign, metric in _band_specs(present, metrics):
            for band in ALL_BANDS:
                i = index.get((a, b, metric, band))
                if i is not None:
                    out.append(from_contrast(run.model, tag, statement, c.loc[i], sign))
    return out


def separation_claims(contrasts: pd.DataFrame, runs: pd.DataFrame, alpha: float) -> list[Claim]:
    """Claim 4: at how many layers each metric separates front/end from original."""
    out: list[Claim] = []
    for run in _unchanged_runs(runs).itertuples():
        c = _rows(contrasts, run.run_id)
        c = c[c["band"].isna() & (c["variant_b"] == "original") & (c["layer"] >= 1)]
        groups = []
        for metric in SEPARATION_METRICS:
            sign = -1 if metric == "erank" else +1
            for v in BIASED:
                g = c[(c["variant_a"] == v) & (c["metric"] == metric)]
                if not g.empty:
                    rows = [from_contrast(run.model, "4", "", r, sign) for _, r in g.iterrows()]
                    groups.append((metric, v, sign, rows))
        layer_rows = [r for *_, rows in groups for r in rows]
        lexical(layer_rows, alpha)
        for r, p, pt in zip(layer_rows, holm([r.p_value for r in layer_rows]),
                            holm([r.p_tost for r in layer_rows]), strict=True):  # fmt: skip
            r.p_holm, r.p_tost = float(p), float(pt)
        for metric, v, sign, rows in groups:
            sig = [r for r in rows if r.p_holm < alpha and r.effect != 0]
            agree = [r for r in sig if np.sign(r.effect) == sign]
            against = [r for r in sig if np.sign(r.effect) == -sign]
            if len(agree) > len(against):
                verdict, side = SUPPORTED, agree
            elif len(against) > len(agree):
                verdict, side = REVERSED, against
            elif not sig and all(r.p_tost < alpha for r in rows):
                verdict, side = EQUIVALENT, rows
            else:
                verdict, side = INCONCLUSIVE, sig or rows
            out.append(
                Claim(
                    model=run.model,
                    claim="4",
                    statement=f"{metric} separates {v} from original",
                    metric=metric,
                    comparison=f"{v} - original",
                    scope=f"{len(rows)} layers (1..L)",
                    effect=float(len(agree)),
                    ci_low=math.nan,
                    ci_high=math.nan,
                    p_holm=_finite(min, [r.p_holm for r in side]),
                    n=max(r.n for r in rows),
                    verdict=verdict,
                    note=f"layers with Holm p < {alpha:g} (all claim-4 layer tests of the "
                    f"model): {len(agree)} in the claimed direction, {len(against)} against; "
                    f"{sum(r.lexical_confound for r in rows)} layers differ at layer 0 too",
                    adjusted=any(r.adjusted for r in rows),
                    unit="layers",
                    p_tost=_finite(max, [r.p_tost for r in rows]),
                    layer0_effect=rows[0].layer0_effect,  # the same for every layer row
                    layer0_p=rows[0].layer0_p,
                    lexical_confound=rows[0].lexical_confound,
                    token_set=token_set_of(metric),
                    band="all layers",
                    sign=sign,
                )
            )
    return out


def intervention_claims(contrasts: pd.DataFrame, runs: pd.DataFrame) -> list[Claim]:
    """Claim 5c: removing the positional signal (zero_pos) raises erank (less homogenization)."""
    out: list[Claim] = []
    by_id = runs.set_index("run_id")
    c = contrasts[
        contrasts["baseline_run_id"].notna()
        & (contrasts["metric"] == "erank")
        & (contrasts["variant_a"] == "original")
        & contrasts["band"].isin(ALL_BANDS)
    ]
    for _, row in c.iterrows():
        if row["run_id"] not in by_id.index:
            continue
        intervention = by_id.loc[row["run_id"], "intervention"]
        out.append(
            from_contrast(
                str(by_id.loc[row["run_id"], "model"]), "5c",
                f"{intervention} reduces homogenization (higher erank than unchanged)", row, +1,
                comparison=f"{intervention} - none (original)",
            )
        )  # fmt: skip
    return out


def family_verdicts(rows: list[Claim], alpha: float) -> None:
    """Holm over each model's claim rows (p and TOST p; claim 4 has its own), then verdicts."""
    for model in sorted({r.model for r in rows}):
        # claim 3's second reading tests the same contrast as the first: one test, counted once
        fam = [r for r in rows if r.model == model and r.claim not in ("4", SUMMARY_READING)]
        p_h, t_h = holm([r.p_value for r in fam]), holm([r.p_tost for r in fam])
        twin = {}
        for r, p, t in zip(fam, p_h, t_h, strict=True):
            r.p_holm, r.p_tost = float(p), float(t)
            twin[(r.comparison, r.metric, r.band)] = r
        for r in rows:
            if r.model == model and r.claim == SUMMARY_READING:
                first = twin[(r.comparison, r.metric, r.band)]
                r.p_holm, r.p_tost = first.p_holm, first.p_tost
        for r in rows:
            if r.model == model and r.claim != "4" and not r.verdict:
                r.verdict = decide(r.effect, r.p_holm, r.p_tost, r.sign or None, alpha)


def claims_table(
    contrasts: pd.DataFrame,
    runs: pd.DataFrame,
    layer_metrics: pd.DataFrame,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> pd.DataFrame:
    """Every claim row for every model, in claim order (one DataFrame; the columns of Claim).

    contrasts / runs: the store's tables; layer_metrics: rows (run_id, variant, sample_id,
    layer, metric, value) of the original variant for claim 2 (erank and, when present,
    erank__no_sink and erank__standardized). The bootstrap settings and ``test`` are claim 2's.
    """
    metrics = sorted(set(contrasts["metric"]))
    rows = [
        *band_claims(contrasts, runs, metrics),
        *progression_claims(layer_metrics, runs, alpha, n_boot=n_boot, ci=ci, seed=seed,
                            test=test, n_perm=n_perm),
        *intervention_claims(contrasts, runs),
    ]  # fmt: skip
    lexical(rows, alpha)
    family_verdicts(rows, alpha)
    rows += separation_claims(contrasts, runs, alpha)
    frame = pd.DataFrame([asdict(r) for r in rows], columns=list(Claim.__dataclass_fields__))
    frame = frame.drop(columns="sign")
    order = {"1": 0, "2": 1, "3": 2, "4": 3, "5": 4}
    frame["_o"] = frame["claim"].str[0].map(order)
    return frame.sort_values(["model", "_o", "claim"], kind="stable").drop(columns="_o")


def _finite(pick, values) -> float:
    """``pick`` (min or max) of the finite ``values``; NaN when none is (a database written
    before the TOST columns), without numpy's all-NaN warning."""
    ok = [float(v) for v in values if math.isfinite(v)]
    return pick(ok) if ok else math.nan


# A layer-0 difference below NUMERIC_TOLERANCE of the original's level is rounding, not words.
# The stats stage already sets such per-text differences to 0 (homog.paired_tests); this guard
# keeps databases written before that from marking them.


def lexical(rows: list[Claim], alpha: float) -> None:
    """Set ``lexical_confound``: the contrast's layer-0 difference has p < alpha and is larger
    than rounding (``NUMERIC_TOLERANCE`` times the original's mean, at least 1)."""
    for r in rows:
        scale = abs(r.baseline_mean) if math.isfinite(r.baseline_mean) else 1.0
        real = abs(r.layer0_effect) > NUMERIC_TOLERANCE * max(1.0, scale)
        r.lexical_confound = bool(math.isfinite(r.layer0_p) and r.layer0_p < alpha and real)
