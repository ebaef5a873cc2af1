"""Issue 32, item 1 and the I/O tracebacks: one output-path policy for every command that
writes (docs/guarantees.md).

Outputs are regular files written atomically; a device, FIFO or socket at the target is
refused by name and left as it was; a symlink is followed; a full disk or a missing
permission is a message; temporaries of killed writers are removed by the next write.
Device nodes are made with mknod in a temp folder (root only; skipped with the reason
otherwise) and the same logic is covered with a FIFO, which anyone can make.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hostile_helpers import ENV, HOMOG, IS_ROOT, clean_error, write_texts

from homog.cli import main
from homog.errors import HomogError
from homog.io import atomic_path, write_json


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def make_node(path: Path, kind: str) -> Path:
    """A character device (a copy of /dev/null or /dev/full, mknod: root only) or a FIFO."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        if not IS_ROOT:
            pytest.skip("mknod of a character device needs root (the FIFO case covers the logic)")
        minor = {"null": 3, "full": 7}[kind]
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def is_node(path: Path, kind: str) -> bool:
    mode = path.lstat().st_mode
    return stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


@pytest.fixture
def db(tmp_path, demo_db_factory):
    path = tmp_path / "homog.duckdb"
    shutil.copy(demo_db_factory(2, 4), path)
    return path


@pytest.fixture
def corpus_params(tmp_path):
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text(
        "".join(
            f'{{"text": "{"a fine film with words " * 6} {i}", "label": {i % 2}, "id": "r{i}"}}\n'
            for i in range(20)
        )
    )
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"corpus": {"source": f"file:{reviews}", "n": 4}}))
    return path


# --- a device, FIFO or socket at the target is refused and left as it was ------------------


@pytest.mark.parametrize("kind", ["null", "full", "fifo"])
@pytest.mark.parametrize("command", ["corpus", "report", "export"])
def test_node_target_is_refused_and_kept(tmp_path, db, corpus_params, command, kind):
    node = make_node(tmp_path / "node", kind)
    args = {
        "corpus": ["corpus", "--params", str(corpus_params), "--out", str(node)],
        "report": ["report", "--params", str(corpus_params), "--db", str(db), "-o", str(node)],
        "export": [
            "export",
            "runs",
            "-o",
            str(node),
            "--format",
            "csv",
            "--force",
            "--db",
            str(db),
        ],
    }[command]
    clean_error(invoke(*args), str(node), "not a regular file")
    assert is_node(node, kind)  # not replaced by a regular file
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".node")] == []


def test_socket_and_directory_targets_are_refused(tmp_path):
    import socket

    from homog.io import check_target

    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        with pytest.raises(HomogError, match="is a socket"):
            write_json(sock_path, {})
    finally:
        sock.close()
    (tmp_path / "d").mkdir()
    with pytest.raises(HomogError, match="is a directory"):
        write_json(tmp_path / "d", {})
    with pytest.raises(HomogError, match="not a directory"):
        check_target(tmp_path / "s", directory=True)


def test_symlinked_output_updates_its_target_and_keeps_the_link(tmp_path):
    real = tmp_path / "store" / "out.json"
    real.parent.mkdir()
    write_json(real, {"v": 1})
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_json(link, {"v": 2})
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert '"v": 2' in real.read_text()


# --- full disk, permissions, a file in the way ---------------------------------------------


def test_no_space_while_writing_is_a_message_and_leaves_nothing(tmp_path):
    def fill(tmp: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))

    with pytest.raises(HomogError, match=r"no space left on the device while writing .*out\.bin"):
        with atomic_path(tmp_path / "out.bin") as tmp:
            fill(tmp)
    assert list(tmp_path.iterdir()) == []


def test_report_out_under_a_file_or_in_an_unwritable_place(tmp_path, db, corpus_params):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, needle in (
        (afile / "r.html", "afile is a file"),
        (Path("/proc/homog-test/r.html"), "cannot write the report"),
    ):
        t0 = time.monotonic()
        res = invoke("report", "--params", str(corpus_params), "--db", str(db), "-o", str(out))
        clean_error(res, needle)
        assert time.monotonic() - t0 < 20


@pytest.mark.skipif(IS_ROOT, reason="root writes into a 0555 directory; /proc covers it")
def test_report_into_read_only_directory(tmp_path, db, corpus_params):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    res = invoke(
        "report", "--params", str(corpus_params), "--db", str(db), "-o", str(ro / "r.html")
    )
    clean_error(res, str(ro), "ermission denied")


