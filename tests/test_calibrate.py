"""The calibration suite: every check passes, and the CLI prints it and fails loudly."""

from __future__ import annotations

import json

from click.testing import CliRunner

from homog.cli import main
from homog.metrics import calibrate as cal


def test_every_calibration_check_passes():
    checks = cal.run_checks()
    assert len(checks) > 30
    failed = [c for c in checks if not c.ok]
    assert not failed, failed


def test_checks_would_catch_a_broken_metric(monkeypatch):
    """The suite is not vacuous: a wrong erank (using sigma^2 instead of sigma) fails it."""
    import homog.metrics.spectra as m

    real = m.spectral_metrics

    def wrong(eig):
        out = real(eig)
        p = eig / eig.sum(-1, keepdim=True)
        out["erank"] = (-(p * p.clamp_min(1e-300).log()).sum(-1)).exp() + 0.5
        return out

    monkeypatch.setattr(m, "spectral_metrics", wrong)
    assert any(not c.ok for c in cal.check_orthonormal())


def test_collapse_is_monotone_in_t_even_centered():
    assert all(c.ok for c in cal.check_averaging(center=True))


def test_cli_table_and_json():
    runner = CliRunner()
    res = runner.invoke(main, ["calibrate"])
    assert res.exit_code == 0, res.output
    assert "orthonormal" in res.output and "bfloat16" in res.output
    res = runner.invoke(main, ["calibrate", "--format", "json"])
    rows = json.loads(res.output)
    assert {r["case"] for r in rows} >= {"orthonormal", "identical rows", "rotation"}


def test_cli_exits_nonzero_when_a_check_fails(monkeypatch):
    bad = [cal.Check("x", "erank", 0.0, "= 1", False)]
    monkeypatch.setattr(cal, "run_checks", lambda: bad)
    res = CliRunner().invoke(main, ["calibrate"])
    assert res.exit_code == 1
    assert "1 of 1 calibration checks failed" in res.output


def test_one_massive_token_fakes_collapse_only_for_erank_all():
    rows = {c.metric: c for c in cal.check_massive_token()}
    assert all(c.ok for c in rows.values())
    assert rows["erank"].value < rows["erank__no_sink"].value / 4
    assert rows["erank__standardized"].info  # shown: z-scoring does not remove a loud token
