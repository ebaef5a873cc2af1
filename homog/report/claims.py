"""The paper's claims as table rows: measured effect, CI, Holm p and a verdict (pure pandas).

Every row is computed from the store's tables (``contrasts``, ``runs``, ``layer_metrics``)
alone, so a reader can recompute it with SQL. The verdict rules (README, "homog report"):

- a directional claim (e.g. "front has lower erank than original") is **supported** when the
  Holm-corrected p is below ``alpha`` and the effect has the claimed sign, **reversed** when
  p < alpha with the other sign, and **not supported** otherwise (including a missing p);
- an undirected claim (e.g. "paraphrase alone changes erank") is supported when p < alpha in
  either direction;
- a count claim ("the metric separates original from biased text") is supported when at least
  one layer has Holm p < alpha with the claimed sign, reversed when only the other sign does.

Claims (arXiv 2508.17126), per model, on the unchanged run (intervention ``none``) unless
said otherwise: 1 Front/End lower effective rank and higher MEV than original, per depth
band; 2 homogenization is progressive over depth and fastest in the middle layers; 3 attention
mass concentrates on the first token, more in the synthetic variants; 4 the metrics separate
original from biased text (layers with Holm p < alpha); 5 open questions: control vs original
(paraphrase), front/end vs control (position), ``zero_pos`` vs unchanged (does removing the
positional signal reduce homogenization?). Claim 1 is repeated for each token set found in the
data (``erank__no_sink``, ``erank__standardized``, ...), so a reader sees whether it survives.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from homog.stats import BANDS, band_of_layers, bootstrap_ci, paired_p

SUPPORTED, NOT_SUPPORTED, REVERSED = "supported", "not supported", "reversed"
BIASED = ("front", "end")
# (metric, claimed sign of variant - original): lower erank / higher MEV and attention to the
# first token under positional bias
CLAIM1_METRICS = (("erank", -1), ("mev", +1))
SEPARATION_METRICS = ("erank", "mev", "resultant_length", "attn_first")
TOKEN_SETS = ("no_sink", "standardized")


@dataclass
class Claim:
    """One row of the claims table."""

    model: str
    claim: str  # "1" .. "5", with a letter for the variants of a claim
    statement: str
    metric: str
    comparison: str  # e.g. "front - original", "late - early (original)"
    scope: str  # a depth band, "all layers", ...
    effect: float  # the measured mean difference (or a count)
    ci_low: float
    ci_high: float
    p_holm: float
    n: int
    verdict: str
    note: str = ""


def directional_verdict(effect: float, p: float, sign: int, alpha: float) -> str:
    """supported / reversed / not supported for a claim that ``effect`` has ``sign``."""
    if not (math.isfinite(effect) and math.isfinite(p)) or p >= alpha or effect == 0:
        return NOT_SUPPORTED
    return SUPPORTED if np.sign(effect) == sign else REVERSED


def undirected_verdict(p: float, alpha: float) -> str:
    return SUPPORTED if math.isfinite(p) and p < alpha else NOT_SUPPORTED


def _unchanged_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["intervention"].fillna("none") == "none"]


def _band_row(contrasts: pd.DataFrame, run_id: str, a: str, b: str, metric: str, band: str):
    c = contrasts[
        (contrasts["run_id"] == run_id)
        & (contrasts["variant_a"] == a)
        & (contrasts["variant_b"] == b)
        & (contrasts["metric"] == metric)
        & (contrasts["band"] == band)
        & contrasts["baseline_run_id"].isna()
    ]
    return None if c.empty else c.iloc[0]


def _from_contrast(
    model: str, claim: str, statement: str, row, sign: int | None, alpha: float
) -> Claim:
    effect, p = float(row["mean_diff"]), float(row["p_holm"])
    verdict = (
        undirected_verdict(p, alpha)
        if sign is None
        else directional_verdict(effect, p, sign, alpha)
    )
    return Claim(
        model=model,
        claim=claim,
        statement=statement,
        metric=str(row["metric"]),
        comparison=f"{row['variant_a']} - {row['variant_b']}",
        scope=f"{row['band']} layers",
        effect=effect,
        ci_low=float(row["ci_low"]),
        ci_high=float(row["ci_high"]),
        p_holm=p,
        n=int(row["n"]),
        verdict=verdict,
    )


def band_claims(
    contrasts: pd.DataFrame, runs: pd.DataFrame, metrics: list[str], alpha: float
) -> list[Claim]:
    """Claims 1, 3 and 5 (the variant contrasts by depth band) for every unchanged run."""
    out: list[Claim] = []
    present = set(contrasts["metric"])
    for run in _unchanged_runs(runs).itertuples():
        model = run.model
        specs: list[tuple[str, str, str, str, int | None, str]] = []
        for base, sign in CLAIM1_METRICS:
            for metric in [base, *(f"{base}__{s}" for s in TOKEN_SETS)]:
                if metric not in present or metric not in metrics:
                    continue
                word = "lower" if sign < 0 else "higher"
                tag = "1" if metric == base else f"1 ({metric.split('__')[1]})"
                for v in BIASED:
                    statement = f"{v} has {word} {metric} than original"
                    specs.append((tag, statement, v, "original", sign, metric))
        if "attn_first" in present:
            for v in BIASED:
                statement = f"{v} puts more attention on the first token than original"
                specs.append(("3", statement, v, "original", +1, "attn_first"))
        if "erank" in present:
            specs.append(("5a", "paraphrase alone changes erank (control vs original)",
                          "control", "original", None, "erank"))  # fmt: skip
            for v in BIASED:
                statement = f"position, not paraphrase: {v} has lower erank than control"
                specs.append(("5b", statement, v, "control", -1, "erank"))
        for tag, statement, a, b, sign, metric in specs:
            for band in BANDS:
                row = _band_row(contrasts, run.run_id, a, b, metric, band)
                if row is not None:
                    out.append(_from_contrast(model, tag, statement, row, sign, alpha))
    return out


def separation_claims(contrasts: pd.DataFrame, runs: pd.DataFrame, alpha: float) -> list[Claim]:
    """Claim 4: at how many layers each metric separates front/end from original."""
    out: list[Claim] = []
    for run in _unchanged_runs(runs).itertuples():
        for metric in SEPARATION_METRICS:
            sign = -1 if metric == "erank" else +1
            for v in BIASED:
                c = contrasts[
                    (contrasts["run_id"] == run.run_id)
                    & (contrasts["variant_a"] == v)
                    & (contrasts["variant_b"] == "original")
                    & (contrasts["metric"] == metric)
                    & contrasts["band"].isna()
                    & contrasts["baseline_run_id"].isna()
                ]
                if c.empty:
                    continue
                sig = c[c["p_holm"] < alpha]
                agree = int((np.sign(sig["mean_diff"]) == sign).sum())
                against = int((np.sign(sig["mean_diff"]) == -sign).sum())
                # the majority of the separating layers decides (a tie: not supported)
                verdict = (
                    SUPPORTED if agree > against else REVERSED if against > agree else NOT_SUPPORTED
                )
                out.append(
                    Claim(
                        model=run.model,
                        claim="4",
                        statement=f"{metric} separates {v} from original",
                        metric=metric,
                        comparison=f"{v} - original",
                        scope=f"{len(c)} layers",
                        effect=float(agree),
                        ci_low=math.nan,
                        ci_high=math.nan,
                        p_holm=float(c["p_holm"].min()),
                        n=int(c["n"].max()),
                        verdict=verdict,
                        note=f"layers with Holm p < {alpha:g}: {agree} in the claimed "
                        f"direction, {against} against",
                    )
                )
    return out


def intervention_claims(contrasts: pd.DataFrame, runs: pd.DataFrame, alpha: float) -> list[Claim]:
    """Claim 5c: removing the positional signal (zero_pos) raises erank (less homogenization)."""
    out: list[Claim] = []
    by_id = runs.set_index("run_id")
    c = contrasts[
        contrasts["baseline_run_id"].notna()
        & (contrasts["metric"] == "erank")
        & (contrasts["variant_a"] == "original")
        & contrasts["band"].isin(BANDS)
    ]
    for row in c.itertuples():
        if row.run_id not in by_id.index:
            continue
        intervention = by_id.loc[row.run_id, "intervention"]
        effect, p = float(row.mean_diff), float(row.p_holm)
        out.append(
            Claim(
                model=str(by_id.loc[row.run_id, "model"]),
                claim="5c",
                statement=f"{intervention} reduces homogenization (higher erank than unchanged)",
                metric="erank",
                comparison=f"{intervention} - none (original)",
                scope=f"{row.band} layers",
                effect=effect,
                ci_low=float(row.ci_low),
                ci_high=float(row.ci_high),
                p_holm=p,
                n=int(row.n),
                verdict=directional_verdict(effect, p, +1, alpha),
            )
        )
    return out


def progression_claims(
    layer_metrics: pd.DataFrame,
    runs: pd.DataFrame,
    alpha: float,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    test: str = "sign_flip",
    n_perm: int = 10000,
) -> list[Claim]:
    """Claim 2: erank falls from the early to the late band (per text, original variant), and
    the steepest fall between consecutive layers lies in the middle band.

    layer_metrics: rows (run_id, variant, sample_id, layer, metric, value) of erank. The effect
    is the mean over texts of (late-band mean - early-band mean); CI by the stats stage's
    bootstrap, p by its paired test (``stats.test``; one test per model, Holm across the
    models).
    """
    rows: list[Claim] = []
    for run in _unchanged_runs(runs).itertuples():
        m = layer_metrics[
            (layer_metrics["run_id"] == run.run_id)
            & (layer_metrics["variant"] == "original")
            & (layer_metrics["metric"] == "erank")
        ]
        if m.empty:
            continue
        wide = m.pivot_table(index="sample_id", columns="layer", values="value")
        bands = band_of_layers(list(wide.columns))
        if not bands:
            continue
        d = (wide[bands["late"]].mean(axis=1) - wide[bands["early"]].mean(axis=1)).to_numpy()
        d = d[np.isfinite(d)]
        low, high = (
            bootstrap_ci(d[None, :], n_boot=n_boot, ci=ci, seed=seed) if d.size >= 2 else
            ([math.nan], [math.nan])
        )  # fmt: skip
        curve = wide.mean(axis=0)
        steps = curve.diff().dropna()
        steepest = int(steps.idxmin()) if len(steps) else -1  # the layer the fall ends at
        in_middle = steepest in bands["middle"]
        rows.append(
            Claim(
                model=run.model,
                claim="2",
                statement="homogenization is progressive (erank falls from early to late "
                "layers), fastest in the middle layers",
                metric="erank",
                comparison="late - early (original)",
                scope=f"steepest fall at layer {steepest} of {max(wide.columns)}",
                effect=float(d.mean()) if d.size else math.nan,
                ci_low=float(low[0]),
                ci_high=float(high[0]),
                p_holm=float(paired_p(d[None, :], test=test, n_perm=n_perm, seed=seed)[0])
                if d.size >= 2
                else math.nan,
                n=int(d.size),
                verdict="",
                note="steepest fall in the middle band"
                if in_middle
                else "steepest fall outside the middle band",
            )
        )
    from homog.stats import holm

    for claim, p in zip(rows, holm([c.p_holm for c in rows]), strict=True):
        claim.p_holm = float(p)
        claim.verdict = directional_verdict(claim.effect, claim.p_holm, -1, alpha)
        if claim.verdict == SUPPORTED and "outside" in claim.note:
            claim.verdict = NOT_SUPPORTED  # progressive, but not fastest in the middle
    return rows


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
    """Every claim row for every model, in claim order (one DataFrame; columns of Claim)."""
    metrics = sorted(set(contrasts["metric"]))
    rows = [
        *band_claims(contrasts, runs, metrics, alpha),
        *progression_claims(
            layer_metrics, runs, alpha, n_boot=n_boot, ci=ci, seed=seed, test=test, n_perm=n_perm
        ),
        *separation_claims(contrasts, runs, alpha),
        *intervention_claims(contrasts, runs, alpha),
    ]
    frame = pd.DataFrame([asdict(r) for r in rows], columns=list(Claim.__dataclass_fields__))
    order = {"1": 0, "2": 1, "3": 2, "4": 3, "5": 4}
    frame["_o"] = frame["claim"].str[0].map(order)
    return frame.sort_values(["model", "_o", "claim"], kind="stable").drop(columns="_o")
