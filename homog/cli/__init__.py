"""The ``homog`` command line: a thin Click layer over the library.

Subcommands are imported lazily (``COMMANDS`` maps a name to ``module:attribute``), so
``homog --help`` stays fast and importing the CLI does not pull torch in. Other packages add
commands through the ``homog.commands`` entry-point group, and so does this project's TUI
(its ``tui`` entry in pyproject.toml): the CLI names no module above it, and nothing
imports ``tui`` or ``textual`` until ``homog tui`` runs. The installed distributions are
scanned for the group (about 25 ms with ``importlib.metadata``'s import) only when a name is
not built in, or when the commands are listed.
"""

from __future__ import annotations

import contextlib
import importlib
import os

import click

from homog import __version__
from homog.errors import HomogError

COMMANDS: dict[str, str] = {
    "calibrate": "homog.cli.calibrate:calibrate",
    "corpus": "homog.cli.corpus:corpus",
    "synth": "homog.cli.corpus:synth",
    "texts": "homog.cli.texts:texts",
    "extract": "homog.cli.extract:extract",
    "mauve": "homog.cli.pipeline:mauve",
    "stats": "homog.cli.pipeline:stats",
    "load": "homog.cli.pipeline:load",
    "runs": "homog.cli.query:runs",
    "compare": "homog.cli.query:compare",
    "sql": "homog.cli.sql:sql",
    "export": "homog.cli.sql:export",
    "plot": "homog.cli.query:plot",
    "report": "homog.cli.report:report",
    "claims": "homog.cli.claims:claims",
    "diff": "homog.cli.diff:diff",
    "posenc": "homog.cli.posenc:posenc",
    "probe": "homog.cli.probe:probe",
    "publish": "homog.cli.publish:publish",
}


def _flush_stdout() -> None:
    """Flush stdout inside the command (a full disk or closed pipe behind stdout is then an
    error message, not a traceback at exit); after a failed flush stdout is pointed at
    /dev/null so that Python's own flush at exit cannot fail again."""
    import sys

    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise


def _io_message(exc: OSError | UnicodeError) -> str | None:
    """The message for an input/output error no command turned into a HomogError: stdout or
    a file on a full disk, a missing permission, input that is not UTF-8 (None: a bug, whose
    traceback is kept)."""
    from homog.io import NO_PERMISSION, NO_SPACE, TOO_LARGE, error_number, os_error

    if isinstance(exc, UnicodeDecodeError):
        bad = exc.object[exc.start : exc.start + 1].hex()
        return (
            f"the input is not UTF-8 text (byte 0x{bad} at position {exc.start}); save it as "
            "UTF-8 (e.g. `iconv -f latin1 -t utf-8 FILE`) and retry"
        )
    if isinstance(exc, UnicodeError) or error_number(exc) not in (
        *NO_SPACE,
        *TOO_LARGE,
        *NO_PERMISSION,
    ):
        return None
    if exc.filename is None and exc.errno is not None:  # stdout
        why = "no space left on the device" if exc.errno in NO_SPACE else exc.strerror
        return f"cannot write to stdout: {why}; redirect it to a file or a place that can take it"
    return str(os_error(exc, exc.filename, "file"))


