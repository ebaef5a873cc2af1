"""The report's section "Where position acts": the moved sentence itself.

From the stats stage's ``sentence_contrasts`` (homog.stats.sentences) and a per-variant summary
of ``sentence_metrics``: per model, first what any sentence gets from its place (the
same-place control moved to the key sentence's slots, homog.report.sentences_specific), then
what the key sentence gets beyond it: the key-specific effects (difference of differences;
first, last, U-shape) per band with CIs, SESOI and the verdict rule of docs/statistics.md in
their own Holm family (per model: 3 questions x the primary sentence metrics x 4 bands), with
the control's move, the positional curve's prediction and the key's own move beside each; the
earlier position effect and the key sentence's own U-shape as an exploratory family; the
layer-0 rows as the control, and one figure per model. Pure: frames in, a section out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from homog.plot import legend_below
from homog.report.answer_line import AnswerLine, family_of, verdict_counts
from homog.report.document import Section
from homog.report.sentences_specific import family_tables, place_lines
from homog.stats.bands import band_of_layers
from homog.stats.paired_tests import holm
from homog.stats.verdicts import row_verdict
from homog.variants import CTRL_NAMED, KEY_CONTROL, variant_name

TITLE = "Where position acts"
# the section's primary family: the sentence metrics and bands it tests
PRIMARY_METRICS = ("sent_cos_centroid", "sent_attn_in")
BANDS = ("early", "middle", "late", "final")
# the layer-0 control's metrics: the sentence's own tokens and the text's multiset do not
# change, so these must not either (sent_cos_first does: the first token changes with the
# first sentence; sent_attn_in has no layer 0)
CONTROL_METRICS = ("sent_cos_centroid", "sent_erank", "sent_erank_c", "sent_norm")
# (sentence, variant_a) -> (question, family): the key-specific rows (like with like: the key
# sentence against the same-place control on the same slots) are the section's primary
# family; the earlier position effect (different destinations) and the key sentence's own
# U-shape (position alone included) are exploratory, beside them
QUESTIONS = {
    ("key - ctrl", "key_first - key_mid"): ("key-specific first", "primary"),
    ("key - ctrl", "key_last - key_mid"): ("key-specific last", "primary"),
    ("key - ctrl", "key_ends - key_mid"): ("key-specific U-shape", "primary"),
    ("key - control", "key_far"): ("position effect", "exploratory"),
    ("key", "key_ends"): ("U-shape", "exploratory"),
}
# every question is undirected by declaration (claimed sign "either"): the paper names no
# direction for a sentence's cosine or received attention, so a supported U-shape row may be
# an inverted U; the answer line says which (SIDES)
SIDES = {
    "key-specific first": ("above the same-place control", "below it"),
    "key-specific last": ("above the same-place control", "below it"),
    "key-specific U-shape": ("U beyond the control's", "inverted U beyond the control's"),
    "position effect": ("above the control", "below the control"),
    "U-shape": ("U", "inverted U"),
}
CURVE_SQL = (
    "SELECT r.model, s.variant, s.is_key, s.is_control, s.is_ctrl, s.layer, s.metric, "
    "avg(s.value) AS value, avg(s.rel_position) AS position, count(*) AS n "
    "FROM sentence_metrics s JOIN runs r USING (run_id) "
    "WHERE (s.is_key OR s.is_control OR s.is_ctrl) "
    "AND coalesce(r.intervention, 'none') = 'none' "
    "AND s.metric IN ('sent_cos_centroid', 'sent_attn_in') "
    "GROUP BY ALL ORDER BY ALL"
)

# the dose view (homog.stats.sentences.sentence_dose in SQL): every followed sentence of every
# variant, its value minus its mean over the family's members (sentence fixed effects),
# averaged per fifth of relative position
DOSE_SQL = (
    "SELECT model, metric, layer, bin, (bin + 0.5) / 5 AS position, avg(value - centre) AS "
    "value, count(*) AS n FROM (SELECT r.model, s.metric, s.layer, s.value, "
    "least(floor(s.rel_position * 5), 4)::INTEGER AS bin, avg(s.value) OVER (PARTITION BY "
    "s.run_id, s.sample_id, s.sentence, s.layer, s.metric) AS centre "
    "FROM sentence_metrics s JOIN runs r USING (run_id) "
    "WHERE coalesce(r.intervention, 'none') = 'none' "
    "AND s.metric IN ('sent_cos_centroid', 'sent_attn_in')) GROUP BY ALL ORDER BY ALL"
)


def _g(x) -> str:
    return f"{float(x):.3g}" if pd.notna(x) else "n/a"


def verdict_rows(sc: pd.DataFrame, runs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The families' rows (model, question, family, metric, band, effect, ci_low, ci_high,
    sesoi, eq_ci_low, eq_ci_high, p_value, p_holm, n, n_identical, verdict; Holm per model
    and family) and the layer-0 control rows (question '... (layer 0)', p_holm = the raw
    p): every run without an intervention."""
    if sc is None or sc.empty:
        return pd.DataFrame()
    model = runs.set_index("run_id")["model"]
    iv = runs.set_index("run_id")["intervention"].fillna("none")
    sc = sc[sc["run_id"].map(iv) == "none"].assign(model=sc["run_id"].map(model))
    sc = sc[sc["band"].notna()]
    rows = []
    for (sentence, va), (question, family) in QUESTIONS.items():
        sel = sc[(sc["sentence"] == sentence) & (sc["variant_a"] == va)]
        for r in sel.itertuples():
            control = r.band == "layer0"
            if r.metric not in (CONTROL_METRICS if control else PRIMARY_METRICS):
                continue
            rows.append(
                {
                    "model": r.model,
                    "question": question + (" (layer 0)" if control else ""),
                    "metric": r.metric,
                    "band": r.band,
                    "effect": r.mean_diff,
                    "ci_low": r.ci_low,
                    "ci_high": r.ci_high,
                    "sesoi": r.sesoi,
                    "eq_ci_low": r.eq_ci_low,
                    "eq_ci_high": r.eq_ci_high,
                    "p_value": r.p_value,
                    "n": r.n,
                    "n_identical": getattr(r, "n_identical", None),
                    "control": control,
                    "family": "control" if control else family,
                }
            )
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["p_holm"] = out["p_value"]
    fam = ~out["control"] & out["band"].isin(BANDS)
    for _, idx in out[fam].groupby(["model", "family"]).groups.items():
        out.loc[idx, "p_holm"] = holm(out.loc[idx, "p_value"].to_numpy(dtype=float))
    out = out[fam | out["control"]].copy()
    out["verdict"] = [row_verdict(r, alpha, effect="effect") for r in out.itertuples()]
    out["claimed"] = "either"
    order = {b: i for i, b in enumerate(("layer0", *BANDS))}
    return out.sort_values(
        ["model", "control", "question", "metric", "band"],
        key=lambda s: s.map(order) if s.name == "band" else s,
    ).reset_index(drop=True)


