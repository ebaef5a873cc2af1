"""Small I/O helpers shared by every stage: atomic outputs, JSON files, content hashes.

Stages never leave half-written output where the next stage would trust it: every file or
directory is written under a temporary name beside its target and renamed into place only
when complete (``os.replace`` is atomic on one filesystem).

The output-path policy of every command that writes (docs/guarantees.md):

- outputs are regular files (or directories of them), written atomically;
- a target that exists and is not a regular file (a device such as ``/dev/null``, a FIFO, a
  socket) is refused with a message naming it, never replaced (commands that stream write
  ``-o -`` to stdout instead);
- a symlinked target is followed: its target is rebuilt atomically beside itself, the link
  stays;
- a full disk, a missing permission, a file in the way are messages (HomogError) naming the
  path, never tracebacks;
- temporary files carry the writer's pid; those of dead processes are removed by the next
  write of the same target (a ``kill -9`` leaves nothing behind for long).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from homog import interrupts
from homog.errors import HomogError
from homog.layout import writable_dir

__all__ = [
    "HomogError",
    "atomic_path",
    "check_target",
    "content_hash",
    "os_error",
    "read_output",
    "probe_dir",
    "remove_stale",
    "unreadable",
    "write_json",
]

_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}
T = TypeVar("T")
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
TOO_LARGE = (errno.EFBIG,)  # a file-size limit (`ulimit -f`) or the filesystem's maximum
_ERRNO_TEXT = re.compile(r"\[errno (\d+)\]", re.I)  # pyarrow's OSError has errno None


def error_number(exc: OSError) -> int | None:
    """``exc.errno``, or the ``[errno N]`` pyarrow writes into its message (its errno is None)."""
    if exc.errno is not None:
        return exc.errno
    m = _ERRNO_TEXT.search(str(exc))
    return int(m.group(1)) if m else None


NO_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)


def content_hash(obj: Any, length: int = 12) -> str:
    """A short, stable hash of a JSON-serialisable object (keys sorted)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def os_error(exc: OSError, path: str | os.PathLike[str] | None, what: str = "output") -> HomogError:
    """The HomogError for an OSError met while writing ``path`` (the ``what``): a full disk,
    a missing permission, a file where a directory should be, or anything else, each named."""
    where = f"the {what} {path}" if path is not None else f"the {what}"
    number = error_number(exc)
    if number in NO_SPACE:
        return HomogError(
            f"no space left on the device while writing {where}; free space (or choose another "
            "place) and rerun: nothing half-written was left"
        )
    if number in TOO_LARGE:
        return HomogError(
            f"a file grew past the largest size allowed while writing {where} (File too large: "
            "a file-size limit such as `ulimit -f`, or the filesystem's maximum file size); "
            "raise the limit, or free space on (or choose) a filesystem that takes large files, "
            "and rerun: nothing half-written was left"
        )
    if number in NO_PERMISSION:
        return HomogError(
            f"cannot write {where}: {exc.strerror or 'permission denied'}; choose a writable "
            "path or fix the permissions"
        )
    if exc.errno in (errno.ENOTDIR, errno.EEXIST) and path is not None:
        for parent in Path(path).parents:
            if parent.exists() and not parent.is_dir():
                return HomogError(
                    f"cannot write {where}: {parent} is a file, not a directory; choose "
                    "another path"
                )
    return HomogError(f"cannot write {where}: {exc.strerror or exc}; choose another path")


# What reading a damaged Parquet or .npz file raises (pyarrow's errors subclass these too).
READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    EOFError,
    KeyError,
    zipfile.BadZipFile,
    zlib.error,
)


def unreadable(path: str | os.PathLike[str], exc: BaseException, fix: str) -> HomogError:
    """The HomogError for a stage output that cannot be read: names the file, DuckDB's or
    pyarrow's or numpy's reason, and ``fix`` (the command that writes it again)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return HomogError(
        f"cannot read {path} ({first}): the file is damaged or not what homog wrote; {fix}"
    )


def read_output(path: Path, read: Callable[[Path], T], fix: str) -> T:
    """``read(path)``, with a damaged file as :func:`unreadable`'s HomogError."""
    try:
        return read(path)
    except READ_ERRORS as exc:
        raise unreadable(path, exc, fix) from exc


