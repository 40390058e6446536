"""The ``gpu-test-lint`` command line: a thin click layer over :mod:`lint_gpu_tests.api`.

``check`` is the default command, so ``gpu-test-lint tests/`` checks ``tests/`` (to check a
directory named like a command, spell it out: ``gpu-test-lint check rules``). Exit codes are
ruff's: 0 nothing left to report, 1 violations left (or fixed, with
``--exit-non-zero-on-fix``; or a non-empty ``--diff``), 2 a usage, configuration or internal
error. Errors are one ``error: ...`` line on stderr; tracebacks only with ``--verbose``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click

from lint_gpu_tests import __version__
from lint_gpu_tests.config import (
    FIX_STRATEGIES,
    TARGETS,
    ConfigError,
    ConfigResolver,
    selector_problem,
)
from lint_gpu_tests.output import (
    OutputFormat,
    RenderOptions,
    confirmed_lines,
    render,
    show_fixes_lines,
    statistics_lines,
    summary_lines,
)

if TYPE_CHECKING:
    from lint_gpu_tests.baseline import BaselineUpdate
    from lint_gpu_tests.ftypes import FileResult, Violation
    from lint_gpu_tests.leaks import LeakReport
    from lint_gpu_tests.run import RunOptions, RunResult

PROGRESS_AFTER_S = 2.0
"""A ``check`` run still going after this many seconds draws a progress bar on stderr (on a
terminal only, and not with ``--quiet``)."""


class DefaultCommandGroup(click.Group):
    """A group that runs ``check`` when the first argument is not a subcommand."""

    default_command = "check"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Insert the default command unless a subcommand or a group option comes first."""
        if not args or (args[0] not in self.commands
                        and args[0] not in ("--help", "-h", "--version", "-V")):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with status 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _codes(option: str, values: Sequence[str]) -> tuple[str, ...] | None:
    """Split comma-separated code lists; ``None`` when the option was not given."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip().upper()
            if not item:
                continue
            if item == "ALL":
                item = "GPU"
            problem = selector_problem(item)
            if problem is not None:
                fail(f"invalid value for `{option}`: {problem}")
            out.append(item)
    return tuple(out)


def _patterns(values: Sequence[str]) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


def _use_color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


@dataclass(frozen=True)
class _Report:
    """How ``check`` reports a run (the options that do not reach the run itself)."""

    fmt: OutputFormat
    show_fixes: bool = False
    statistics: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    quiet: bool = False
    leaks: LeakReport | None = None
    select_confirmed: bool = False
    baseline: BaselineUpdate | None = None
    """How the run updates its baselines (``None``: it only reads them)."""

    def confirm(self, violations: list[Violation], sources: dict[str, bytes] | None = None
                ) -> tuple[list[Violation], int]:
        """With ``--leak-report``: the violations with the confirmed ones marked and first,
        only those with ``--select-confirmed``; and how many that left out."""
        if self.leaks is None:
            return violations, 0
        from lint_gpu_tests.leaks import confirm

        marked = confirm(violations, self.leaks, cwd=os.getcwd(), sources=sources)
        if not self.select_confirmed:
            return marked, 0
        kept = [v for v in marked if v.confirmed]
        return kept, len(marked) - len(kept)

    def baselined(self, result: RunResult, config: ConfigResolver, violations: list[Violation],
                  sources: dict[str, bytes] | None = None) -> tuple[list[Violation], list[str]]:
        """The violations no baseline holds, and the lines (for stderr) on the baselines."""
        from lint_gpu_tests.api import (
            BaselineError,
            BaselineUpdate,
            apply_run_baselines,
            baseline_lines,
        )

        update = self.baseline or BaselineUpdate.NONE
        try:
            outcome = apply_run_baselines(result, config, update, violations=violations,
                                          sources=sources)
        except (BaselineError, OSError) as exc:
            fail(str(exc))
        return outcome.reported, [] if self.quiet else baseline_lines(outcome, update)

    def leak_lines(self, shown: list[Violation], left_out: int, checked: list[str]
                   ) -> list[str]:
        """The closing lines of ``--leak-report`` (none without it)."""
        if self.leaks is None:
            return []
        from lint_gpu_tests.leaks import unmatched_leaks

        unmatched = unmatched_leaks(self.leaks, shown, checked, cwd=os.getcwd())
        return confirmed_lines(shown, self.leaks.path, left_out=left_out,
                               unmatched=list(dict.fromkeys(leak.nodeid for leak in unmatched)))


class _Progress:
    """A click progress bar on ``file``, drawn once a run has lasted
    :data:`PROGRESS_AFTER_S` (by ``clock``) with files still to check; a
    :class:`lint_gpu_tests.run.Progress` hook. Nothing is drawn unless ``enabled``."""

    def __init__(self, enabled: bool, file: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self.file = file if file is not None else sys.stderr
        self.clock = clock
        self.began = clock()
        self.total = 0
        self.done = 0
        self.bar: Any = None

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, count: int) -> None:
        self.done += count
        if self.bar is None:
            if not self.enabled or self.done >= self.total or \
                    self.clock() - self.began < PROGRESS_AFTER_S:
                return
            self.bar = click.progressbar(length=self.total, label="Checking", file=self.file,
                                         show_pos=True)
            self.bar.__enter__()
            count = self.done
        self.bar.update(count)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.group(cls=DefaultCommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="gpu-test-lint")
def cli() -> None:
    """Find (and fix) vLLM engines that GPU tests manage by hand.

    Commands: check (the default), prove, rule CODE, rules. Also: python -m lint_gpu_tests.
    """


@cli.command("check", short_help="Check PATHS for hand-managed engines (- is stdin).")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes, writing files in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (or count) unsafe fixes.")
@click.option("--diff", is_flag=True,
              help="Print the changes fixes would make; write nothing (exit 1 if any).")
@click.option("--show-fixes", is_flag=True, help="List the violations that were fixed.")
@click.option("--select", multiple=True, metavar="CODES",
              help="Comma-separated codes or prefixes to report (replaces the config's).")
@click.option("--ignore", multiple=True, metavar="CODES",
              help="Comma-separated codes or prefixes to ignore (replaces the config's).")
@click.option("--extend-select", multiple=True, metavar="CODES",
              help="Comma-separated codes or prefixes added to the selection.")
@click.option("--output-format", type=click.Choice([f.value for f in OutputFormat]),
              default=OutputFormat.CONCISE.value, show_default=True)
@click.option("--statistics", is_flag=True, help="Print counts per code instead of violations.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when violations are found.")
@click.option("--exit-non-zero-on-fix", is_flag=True,
              help="Exit 1 when anything was fixed, even if nothing is left.")
@click.option("-q", "--quiet", is_flag=True, help="Print violations only, no summary.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Cache directory [env GPU_TEST_LINT_CACHE_DIR; default: "
                   ".gpu-test-lint-cache at the config root].")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes [default: the CPU count].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Config file (pyproject.toml or .gpu-test-lint.toml) instead of the "
                   "nearest one.")
@click.option("--target", type=click.Choice(TARGETS), default=None,
              help="Runner that fixes target (overrides the config).")
@click.option("--fix-strategy", type=click.Choice(FIX_STRATEGIES), default=None,
              help="How GPU001/GPU004 fixes manage an engine: wrap it in the runner, or run "
                   "the test in a new process (overrides the config).")
@click.option("--exclude", multiple=True, metavar="PATTERNS",
              help="Gitignore-style patterns to skip (replaces the config's and the defaults).")
@click.option("--extend-exclude", multiple=True, metavar="PATTERNS",
              help="Gitignore-style patterns to skip in addition.")
@click.option("--force-exclude", is_flag=True,
              help="Apply excludes to files named on the command line too (for pre-commit).")
@click.option("--respect-gitignore/--no-respect-gitignore", default=True, show_default=True,
              help="Skip files that .gitignore files ignore.")
@click.option("--stdin-filename", metavar="PATH", default=None,
              help="Read the source from stdin and check it as PATH (its config, its name in "
                   "reports); with --fix print the fixed source, reports going to stderr.")
@click.option("--add-noqa", is_flag=True,
              help="Add `# noqa: CODE` to every line with a violation (adopting the tool on "
                   "a suite with unfixable leftovers).")
@click.option("--show-files", is_flag=True,
              help="List the files that would be checked (and those the rules skip), and exit.")
@click.option("--show-settings", is_flag=True,
              help="Print the settings the files get, per config file, and exit.")
@click.option("--leak-report", "leak_report", type=click.Path(dir_okay=False), default=None,
              metavar="PATH",
              help="A leak report written by pytest --gpu-leak-report-file: mark the "
                   "violations in tests and fixtures that really leaked as confirmed, and "
                   "list them first.")
@click.option("--select-confirmed", is_flag=True,
              help="With --leak-report: report only the confirmed violations (with --fix or "
                   "--diff: fix only the files that hold one).")
@click.option("--baseline", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Report only the violations not recorded in this baseline file (instead "
                   "of the config's `baseline`).")
@click.option("--update-baseline", is_flag=True,
              help="Write the baseline: record the violations left, drop what no longer occurs.")
@click.option("--ratchet", is_flag=True,
              help="Update the baseline only by dropping what no longer occurs; new violations "
                   "are reported, not recorded.")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors.")
def check_command(
    paths: tuple[str, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    show_fixes: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    output_format: str,
    statistics: bool,
    exit_zero: bool,
    exit_non_zero_on_fix: bool,
    quiet: bool,
    no_cache: bool,
    cache_dir: str | None,
    jobs: int | None,
    config_file: str | None,
    target: str | None,
    fix_strategy: str | None,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    force_exclude: bool,
    respect_gitignore: bool,
    stdin_filename: str | None,
    add_noqa: bool,
    show_files: bool,
    show_settings: bool,
    leak_report: str | None,
    select_confirmed: bool,
    baseline: str | None,
    update_baseline: bool,
    ratchet: bool,
    verbose: bool,
) -> None:
    """Check PATHS (default: the current directory; - reads standard input) for
    hand-managed engines."""
    from lint_gpu_tests.api import BaselineUpdate, RunOptions

    if "-" in paths:  # ruff's convention: `-` is standard input
        paths = tuple(p for p in paths if p != "-")
        if stdin_filename is None:
            stdin_filename = "-"
    if add_noqa and (fix or diff or stdin_filename is not None):
        fail("--add-noqa cannot be combined with --fix, --diff or --stdin-filename")
    if select_confirmed and leak_report is None:
        fail("--select-confirmed needs --leak-report PATH")
    if select_confirmed and add_noqa:
        fail("--select-confirmed cannot be combined with --add-noqa")
    if (update_baseline or ratchet) and (diff or add_noqa or select_confirmed
                                         or stdin_filename is not None):
        fail("--update-baseline and --ratchet cannot be combined with --diff, --add-noqa, "
             "--select-confirmed or --stdin-filename")
    leaks = None
    if leak_report is not None and not (show_files or show_settings or add_noqa):
        from lint_gpu_tests.leaks import LeakReportError, load_leak_report

        try:
            leaks = load_leak_report(leak_report)
        except LeakReportError as exc:
            fail(str(exc))
    overrides: dict[str, Any] = {}
    for key, value in (("select", _codes("--select", select)),
                       ("ignore", _codes("--ignore", ignore)),
                       ("extend_select", _codes("--extend-select", extend_select)),
                       ("exclude", _patterns(exclude)),
                       ("extend_exclude", _patterns(extend_exclude))):
        if value is not None:
            overrides[key] = value
    if target is not None:
        overrides["target"] = target
    if fix_strategy is not None:
        overrides["fix_strategy"] = fix_strategy
    if baseline is not None:
        overrides["baseline"] = os.path.abspath(baseline)
    try:  # what only fixes use is looked up where a run fixes (run_paths, _run_stdin)
        config = ConfigResolver(config_file, overrides, fix_settings=show_settings)
    except ConfigError as exc:
        fail(str(exc))
    report = _Report(OutputFormat(output_format), show_fixes=show_fixes,
                     statistics=statistics, exit_zero=exit_zero,
                     exit_non_zero_on_fix=exit_non_zero_on_fix, quiet=quiet, leaks=leaks,
                     select_confirmed=select_confirmed,
                     baseline=BaselineUpdate.RATCHET if ratchet else
                     BaselineUpdate.WRITE if update_baseline else None)
    # `--fix --diff` is `--diff`: nothing is written.
    options = RunOptions(fix=fix and not diff, unsafe_fixes=unsafe_fixes, diff=diff, jobs=jobs,
                         cache=not no_cache, cache_dir=cache_dir, force_exclude=force_exclude,
                         respect_gitignore=respect_gitignore, verbose=verbose,
                         edits=report.fmt in (OutputFormat.JSON, OutputFormat.SARIF)
                         and not statistics)
    try:
        if show_files or show_settings:
            code = _show(list(paths), config, options, files=show_files)
        elif stdin_filename is not None:
            if paths:
                click.echo(f"warning: ignoring {', '.join(paths)}: the source is read from "
                           "stdin", err=True)
            code = _run_stdin(stdin_filename, config, options, report)
        elif add_noqa:
            code = _run_add_noqa(list(paths), config, options)
        else:
            code = _run_check(list(paths), config, options, report)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except ConfigError as exc:
        fail(str(exc))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - one line unless --verbose
        if verbose:
            import traceback

            traceback.print_exc()
        fail(f"internal error: {type(exc).__name__}: {exc}")
    sys.exit(code)


def _show(paths: list[str], config: ConfigResolver, options: RunOptions, *, files: bool
          ) -> int:
    """``--show-files`` / ``--show-settings``: what a run over ``paths`` would check, and
    with which settings."""
    from lint_gpu_tests.api import PathNotFoundError, discover_files, may_hold_violation
    from lint_gpu_tests.config import config_as_toml
    from lint_gpu_tests.engine import in_scope

    try:
        found = discover_files(paths, config, respect_gitignore=options.respect_gitignore,
                               force_exclude=options.force_exclude)
    except PathNotFoundError as exc:
        fail(str(exc))
    for problem in found.problems:
        click.echo(f"{'error' if problem.fatal else 'warning'}: {problem.path}: "
                   f"{problem.message}", err=True)
    if files:
        from lint_gpu_tests.conftest_index import ConftestIndex

        memo: dict[tuple[str, int], frozenset[str]] = {}
        conftests = ConftestIndex()
        for path in found.files:
            settings = config.for_file(path)
            try:
                with open(path, "rb") as handle:
                    source = handle.read()
            except OSError as exc:
                click.echo(f"{path} (cannot read: {exc.strerror or exc})")
                continue
            if not may_hold_violation(source, path, settings, memo, conftests):
                # As a check run does: such a file is not even parsed.
                click.echo(f"{path} (not analysed: names nothing the rules look for)")
                continue
            note = {True: "", False: " (not a test module: no rule applies)",
                    None: " (does not parse: GPU900)"}[in_scope(source, path, settings)]
            click.echo(f"{path}{note}")
        return 0
    groups: dict[int, tuple[Any, list[str]]] = {}
    for path in found.files:
        settings = config.for_file(path)
        groups.setdefault(id(settings), (settings, []))[1].append(path)
    for index, (settings, members) in enumerate(groups.values()):
        more = f" (and {len(members) - 1} more)" if len(members) > 1 else ""
        click.echo(("\n" if index else "") + f"Resolved settings for: {members[0]}{more}")
        click.echo(f"Settings path: {settings.source or '(none: defaults)'}")
        click.echo(f"Root: {settings.root}")
        click.echo(config_as_toml(settings), nl=False)
    return 0


def _run_stdin(filename: str, config: ConfigResolver, run: RunOptions, report: _Report
               ) -> int:
    """``--stdin-filename``: check (or fix, printing the fixed source) the source on stdin."""
    from lint_gpu_tests.api import RunResult, check_stdin, stdin_edits, unified_diff
    from lint_gpu_tests.discovery import is_excluded

    fix, diff, unsafe_fixes, fmt = run.fix, run.diff, run.unsafe_fixes, report.fmt
    source = sys.stdin.buffer.read()
    if fix or diff or run.edits:
        config.want_fix_settings()
    settings = config.for_file(filename)
    if run.force_exclude and is_excluded(filename, settings):
        if fix:
            sys.stdout.buffer.write(source)
        return 0
    result = check_stdin(source, filename, settings, fix=fix or diff,
                         unsafe_fixes=unsafe_fixes, verbose=run.verbose)
    if result.error is not None:
        _report_failures([result], run.verbose)
    edits = (stdin_edits(source, result, settings, unsafe_fixes=unsafe_fixes)
             if fmt in (OutputFormat.JSON, OutputFormat.SARIF) and not fix and not diff
             else {})
    options = RenderOptions(unsafe_fixes=unsafe_fixes, color=False, cwd=os.getcwd(),
                            edits=edits, leak_report=report.leaks is not None)
    text_of = {filename: result.new_source if result.new_source is not None else source}
    remaining, left_out = report.confirm(result.violations, text_of)
    if diff:
        if result.new_source is not None:
            click.echo(unified_diff(filename, source, result.new_source), nl=False)
        if result.error is not None:
            return 2
        return 1 if result.new_source is not None and not report.exit_zero else 0
    remaining, baseline_notes = report.baselined(RunResult(files=[result]), config, remaining,
                                                 text_of)
    report_to_stderr = fix
    if fix:
        stdout = sys.stdout.buffer
        stdout.write(result.new_source if result.new_source is not None else source)
        stdout.flush()
    text = render(remaining, fmt, options)
    if text:
        click.echo(text, nl=False, err=report_to_stderr)
    if fmt.is_text and not report.quiet:
        for line in summary_lines(remaining, len(result.fixed), unsafe_fixes=unsafe_fixes,
                                  fix_mode=fix):
            click.echo(line, err=report_to_stderr)
        for line in report.leak_lines(remaining, left_out, [filename]):
            click.echo(line, err=report_to_stderr)
    for line in baseline_notes:
        click.echo(line, err=True)
    if result.error is not None:
        return 2
    return 1 if remaining and not report.exit_zero else 0


def _run_add_noqa(paths: list[str], config: ConfigResolver, options: RunOptions) -> int:
    """``--add-noqa``: suppress every violation found with a ``# noqa: CODE`` comment."""
    from dataclasses import replace

    from lint_gpu_tests.api import PathNotFoundError, add_noqa_to_files, check_paths

    # A plain check (no fix, diff nor edits; --add-noqa refuses --fix and --diff) whose
    # failures are reported without their tracebacks.
    plain = replace(options, fix=False, diff=False, unsafe_fixes=False, verbose=False,
                    edits=False)
    try:
        result = check_paths(paths, config, plain)
    except PathNotFoundError as exc:
        fail(str(exc))
    for problem in result.problems:
        click.echo(f"{'error' if problem.fatal else 'warning'}: {problem.path}: "
                   f"{problem.message}", err=True)
    added, errors = add_noqa_to_files(result)
    _report_failures(result.failed, verbose=False)
    for path, message in errors:
        click.echo(f"error: failed to add noqa to {path}: {message}", err=True)
    click.echo(f"Added {added} noqa directive{'' if added == 1 else 's'}.", err=True)
    return 2 if result.has_fatal_problem or errors else 0