def sentence_line(rows: pd.DataFrame) -> AnswerLine | None:
    """The answer's line: per model, the tally of verdicts of the position effect and the
    U-shape on the moved sentence, with the largest |effect| in SESOI units."""
    if rows is None or rows.empty:
        return None
    parts = []
    for model, g in rows[~rows["control"]].groupby("model", sort=False):
        tallies = []
        for q in dict.fromkeys(q for q, _ in QUESTIONS.values()):
            if (g["question"] == q).any():
                tallies.append(f"{q} {_tally(g[g['question'] == q], SIDES[q])}")
        main = g[g["family"] == "primary"] if (g["family"] == "primary").any() else g
        ratio = (main["effect"] / main["sesoi"].where(main["sesoi"] > 0)).abs()
        what = "key-specific" if main is not g else "largest"
        big = f"; {what} |effect| up to {ratio.max():.2g} SESOI" if ratio.notna().any() else ""
        n = pd.to_numeric(g["n"], errors="coerce").max()
        reviews = f" ({int(n)} reviews)" if pd.notna(n) else ""
        parts.append(f"{model}{reviews}: {'; '.join(tallies)}{big}")
    shown = rows[~rows["control"]]
    return AnswerLine(
        question=TITLE,
        family=family_of(shown["family"]),
        scope="the moved sentence itself, its cosine to the text's centroid and the attention "
        "it receives, per band",
        finding=f"{' | '.join(parts)}.",
        endpoints=len(shown),
        verdicts=verdict_counts(shown["verdict"]),
    )


