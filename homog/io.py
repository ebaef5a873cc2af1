"""Small I/O helpers shared by every stage: atomic outputs, params, content hashes.

Stages never leave half-written output where the next stage would trust it: every file or
directory is written under a temporary name beside its target and renamed into place only
when complete (``os.replace`` is atomic on one filesystem).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PARAMS = Path("params.yaml")


class HomogError(Exception):
    """An error the user can fix; the CLI prints its message and exits non-zero."""


def load_params(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> dict[str, Any]:
    """Read ``params.yaml`` (or another YAML file) into a dict.

    Raises HomogError when the file is missing or is not a YAML mapping.
    """
    path = Path(path)
    if not path.exists():
        raise HomogError(
            f"params file {path} not found: run from the project root or pass --params PATH"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise HomogError(f"params file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise HomogError(f"params file {path} must hold a mapping at the top level")
    return data


def section(params: dict[str, Any], name: str) -> dict[str, Any]:
    """Return ``params[name]`` or raise HomogError naming the missing section."""
    value = params.get(name)
    if not isinstance(value, dict):
        raise HomogError(f"params.yaml has no '{name}:' section (a mapping is expected)")
    return value


def config_from_section(
    cls: type,
    params: dict[str, Any],
    name: str,
    *,
    read_elsewhere: tuple[str, ...] = (),
    **values: Any,
) -> Any:
    """Build the dataclass ``cls`` from ``params[name]`` (a missing section gives defaults).

    ``values`` set fields from outside the section (e.g. the top-level seed, CLI overrides;
    None is ignored). Keys of the section that are neither fields nor ``read_elsewhere`` (keys
    another part of homog reads) raise HomogError naming them, so a typo is never ignored.
    """
    section = params.get(name) or {}
    if not isinstance(section, dict):
        raise HomogError(f"params.yaml '{name}:' must be a mapping")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(section) - known - set(read_elsewhere))
    if unknown:
        valid = sorted(known | set(read_elsewhere))
        raise HomogError(
            f"params.yaml '{name}:' has unknown key(s) {', '.join(unknown)} (unknown {name} "
            f"params); valid: {', '.join(valid)}"
        )
    kwargs = {k: v for k, v in section.items() if k in known}
    kwargs.update({k: v for k, v in values.items() if v is not None})
    return cls(**kwargs)


def content_hash(obj: Any, length: int = 12) -> str:
    """A short, stable hash of a JSON-serialisable object (keys sorted)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str], *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` on success.

    On an exception the temporary file or directory is removed and ``target`` is left as it
    was. With ``directory=True`` the yielded path is an empty directory that replaces
    ``target`` (an existing directory there is removed only after the new one is complete).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkdtemp/mkstemp make 0700/0600; outputs get the usual permissions (umask applies)
    umask = os.umask(0)
    os.umask(umask)
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        tmp.chmod(0o777 & ~umask)
    else:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        tmp = Path(name)
        tmp.chmod(0o666 & ~umask)
    try:
        yield tmp
        if directory:
            old = None
            if target.exists():
                old = target.with_name(f".{target.name}.old.{os.getpid()}")
                os.replace(target, old)
            os.replace(tmp, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
