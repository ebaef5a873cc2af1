"""Issue 39 item 14: a full disk or a file-size limit (ENOSPC, EFBIG 'File too large') while
`homog extract` writes is one message naming the path and what to free, with no partial
output left where the next stage would read it (extract writes atomically). No model runs:
the writer is monkeypatched to fail."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import pandas as pd
import pytest
from click.testing import CliRunner
from hostile_helpers import ROOT, clean_error

from homog.cli import main
from homog.errors import HomogError

FAILURES = {
    "EFBIG": OSError(errno.EFBIG, "File too large"),
    "ENOSPC": OSError(errno.ENOSPC, "No space left on device"),
    # pyarrow's own OSError: errno None, the number in its message
    "arrow-EFBIG": OSError("Error writing bytes to file. Detail: [errno 27] File too large"),
}


def _fake_outputs():
    return SimpleNamespace(
        tables=lambda: {"layer_metrics": pd.DataFrame({"value": [1.0]})},
        vectors={"v": [1.0]},
    )


def _fail(exc):
    def write(*_a, **_k):
        raise exc

    return write


@pytest.mark.parametrize("name", list(FAILURES))
def test_write_outputs_disk_full_is_one_message_and_leaves_nothing(tmp_path, monkeypatch, name):
    from homog.extract import outputs

    monkeypatch.setattr(outputs, "run_json_record", lambda o, r: dict(r))
    monkeypatch.setattr(outputs, "_write_parquet", _fail(FAILURES[name]))
    target = tmp_path / "m" / "none"
    with pytest.raises(HomogError) as err:
        outputs.write_outputs(_fake_outputs(), target, {})
    msg = str(err.value)
    assert str(target) in msg and "nothing half-written was left" in msg
    assert "free space" in msg
    if "EFBIG" in name:
        assert "File too large" in msg and "ulimit -f" in msg
    assert not target.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == []  # no temporary folder


def test_shard_write_efbig_is_named(tmp_path):
    from homog.io import atomic_path

    shard = tmp_path / "work" / "shard-0000.npz"
    with (
        pytest.raises(HomogError, match=r"File too large.*nothing half-written"),
        atomic_path(shard),
    ):
        raise OSError(errno.EFBIG, "File too large")
    assert not (tmp_path / "work").exists() or list((tmp_path / "work").iterdir()) == []


def test_extract_cli_disk_full_is_one_line_without_traceback(tmp_path, monkeypatch):
    """`homog extract` with the final write failing on EFBIG: exit 1, `Error:` naming the
    output folder, no traceback (was 3 chained tracebacks), no run folder left."""
    from homog.extract import outputs

    monkeypatch.setattr(outputs, "run_json_record", lambda o, r: dict(r))
    monkeypatch.setattr(outputs, "_write_parquet", _fail(FAILURES["EFBIG"]))

    def runner(*_a, **_k):
        def run(model_key, source, texts, config, interventions, out, **_kw):
            from pathlib import Path

            outputs.write_outputs(_fake_outputs(), Path(out) / interventions[0], {})
            return []

        return run

    monkeypatch.setattr("homog.extract.extract_runner", runner)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "x"
    res = CliRunner().invoke(
        main, ["extract", "--model", "smollm2-135m", "--intervention", "none", "--out", str(out)]
    )
    clean_error(res, str(out / "none"), "File too large", "free space")
    assert res.output.count("Error:") == 1
    assert not (out / "none").exists()
    assert [p.name for p in out.iterdir()] == [] if out.exists() else True


def test_unmapped_efbig_reaching_the_cli_is_a_message(monkeypatch, demo_db_factory):
    exc = OSError(errno.EFBIG, "File too large", "/tmp/somewhere/big.parquet")
    monkeypatch.setattr("homog.cli.query.connect_db", _fail(exc))
    res = CliRunner().invoke(main, ["runs", "--db", str(demo_db_factory(1, 4))])
    clean_error(res, "/tmp/somewhere/big.parquet", "File too large")