def _tally(rows: pd.DataFrame, sides: tuple[str, str]) -> str:
    """'2 supported (1 U, 1 inverted U), 3 negligible': the verdict counts of an undirected
    question, each supported count split by the side its effect lies on."""
    parts = []
    for word, n in rows["verdict"].value_counts().items():
        text = f"{n} {word}"
        if word == "supported":
            up = int((rows[rows["verdict"] == word]["effect"] > 0).sum())
            split = [f"{k} {side}" for k, side in ((up, sides[0]), (n - up, sides[1])) if k]
            text += f" ({', '.join(split)})"
        parts.append(text)
    return ", ".join(parts)


def figure_points(sel: pd.DataFrame, arm: str) -> pd.DataFrame:
    """The points of one arm (``key``, ``control``) of the sentence figure, sorted by
    position: per variant the mean value and position of the arm's sentence and ``change``,
    the value minus the original's. ``key``: the key sentence (``is_key``) in key_first /
    key_mid / key_last. ``control``: the same-place control sentence (``is_ctrl``) in
    ctrl_first / ctrl_mid / ctrl_last; where a run has none of those, the sentence key_control
    moves as far (``is_control``). Empty when the original is missing."""
    if arm == "key":
        flag, keep = "is_key", [variant_name(p) for p in sorted(CTRL_NAMED)]
    else:
        flag, keep = "is_ctrl", [CTRL_NAMED[p] for p in sorted(CTRL_NAMED)]
        has = sel[sel[flag].fillna(False).astype(bool)] if flag in sel.columns else sel.iloc[0:0]
        if not has["variant"].isin(keep).any():
            flag, keep = "is_control", [KEY_CONTROL]
    s = sel[sel[flag].fillna(False).astype(bool)].groupby("variant")[["value", "position"]].mean()
    if "original" not in s.index:
        return s.iloc[0:0].assign(change=[])
    s["change"] = s["value"] - s.loc["original", "value"]
    return s.loc[[v for v in ["original", *keep] if v in s.index]].sort_values("position")


