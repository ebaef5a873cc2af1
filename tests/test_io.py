"""homog.io: atomic outputs never leave half-written files and get normal permissions."""

from __future__ import annotations

import os
import stat

import pytest

from homog.io import atomic_path, write_json


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
