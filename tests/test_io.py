"""homog.io: atomic outputs never leave half-written files and get normal permissions."""

from __future__ import annotations

import os
import stat

import pytest

from homog.io import HomogError, atomic_path, load_params, write_json


def test_atomic_file_replaces_only_on_success(tmp_path):
    target = tmp_path / "out.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text().strip().startswith("{")
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left


def test_atomic_directory_and_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "d", directory=True) as tmp:
            (tmp / "x").write_text("1")
        with atomic_path(tmp_path / "f.txt") as tmp:
            tmp.write_text("1")
    finally:
        os.umask(old)
    assert (tmp_path / "d" / "x").read_text() == "1"
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o644


def test_load_params_errors_name_the_file(tmp_path):
    with pytest.raises(HomogError, match="not found"):
        load_params(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(HomogError, match="mapping"):
        load_params(bad)


def test_config_from_section_rejects_typos_and_applies_values():
    from dataclasses import dataclass

    from homog.io import config_from_section

    @dataclass
    class Cfg:
        a: int = 1
        seed: int = 0

    params = {"s": {"a": 2, "elsewhere": True}, "seed": 7}
    cfg = config_from_section(Cfg, params, "s", read_elsewhere=("elsewhere",), seed=7)
    assert (cfg.a, cfg.seed) == (2, 7)
    assert config_from_section(Cfg, {}, "s") == Cfg()
    with pytest.raises(HomogError, match="unknown key.*elsewhere.*valid: a, seed"):
        config_from_section(Cfg, params, "s")
    with pytest.raises(HomogError, match="must be a mapping"):
        config_from_section(Cfg, {"s": [1]}, "s")
