"""Like with like: the key sentence against a non-key sentence moved to the same places.

Synthetic sentence metrics on the position family's real orders (homog.synth.position): a
pure position curve that any sentence gets from its place cancels in every key-specific row
(difference of differences), while the old position effect (key_far: different destinations)
reports it as an effect; a planted key x position interaction is recovered. Identity pairs
(the same text on both sides) are left out and counted, at the whole-text and sentence level.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from homog.stats.combos import identical_samples, text_ids
from homog.stats.contrasts import run_contrasts
from homog.stats.sentences import run_sentence_contrasts
from homog.stats.settings import StatsSettings
from homog.stats.verdicts import verdict_of
from homog.synth.position import family_orders, join
from homog.variants import contrast_name, contrast_terms, parse_contrast

N_SENT = 6
LAYERS = range(7)  # layer 0, early / middle / late bands, final


def curve(p: np.ndarray | float) -> np.ndarray | float:
    """Any sentence's gain from its relative place: primacy and recency (a U, 1 at the
    edges, 0 in the middle)."""
    return 4.0 * (np.asarray(p) - 0.5) ** 2


def family(
    n_reviews: int, seed: int, with_first: bool = False
) -> list[tuple[str, int, dict[str, list[int]], int, int]]:
    """(sample_id, key, orders incl. original, control sentence, ctrl sentence) per review:
    synth's orders for random sentence lengths and interior key places (the first place too
    with ``with_first``)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(n_reviews):
        lengths = list(rng.integers(5, 30, size=N_SENT))
        key = int(rng.integers(0 if with_first else 1, N_SENT - 1))
        fam = family_orders(lengths, key, [0, 0.5, 1])
        orders = {"original": list(range(N_SENT)), **fam.orders}
        out.append((f"r{r}", key, orders, fam.control_sentence, fam.ctrl_sentence))
    return out


