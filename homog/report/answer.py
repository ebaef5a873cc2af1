"""The report's first screen: the answer in words, and the primary effects against their margin.

One line per question, generated from the claims frame (``homog.report.claims.claims_table``):
the pre-registered primary family first (homog.report.answer_primary), then the
exploratory rows that a reader asks about next (the reordering effect, the paper's rewrites,
removing positions, the classifier), then the moved sentence, the dose series and the cost,
and the order-invariance check last. Each line is an :class:`~homog.report.answer_line.AnswerLine`
(question, family, scope, finding, endpoints, verdict counts, largest effect) rendered in one
place, its ``markdown``; the README's "answer so far" is written from the same lines
(``python -m homog.report.readme``), so the two cannot disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from homog.claims import CONTROL_FAMILY, EXPLORATORY, PRIMARY, Tag
from homog.report.answer_line import AnswerLine, verdict_counts
from homog.report.answer_primary import per_model, primary_lines, sig2
from homog.report.concentration import answer_line as concentration_line
from homog.report.cost import cost_line
from homog.report.cost_doses import primary_cost_line
from homog.report.document import Section
from homog.report.forest import forest_figure
from homog.stats.reordering import REPEATS
from homog.stats.separability import MIN_TEXTS

README_START, README_END = "<!-- current-answer -->", "<!-- /current-answer -->"


def _count(n: float) -> str:
    return str(int(n)) if pd.notna(n) else "no"


def _exploratory(
    claims: pd.DataFrame,
    tag: str,
    comparisons: tuple[str, ...] | None,
    metric: str,
    bands: tuple[str, ...],
) -> pd.DataFrame:
    rows = claims[(claims["claim"].astype(str) == tag) & (claims["metric"] == metric)]
    rows = rows[rows["band"].isin(bands)]
    if "family" in rows.columns:
        rows = rows[rows["family"] == EXPLORATORY]
    return rows if comparisons is None else rows[rows["comparison"].isin(comparisons)]


def _effects(rows: pd.DataFrame, pct: bool = False) -> str:
    parts = []
    for _, r in rows.iterrows():
        size = (
            f"{sig2(r['pct_of_baseline'])} % of the mean"
            if pct
            else f"{sig2(r['effect'])} [{sig2(r['ci_low'])}, {sig2(r['ci_high'])}]"
        )
        parts.append(f"{r['model']} {r['band']} {size} {r['verdict']}")
    return "; ".join(parts)


def _exploratory_line(question: str, scope: str, rows: pd.DataFrame, finding: str) -> AnswerLine:
    return AnswerLine(
        question=question,
        family=EXPLORATORY,
        scope=scope,
        finding=finding,
        endpoints=len(rows),
        verdicts=verdict_counts(rows["verdict"]),
    )


def exploratory_lines(claims: pd.DataFrame) -> list[AnswerLine]:
    """The exploratory rows a reader asks about after the primary answer."""
    out = []
    late = ("late", "final")
    reorder = _exploratory(claims, Tag.REORDERING, ("key_control - original",), "erank", late)
    if not reorder.empty:
        out.append(
            _exploratory_line(
                "Reordering effect",
                "exploratory; key_control - original, erank: a non-key sentence moved, no word "
                "changed",
                reorder,
                f"{_effects(reorder)}.",
            )
        )
    rewrites = claims[claims["claim"].astype(str).str.match(r"^1( \(|$)")]
    rewrites = rewrites[rewrites["comparison"].isin(["front - original", "end - original"])]
    if "family" in rewrites.columns:
        rewrites = rewrites[rewrites["family"] == EXPLORATORY]
    if not rewrites.empty:
        out.append(
            _exploratory_line(
                "The paper's rewrites",
                "exploratory, claim 1; front / end - original, every metric, token set and band",
                rewrites,
                f"{per_model(rewrites)}.",
            )
        )
    zero = _exploratory(claims, Tag.INTERVENTION, None, "erank", ("final",))
    # claim 5c holds every intervention against none (the graded doses too): this line is
    # zero_pos's, as it says; the doses have the report's section of their own
    zero = zero[zero["comparison"].astype(str).str.startswith("zero_pos - none")]
    if not zero.empty:
        out.append(
            _exploratory_line(
                "Removing positions",
                "exploratory, 5c; zero_pos - none, erank at the final layer",
                zero,
                f"{_effects(zero, pct=True)}.",
            )
        )
    sep = separability_line(claims)
    if sep is not None:
        out.append(sep)
    return out


def _ci(r: pd.Series) -> str:
    return f"{sig2(r['effect'])} [{sig2(r['ci_low'])}, {sig2(r['ci_high'])}]"


def separability_line(claims: pd.DataFrame) -> AnswerLine | None:
    """Claim 4 on the profile: the best AUC against the original, the same split by whether
    the variant changed the first sentence, and each position variant against key_control
    (position beyond reordering); the layer-0 rows of the position family are 0.5 by
    construction (the metrics are order-invariant there), a check rather than a control."""
    tags = claims["claim"].astype(str)
    tagged = tags.isin([Tag.SEPARATION, Tag.SEPARATION_BEYOND])
    sep = claims[tagged & (claims["metric"] == "profile")]
    if sep.empty:
        return None
    parts = []
    for model, g in sep.groupby("model", sort=False):
        comp = g["comparison"].astype(str)
        whole = g[
            (g["claim"] == Tag.SEPARATION)
            & (g["band"] != "layer0")
            & ~comp.str.contains(r"\(first")
        ]
        if whole.empty:
            continue
        auc = pd.to_numeric(whole["effect"], errors="coerce")
        if auc.isna().all():
            n = pd.to_numeric(whole["n"], errors="coerce").max()
            parts.append(
                f"{model}: no AUC, too few reviews ({_count(n)} paired texts; "
                f"the classifier needs at least {MIN_TEXTS})"
            )
            continue
        best = whole.loc[auc.idxmax()]
        text = f"{model}: best AUC {_ci(best)} ({best['comparison']}, {best['verdict']})"
        variant = str(best["comparison"]).split(" - ")[0]
        for word in ("changed", "kept"):
            part = g[comp == f"{variant} - original (first sentence {word})"]
            if len(part):
                text += f", first sentence {word} {_ci(part.iloc[0])}"
        beyond = g[g["claim"] == Tag.SEPARATION_BEYOND]
        if len(beyond):
            text += "; against key_control: " + ", ".join(
                f"{str(r['comparison']).split(' - ')[0]} {_ci(r)} {r['verdict']}"
                for _, r in beyond.iterrows()
            )
        parts.append(text)
    if not parts:
        return None
    return AnswerLine(
        question="Separability",
        family=EXPLORATORY,
        scope="exploratory, claim 4; a classifier on the per-layer metric profile, original "
        f"against each variant, AUC over {REPEATS} fold assignments",
        finding=f"{'; '.join(parts)}. At layer 0 the position family sits at 0.5 by "
        "construction (every metric of a token set is order-invariant there): a check, not a "
        "control.",
    )


def _nonzero(rows: pd.DataFrame) -> pd.Series:
    """Effects beyond floating-point rounding: a difference of differences of the same
    tokens reordered leaves ~1e-14 on an erank of 30, which is 0 by construction."""
    effect = pd.to_numeric(rows["effect"], errors="coerce").abs()
    base = rows["baseline_mean"] if "baseline_mean" in rows else pd.Series(1.0, rows.index)
    scale = pd.to_numeric(base, errors="coerce").abs().fillna(1.0)
    return effect > 1e-9 * scale.clip(lower=1.0)


def control_line(claims: pd.DataFrame) -> AnswerLine | None:
    """The order-invariance check: the position family's layer-0 rows (the same tokens
    reordered) are exactly 0 by construction on every order-free metric (no_sink is not one:
    the first token it drops changes with the order)."""
    if "family" not in claims.columns:
        return None
    ctl = claims[
        (claims["family"] == CONTROL_FAMILY) & (claims["claim"].astype(str) != Tag.SEPARATION)
    ]
    fam = ctl[ctl["comparison"].str.contains("key_") & ~ctl["comparison"].str.contains("original")]
    fam = fam[~fam["metric"].astype(str).str.endswith("__no_sink")]
    if fam.empty:
        return None
    moved = fam[_nonzero(fam)]
    return AnswerLine(
        question="Order-invariance check",
        family=CONTROL_FAMILY,
        scope=f"layer 0, position family, {len(fam)} rows; no_sink aside, its dropped first "
        "token changes with the order",
        finding=(
            "every one is exactly 0, by construction (the same tokens in another order): a "
            "sanity check of the pipeline, not a control of the effects."
            if moved.empty
            else f"{len(moved)} rows differ from 0: read the effects with care."
        ),
        endpoints=len(fam),
    )


def answer_lines(claims: pd.DataFrame) -> list[AnswerLine]:
    """The answer, one line per question (empty when there are no claims)."""
    if claims.empty:
        return []
    lines = [*primary_lines(claims), *exploratory_lines(claims)]
    ctl = control_line(claims)
    return [*lines, ctl] if ctl else lines


def _basis(claims: pd.DataFrame) -> str:
    """The margin's basis in words, from one primary row (they share the rule)."""
    prim = claims[claims["family"] == PRIMARY] if "family" in claims.columns else claims
    basis = prim["sesoi_basis"].dropna().astype(str) if "sesoi_basis" in prim.columns else []
    basis = [b for b in basis if b]
    return re.sub(r" \([^)]*\)", "", basis[0]) if basis else "stats.sesoi"