def _report_failures(failed: list[FileResult], verbose: bool) -> None:
    """One ``error: failed to read|check|fix PATH: why`` line per file, on stderr, then the
    ``--verbose`` hint when an exception's traceback is there to see."""
    verbs = {"read": "check", "check": "check", "fix": "fix"}
    for file in failed:
        click.echo(f"error: failed to {verbs.get(file.error_stage, 'check')} {file.path}: "
                   f"{file.error}", err=True)
    if not verbose and any(file.error_has_traceback for file in failed):
        click.echo("hint: run with --verbose to see the traceback", err=True)


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


def _run_check(paths: list[str], config: ConfigResolver, run: RunOptions, report: _Report
               ) -> int:
    """Run the check and print its report; return the exit status."""
    from lint_gpu_tests.api import PathNotFoundError, check_paths

    fmt, fix, unsafe_fixes, quiet = report.fmt, run.fix, run.unsafe_fixes, report.quiet
    progress = _Progress(enabled=not quiet and _stderr_is_terminal())
    try:
        if report.select_confirmed and (run.fix or run.diff):
            result = _fix_confirmed_files(paths, config, run, report, progress)
        else:
            result = check_paths(paths, config, run, progress=progress)
    except PathNotFoundError as exc:
        fail(str(exc))
    finally:
        progress.finish()

    for problem in result.problems:
        level = "error" if problem.fatal else "warning"
        click.echo(f"{level}: {problem.path}: {problem.message}", err=True)
    _report_failures(result.failed, run.verbose)
    if not result.files and not result.problems and not report.select_confirmed:
        click.echo(f"warning: No Python files found under {', '.join(paths) or '.'}", err=True)

    color = _use_color() and fmt.is_text
    options = RenderOptions(unsafe_fixes=unsafe_fixes, color=color, cwd=os.getcwd(),
                            edits=result.edits, leak_report=report.leaks is not None)
    remaining, left_out = report.confirm(result.violations)
    remaining, baseline_notes = report.baselined(result, config, remaining) if not run.diff \
        else (remaining, [])
    leak_lines = report.leak_lines(remaining, left_out, [file.path for file in result.files]) \
        if fmt.is_text and not quiet else []
    fatal = result.has_fatal_problem

    if run.diff:
        for path in sorted(result.diffs):
            click.echo(result.diffs[path], nl=False)
        fixes = len(result.fixed)
        if not quiet:
            if fixes:
                click.echo(f"Would fix {fixes} violation{'' if fixes == 1 else 's'}.", err=True)
            else:
                click.echo("No violations would be fixed.", err=True)
        if fatal:
            return 2
        return 1 if result.diffs and not report.exit_zero else 0

    if report.statistics:
        for line in statistics_lines([*remaining, *result.fixed] if fix else remaining,
                                     unsafe_fixes):
            click.echo(line, color=color)
        if not quiet:
            # As ruff: how many `[*]` fixes `--fix` applies, and the unsafe ones apart (hidden
            # without `--unsafe-fixes`).
            for line in summary_lines(remaining, 0, unsafe_fixes=unsafe_fixes,
                                      fix_mode=False)[1:]:
                click.echo(line)
            for line in leak_lines:
                click.echo(line)
    else:
        text = render(remaining, fmt, options)
        if text:
            click.echo(text, nl=False, color=color)
        if fmt.is_text:
            if report.show_fixes:
                lines = show_fixes_lines(result.fixed)
                if lines:
                    click.echo(("\n" if remaining else "") + "\n".join(lines), color=color)
            if not quiet:
                for line in summary_lines(remaining, len(result.fixed),
                                          unsafe_fixes=unsafe_fixes, fix_mode=fix):
                    click.echo(line, color=color)
                for line in leak_lines:
                    click.echo(line, color=color)
    for line in baseline_notes:
        click.echo(line, err=True)
    if fatal:
        return 2
    if report.exit_zero:
        return 0
    if remaining:
        return 1
    if report.exit_non_zero_on_fix and result.fixed:
        return 1
    return 0