def test_permission_denied_while_writing_names_the_file(tmp_path, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(HomogError, match=r"cannot write the output .*x\.json: Permission denied"):
        write_json(tmp_path / "x.json", {})


def test_synth_out_an_existing_file(tmp_path, corpus_params):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    res = invoke(
        "synth",
        "--params",
        str(corpus_params),
        "--corpus",
        str(tmp_path / "c.parquet"),
        "--out",
        str(afile),
    )
    clean_error(res, "afile is a file, not a directory")
    assert afile.read_text() == "keep"


@pytest.mark.parametrize("where", ["under_file", "proc"])
def test_extract_out_under_a_file_or_in_proc(tmp_path, corpus_params, where):
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = afile / "x" if where == "under_file" else Path("/proc/homog-test/x")
    texts = str(tmp_path / "none.parquet")
    res = invoke(
        "extract",
        "--params",
        str(corpus_params),
        "--model",
        "random:tiny-llama",
        "--texts",
        texts,
        "--out",
        str(out),
        "--device",
        "cpu",
    )
    clean_error(res, "afile is a file" if where == "under_file" else "/proc/homog-test")


def test_full_disk_during_extract_is_one_message(tmp_path, corpus_params, monkeypatch):
    import numpy as np

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    monkeypatch.setattr(np, "savez_compressed", full)
    texts = write_texts(tmp_path / "texts.parquet")
    res = invoke(
        "extract",
        "--params",
        str(corpus_params),
        "--model",
        "random:tiny-llama",
        "--texts",
        str(texts),
        "--out",
        str(tmp_path / "x"),
        "--device",
        "cpu",
        "--no-progress",
    )
    clean_error(res, "no space left on the device", "free space")
    assert not any(p.suffix == ".tmp" for p in (tmp_path).rglob("*"))


@pytest.mark.slow
def test_full_tmpfs_during_extract(tmp_path, corpus_params):
    """A real full disk: a 64 KiB tmpfs (root only)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if (
        not IS_ROOT
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        pytest.skip("mounting a small tmpfs needs root (the ENOSPC test above covers the logic)")
    try:
        texts = write_texts(tmp_path / "texts.parquet")
        proc = subprocess.run(
            [
                *HOMOG,
                "extract",
                "--params",
                str(corpus_params),
                "--model",
                "random:tiny-llama",
                "--texts",
                str(texts),
                "--out",
                str(mnt / "x"),
                "--device",
                "cpu",
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stderr
        assert "no space left on the device" in proc.stderr and "Traceback" not in proc.stderr
        assert not [p for p in mnt.rglob("*") if p.suffix == ".tmp"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# --- stdout and stdin ----------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize(
    "args", [["runs"], ["sql", "SELECT * FROM runs"], ["sql", "SELECT 1", "--format", "csv"]]
)
def test_stdout_on_a_full_device(db, args):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*HOMOG, *args, "--db", str(db)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            timeout=120,
        )
    assert proc.returncode == 1, proc.stderr
    assert "cannot write to stdout: no space left" in proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_latin1_sql_on_stdin(db, locale):
    proc = subprocess.run(
        [*HOMOG, "sql", "-", "--db", str(db)],
        input="SELECT 'café'".encode("latin-1"),
        capture_output=True,
        timeout=120,
        env={**ENV, "LC_ALL": locale, "PYTHONIOENCODING": ""},
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "not UTF-8" in err and "0xe9" in err and "iconv" in err and "Traceback" not in err


# --- temporaries of killed writers ----------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_next_write_removes_temporaries_of_killed_writers(tmp_path):
    dead, live = _dead_pid(), os.getppid()
    stale = [tmp_path / f".out.json.{dead}.abc123_x.tmp", tmp_path / f".out.json.{dead}.old"]
    kept = [tmp_path / f".out.json.{live}.abc123_x.tmp", tmp_path / f".out.json.5.{dead}.ab.tmp"]
    stale[1].mkdir()
    for p in (stale[0], *kept):
        p.write_text("junk")
    write_json(tmp_path / "out.json", {})
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)


def test_report_removes_report_folders_of_killed_reports(tmp_path, db, corpus_params, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    dead = _dead_pid()
    stale = tmp / f"homog-report-{dead}-k1ll3d_x"
    (stale / "fig").mkdir(parents=True)
    other = tmp / "homog-report-notapid"
    other.mkdir()
    res = invoke(
        "report", "--params", str(corpus_params), "--db", str(db), "-o", str(tmp_path / "r.html")
    )
    assert res.exit_code == 0, res.output
    assert not stale.exists() and other.exists()
    assert [p.name for p in tmp.iterdir()] == ["homog-report-notapid"]  # its own one is gone


def test_kill_9_during_report_leaves_a_folder_the_next_report_removes(tmp_path, db, corpus_params):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "TMPDIR": str(tmp)}
    cmd = [
        *HOMOG,
        "report",
        "--params",
        str(corpus_params),
        "--db",
        str(db),
        "-o",
        str(tmp_path / "r.html"),
    ]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp.glob("homog-report-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert list(tmp.glob("homog-report-*")), "the report never made its temp folder"
    assert subprocess.run(cmd, env=env, capture_output=True, timeout=300).returncode == 0
    assert not list(tmp.glob("homog-report-*"))
