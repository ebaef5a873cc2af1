"""Small I/O helpers shared by every stage: atomic outputs, JSON files, content hashes.

Stages never leave half-written output where the next stage would trust it: every file or
directory is written under a temporary name beside its target and renamed into place only
when complete (``os.replace`` is atomic on one filesystem).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from homog.errors import HomogError

__all__ = ["HomogError", "atomic_path", "content_hash", "write_json"]


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
