"""Every command's help read on an 80-column terminal: no line is wider, the top-level list
names every stage, and synth's and the stages' helps name what they write."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_docs import command_names

from homog.cli import main


def help_text(name: str) -> str:
    argv = [*name.split(), "--help"] if name else ["--help"]
    res = CliRunner().invoke(main, argv, env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("name", ["", *command_names()])
def test_help_fits_80_columns(name):
    wide = [ln for ln in help_text(name).splitlines() if len(ln) > 80]
    assert wide == [], f"homog {name} --help: {len(wide)} line(s) over 80 columns"


def test_the_top_level_lists_every_stage_of_the_pipeline():
    import yaml
    from conftest import ROOT

    text = help_text("")
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    commands = {s.split("_")[0] for s in stages}  # probe_features: `homog probe --step`
    listed = text.split("Pipeline stages")[1].split("Options:")[0]  # the groups, not the list
    assert not [c for c in commands if c not in listed.replace(",", " ").split()], listed


def test_the_stage_list_is_dvc_yamls():
    """PIPELINE_STAGES, the one list the top-level help's stages come from, names every stage
    of dvc.yaml in its order, with the command its `cmd` runs; every command the help's groups
    name is one `homog` lists."""
    import yaml
    from conftest import ROOT

    from homog.cli import COMMANDS, PIPELINE_STAGES, READER_GROUPS, builtin_command

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert list(PIPELINE_STAGES) == list(stages)
    for stage, command in PIPELINE_STAGES.items():
        cmd = stages[stage].get("do", stages[stage])["cmd"]
        assert cmd.split()[:2] == ["homog", command], (stage, cmd)
    listed = help_text("").split("Pipeline stages")[1].split("\n")[1].replace(",", " ").split()
    assert listed == list(dict.fromkeys(PIPELINE_STAGES.values()))
    assert [n for n in COMMANDS if builtin_command(n) is None] == []
    named = {*PIPELINE_STAGES.values(), *(n for _, names in READER_GROUPS for n in names)}
    assert named <= {*COMMANDS, "tui"}


def test_synth_help_names_every_variant_it_writes():
    from homog.variants import TEXT_VARIANTS

    text = " ".join(help_text("synth").split())
    assert all(v in text for v in TEXT_VARIANTS)


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("extract", ("layer_metrics", "pooled_mean.npy", "run.json", "sentence_metrics")),
        ("stats", ("contrasts", "dose_response", "separability", "sentence_contrasts")),
    ],
)
def test_stage_help_names_its_outputs(name, files):
    text = " ".join(help_text(name).split())
    assert [f for f in files if f not in text] == []


def test_the_probe_refuses_one_review_per_label_without_promising_folds(capsys):
    """At 2 reviews (one per label) the probe said "2 folds instead of 5" and then failed;
    now it says only why it cannot run."""
    from homog.errors import HomogError
    from homog.probe.stage import fold_count

    with pytest.raises(HomogError, match="at least 2 reviews of each label.*has 1"):
        fold_count(1, 5)
    assert "folds instead" not in capsys.readouterr().err
    assert fold_count(3, 5) == 3 and "3 folds instead of probe.folds 5" in capsys.readouterr().err
    assert fold_count(7, 5) == 5 and capsys.readouterr().err == ""