def with_extra(lines: list[AnswerLine], extra: list[AnswerLine | None]) -> list[AnswerLine]:
    """``lines`` with the ``extra`` lines (those not None) before the control lines, which
    close the answer."""
    extra = [e for e in extra if e is not None]
    if not extra or not lines:  # a database of graded runs alone answers with those
        return lines or extra
    controls = [line for line in lines if line.family == CONTROL_FAMILY]
    return [*(line for line in lines if line.family != CONTROL_FAMILY), *extra, *controls]


def full_answer(
    claims: pd.DataFrame,
    probe: pd.DataFrame | None,
    sentences: AnswerLine | None,
    doses: pd.DataFrame | None = None,
    concentration: pd.DataFrame | None = None,
) -> list[AnswerLine]:
    """The answer's lines: the claims', the moved sentence's line (``sentences``), the
    sink_bias doses' primary endpoint (``concentration``: intervention_doses) and the cost
    line: from the homogenize doses' primary endpoint (``doses``: intervention_cost) when
    the database has it, else the probe stage's within-text slopes (the report's first
    section and the README's answer are both these lines)."""
    cost = primary_cost_line(doses)
    if cost is None and probe is not None:
        cost = cost_line(probe)
    sink = None
    if concentration is not None and not concentration.empty:
        sink = concentration_line(concentration)
    return with_extra(answer_lines(claims), [sentences, sink, cost])