def sentence_frame(reviews, key_gain: float, seed: int = 1) -> pd.DataFrame:
    """sentence_metrics rows: sentence base value + (layer > 0) curve(place) + key_gain at
    the edges for the key sentence + noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for sid, key, orders, control, ctrl in reviews:
        base = rng.normal(size=N_SENT)
        for v, order in orders.items():
            for k, sent in enumerate(order):
                p = k / (N_SENT - 1)
                edge = k in (0, N_SENT - 1)
                for layer in LAYERS:
                    deep = layer > 0
                    value = base[sent] + deep * (curve(p) + key_gain * (sent == key) * edge)
                    noisy = value + 0.01 * rng.normal()
                    rows.append(
                        (
                            v,
                            sid,
                            sent,
                            k,
                            p,
                            3,
                            sent == key,
                            sent == control,
                            sent == ctrl,
                            layer,
                            "m",
                            noisy,
                        )
                    )
    cols = [
        "variant",
        "sample_id",
        "sentence",
        "sent_index",
        "rel_position",
        "n_tokens",
        "is_key",
        "is_control",
        "is_ctrl",
        "layer",
        "metric",
        "value",
    ]
    return pd.DataFrame(rows, columns=cols)


def stats(n: int = 400) -> StatsSettings:
    return StatsSettings(n_boot=n, ci=0.95, test="sign_flip", n_perm=n, sesoi_basis="sd")


def verdicts(out: pd.DataFrame, band: str = "late") -> dict[tuple[str, str, str], tuple]:
    """(sentence, variant_a, variant_b) -> (verdict, effect, n_identical) at ``band``."""
    rows = out[out["band"] == band]
    return {
        (r.sentence, r.variant_a, r.variant_b): (
            verdict_of(
                r.mean_diff,
                r.ci_low,
                r.ci_high,
                r.eq_ci_low,
                r.eq_ci_high,
                r.sesoi,
                r.p_value,
                0.05,
            ),
            r.mean_diff,
            r.n_identical,
        )
        for r in rows.itertuples()
    }


SPECIFIC = [
    ("key - ctrl", "key_first - key_mid", "ctrl_first - ctrl_mid"),
    ("key - ctrl", "key_last - key_mid", "ctrl_last - ctrl_mid"),
    ("key - ctrl", "key_ends - key_mid", "ctrl_ends - ctrl_mid"),
]


def test_a_pure_position_curve_cancels_in_every_key_specific_row():
    reviews = family(40, seed=0)
    out = run_sentence_contrasts(sentence_frame(reviews, key_gain=0.0), "run", stats())
    got = verdicts(out)
    for row in SPECIFIC:
        assert got[row][0] == "equivalent", (row, got[row])
        assert abs(got[row][1]) < 0.01
    # the old position effect compares different destinations: the curve reads as an effect
    old = got[("key - control", "key_far", "original")]
    assert old[0] in ("supported", "reversed") and abs(old[1]) > 0.3, old
    # and what any sentence gets from the edges is there, in the control's own rows
    assert got[("ctrl", "ctrl_ends", "ctrl_mid")][1] == pytest.approx(1.0, abs=0.05)


def test_the_position_curve_predicts_what_position_alone_does():
    """position_pred, fit on the non-key sentences with sentence fixed effects: beside the key
    sentence's own move it equals the measured move when position is all there is, and beside
    a key-specific row it is 0; with a planted key gain the move exceeds it by that gain."""
    reviews = family(40, seed=0)
    for gain in (0.0, 0.3):
        out = run_sentence_contrasts(sentence_frame(reviews, key_gain=gain), "run", stats(50))
        late = out[out["band"] == "late"].set_index(["sentence", "variant_a", "variant_b"])
        move = late.loc[("key", "key_first", "key_mid")]
        # key_mid is index 3 of 6 (relative place 0.6): curve(0) - curve(0.6) = 0.96
        assert move["position_pred"] == pytest.approx(0.96, abs=0.03)
        assert move["mean_diff"] - move["position_pred"] == pytest.approx(gain, abs=0.03)
        for row in SPECIFIC:
            assert abs(late.loc[row, "position_pred"]) < 1e-9
    assert out.loc[out["band"].isna(), "position_pred"].isna().all()  # band rows only


def test_a_planted_key_by_position_interaction_is_recovered():
    reviews = family(40, seed=0)
    out = run_sentence_contrasts(sentence_frame(reviews, key_gain=0.3), "run", stats())
    got = verdicts(out)
    for row in SPECIFIC:
        assert got[row][0] == "supported", (row, got[row])
        assert got[row][1] == pytest.approx(0.3, abs=0.02)
    # layer 0 knows no place: the control row of the design is 0
    l0 = verdicts(out, "layer0")
    assert all(abs(l0[row][1]) < 0.01 for row in SPECIFIC)


def test_identity_pairs_are_left_out_and_counted():
    """key_first - original is an exact zero where the key sentence is already first: those
    reviews leave the row (sentence and whole text), n_identical counts them, and n drops."""
    reviews = family(40, seed=0, with_first=True)
    texts = pd.DataFrame(
        [
            (v, sid, join([f"s{i}." for i in order]))
            for sid, _, orders, _, _ in reviews
            for v, order in orders.items()
        ],
        columns=["variant", "sample_id", "text"],
    )
    ids = text_ids(texts)
    first = sum(key == 0 for _, key, *_ in reviews)
    assert first > 0
    frame = sentence_frame(reviews, key_gain=0.0)
    out = run_sentence_contrasts(frame, "run", stats(100), text_ids=ids)
    got = out[
        (out["band"] == "late")
        & (out["variant_a"] == "key_first")
        & (out["variant_b"] == "original")
    ].iloc[0]
    assert got["n_identical"] == first and got["n"] == len(reviews) - first
    assert (out.loc[out["sentence"] == "key - ctrl", "n_identical"] == 0).all()
    # whole text: the same rule on the texts' own metric
    whole = frame[frame["is_key"]].rename(columns={"value": "value"})[
        ["variant", "sample_id", "layer", "metric", "value"]
    ]
    rows = run_contrasts(whole, "run", StatsSettings(n_boot=50, n_perm=50), text_ids=ids)
    kf = rows[(rows["variant_a"] == "key_first") & (rows["variant_b"] == "original")]
    assert (kf["n_identical"] == first).all() and (kf["n"] == len(reviews) - first).all()
    # the whole-text difference of differences equals its numpy computation
    late = whole[whole["layer"] == 5].pivot(index="sample_id", columns="variant", values="value")
    want = ((late["key_first"] - late["key_mid"]) - (late["ctrl_first"] - late["ctrl_mid"])).mean()
    did = rows[(rows["variant_a"] == "key_first - key_mid") & (rows["layer"] == 5)]
    assert did["mean_diff"].iloc[0] == pytest.approx(want, abs=1e-12)
    assert did["variant_b"].iloc[0] == "ctrl_first - ctrl_mid"
    none = run_contrasts(whole, "run", StatsSettings(n_boot=50, n_perm=50))
    assert none["n_identical"].isna().all()  # not checked without the texts


def test_identity_is_per_distinct_text_and_weight():
    ids = pd.DataFrame({"a": [1, 1, 1], "b": [1, 2, 1], "c": [3, 3, 1]}, index=["x", "y", "z"])
    assert list(identical_samples({"a": 1.0, "b": -1.0}, ids)) == ["x", "z"]
    # (a - b) - (c - a): x cancels only if a == b and c == a
    terms = contrast_terms("a - b", "c - a")
    assert terms == {"a": 2.0, "b": -1.0, "c": -1.0}
    assert list(identical_samples(terms, ids)) == ["z"]
    assert list(identical_samples({"a": 1.0, "zz": -1.0}, ids)) == []


@pytest.mark.parametrize(
    "text",
    [
        "key_first - key_control",
        "(key_first - key_mid) - (ctrl_first - ctrl_mid)",
        "(key_ends - key_mid) - (ctrl_ends - ctrl_mid)",
        "(a - b) - c",
        "a - (b - c)",
    ],
)
def test_the_contrast_grammar_round_trips(text):
    assert contrast_name(*parse_contrast(text)) == text


@pytest.mark.parametrize("text", ["a - b - c", "key_frist", "(a - b", "a-b", "(a) - b"])
def test_the_contrast_grammar_refuses(text):
    assert parse_contrast(text) is None


def test_where_position_acts_says_what_any_sentence_gets_then_the_key(tmp_path):
    """The report's section: the place's gain for any sentence first, then the key-specific
    rows as the primary family with the control's move, the curve's prediction and the key's
    own move beside each; the earlier position effect is exploratory."""
    from homog.report.document import to_html
    from homog.report.sentences_view import sentences_section, verdict_rows

    frame = sentence_frame(family(30, seed=0), key_gain=0.3).assign(metric="sent_attn_in")
    sc = run_sentence_contrasts(frame, "r1", stats(1000))  # p down to 1e-3: Holm of 12
    runs = pd.DataFrame({"run_id": ["r1"], "model": ["m"], "intervention": ["none"]})
    rows = verdict_rows(sc, runs)
    prim = rows[(rows["family"] == "primary") & ~rows["control"]]
    assert set(prim["question"]) == {
        "key-specific first",
        "key-specific last",
        "key-specific U-shape",
    }
    assert (prim["verdict"] == "supported").all()
    assert set(rows.loc[rows["family"] == "exploratory", "question"]) == {
        "position effect",
        "U-shape",
    }
    sec = sentences_section(sc, pd.DataFrame(), runs, tmp_path, 0.05)
    where = [i for i, p in enumerate(sec.paragraphs) if "What any sentence gets" in p]
    tally = [i for i, p in enumerate(sec.paragraphs) if "key-specific first 4 supported" in p]
    assert where and tally and where[0] < tally[0]  # the place first, then the key beyond it
    table = sec.tables[0]
    assert table.columns[4:8] == ["any sentence", "predicted", "key move", "key-specific"]
    first = [r for r in table.rows if r[1] == "key-specific first" and r[3] == "late"][0]
    any_sentence, predicted, key_move, effect = first[4:8]
    assert any_sentence == pytest.approx(predicted, abs=0.05)  # the curve = the control's move
    assert key_move - any_sentence == pytest.approx(effect, abs=1e-9)
    assert effect == pytest.approx(0.3, abs=0.03)
    assert "Where position acts" in to_html("t", "", [sec])


def test_unchanged_texts_are_reported_per_variant():
    """synth's report.json: the share of each variant's texts that equal their original; the
    report's manipulation section says it, and where the same-place control landed."""
    from homog.report.manipulation import identity_lines
    from homog.synth.position_report import identical_to_original

    table = pd.DataFrame(
        {
            "variant": ["original", "original", "front", "front", "key_first", "key_first"],
            "sample_id": ["a", "b", "a", "b", "a", "b"],
            "text": [" A. B.", " C. D.", " A. B.", " D, C.", " B. A.", " C. D."],
        }
    )
    same = identical_to_original(table)
    assert same == {"front": {"texts": 2, "share": 0.5}, "key_first": {"texts": 2, "share": 0.5}}
    report = {
        "manipulation": {
            "identical_to_original": same,
            "position_family": {
                "same_place_control": {"texts_share": 1.0, "same_slot_share": {"ctrl_first": 1.0}}
            },
        }
    }
    lines = identity_lines(report)
    assert "front 50 % of 2, key_first 50 % of 2" in lines[0]
    assert (
        "in 100 % of the family's reviews; on the key sentence's slot: ctrl_first 100 %" in lines[1]
    )
    assert identity_lines({}) == []