def _fix_confirmed_files(paths: list[str], config: ConfigResolver, run: RunOptions,
                         report: _Report, progress: _Progress) -> RunResult:
    """``--select-confirmed`` with ``--fix``/``--diff``: check ``paths``, then fix (or diff)
    only the files that hold a confirmed violation (every fix of those files)."""
    from dataclasses import replace

    from lint_gpu_tests.api import RunResult, check_paths

    checked = check_paths(paths, config, replace(run, fix=False, diff=False, edits=False),
                          progress=progress)
    marked, _ = report.confirm(checked.violations)
    files = sorted({v.path for v in marked if v.confirmed})
    if not files:
        return RunResult(problems=checked.problems,
                         files=[file for file in checked.files if file.error is not None])
    fixed = check_paths(files, config, replace(run, force_exclude=False))
    fixed.problems[:0] = checked.problems
    return fixed


@cli.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True,
              help="Explain every rule, and the codes that are not rules (GPU900, GPU999).")
def rule_command(code: str | None, show_all: bool) -> None:
    """Explain rule CODE (What it does, Why is this bad?, Example, Use instead, ...)."""
    from lint_gpu_tests.docs import PSEUDO_RULES, pseudo_rule, render_rule
    from lint_gpu_tests.rules import ALL_RULES, rule_by_code

    if show_all:
        click.echo("\n".join([*(render_rule(rule) for rule in ALL_RULES),
                              *(pseudo_rule(code) for code in PSEUDO_RULES)]), nl=False)
        return
    if code is None:
        fail("give a rule code, e.g. `gpu-test-lint rule GPU001`, or --all")
    rule = rule_by_code(code)
    if rule is None:
        if code.upper() in PSEUDO_RULES:
            click.echo(pseudo_rule(code), nl=False)
            return
        fail(f"unknown rule code `{code}` (see `gpu-test-lint rules`)")
    click.echo(render_rule(rule), nl=False)


