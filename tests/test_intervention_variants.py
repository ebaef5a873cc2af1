"""extract.intervention_variants: interventions other than none run on some variants only, and
still pair with the unchanged run of every variant."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import TINY, extract_config
from test_extract import make_texts, read_outputs

from homog.config import parse_params
from homog.errors import HomogError
from homog.extract import extract_runner
from homog.extract.plan import texts_hash
from homog.extract.run import intervention_groups
from homog.stats.runs import unchanged_run


def test_groups_split_none_from_the_restricted_interventions():
    df = make_texts(3, variants=("original", "front", "end"))
    cfg = extract_config(intervention_variants=["original"])
    groups = intervention_groups(df, ["none", "zero_pos"], cfg)
    assert [g[1] for g in groups] == [["none"], ["zero_pos"]]
    assert groups[0][2] is None and len(groups[0][0]) == 9
    sub, _, pair = groups[1]
    assert set(sub["variant"]) == {"original"} and len(sub) == 3
    assert pair == texts_hash(df)
    # without the option (or with none alone) one pass runs everything
    assert len(intervention_groups(df, ["none", "zero_pos"], extract_config())) == 1
    assert len(intervention_groups(df, ["none"], cfg)) == 1
    with pytest.raises(HomogError, match=r"intervention_variants names \['key_mid'\]"):
        intervention_groups(
            df, ["none", "zero_pos"], extract_config(intervention_variants=["key_mid"])
        )


def test_the_option_does_not_change_the_unchanged_run_id():
    assert (
        extract_config(intervention_variants=["original"]).result_keys()
        == extract_config().result_keys()
    )


def test_restricted_zero_pos_run_pairs_with_the_full_none_run(tmp_path):
    df = make_texts(3, variants=("original", "front"))
    cfg = extract_config(intervention_variants=["original"])
    params = parse_params({"extract": {"device": "cpu"}})
    run = extract_runner(params, "local")
    recs = run(
        "tiny",
        TINY,
        df,
        cfg,
        ["none", "zero_pos"],
        tmp_path,
        show_progress=False,
        log=lambda m: None,
    )
    by_iv = {r["intervention"]: r for r in recs}
    assert by_iv["none"]["n_texts"] == 6 and by_iv["zero_pos"]["n_texts"] == 3
    assert by_iv["none"]["pair_key"] == by_iv["zero_pos"]["pair_key"]
    assert by_iv["none"]["run_id"] != by_iv["zero_pos"]["run_id"]
    lm = read_outputs(tmp_path / "zero_pos")["layer_metrics"]
    assert set(lm["variant"]) == {"original"}
    assert (
        unchanged_run(by_iv["zero_pos"], list(by_iv.values()), log=lambda m: None) is by_iv["none"]
    )
    # layer 0 sees no position: the restricted run equals the unchanged run there
    none = read_outputs(tmp_path / "none")["layer_metrics"]
    key = ["variant", "sample_id", "metric"]
    a = lm[lm.layer == 0].set_index(key)["value"]
    b = none[(none.layer == 0) & (none.variant == "original")].set_index(key)["value"]
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index(), check_names=False)


def test_dose_texts_draws_the_graded_runs_reviews_and_keeps_the_others_whole():
    df = make_texts(6, variants=("original", "front"))
    cfg = extract_config(
        intervention_variants=["original"], homogenize_doses=[0, 0.5], dose_texts=3
    )
    groups = intervention_groups(df, list(cfg.interventions), cfg)
    by_ivs = {tuple(g[1]): g for g in groups}
    graded = ("homogenize:0", "homogenize:0.5", "homogenize_control:0.5")
    assert set(by_ivs) == {("none",), ("zero_pos",), graded}
    assert len(by_ivs[("none",)][0]) == 12 and len(by_ivs[("zero_pos",)][0]) == 6
    sub, _, pair = by_ivs[graded]
    assert set(sub["variant"]) == {"original"} and sub["sample_id"].nunique() == 3
    assert pair == texts_hash(df)  # pairs with the unchanged run of every text
    # the draw is the seed's: the same reviews again, others under another seed
    again = intervention_groups(df, list(cfg.interventions), cfg)
    assert list(again[-1][0]["sample_id"]) == list(sub["sample_id"])
    draws = {
        tuple(intervention_groups(df, list(c.interventions), c)[-1][0]["sample_id"])
        for c in (extract_config(homogenize_doses=[0], dose_texts=3, seed=s) for s in range(8))
    }
    assert len(draws) > 1
    # as many or more than there are: every review, one pass with the zero_pos run
    whole = extract_config(intervention_variants=["original"], homogenize_doses=[0], dose_texts=6)
    assert len(intervention_groups(df, list(whole.interventions), whole)) == 2
    # it does not enter the run ids: a review's run is the same with or without the draw
    assert (
        cfg.result_keys()
        == extract_config(
            intervention_variants=["original"], homogenize_doses=[0, 0.5]
        ).result_keys()
    )


@pytest.mark.parametrize("bad", [0, -2, 1.5, "all"])
def test_dose_texts_must_be_a_count(bad):
    with pytest.raises(HomogError, match="extract.dose_texts must be a number of reviews"):
        extract_config(dose_texts=bad)
