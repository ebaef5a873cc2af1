"""The paper's claims as table rows: effect, CI, family, margin and a verdict word.

Every row is computed from the store's tables (``contrasts``, ``runs``, ``layer_metrics``,
``separability``) alone, so a reader can recompute it with SQL (docs/statistics.md gives every
formula).

The effect a verdict reads is the length-adjusted one (``adj_*`` columns of ``contrasts``)
wherever the two variants' token counts differ, the raw mean paired difference otherwise.
Each row carries a smallest effect size of interest (``sesoi``, from the stats stage:
``stats.sesoi`` times the original's early-to-late change by default; ``sesoi_basis`` says
what it is a share of) and belongs to one family:

- **primary**: the pre-registered endpoints of ``stats.primary`` (metric x token set x scope
  x contrast); Holm over them per model;
- **exploratory**: every other claim row; Holm over them per model, apart from the primary;
- **control**: the layer-0 rows (the position-free token embeddings), shown beside the
  claims as their negative control and counted in no Holm family (their p is the raw one).

Verdicts at ``alpha`` (:func:`homog.stats.verdicts.judge`): **supported** / **reversed**
(significant, the 95 % CI wholly beyond +-sesoi, on the claimed side or the other),
**nonzero** (significant, the CI reaching into the margin), **negligible** (inside +-sesoi,
real), **equivalent** (not significant and inside), **inconclusive** (neither), **too few
pairs** (n < 10), **descriptive** (no SESOI). The ``claimed`` column names each row's claimed
sign (``either``: undirected by declaration).

Beside each verdict: ``lexical_confound`` is true when the same contrast differs at layer 0
(raw paired test p < alpha, larger than rounding), and ``rel_layer0_*`` is the band's
difference minus the layer-0 difference per text.

Claims (arXiv 2508.17126), per model, on the unchanged run (intervention ``none``) unless
said otherwise, each at layer 0, the early / middle / late bands and the final-norm output:

1. front / end (and the token-preserving key_first / key_last) have lower erank and higher
   MEV than original, on every token set present; ``1u``: the U-shape, the key sentence at
   the edges ((key_first + key_last) / 2, the stats stage's ``key_ends``) against the middle
   (key_mid); ``1k``: the key-specific effects, (key at the place - key in the middle) -
   (a non-key sentence at the same place - it in the middle) for the first place, the last
   and both (the same-place control ctrl_*; position alone cancels);
2. homogenization is progressive (erank: late band - early band of the original < 0), and its
   steepest fall lies in the middle band (claims_progression);
3. the biased variants put more attention on the first token than original (``attn_first``
   higher; the paper's statement, one reading);
4. the metrics separate original from biased text: a cross-validated classifier on the
   per-layer metric profile, its AUC (the stats stage's ``separability`` table;
   claims_separability); the layer-0 classifier is its control;
5. 5a the reordering effect (control / key_control vs original: rewriting, or moving a
   non-key sentence, alone), 5b the position effect (front / end vs control, key_first /
   key_last vs key_control: position, not rewriting or reordering), 5c ``zero_pos`` vs
   unchanged (removing the positional signal raises erank).
"""

from __future__ import annotations

import math
from dataclasses import asdict

import pandas as pd

from homog.claims import CONTROL_FAMILY, EXPLORATORY, GROUPS, OWN_HOLM, PRIMARY, Tag
from homog.config.primary import PrimaryConfig
from homog.metrics.registry import (
    base_metric,
    difference_unit,
    token_set_of,
)
from homog.report.claims_plan import band_specs
from homog.report.claims_progression import progression_claims
from homog.report.claims_rows import Claim
from homog.report.claims_rules import lexical, row_verdict
from homog.report.claims_separability import separation_claims
from homog.stats.bands import ALL_BANDS
from homog.stats.paired_tests import holm
from homog.stats.verdicts import (
    EQUIVALENT,
    INCONCLUSIVE,
    NEGLIGIBLE,
    REVERSED,
    SUPPORTED,
)
from homog.variants import (
    contrast_name,
)