def check_target(
    target: str | os.PathLike[str], *, directory: bool = False, what: str = "output"
) -> Path:
    """The path to write for ``target``: its symlink followed, refused unless it is absent or
    a regular file (``directory=True``: a directory).

    Raises HomogError naming ``target`` and its kind when it is a device, FIFO, socket (or,
    for a file, a directory), and when a parent of it is a file.
    """
    target = Path(target)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:  # ENOTDIR: a parent is a file; EACCES
        raise os_error(exc, target, what) from exc
    if stat.S_ISREG(mode) and not directory or stat.S_ISDIR(mode) and directory:
        return target
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    want = "a directory" if directory else "a regular file"
    raise HomogError(
        f"refusing to write the {what} {target}: it exists and is {kind}, not {want}; "
        "homog only replaces its own regular files: choose another path"
        + ("" if directory else " (or `-o -` to stream, where the command offers it)")
    )


def probe_dir(directory: str | os.PathLike[str], what: str = "output") -> Path:
    """Check, before any work, that files can be made in ``directory`` without leaving it
    behind: the folders it creates for the check are removed again. HomogError (from
    :func:`homog.layout.writable_dir`) names the file in the way or the unwritable place."""
    d = Path(directory)
    missing = next((p for p in (d, *d.parents) if p.parent.exists() and not p.exists()), None)
    if missing is not None and missing.is_symlink():
        missing = None
    writable_dir(d, what=what)
    if missing is not None:
        shutil.rmtree(missing, ignore_errors=True)
    return d


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's live process / not a pid
        return True
    return True


def remove_stale(directory: str | os.PathLike[str], pattern: str) -> list[Path]:
    """Remove entries of ``directory`` whose name matches ``pattern`` (a regex whose group 1
    is a pid) when that pid no longer runs: temporary files and folders of killed writers.
    A live pid (maybe a writer at work right now) is left alone. Returns the removed paths."""
    directory = Path(directory)
    removed: list[Path] = []
    regex = re.compile(pattern)
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for p in entries:
        m = regex.match(p.name)
        if not m or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def _stale_pattern(name: str) -> str:
    # mkstemp's random part has no dot, so `.x.<pid>.<rand>.tmp` of target `x` never matches
    # a temp file of target `x.5`
    return rf"^\.{re.escape(name)}\.(\d+)\.(?:[A-Za-z0-9_]+\.tmp|old)$"


@contextlib.contextmanager
def atomic_path(
    target: str | os.PathLike[str], *, directory: bool = False, what: str = "output"
) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` on success.

    On an exception the temporary file or directory is removed and ``target`` is left as it
    was. With ``directory=True`` the yielded path is an empty directory that replaces
    ``target`` (an existing directory there is removed only after the new one is complete).
    ``target`` is checked first (:func:`check_target`: a symlink is followed, a device or
    FIFO refused); temporaries of killed writers of the same target are removed; a full disk
    or a missing permission, also while the caller writes the temporary path, becomes a
    HomogError naming ``target`` (the ``what``). A Ctrl-C during the command whose
    KeyboardInterrupt was lost (:func:`homog.interrupts.check`) stops the rename.
    """
    target = check_target(target, directory=directory, what=what)
    pid = os.getpid()
    # mkdtemp/mkstemp make 0700/0600; outputs get the usual permissions (umask applies)
    umask = os.umask(0)
    os.umask(umask)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target.parent, _stale_pattern(target.name))
        if directory:
            tmp = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.{pid}.", suffix=".tmp", dir=target.parent)
            )
            tmp.chmod(0o777 & ~umask)
        else:
            fd, name = tempfile.mkstemp(
                prefix=f".{target.name}.{pid}.", suffix=".tmp", dir=target.parent
            )
            os.close(fd)
            tmp = Path(name)
            tmp.chmod(0o666 & ~umask)
    except OSError as exc:
        raise os_error(exc, target, what) from exc
    try:
        yield tmp
        interrupts.check()  # a Ctrl-C whose KeyboardInterrupt was lost: no commit
        if directory:
            old = None
            if target.exists():
                old = target.with_name(f".{target.name}.{pid}.old")
                os.replace(target, old)
            os.replace(tmp, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        mapped = (*NO_SPACE, *TOO_LARGE, *NO_PERMISSION)
        if isinstance(exc, OSError) and error_number(exc) in mapped:
            raise os_error(exc, target, what) from exc
        raise


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