@cli.command("rules")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown"]), default="table",
              show_default=True, help="`markdown` prints docs/rules.md.")
def rules_command(fmt: str) -> None:
    """List every rule: code, name, whether it has a fix, summary."""
    from lint_gpu_tests.docs import render_rules_markdown, render_rules_table

    click.echo(render_rules_table() if fmt == "table" else render_rules_markdown(), nl=False)


class _ProveCommand(click.Command):
    """``prove``'s command: the arguments after ``--`` are the user's pytest arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep what follows ``--`` for pytest (``ctx.meta["pytest_args"]``)."""
        if "--" in args:
            at = args.index("--")
            ctx.meta["pytest_args"] = tuple(args[at + 1:])
            args = args[:at]
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        """The usage line ends with ``[-- PYTEST ARGS]...``."""
        return [*super().collect_usage_pieces(ctx), "[-- PYTEST ARGS]..."]


@cli.command("prove", cls=_ProveCommand)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--unsafe-fixes", is_flag=True, help="Fix with unsafe fixes too.")
@click.option("--fix-strategy", type=click.Choice(FIX_STRATEGIES), default=None,
              help="How hand-managed engines are fixed (as `check`).")
@click.option("--target", type=click.Choice(TARGETS), default=None,
              help="Which engine API fixes write (as `check`).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Use this config file for every file (as `check`).")