__all__ = [
    "Claim",
    "claims_table",
    "EQUIVALENT",
    "INCONCLUSIVE",
    "NEGLIGIBLE",
    "REVERSED",
    "SUPPORTED",
]


def _unchanged_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["intervention"].fillna("none") == "none"]


def _rows(contrasts: pd.DataFrame, run_id: str, *, baseline: bool = False) -> pd.DataFrame:
    c = contrasts[contrasts["run_id"] == run_id]
    return c[c["baseline_run_id"].notna() if baseline else c["baseline_run_id"].isna()]


def _get(row: pd.Series, col: str, default=math.nan):
    return row[col] if col in row.index and pd.notna(row[col]) else default


def _notes(row: pd.Series, adjusted: bool, l0: float) -> str:
    """The row's note: how its effect was adjusted for length, a missing layer-0 control,
    identical pairs left out, and the mixed model's contrast."""
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
    same = _get(row, "n_identical", 0)
    if same:
        notes.append(f"{int(same)} identical pair(s) left out (the same text on both sides)")
    if math.isfinite(float(_get(row, "mm_diff"))):
        notes.append(
            f"mixed model: {float(row['mm_diff']):+.4g} "
            f"[{float(row['mm_ci_low']):+.4g}, {float(row['mm_ci_high']):+.4g}]"
        )
    return "; ".join(notes)


def from_contrast(
    model: str,
    claim: str,
    statement: str,
    row: pd.Series,
    sign: int | None,
    comparison: str | None = None,
) -> Claim:
    """A claim row from one contrasts row (verdict and p_holm are set by the family)."""
    adjusted = bool(_get(row, "adjusted", False))
    pre = "adj_" if adjusted else ""
    effect = float(row[f"{pre}diff" if adjusted else "mean_diff"])
    p = float(_get(row, "adj_p_value" if adjusted else "p_value"))
    base = float(_get(row, "baseline_mean"))
    metric = str(row["metric"])
    l0, l0p = float(_get(row, "layer0_diff")), float(_get(row, "layer0_p_value"))
    band = str(row["band"])
    return Claim(
        model=model,
        claim=claim,
        statement=statement,
        metric=metric,
        comparison=comparison or contrast_name(str(row["variant_a"]), str(row["variant_b"])),
        scope="layer 0"
        if band == "layer0"
        else "final layer"
        if band == "final"
        else f"{band} layers",
        effect=effect,
        ci_low=float(_get(row, "adj_ci_low" if adjusted else "ci_low")),
        ci_high=float(_get(row, "adj_ci_high" if adjusted else "ci_high")),
        p_holm=math.nan,
        n=int(row["n"]),
        verdict="",
        note=_notes(row, adjusted, l0),
        raw_effect=float(row["mean_diff"]),
        adjusted=adjusted,
        dz=float(_get(row, "dz")),
        pct_of_baseline=100 * effect / base if base and math.isfinite(base) else math.nan,
        baseline_mean=base,
        unit=difference_unit(metric),
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
        family=CONTROL_FAMILY if band == "layer0" else EXPLORATORY,
        sesoi_basis=str(_get(row, "sesoi_basis", "")),
        eq_ci_low=float(_get(row, "eq_ci_low")),
        eq_ci_high=float(_get(row, "eq_ci_high")),
        baseline_sd=float(_get(row, "baseline_sd")),
        depth_change=float(_get(row, "depth_change")),
        sign=0 if sign is None else sign,
    )


def band_claims(contrasts: pd.DataFrame, runs: pd.DataFrame, metrics: list[str]) -> list[Claim]:
    """Claims 1, 3 and 5a/5b at every band row (layer0 .. final) of every unchanged run."""
    out: list[Claim] = []
    present = set(contrasts["metric"])
    for run in _unchanged_runs(runs).itertuples():
        c = _rows(contrasts, run.run_id)
        c = c[c["band"].isin(ALL_BANDS)]
        index = {
            (r.variant_a, r.variant_b, r.metric, r.band): i
            for i, r in zip(c.index, c.itertuples(), strict=True)
        }
        for tag, statement, a, b, sign, metric in band_specs(present, metrics):
            for band in ALL_BANDS:
                i = index.get((a, b, metric, band))
                if i is not None:
                    out.append(from_contrast(run.model, tag, statement, c.loc[i], sign))
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
                str(by_id.loc[row["run_id"], "model"]),
                Tag.INTERVENTION,
                f"{intervention} reduces homogenization (higher erank than unchanged)",
                row,
                +1,
                comparison=f"{intervention} - none (original)",
            )
        )
    return out