def test_the_sentence_figure_plots_the_control_sentence_at_the_key_sentences_places():
    """The figure's control arm is the same-place control (is_ctrl in ctrl_*), like with
    like, not the sentence key_control moves (is_control); a run without ctrl_* falls back to
    key_control."""
    from homog.report.sentences_view import figure_points

    rows = []
    for variant, pos, key, far, ctrl in [
        ("original", 0.4, 1.0, 5.0, 2.0),
        ("key_first", 0.0, 1.5, 5.0, 2.0),
        ("key_mid", 0.5, 1.2, 5.0, 2.0),
        ("key_last", 1.0, 1.7, 5.0, 2.0),
        ("key_control", 0.9, 1.0, 5.9, 2.0),
        ("ctrl_first", 0.0, 1.0, 5.0, 2.4),
        ("ctrl_mid", 0.5, 1.0, 5.0, 2.1),
        ("ctrl_last", 1.0, 1.0, 5.0, 2.6),
    ]:
        flags = dict(is_key=0, is_control=0, is_ctrl=0)
        for flag, value in (("is_key", key), ("is_control", far), ("is_ctrl", ctrl)):
            rows.append(dict(flags, variant=variant, position=pos, value=value, **{flag: 1}))
    sel = pd.DataFrame(rows)
    key = figure_points(sel, "key")
    assert list(key.index) == ["key_first", "original", "key_mid", "key_last"]
    assert key.loc["key_last", "change"] == pytest.approx(0.7)
    ctrl = figure_points(sel, "control")
    assert list(ctrl.index) == ["ctrl_first", "original", "ctrl_mid", "ctrl_last"]
    assert ctrl.loc["ctrl_first", "change"] == pytest.approx(0.4)  # is_ctrl's, not is_control's
    older = figure_points(sel[~sel["variant"].str.startswith("ctrl_")], "control")
    assert list(older.index) == ["original", "key_control"]
    assert older.loc["key_control", "change"] == pytest.approx(0.9)
    no_column = figure_points(sel.drop(columns="is_ctrl"), "control")
    assert list(no_column.index) == ["original", "key_control"]
    assert figure_points(sel[sel["variant"] != "original"], "key").empty
