"""Every name of ``stats.primary`` is checked against the registries, with "did you mean".

A typo matched no claim row, so the primary family shrank silently (fewer endpoints, another
Holm family, the U-shape line gone).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hostile_helpers import clean_error

from homog.config.primary import PrimaryConfig
from homog.errors import HomogError
from homog.stats.primary_names import check_primary


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("metrics", ("erankk",), "unknown metric 'erankk' (did you mean erank?)"),
        ("token_sets", ("standardised",), "'standardised' (did you mean standardized?)"),
        (
            "contrasts",
            ("key_frist - key_control",),
            "unknown variant 'key_frist' (did you mean key_first?)",
        ),
        ("contrasts", ("key_first - orignal",), "'orignal' (did you mean original?)"),
    ],
)
def test_a_typo_is_an_error_naming_the_close_name(field, value, needle):
    with pytest.raises(HomogError) as err:
        check_primary(PrimaryConfig(**{field: value}))
    assert needle in str(err.value) and f"stats.primary.{field}" in str(err.value)


def test_registered_names_pass():
    check_primary(PrimaryConfig())  # the defaults
    check_primary(
        PrimaryConfig(
            metrics=("mev", "schatten_1", "curvature", "act_ratio", "attn_first"),
            token_sets=("all", "no_sink", "standardized"),
            contrasts=("front - original", "key_p25 - key_control", "key_ends - key_mid"),
        )
    )


@pytest.mark.parametrize("command", [["claims"], ["report", "-o", "r.html"]])
def test_claims_and_report_refuse_a_typo(command, demo_db_factory, write_params, tmp_path):
    params = write_params(stats={"primary": {"metrics": ["erankk"]}})
    out = [str(tmp_path / a) if a.endswith(".html") else a for a in command]
    db = str(demo_db_factory(1, 4))
    from homog.cli import main

    res = CliRunner().invoke(main, [*out, "--db", db, "--params", str(params)])
    clean_error(res, "erankk", "did you mean erank?")
    assert not (tmp_path / "r.html").exists()


def test_the_stats_stage_refuses_a_typo_before_any_work(tmp_path):
    from homog.stats.stage import stats_stage

    params = {"stats": {"primary": {"token_sets": ["all", "nosink"]}}}
    with pytest.raises(HomogError, match=r"'nosink' \(did you mean no_sink\?\)"):
        stats_stage(params, tmp_path)


def test_a_difference_of_differences_is_checked_variant_by_variant():
    """The key-specific endpoints pass; a typo inside one of their sides is named."""
    check_primary(PrimaryConfig(contrasts=("(key_first - key_mid) - (ctrl_first - ctrl_mid)",)))
    with pytest.raises(HomogError, match="unknown variant 'ctrl_frist'"):
        check_primary(PrimaryConfig(contrasts=("(key_first - key_mid) - (ctrl_frist - ctrl_mid)",)))
