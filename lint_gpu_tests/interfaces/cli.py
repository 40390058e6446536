"""The ``gpu-test-lint`` command line: a thin click layer over :mod:`lint_gpu_tests.api`.

``check`` is the default command, so ``gpu-test-lint tests/`` checks ``tests/`` (to check a
directory named like a command, spell it out: ``gpu-test-lint check rules``). Exit codes are
ruff's: 0 nothing left to report, 1 violations left (or fixed, with
``--exit-non-zero-on-fix``; or a non-empty ``--diff``), 2 a usage, configuration or internal
error. Errors are one ``error: ...`` line on stderr; tracebacks only with ``--verbose``.

``check`` parses its options into option dataclasses (:mod:`lint_gpu_tests.interfaces.cli_options`),
runs the library, and writes what :func:`lint_gpu_tests.report.present.present` makes of the
result; the other commands are in :mod:`lint_gpu_tests.interfaces.commands`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

import click

import lint_gpu_tests.running.answers as answers
from lint_gpu_tests import __version__
from lint_gpu_tests.config import ConfigError
from lint_gpu_tests.interfaces.cli_options import CheckArgs, check_options, fail, parse_check
from lint_gpu_tests.report.present import Presentation, ProgressBar, present

if TYPE_CHECKING:
    from lint_gpu_tests.config import ConfigResolver
    from lint_gpu_tests.running.run import RunResult


#: The commands of :mod:`lint_gpu_tests.interfaces.commands` by name, imported when one is asked for
# (or  the help lists them): ``check`` runs without them.
LAZY_COMMANDS = {"rule": "rule_command", "rules": "rules_command", "prove": "prove_command",
                 "server": "server_command"}


class DefaultCommandGroup(click.Group):
    """A group that runs ``check`` when the first argument is not a subcommand; the other
    commands (:data:`LAZY_COMMANDS`) are imported when named."""

    default_command = "check"

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, sorted (as click lists them)."""
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, one of :data:`LAZY_COMMANDS` imported now."""
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            from lint_gpu_tests.interfaces import commands

            self.add_command(getattr(commands, LAZY_COMMANDS[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Insert the default command unless a subcommand or a group option comes first."""
        if not args or (args[0] not in self.list_commands(ctx)
                        and args[0] not in ("--help", "-h", "--version", "-V")):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def _write(shown: Presentation) -> int:
    """Write ``shown``'s pieces where they go, in order; return its exit status."""
    for err, piece in shown.pieces:
        click.echo(piece, nl=False, err=err, color=True)
    return shown.status


@click.group(cls=DefaultCommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="gpu-test-lint")
def cli() -> None:
    """Find (and fix) vLLM engines that GPU tests manage by hand.

    Commands: check (the default), prove, rule CODE, rules, server. Also: python -m
    lint_gpu_tests.
    """


@cli.command("check", short_help="Check PATHS for hand-managed engines (- is stdin).")
@check_options
def check_command(paths: tuple[str, ...], **params: Any) -> None:
    """Check PATHS (default: the current directory; - reads standard input, checked as a
    test module of the current directory unless --stdin-filename names it) for
    hand-managed engines."""
    args = parse_check(paths, params)
    mode = args.mode
    try:
        if mode.leak_report is not None and not (mode.shows or mode.add_noqa):
            from lint_gpu_tests.running.leaks import load_leak_report

            args = replace(args, report=replace(args.report,
                                                leaks=load_leak_report(mode.leak_report)))
        # What only fixes use is looked up where a run fixes (run_paths, run_source).
        config = args.selection.resolver(fix_settings=mode.show_settings)
        args = replace(args, report=replace(args.report, resolver=config))  # its baselines
        if mode.shows:
            code = _show(args, config)
        elif mode.stdin_filename is not None:
            code = _check_stdin(mode.stdin_filename, args, config)
        elif mode.add_noqa:
            code = _add_noqa(args, config)
        else:
            code = _check(args, config)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except _user_errors() as exc:  # evaluated only when something was raised
        fail(str(exc))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - one line unless --verbose
        if args.run.verbose:
            import traceback

            traceback.print_exc()
        fail(f"internal error: {type(exc).__name__}: {exc}")
    sys.exit(code)


def _user_errors() -> tuple[type[Exception], ...]:
    """The errors ``check`` reports as one ``error:`` line with exit 2 (a bad baseline,
    config, leak report or path), imported when one is raised: a run that raises none
    imports neither baselines nor leak reports."""
    from lint_gpu_tests.report.baseline import BaselineError
    from lint_gpu_tests.running.discovery import PathNotFoundError
    from lint_gpu_tests.running.leaks import LeakReportError

    return (BaselineError, ConfigError, LeakReportError, PathNotFoundError)


