"""Issue 39 item 11 and Deliver 7: running out of memory is one line naming the command and what
to lower, exit 1, no traceback, and no partial output (numpy's _ArrayMemoryError of
`stats.n_boot: 1000000000000` was a traceback). Nothing allocates for real: numpy refuses a
43.7 TiB array at once, and the other failures are raised by monkeypatched functions."""

from __future__ import annotations

import re
import subprocess
import sys

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hostile_helpers import ENV, ROOT, clean_error

from homog.cli import _MEMORY_ADVICE, COMMANDS, main
from homog.errors import HomogError

# numpy's MemoryError for stats.n_boot = 1e12 (the bootstrap's [draws, texts] matrix)
HUGE = "import numpy as np; np.ones((10**12, 6))"

STATS_OOM = f"""
import sys
import homog.stats.stage as stage
from homog.io import atomic_path

def stats_stage(params, *a, **k):  # the real stage's writer, failing half-way
    with atomic_path("data/stats", directory=True) as tmp:
        (tmp / "contrasts.parquet").write_bytes(b"PAR1 half")
        {HUGE}

stage.stats_stage = stats_stage
from homog.cli import main
main(prog_name="homog")
"""


def test_stats_numpy_memory_error_is_one_line_and_keeps_the_old_output(tmp_path):
    """A fresh interpreter, as a user runs it: exit 1, one `Error:` line naming `homog stats`,
    numpy's size and stats.n_boot, no traceback; data/stats keeps its previous files and no
    temporary folder is left."""
    old = tmp_path / "data" / "stats"
    old.mkdir(parents=True)
    (old / "contrasts.parquet").write_bytes(b"previous run")
    res = subprocess.run(
        [sys.executable, "-c", STATS_OOM, "stats", "--params", str(ROOT / "params.yaml")],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: homog stats ran out of memory"), lines
    for needle in ("Unable to allocate 43.7 TiB", "stats.n_boot", "nothing half-written"):
        assert needle in lines[0], (needle, lines[0])
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["stats"]
    assert [p.name for p in old.iterdir()] == ["contrasts.parquet"]
    assert (old / "contrasts.parquet").read_bytes() == b"previous run"


def test_export_memory_error_half_way_leaves_no_file(tmp_path, monkeypatch, demo_db_factory):
    """`homog export ... -o x.json` whose rows run out of memory after the first batch was
    written: no x.json, no temporary beside it, the user's file there untouched."""
    import homog.cli.sql as query

    real = query._relation_rows

    def rows(con, source):
        columns, batches = real(con, source)

        def half():
            yield next(iter(batches))
            raise MemoryError

        return columns, half()

    monkeypatch.setattr(query, "_relation_rows", rows)
    mine = tmp_path / "thesis.tex"
    mine.write_text("mine")
    out = tmp_path / "x.json"
    db = str(demo_db_factory(1, 4))
    res = CliRunner().invoke(
        main, ["export", "SELECT * FROM layer_metrics", "-o", str(out), "--db", db]
    )
    clean_error(res, "homog export ran out of memory", "LIMIT", "nothing half-written")
    assert res.output.count("Error:") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]
    assert mine.read_text() == "mine"


class _TorchOOM(RuntimeError):
    """What torch.OutOfMemoryError looks like from here (a RuntimeError of module torch)."""


_TorchOOM.__name__ = "OutOfMemoryError"
_TorchOOM.__module__ = "torch"

FAILURES = {
    "MemoryError": MemoryError(),
    "arrow": pa.ArrowMemoryError("malloc of size 1073741824 failed"),
    "torch": _TorchOOM("CUDA out of memory. Tried to allocate 20.00 GiB"),
    "duckdb": duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate block"),
}


def _wrapped(exc: BaseException) -> HomogError:
    try:
        raise HomogError(f"load failed: {exc}") from exc
    except HomogError as err:
        return err


@pytest.mark.parametrize("name", [*FAILURES, "duckdb-wrapped"])
def test_every_kind_of_out_of_memory_is_one_line(name, tmp_path, monkeypatch):
    exc = _wrapped(FAILURES["duckdb"]) if name == "duckdb-wrapped" else FAILURES[name]

    def fail(*_a, **_k):
        raise exc

    monkeypatch.setattr("homog.cli.texts.variant_counts", fail)
    res = CliRunner().invoke(main, ["texts", "--texts", str(tmp_path / "texts.parquet")])
    clean_error(res, "homog texts ran out of memory", "free memory", "nothing half-written")
    assert res.output.startswith("Error:") and res.output.count("\n") == 1, res.output
    if name != "MemoryError":  # what failed to fit is named
        first = str(FAILURES["duckdb" if name == "duckdb-wrapped" else name]).split(":")[0]
        assert first in res.output, res.output


def test_a_stage_own_out_of_memory_message_is_kept(tmp_path, monkeypatch):
    """extract's HomogError made of torch's OutOfMemoryError already names the batch and
    extract.batch_tokens: it is printed as it is."""
    own = "out of memory on cuda:0 for a batch of 8 texts x 512 tokens: lower extract.batch_tokens"
    err = _wrapped(FAILURES["torch"])
    err.args = (own,)

    def fail(*_a, **_k):
        raise err

    monkeypatch.setattr("homog.cli.texts.variant_counts", fail)
    res = CliRunner().invoke(main, ["texts", "--texts", str(tmp_path / "texts.parquet")])
    clean_error(res, own)
    assert "ran out of memory" not in res.output


def _config_keys() -> set[str]:
    """Every dotted params key (config dataclasses), and posenc.train's preset keys."""
    import dataclasses

    from homog.config import Params
    from homog.config.posenc_presets import PRESETS

    keys: set[str] = set()

    def walk(cls: type, prefix: str) -> None:
        for f in dataclasses.fields(cls):
            keys.add(prefix + f.name)
            sub = f.default_factory if f.default_factory is not dataclasses.MISSING else None
            if isinstance(sub, type) and dataclasses.is_dataclass(sub):
                walk(sub, f"{prefix}{f.name}.")

    walk(Params, "")
    keys |= {f"posenc.train.{k}" for p in PRESETS.values() for k in p["train"]}
    return keys


def test_memory_advice_names_real_commands_and_params_keys():
    """The advice names commands that exist and params keys that exist (a renamed key would
    otherwise send users to nothing)."""
    assert set(_MEMORY_ADVICE) <= set(COMMANDS)
    keys = _config_keys()
    named = {
        k
        for text in _MEMORY_ADVICE.values()
        for k in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", text)
    }
    assert named and named <= keys, named - keys
