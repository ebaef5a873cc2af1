"""The ``homog`` command line: a thin Click layer over the library.

Subcommands are imported when listed or run (:func:`builtin_command` imports each one's
module inside the function), so importing the CLI does not pull torch in. Other packages add
commands through the ``homog.commands`` entry-point group, and so does this project's TUI
(its ``tui`` entry in pyproject.toml): the CLI names no module above it, and nothing
imports ``tui`` or ``textual`` until ``homog tui`` runs. The installed distributions are
scanned for the group (about 25 ms with ``importlib.metadata``'s import) only when a name is
not built in, or when the commands are listed.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import click

from homog import __version__
from homog.errors import HomogError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

# dvc.yaml's stages, in its order, and the command each runs (tests/test_cli_help.py reads
# dvc.yaml against it); `homog --help` lists these commands as the pipeline's stages
PIPELINE_STAGES: dict[str, str] = {
    "corpus": "corpus",
    "synth": "synth",
    "extract": "extract",
    "mauve": "mauve",
    "probe_features": "probe",
    "probe": "probe",
    "stats": "stats",
    "posenc_train": "posenc",
    "posenc_decompose": "posenc",
    "load": "load",
    "report": "report",
}
# `homog --help`'s groups of commands after the pipeline's stages
READER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Looking at results (read-only over data/homog.duckdb)",
        ("runs", "compare", "diff", "claims", "sql", "export", "plot", "report", "tui"),
    ),
    ("Publishing the summary tables (a folder every reader opens as --db)", ("publish",)),
    ("Looking at synth's texts and the reviews it dropped (data/synth)", ("texts",)),
    ("Checks", ("calibrate",)),
)
# the built-in commands (plugins such as tui come from the homog.commands entry points)
COMMANDS: tuple[str, ...] = (
    "calibrate",
    "corpus",
    "synth",
    "texts",
    "extract",
    "mauve",
    "stats",
    "load",
    "runs",
    "compare",
    "sql",
    "export",
    "plot",
    "report",
    "claims",
    "diff",
    "posenc",
    "probe",
    "publish",
)


def builtin_command(name: str) -> click.Command | None:
    """The built-in command ``name`` (None for another name). Its module is imported here, when
    the command is listed or run, so that importing the CLI stays light (no torch)."""
    match name:
        case "calibrate":
            from homog.cli import calibrate as module
        case "corpus" | "synth":
            from homog.cli import corpus as module
        case "texts":
            from homog.cli import texts as module
        case "extract":
            from homog.cli import extract as module
        case "mauve" | "stats" | "load":
            from homog.cli import pipeline as module
        case "runs" | "compare" | "plot":
            from homog.cli import query as module
        case "sql" | "export":
            from homog.cli import sql as module
        case "report":
            from homog.cli import report as module
        case "claims":
            from homog.cli import claims as module
        case "diff":
            from homog.cli import diff as module
        case "posenc":
            from homog.cli import posenc as module
        case "probe":
            from homog.cli import probe as module
        case "publish":
            from homog.cli import publish as module
        case _:
            return None
    return getattr(module, name)


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


# What sizes each command's memory, for the out-of-memory message: params keys to
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


def _plugin_commands() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="homog.commands")}


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

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = {*super().list_commands(ctx), *_plugin_commands(), *COMMANDS}
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        plugin = None if cmd_name in COMMANDS else _plugin_commands().get(cmd_name)
        if cmd_name not in COMMANDS and plugin is None:
            return super().get_command(ctx, cmd_name)
        try:
            return builtin_command(cmd_name) if plugin is None else plugin.load()
        except ModuleNotFoundError as exc:
            # A command whose module is missing is listed with the reason instead of crashing
            # `homog --help` for every other command.
            reason = str(exc)

            @click.command(cmd_name, help=f"(unavailable: {reason})")
            def unavailable() -> None:
                raise click.ClickException(f"'homog {cmd_name}' is unavailable: {reason}")

            return unavailable


def _help() -> str:
    """The group's help: what homog is, then its commands in groups, the pipeline's stages
    (PIPELINE_STAGES, in dvc.yaml's order) first."""
    stages = (
        "Pipeline stages (run by `dvc repro`, each reads params.yaml)",
        PIPELINE_STAGES.values(),
    )
    groups = [
        f"{title}:\n  {', '.join(dict.fromkeys(names))}"
        for title, names in (stages, *READER_GROUPS)
    ]
    return (
        "homog: how token representations homogenize layer by layer under positional bias.\n\n"
        "\b\n" + "\n".join(groups)
    )


@click.group(cls=LazyGroup, help=_help(), context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="homog")
def main() -> None:
    """Set up every command: the libraries' own progress bars are quieted."""
    from homog.progress import quiet_library_bars

    quiet_library_bars()