def assign_families(rows: list[Claim], primary: PrimaryConfig | None) -> None:
    """Set each row's family: control (layer 0, or a classifier's layer-0 control), primary
    (its base metric, token set, band and comparison are all named in ``stats.primary``) or
    exploratory."""
    for r in rows:
        if r.band == "layer0":
            r.family = CONTROL_FAMILY
        elif primary is not None and primary.names(
            base_metric(r.metric), r.token_set, r.band, r.comparison
        ):
            r.family = PRIMARY


def family_verdicts(rows: list[Claim], alpha: float) -> None:
    """Holm per model over its primary rows and, apart, over its exploratory rows (a control
    row keeps its raw p); then every row without a verdict gets one (:func:`judge`).

    Claim 4's classifier rows are Holm-corrected among themselves, and apart its rows against
    key_control (4r): their permutation or bootstrap p cannot fall below 1 / (draws + 1), so
    in the family of every other exploratory row (hundreds, with sign-flip p down to 1e-4) no
    classifier could ever pass."""
    for model in sorted({r.model for r in rows}):
        for family, group in (
            (PRIMARY, ""),
            (EXPLORATORY, ""),
            *((EXPLORATORY, tag) for tag in OWN_HOLM),
        ):
            fam = [
                r
                for r in rows
                if r.model == model
                and r.family == family
                and (r.claim if r.claim in OWN_HOLM else "") == group
            ]
            for r, p in zip(fam, holm([r.p_value for r in fam]), strict=True):
                r.p_holm = float(p)
    for r in rows:
        if r.family == CONTROL_FAMILY:
            r.p_holm = r.p_value
        if not r.verdict:
            r.verdict = row_verdict(r, r.sesoi, alpha)


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
    primary: PrimaryConfig | None = None,
    separability: pd.DataFrame | None = None,
    sesoi: float = 0.1,
) -> pd.DataFrame:
    """Every claim row for every model, in claim order (one DataFrame; the columns of Claim).

    contrasts / runs: the store's tables; layer_metrics: rows (run_id, variant, sample_id,
    layer, metric, value) of the original variant for claim 2 (erank and, when present,
    erank__no_sink and erank__standardized). The bootstrap settings and ``test`` are claim 2's.
    ``primary``: the pre-registered endpoints (``stats.primary``; None: its defaults);
    ``separability``: the stats stage's classifier table for claim 4 (None or empty: no
    claim-4 rows).
    """
    metrics = sorted(set(contrasts["metric"]))
    rows = [
        *band_claims(contrasts, runs, metrics),
        *progression_claims(
            layer_metrics,
            runs,
            alpha,
            n_boot=n_boot,
            ci=ci,
            seed=seed,
            test=test,
            n_perm=n_perm,
            sesoi=sesoi,
        ),
        *intervention_claims(contrasts, runs),
    ]
    if separability is not None and not separability.empty:
        rows += separation_claims(separability, runs)
    lexical(rows, alpha)
    assign_families(rows, primary if primary is not None else PrimaryConfig())
    family_verdicts(rows, alpha)
    frame = pd.DataFrame([asdict(r) for r in rows], columns=list(Claim.__dataclass_fields__))
    # every row names its claimed sign, or that it is undirected by declaration
    frame["claimed"] = frame["sign"].map({1: "+", -1: "-"}).fillna("either")
    frame = frame.drop(columns=["sign", "null"])
    order = {group: i for i, group in enumerate(GROUPS)}
    frame["_o"] = frame["claim"].str[0].map(order)
    return frame.sort_values(["model", "_o", "claim"], kind="stable").drop(columns="_o")
