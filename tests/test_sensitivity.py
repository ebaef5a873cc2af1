"""The margin sensitivity table: every primary endpoint's verdict under sd and depth x 0.05,
0.1, 0.2, recomputed from the stored rows; its own setting's column equals `homog claims`,
and any other column equals the claims of a stats run made with that setting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import save_run

from homog.cli import main
from homog.layout import Layout

N_TEXTS, N_LAYERS = 30, 9
# erank shifts per variant, in units of the texts' spread (3): a position effect of about
# one tenth of an SD at first, none at last
PRIMARY = ["key_first - key_control", "key_last - key_control", "key_ends - key_mid"]
SHIFT = {"original": 0.0, "key_first": -0.5, "key_mid": 0.0, "key_last": -0.15, "key_control": 0.0}


def _frame(rng) -> pd.DataFrame:
    rows = []
    base = 40 - 2.5 * np.arange(N_LAYERS + 1)
    for s in range(N_TEXTS):
        text = rng.normal(0, 3)
        for variant, shift in SHIFT.items():
            noise = rng.normal(0, 0.3, N_LAYERS + 1)
            for layer in range(N_LAYERS + 1):
                e = base[layer] + text + (shift + noise[layer] if layer else 0.0)
                for metric, v in (
                    ("erank", e),
                    ("mev", 0.4 - e / 200),
                    ("erank__no_sink", e - 1),
                    ("mev__no_sink", 0.38 - e / 200),
                ):
                    rows.append((variant, f"s{s:03d}", layer, metric, v))
    return pd.DataFrame(rows, columns=["variant", "sample_id", "layer", "metric", "value"])


def _project(root: Path, stats: dict) -> Path:
    from homog.stats.stage import stats_stage
    from homog.store import load

    layout = Layout(root)
    save_run(layout, "m1", "none", _frame(np.random.default_rng(4)), N_LAYERS)
    params = {
        "models": {"m1": {"source": "random:tiny-llama"}},
        "posenc": {"encodings": []},
        "stats": {
            "n_boot": 200,
            "mixed_metrics": [],
            "separability_perm": 0,
            # these texts have no same-place controls (ctrl_*): the position family's
            # contrasts against key_control are the primary endpoints here
            "primary": {"contrasts": PRIMARY},
            **stats,
        },
    }
    (root / "params.yaml").write_text(json.dumps(params))
    stats_stage(params, root)
    load(params, layout.db(), root)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return _project(tmp_path_factory.mktemp("sens"), {})


def _claims(root: Path, *extra: str) -> list[dict]:
    res = CliRunner().invoke(
        main,
        [
            "claims",
            "--db",
            str(Layout(root).db()),
            "--params",
            str(root / "params.yaml"),
            "--format",
            "json",
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


KEYS = ("model", "comparison", "metric", "scope")


def test_the_own_setting_column_equals_homog_claims(project):
    sens = _claims(project, "--sensitivity")
    claims = {tuple(r[k] for k in KEYS): r for r in _claims(project) if r["family"] == "primary"}
    assert len(sens) == len(claims) == 24  # 2 metrics x 2 token sets x 2 scopes x 3 contrasts
    for row in sens:
        c = claims[tuple(row[k] for k in KEYS)]
        assert row["default"] == "sd x 0.1"
        assert row["sd x 0.1"] == c["verdict"]
        assert row["holds"] == c["margin_sensitivity"]
    # the margin matters on these data: some verdict changes, and the answer line says where
    assert any(r["holds"] != "holds at every margin" for r in sens)
    labels = [f"{b} x {f:g}" for b in ("sd", "depth") for f in (0.05, 0.1, 0.2)]
    assert len({tuple(r[x] for x in labels) for r in sens}) > 1


def test_another_column_equals_a_stats_run_with_that_setting(project, tmp_path):
    sens = {tuple(r[k] for k in KEYS): r for r in _claims(project, "--sensitivity")}
    other = _project(tmp_path, {"sesoi_basis": "depth", "sesoi": 0.2})
    again = [r for r in _claims(other) if r["family"] == "primary"]
    assert again
    for c in again:
        assert sens[tuple(c[k] for k in KEYS)]["depth x 0.2"] == c["verdict"], c