@click.option("--apply", is_flag=True,
              help="Write the fix to the modules proven the same (without it, nothing is "
                   "written).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="pytest sessions side by side (mind the engines your machine holds).")
@click.option("--texts", type=click.Choice(["auto", "exact", "outcome"]), default="auto",
              show_default=True,
              help="How generated texts are compared: auto (greedy or seeded exactly, "
                   "others by outcome only), exact, or outcome (not compared).")
@click.option("--session-timeout", type=click.FloatRange(min=1), default=900.0,
              show_default=True, help="Seconds one module's pytest session may run.")
@click.option("--time-limit", type=click.FloatRange(min=0), default=None,
              help="Seconds after which no session starts (a re-run resumes).")
@click.option("--output-format", type=click.Choice(["text", "json", "sarif"]), default="text",
              show_default=True)
@click.option("--no-cache", is_flag=True, help="Neither read nor write recordings.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Cache directory; recordings go under prove/ in it.")
@click.option("--work-dir", type=click.Path(file_okay=False), default=None,
              help="Keep the two copies (and each session's log) in this folder.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.pass_context
def prove_command(ctx: click.Context, paths: tuple[str, ...], unsafe_fixes: bool,
                  fix_strategy: str | None, target: str | None, config_file: str | None,
                  apply: bool, jobs: int, texts: str, session_timeout: float,
                  time_limit: float | None, output_format: str, no_cache: bool,
                  cache_dir: str | None, work_dir: str | None, quiet: bool) -> None:
    """Prove the fixes of PATHS on your own tests: run them (pytest, with the arguments
    after --) before and after the fix, and compare each test's outcome, engines, texts and
    leaks. Exit 0 when no module differs (and each ran), 1 otherwise, 2 on an error."""
    from lint_gpu_tests.api import PathNotFoundError
    from lint_gpu_tests.prove import ProveOptions, prove_paths
    from lint_gpu_tests.prove.report import render

    overrides = {k: v for k, v in (("fix_strategy", fix_strategy), ("target", target))
                 if v is not None}
    options = ProveOptions(unsafe_fixes=unsafe_fixes, overrides=overrides,
                           config_file=os.path.abspath(config_file) if config_file else None,
                           pytest_args=ctx.meta.get("pytest_args", ()), jobs=jobs,
                           session_timeout_s=session_timeout, time_limit_s=time_limit,
                           texts=texts, apply=apply, cache=not no_cache, cache_dir=cache_dir,
                           work_dir=work_dir)
    try:
        result = prove_paths(list(paths), options, progress=None if quiet else
                             (lambda line: click.echo(line, err=True)))
    except (PathNotFoundError, ConfigError, ValueError) as exc:
        fail(str(exc))
    click.echo(render(result, output_format, os.getcwd()), nl=False)
    sys.exit(0 if result.proven else 1)


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
