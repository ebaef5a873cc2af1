"""homog.lazy.lazy_names, the one lazy-import mechanism of the package faces (extract, synth,
metrics, store): a name is imported on first read from its submodule, an absolute module or
as the submodule itself, then cached; an unknown name is an AttributeError."""

from __future__ import annotations

import sys

import pytest

from homog.lazy import SUBMODULE, lazy_names


def test_names_resolve_on_first_read_and_stay(tmp_path, monkeypatch):
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "inner.py").write_text("VALUE = 41\n")
    (pkg / "sub.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = {"VALUE": "inner", "sub": SUBMODULE, "HomogError": "homog.errors"}
    namespace: dict = {}
    getattr_, dir_ = lazy_names("lazypkg", names, namespace)
    assert "lazypkg.inner" not in sys.modules
    assert getattr_("VALUE") == 41 and namespace["VALUE"] == 41
    assert getattr_("sub").X == 1 and namespace["sub"] is sys.modules["lazypkg.sub"]
    assert getattr_("HomogError").__module__ == "homog.errors"
    assert dir_() == sorted(names)
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'nope'"):
        getattr_("nope")