def _interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a Ctrl-C: KeyboardInterrupt, DuckDB's InterruptException, or the
    'Query interrupted' RuntimeError / Arrow error DuckDB raises while a statement streams."""
    if exc is None:
        return False
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "InterruptException":
        return True
    if isinstance(exc, (RuntimeError, ValueError)) and "interrupt" in str(exc).lower():
        mod = type(exc).__module__ or ""
        return type(exc) is RuntimeError or mod.startswith(("pyarrow", "duckdb", "_duckdb"))
    return False


def _interrupt() -> click.exceptions.Exit:
    """Ctrl-C, one convention for every command: the line 'interrupted' on stderr, status 130
    (128 + SIGINT), no traceback. Outputs are written atomically, so nothing half-written is
    left where a file was."""
    import sys

    with contextlib.suppress(OSError, ValueError):
        print("interrupted", file=sys.stderr, flush=True)
    return click.exceptions.Exit(130)


# What sizes each command's memory, for the out-of-memory message (issue 39): params keys to
# lower, or what to narrow. Commands not named get the reader's advice.
_MEMORY_ADVICE: dict[str, str] = {
    "corpus": "draw fewer texts (corpus.n)",
    "synth": "rephrase fewer texts (corpus.n) or lower synth.bertscore.batch_size, "
    "synth.fluency.batch_size and synth.llm.batch_size",
    "extract": "lower extract.batch_tokens (or extract.max_tokens), or extract fewer texts "
    "(corpus.n)",
    "probe": "lower extract.batch_tokens (the probe's forward passes are batched by it) or use "
    "fewer texts (corpus.n)",
    "mauve": "lower mauve.max_points (or extract.sample_tokens)",
    "stats": "lower stats.n_boot and stats.n_perm, or use fewer texts (corpus.n)",
    "load": "load fewer runs (fewer models in params `models:`)",
    "posenc": "lower posenc.train.batch_size, posenc.train.eval_batch_size or "
    "posenc.decompose_samples",
    "calibrate": "",
    "texts": "",
    "sql": "select fewer rows or columns (add a LIMIT or a WHERE)",
    "export": "select fewer rows or columns (add a LIMIT or a WHERE)",
    "publish": "publish a database of fewer runs",
}
_READER_ADVICE = "narrow it (fewer --runs, --model, --layers or --metric values)"


def _out_of_memory(exc: BaseException | None, *, wrapped: bool = False) -> bool:
    """Whether ``exc`` is running out of memory: MemoryError (numpy's _ArrayMemoryError and
    pyarrow's ArrowMemoryError are subclasses), torch's or Ray's OutOfMemoryError (not
    MemoryErrors) or DuckDB's OutOfMemoryException. ``wrapped``: ``exc`` is a HomogError's
    cause; torch's and Ray's are then left out (extract's 'out of memory on cuda:0 for a batch
    of ...' keeps its words)."""
    if exc is None:
        return False
    if isinstance(exc, MemoryError):
        return True
    mod = type(exc).__module__ or ""
    name = type(exc).__name__
    if name == "OutOfMemoryError" and mod.startswith(("torch", "ray")):  # ray: a killed worker
        return not wrapped
    return name == "OutOfMemoryException" and mod.startswith(("duckdb", "_duckdb"))


def _memory_message(command: str | None, exc: BaseException) -> str:
    """One line for a command that ran out of memory: the command, what failed to fit (numpy's
    'Unable to allocate 43.7 TiB ...'), what to lower, and that nothing was half-written (every
    output is written atomically: :func:`homog.io.atomic_path` removes its temporary on any
    exception, MemoryError included)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    what = f" ({first[:200]})" if first else ""
    name = f"homog {command}" if command else "homog"
    advice = _MEMORY_ADVICE.get(command or "", _READER_ADVICE)
    advice = f"{advice}, or free memory" if advice else "free memory"
    return (
        f"{name} ran out of memory{what}; {advice} (close other programs, or run it on a "
        "machine with more) and rerun: nothing half-written was left"
    )


def _plugin_commands() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="homog.commands")}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when listed or invoked.

    It is also the one place where a ``HomogError`` (a problem the user can fix) raised by any
    subcommand becomes a ``ClickException``: its message on stderr and exit status 1, no
    traceback. Commands call the library and let HomogError through. Ctrl-C (KeyboardInterrupt,
    or DuckDB's interrupt however wrapped) becomes the line ``interrupted`` and status 130.
    Running out of memory (MemoryError, torch's or DuckDB's) is one line naming the command
    and what to lower, status 1.
    """

    def invoke(self, ctx: click.Context) -> object:
        from homog.interrupts import watch_sigint

        try:
            try:
                with watch_sigint():
                    return super().invoke(ctx)
            finally:
                _flush_stdout()
        except KeyboardInterrupt:
            raise _interrupt() from None
        except MemoryError as exc:
            raise click.ClickException(_memory_message(ctx.invoked_subcommand, exc)) from None
        except HomogError as exc:
            if _interrupted(exc.__cause__):
                raise _interrupt() from None
            if _out_of_memory(exc.__cause__, wrapped=True):  # e.g. load's 'load failed: ...'
                message = _memory_message(ctx.invoked_subcommand, exc.__cause__)
                raise click.ClickException(message) from None
            raise click.ClickException(str(exc)) from exc
        except (OSError, UnicodeError) as exc:
            message = _io_message(exc)
            if message is None:
                raise
            raise click.ClickException(message) from exc
        except Exception as exc:
            if _interrupted(exc):  # DuckDB's Ctrl-C, raw or wrapped by Arrow
                raise _interrupt() from None
            if _out_of_memory(exc):  # torch's or DuckDB's, which are not MemoryErrors
                raise click.ClickException(_memory_message(ctx.invoked_subcommand, exc)) from None
            raise

    def _targets(self) -> dict[str, str]:
        return {**_plugin_commands(), **COMMANDS}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._targets()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name) or _plugin_commands().get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # A command whose module is missing is listed with the reason instead of crashing
            # `homog --help` for every other command.
            reason = str(exc)

            @click.command(cmd_name, help=f"(unavailable: {reason})")
            def unavailable() -> None:
                raise click.ClickException(f"'homog {cmd_name}' is unavailable: {reason}")

            return unavailable
        return getattr(module, attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="homog")
def main() -> None:
    """homog: how token representations homogenize layer by layer under positional bias.

    \b
    Pipeline stages (run by `dvc repro`, each reads params.yaml):
      corpus, synth, extract, mauve, stats, probe, load, posenc
    Looking at results (read-only over data/homog.duckdb):
      runs, compare, diff, claims, sql, export, plot, report, tui
    Publishing the summary tables (a folder every reader opens as --db):
      publish
    Looking at synth's texts and the reviews it dropped (data/synth):
      texts
    Checks:
      calibrate
    """
    from homog.progress import quiet_library_bars

    quiet_library_bars()