def _figure(curve: pd.DataFrame, model: str, path: Path) -> Path | None:
    """Per band (columns) and metric (rows): the key sentence's change from its original
    place against its mean relative position in each family member, and the control
    sentence's moved to the same places beside it (``figure_points``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = curve[curve["model"] == model] if "model" in curve.columns else curve.iloc[0:0]
    if c.empty:
        return None
    metrics = [m for m in PRIMARY_METRICS if m in set(c["metric"])]
    bands = band_of_layers(sorted(set(c["layer"])))
    bands = {b: ls for b, ls in bands.items() if b in BANDS}
    if not metrics or not bands:
        return None
    fig, axes = plt.subplots(
        len(metrics), len(bands), squeeze=False, figsize=(2.6 * len(bands), 2.3 * len(metrics))
    )
    handles = {}
    for i, metric in enumerate(metrics):
        for j, (band, layers) in enumerate(bands.items()):
            ax = axes[i][j]
            sel = c[(c["metric"] == metric) & c["layer"].isin(layers)]
            for who, arm, colour in (
                ("key sentence", "key", "C3"),
                ("control sentence", "control", "C0"),
            ):
                pts = figure_points(sel, arm)
                if pts.empty:
                    continue
                (h,) = ax.plot(
                    pts["position"],
                    pts["change"],
                    "o-" if arm == "key" else "s--",
                    color=colour,
                    lw=1.2,
                    ms=4,
                )
                handles[who] = h
                for v, r in pts.iterrows():
                    ax.annotate(
                        v.replace("key_", "").replace("ctrl_", ""),
                        (r["position"], r["change"]),
                        fontsize=6,
                        textcoords="offset points",
                        xytext=(2, 3),
                    )
            ax.axhline(0, color="#999", lw=0.7)
            ax.set_title(f"{band}", fontsize=8)
            ax.tick_params(labelsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel("relative position in the text", fontsize=7)
            if j == 0:
                ax.set_ylabel(f"{metric}\nchange from original", fontsize=7)
    fig.suptitle(model, fontsize=9)
    fig.tight_layout()
    legend_below(fig, list(handles.values()), list(handles), ncol=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def _dose_figure(dose: pd.DataFrame, path: Path) -> Path | None:
    """Per model (columns) and metric (rows): the dose view's value against position, one
    line per band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if dose is None or dose.empty:
        return None
    models = list(dict.fromkeys(dose["model"]))
    metrics = [m for m in PRIMARY_METRICS if m in set(dose["metric"])]
    fig, axes = plt.subplots(
        len(metrics), len(models), squeeze=False, figsize=(3.6 * len(models), 2.4 * len(metrics))
    )
    handles = {}
    for j, model in enumerate(models):
        d = dose[dose["model"] == model]
        bands = band_of_layers(sorted(set(d["layer"])))
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for k, band in enumerate(b for b in BANDS if b in bands):
                sel = d[(d["metric"] == metric) & d["layer"].isin(bands[band])]
                pts = sel.groupby("position")["value"].mean()
                (h,) = ax.plot(pts.index, pts.values, "o-", ms=3, lw=1.1, color=f"C{k}")
                handles[band] = h
            ax.axhline(0, color="#999", lw=0.7)
            ax.set_title(f"{model}", fontsize=8)
            ax.tick_params(labelsize=7)
            if j == 0:
                ax.set_ylabel(f"{metric}\n(sentence fixed effects)", fontsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel("relative position of the sentence", fontsize=7)
    fig.tight_layout()
    legend_below(fig, list(handles.values()), list(handles), ncol=len(handles))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def sentences_section(
    sc: pd.DataFrame,
    curve: pd.DataFrame,
    runs: pd.DataFrame,
    figdir: Path,
    alpha: float,
    dose: pd.DataFrame | None = None,
) -> Section:
    """The section (see the module doc)."""
    sec = Section(TITLE, figure_width=100)
    rows = verdict_rows(sc, runs, alpha)
    if rows.empty:
        sec.paragraphs.append(
            "No sentence contrasts in the database: texts from `homog synth` with the position "
            "family carry each sentence's span, `homog extract` then writes "
            "sentence_metrics.parquet (extract.sentence_metrics), and `homog stats` and "
            "`homog load` the sentence_contrasts table (docs/sentences.md)."
        )
        return sec
    sec.paragraphs.append(
        "Whole-text metrics average a local effect away; here the moved sentence is measured "
        "itself. A place acts on any sentence (the causal mask and the attention sink favour "
        "the first and the last tokens), so the key sentence is compared with a non-key "
        "sentence moved to the same slots (ctrl_first, ctrl_mid, ctrl_last): first what any "
        "sentence gets from its place, then what the key sentence gets beyond it. "
        "Key-specific effect: (key sentence at the place - in the middle) - (control sentence "
        "at the place - in the middle), the U-shape with both ends; position alone and "
        "reordering cancel. Beside it: the control's own move (what any sentence gets), the "
        "positional curve's prediction for the key sentence's move (every followed non-key "
        "sentence, sentence fixed effects) and the key sentence's own move. One Holm family "
        "per model for the key-specific rows; the earlier position effect (key_far: a control "
        "moved as far, to another place) and the key sentence's own U-shape are exploratory. "
        "The layer-0 rows are the control (the embeddings do not know the place: 0 up to "
        "rounding); SESOI: stats.sesoi of the key sentence's own basis (docs/sentences.md); "
        "identical: reviews left out because both sides are the same text. Every "
        "question is undirected by declaration (claimed sign: either): supported means beyond "
        "the margin on either side, and the line below splits those rows by side."
    )
    sec.paragraphs += place_lines(sc, runs, PRIMARY_METRICS, BANDS)
    line = sentence_line(rows)
    if line is not None:
        sec.paragraphs.append(line.markdown)
    sec.tables += family_tables(rows, sc, runs)
    ctl = rows[rows["control"]]
    if len(ctl):
        worst = ctl.groupby("model")["effect"].apply(lambda s: np.nanmax(np.abs(s)))
        sec.paragraphs.append(
            "Layer-0 control (the same sentence's embeddings in another place): largest "
            "|effect| "
            + ", ".join(f"{m} {_g(v)}" for m, v in worst.items())
            + f" over {', '.join(CONTROL_METRICS)} (it must be 0 up to rounding)."
        )
    for model in dict.fromkeys(rows["model"]):
        safe = "".join(ch if ch.isalnum() else "_" for ch in str(model))
        path = _figure(curve, model, figdir / f"sentences__{safe}.png")
        if path is not None:
            sec.figures.append(
                (
                    path,
                    f"{model}: the key sentence's change from its original "
                    "place against its position, per band, and the control "
                    "sentence's moved to the same places (ctrl_first, ctrl_mid, ctrl_last)",
                )
            )
    path = _dose_figure(dose, figdir / "sentences__dose.png")
    if path is not None:
        sec.figures.append(
            (
                path,
                "The dose view: every followed sentence of every variant, "
                "its value minus its mean over the family (sentence fixed "
                "effects), per fifth of relative position and band",
            )
        )
    return sec
