"""Issue 39, items 5, 6, 10 and 11: parameters where results stop meaning anything, or where
memory explodes, are refused by params validation with a message naming the key.

- `extract.max_tokens` below 8: erank = mev = 1 and NaN cosines/twonn_id flowed into stats;
- `stats.n_boot` below 2 / (1 - ci) (40 at 95%): zero-width CIs;
- `stats.n_perm` with 1 / (n_perm + 1) >= alpha: no p could fall below alpha;
- `stats.n_boot` / `n_perm` above 1,000,000: a [draws, texts] matrix of terabytes;
- the corpus stage, when no text fits the token budget, stops with a message (it raised
  AttributeError in `word_count`).
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hostile_helpers import clean_error

from homog.cli import main
from homog.config import parse_params
from homog.corpus.stage import prepare_corpus
from homog.errors import HomogError


@pytest.mark.parametrize("tokens", [1, 2, 3, 7])
def test_max_tokens_below_what_the_metrics_need_is_refused(tokens):
    with pytest.raises(HomogError, match=rf"extract.max_tokens must be >= 8, got {tokens}"):
        parse_params({"extract": {"max_tokens": tokens}})
    assert parse_params({"extract": {"max_tokens": 8}}).extract.max_tokens == 8


@pytest.mark.parametrize(
    ("stats", "message"),
    [
        ({"n_boot": 1}, r"stats.n_boot must be >= 40 for a 0.95 CI.*got 1;"),
        ({"n_boot": 39}, r"stats.n_boot must be >= 40"),
        ({"n_boot": 199, "ci": 0.99}, r"stats.n_boot must be >= 200 for a 0.99 CI"),
        ({"n_perm": 1}, r"stats.n_perm must be >= 20 at alpha 0.05, got 1:.*1 / \(n_perm \+ 1\)"),
        ({"n_perm": 99, "alpha": 0.01}, r"stats.n_perm must be >= 100 at alpha 0.01"),
        ({"n_boot": 10**12}, r"stats.n_boot must be <= 1,000,000, got 1,000,000,000,000"),
        ({"n_perm": 10**7}, r"stats.n_perm must be <= 1,000,000"),
    ],
)
def test_degenerate_draw_counts_are_refused(stats, message):
    with pytest.raises(HomogError, match=message):
        parse_params({"stats": stats})


def test_the_floors_themselves_are_accepted():
    st = parse_params({"stats": {"n_boot": 40, "n_perm": 20}}).stats
    assert (st.n_boot, st.n_perm) == (40, 20)
    # the Wilcoxon test draws no sign vectors: n_perm does not matter to it
    assert parse_params({"stats": {"test": "wilcoxon", "n_perm": 1}}).stats.n_perm == 1
    assert parse_params({"stats": {"n_boot": 10**6, "n_perm": 10**6}}).stats.n_boot == 10**6


def test_stats_command_names_the_file_and_the_key(tmp_path):
    """`stats: {n_boot: 1, n_perm: 1}` was accepted with no warning."""
    params = tmp_path / "other.yaml"
    params.write_text(yaml.safe_dump({"stats": {"n_boot": 1, "n_perm": 1}}))
    res = CliRunner().invoke(main, ["stats", "--params", str(params)])
    clean_error(res, str(params), "stats.n_boot")


def test_corpus_where_no_text_fits_is_a_message():
    """Item 10: with a budget no sentence fits, `word_count` met NaN texts (AttributeError)."""
    raw = pd.DataFrame(
        {
            "text": [f"a fine film number {i}. It was good." for i in range(6)],
            "label": [i % 2 for i in range(6)],
        }
    )
    with pytest.raises(HomogError, match=r"6 not fitting extract.max_tokens"):
        prepare_corpus(
            raw, dataset="d", n=2, seed=0, min_words=1, fits=lambda texts: [False] * len(texts)
        )