def answer_section(
    claims: pd.DataFrame,
    figdir: Path,
    probe: pd.DataFrame | None = None,
    sentences: AnswerLine | None = None,
    doses: pd.DataFrame | None = None,
    concentration: pd.DataFrame | None = None,
) -> Section:
    """The report's first section: the answer lines (:func:`full_answer`) and the forest
    plot of the primary family."""
    sec = Section("The answer", figure_width=50, figures_beside=True)
    lines = full_answer(claims, probe, sentences, doses, concentration)
    if not lines:
        sec.paragraphs.append("No claim rows: run `homog stats` and `homog load`.")
        return sec
    sec.paragraphs.extend(line.markdown for line in lines)
    path = forest_figure(claims, figdir / "answer_forest.png")
    if path is not None:
        sec.figures.append(
            (
                path,
                "The primary endpoints: effect / SESOI with its 95 % CI (cut at +-10, "
                "arrowed); inside the shaded band is too small to matter. SESOI: "
                f"{_basis(claims)}",
            )
        )
    return sec


def replace_block(text: str, lines: list[AnswerLine], source: str) -> str:
    """``text`` with the lines between README_START and README_END replaced, one list item
    per answer line (HomogError-free: a text without the markers raises ValueError)."""
    pattern = re.compile(re.escape(README_START) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {README_START} ... {README_END} block")
    body = "\n".join([source, *(f"- {line.markdown}" for line in lines)])
    return pattern.sub(lambda _: f"{README_START}\n{body}\n{README_END}", text, count=1)


__all__ = ["answer_lines", "answer_section", "forest_figure", "replace_block"]