def _check(args: CheckArgs, config: ConfigResolver) -> int:
    """Check the files (``--select-confirmed`` with ``--fix``/``--diff``: fix only those
    with a confirmed violation), with a progress bar; report."""
    from lint_gpu_tests.api import check_confirmed, check_paths

    run, report = args.run, args.report
    progress = ProgressBar(enabled=not report.quiet and _stderr_is_terminal())
    result: RunResult
    try:
        if report.leaks is not None and report.select_confirmed and (run.fix or run.diff):
            result = check_confirmed(args.paths, config, run, report.leaks, progress=progress)
        else:
            result = check_paths(args.paths, config, run, progress=progress)
    finally:
        progress.finish()
    shown = present(result, report)
    if answers.LISTED is not None:
        from lint_gpu_tests.interfaces.keep_answer import keep_answer

        keep_answer(args, config, result, shown)
    return _write(shown)


def _check_stdin(filename: str, args: CheckArgs, config: ConfigResolver) -> int:
    """``--stdin-filename``: check (or fix, printing the fixed source) the source on stdin."""
    from lint_gpu_tests.api import check_buffer

    if args.paths:
        click.echo(f"warning: ignoring {', '.join(args.paths)}: the source is read from "
                   "stdin", err=True)
    source = sys.stdin.buffer.read()
    return _write(present(check_buffer(source, filename, config, args.run),
                          replace(args.report, stdin=source)))


def _show(args: CheckArgs, config: ConfigResolver) -> int:
    """``--show-files`` / ``--show-settings``: what a run over the paths would check, and
    with which settings."""
    from lint_gpu_tests.api import discover_files, file_notes
    from lint_gpu_tests.report.present import present_files, present_settings

    found = discover_files(args.paths, config, respect_gitignore=args.run.respect_gitignore,
                           force_exclude=args.run.force_exclude)
    if args.mode.show_files:
        return _write(present_files(found.problems, file_notes(found.files, config)))
    return _write(present_settings(found.problems, found.files, config))


def _add_noqa(args: CheckArgs, config: ConfigResolver) -> int:
    """``--add-noqa``: suppress every violation found with a ``# noqa: CODE`` comment."""
    from lint_gpu_tests.api import add_noqa_to_files, check_paths
    from lint_gpu_tests.report.present import present_add_noqa

    # A plain check (no fix, diff nor edits; --add-noqa refuses --fix and --diff) whose
    # failures are reported without their tracebacks.
    result = check_paths(args.paths, config, replace(args.run, unsafe_fixes=False,
                                                     verbose=False, edits=False))
    added, errors = add_noqa_to_files(result)
    return _write(present_add_noqa(result, added, errors))


def _quiet_broken_pipe() -> NoReturn:
    """The reader of stdout went away (``gpu-test-lint ... | head``): stop quietly, as
    command-line tools do, with the exit status a pipe-closed writer gets (1)."""
    _discard_stdout()
    sys.exit(1)


def _discard_stdout() -> None:
    """Point stdout at the null device, so what is still buffered for it goes nowhere
    instead of failing again at the flush."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's stream): nothing to do
        pass


#: Allocations between two collections of the youngest generation (Python's default: 700).
#: Parsing and analysis allocate syntax trees that stay alive until the file is done: at
#: the default the collector keeps walking them and takes about a tenth of a cold run's CPU
#: time (vllm-ascend's tests, docs/performance.md). A CLI run is short and frees its trees.
GC_THRESHOLD = 50_000


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``gpu-test-lint`` command on ``argv`` (default: ``sys.argv[1:]``).

    Raises:
        SystemExit: always, with the exit status (0, 1 or 2; see the README).
    """
    import gc

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    cli.main(args=list(argv) if argv is not None else None, prog_name="gpu-test-lint")


def run() -> NoReturn:
    """Console-script entry point (``gpu-test-lint``, ``python -m lint_gpu_tests``):
    :func:`main`, then flush stdout and stderr and leave the process with ``os._exit``.

    The interpreter's own teardown (every module's objects freed one by one, the last
    garbage collection) does nothing a finished run needs: the cache and fixed files are
    written and closed, and the worker processes are joined, before :func:`main` returns.
    It took about 0.03 s of every run (``benchmarks/run.py``'s imports row, and the warm
    runs of docs/performance.md), a sixth of a warm one. Output that cannot be written
    where click itself writes it (``--version``, ``--help``, ``rules`` into a full disk)
    ends as ``check``'s does: one ``error:`` line and status 2, or, when the reader of a
    pipe went away, quietly with 1. Any other exception (``KeyboardInterrupt``) leaves the
    ordinary way.
    """
    code: object
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    except BrokenPipeError:
        code = 1
        _discard_stdout()
    except OSError as exc:
        _discard_stdout()
        print(f"error: cannot write the output: {exc}", file=sys.stderr)
        code = 2
    else:  # pragma: no cover - click's standalone mode always exits
        code = 0
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # what the interpreter does with ``sys.exit("message")``
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away, or it is closed
            status = status or 1
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
