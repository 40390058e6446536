"""The options of ``gpu-test-lint check``: click's declarations, and the option dataclasses
they are parsed into (:func:`parse_check`): the settings' selection (a
:class:`~lint_gpu_tests.config.ConfigResolver`), the mode (stdin, ``--add-noqa``,
``--show-files``, ``--show-settings``, the leak report), the run's
:class:`~lint_gpu_tests.running.run.RunOptions` and the report's
:class:`~lint_gpu_tests.report.present.PresentOptions`. Also :func:`fail`, the command line's usage
error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from lint_gpu_tests.config import (
    FIX_STRATEGIES,
    STDIN_PATH,
    TARGETS,
    ConfigResolver,
    command_line_overrides,
)
from lint_gpu_tests.report.output import OutputFormat
from lint_gpu_tests.report.present import PresentOptions
from lint_gpu_tests.running.run import RunOptions

if TYPE_CHECKING:
    from lint_gpu_tests.report.baseline import BaselineUpdate

__all__ = ["CheckArgs", "Mode", "Selection", "check_options", "fail", "parse_check"]


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with status 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


_CHECK_PARAMS: list[Callable[[Any], Any]] = [
    click.argument("paths", nargs=-1, type=click.Path()),
    click.option("--fix", is_flag=True, help="Apply safe fixes, writing files in place."),
    click.option("--unsafe-fixes", is_flag=True, help="Also apply (or count) unsafe fixes."),
    click.option("--diff", is_flag=True,
                 help="Print the changes fixes would make; write nothing (exit 1 if any)."),
    click.option("--show-fixes", is_flag=True, help="List the violations that were fixed."),
    click.option("--select", multiple=True, metavar="CODES",
                 help="Comma-separated codes or prefixes to report (replaces the config's)."),
    click.option("--ignore", multiple=True, metavar="CODES",
                 help="Comma-separated codes or prefixes to ignore (replaces the config's)."),
    click.option("--extend-select", multiple=True, metavar="CODES",
                 help="Comma-separated codes or prefixes added to the selection."),
    click.option("--output-format", type=click.Choice([f.value for f in OutputFormat]),
                 default=OutputFormat.CONCISE.value, show_default=True),
    click.option("--statistics", is_flag=True, help="Print counts per code instead of violations."),
    click.option("--exit-zero", is_flag=True, help="Exit 0 even when violations are found."),
    click.option("--exit-non-zero-on-fix", is_flag=True,
                 help="Exit 1 when anything was fixed, even if nothing is left."),
    click.option("-q", "--quiet", is_flag=True, help="Print violations only, no summary."),
    click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
    click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                 help="Cache directory [env GPU_TEST_LINT_CACHE_DIR; default: "
                      ".gpu-test-lint-cache at the config root]."),
    click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
                 help="Worker processes [default: the CPU count]."),
    click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                 help="Config file (pyproject.toml or .gpu-test-lint.toml) instead of the "
                      "nearest one."),
    click.option("--target", type=click.Choice(TARGETS), default=None,
                 help="Runner that fixes target (overrides the config)."),
    click.option("--fix-strategy", type=click.Choice(FIX_STRATEGIES), default=None,
                 help="How GPU001/GPU004 fixes manage an engine: wrap it in the runner, or run "
                      "the test in a new process (overrides the config)."),
    click.option("--exclude", multiple=True, metavar="PATTERNS",
                 help="Gitignore-style patterns to skip (replaces the config's and the defaults)."),
    click.option("--extend-exclude", multiple=True, metavar="PATTERNS",
                 help="Gitignore-style patterns to skip in addition."),
    click.option("--force-exclude", is_flag=True,
                 help="Apply excludes to files named on the command line too (for pre-commit)."),
    click.option("--respect-gitignore/--no-respect-gitignore", default=True, show_default=True,
                 help="Skip files that .gitignore files ignore."),
    click.option("--stdin-filename", metavar="PATH", default=None,
                 help="Read the source from stdin and check it as PATH (its config, its name in "
                      "reports); with --fix print the fixed source, reports going to stderr. "
                      "Without it, - is checked as a test module of the current directory."),
    click.option("--add-noqa", is_flag=True,
                 help="Add `# noqa: CODE` to every line with a violation (adopting the tool on "
                      "a suite with unfixable leftovers)."),
    click.option("--show-files", is_flag=True,
                 help="List the files that would be checked (and those the rules skip), and exit."),
    click.option("--show-settings", is_flag=True,
                 help="Print the settings the files get, per config file, and exit."),
    click.option("--leak-report", "leak_report", type=click.Path(dir_okay=False), default=None,
                 metavar="PATH",
                 help="A leak report written by pytest --gpu-leak-report-file: mark the "
                      "violations in tests and fixtures that really leaked as confirmed, and "
                      "list them first."),
    click.option("--select-confirmed", is_flag=True,
                 help="With --leak-report: report only the confirmed violations (with --fix or "
                      "--diff: fix only the files that hold one)."),
    click.option("--baseline", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                 help="Report only the violations not recorded in this baseline file (instead "
                      "of the config's `baseline`)."),
    click.option("--update-baseline", is_flag=True,
                 help="Write the baseline: record the violations left, drop what no longer "
                      "occurs."),
    click.option("--ratchet", is_flag=True,
                 help="Update the baseline only by dropping what no longer occurs; new "
                      "violations are reported, not recorded."),
    click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors."),
]


def check_options(command: Callable[..., None]) -> Callable[..., None]:
    """Declare ``check``'s argument and options on ``command`` (in ``--help``'s order)."""
    for declare in reversed(_CHECK_PARAMS):
        command = declare(command)
    return command


@dataclass(frozen=True)
class Selection:
    """The options that choose the settings (:meth:`resolver`)."""

    config_file: str | None
    select: tuple[str, ...]
    ignore: tuple[str, ...]
    extend_select: tuple[str, ...]
    exclude: tuple[str, ...]
    extend_exclude: tuple[str, ...]
    target: str | None
    fix_strategy: str | None
    baseline: str | None

    def resolver(self, fix_settings: bool) -> ConfigResolver:
        """The run's :class:`ConfigResolver`.

        Raises:
            ConfigError: for a bad config file, or a selector that selects nothing.
        """
        overrides: dict[str, Any] = command_line_overrides(
            {"select": self.select, "ignore": self.ignore, "extend_select": self.extend_select},
            {"exclude": self.exclude, "extend_exclude": self.extend_exclude})
        overrides.update((key, value) for key, value in (("target", self.target),
                                                         ("fix_strategy", self.fix_strategy))
                         if value is not None)
        if self.baseline is not None:
            overrides["baseline"] = os.path.abspath(self.baseline)
        return ConfigResolver(self.config_file, overrides, fix_settings=fix_settings)


@dataclass(frozen=True)
class Mode:
    """The options that choose what ``check`` does besides checking and reporting files."""

    stdin_filename: str | None
    add_noqa: bool
    show_files: bool
    show_settings: bool
    leak_report: str | None
    select_confirmed: bool
    update_baseline: bool
    ratchet: bool

    @property
    def shows(self) -> bool:
        """``--show-files`` or ``--show-settings``: list, check nothing."""
        return self.show_files or self.show_settings

    def problem(self, fix: bool, diff: bool) -> str | None:
        """Why these options cannot go together (with ``--fix``, ``--diff``), or ``None``."""
        if self.add_noqa and (fix or diff or self.stdin_filename is not None):
            return "--add-noqa cannot be combined with --fix, --diff or --stdin-filename"
        if self.select_confirmed and self.leak_report is None:
            return "--select-confirmed needs --leak-report PATH"
        if self.select_confirmed and self.add_noqa:
            return "--select-confirmed cannot be combined with --add-noqa"
        if (self.update_baseline or self.ratchet) and (
                diff or self.add_noqa or self.select_confirmed or self.stdin_filename is not None):
            return ("--update-baseline and --ratchet cannot be combined with --diff, --add-noqa, "
                    "--select-confirmed or --stdin-filename")
        return None


@dataclass(frozen=True)
class CheckArgs:
    """``check``'s command line, parsed: the paths (``-`` taken out), and the options
    grouped by who uses them. ``report.leaks`` is still to load (``mode.leak_report``)."""

    paths: tuple[str, ...]
    mode: Mode
    selection: Selection
    run: RunOptions
    report: PresentOptions


_T = TypeVar("_T")


def _pick(cls: Callable[..., _T], names: Any, params: dict[str, Any], **more: Any) -> _T:
    """``cls(...)`` of the values in ``params`` (click's) named like its fields, and ``more``."""
    return cls(**{f.name: params[f.name] for f in fields(names)
                  if f.name in params and f.name not in more}, **more)


def parse_check(paths: tuple[str, ...], params: dict[str, Any]) -> CheckArgs:
    """Group click's values of ``check`` (``params``, by parameter name).

    Exits (:func:`fail`) for options that cannot go together.
    """
    stdin_filename = params["stdin_filename"]
    if STDIN_PATH in paths:  # ruff's convention: `-` is standard input
        paths = tuple(p for p in paths if p != STDIN_PATH)
        stdin_filename = stdin_filename if stdin_filename is not None else STDIN_PATH
    mode = _pick(Mode, Mode, params, stdin_filename=stdin_filename)
    problem = mode.problem(params["fix"], params["diff"])
    if problem is not None:
        fail(problem)
    fmt = OutputFormat(params["output_format"])
    # `--fix --diff` is `--diff`: nothing is written.
    run = _pick(RunOptions, RunOptions, params, fix=params["fix"] and not params["diff"],
                cache=not params["no_cache"],
                edits=fmt in (OutputFormat.JSON, OutputFormat.SARIF) and not params["statistics"])
    report = _pick(PresentOptions, PresentOptions, params, fmt=fmt, fix=run.fix, paths=paths,
                   color=_use_color() and fmt.is_text and stdin_filename is None,
                   cwd=os.getcwd(), baseline_update=_baseline_update(mode))
    return CheckArgs(paths, mode, _pick(Selection, Selection, params), run, report)


def _baseline_update(mode: Mode) -> BaselineUpdate | None:
    """``--ratchet`` or ``--update-baseline``, else ``None`` (baselines are only read; the
    baseline module is not imported for that)."""
    if not (mode.ratchet or mode.update_baseline):
        return None
    from lint_gpu_tests.report.baseline import BaselineUpdate

    return BaselineUpdate.RATCHET if mode.ratchet else BaselineUpdate.WRITE


def _use_color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
