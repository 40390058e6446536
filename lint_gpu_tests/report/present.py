"""How ``check`` reports a run: one :func:`present` for every report, from a run's result to
what goes to stdout and stderr and the exit status.

Files on disk and a source read from stdin (``--stdin-filename``; a run of one file) go
through the same steps: the discovery problems and failed files on stderr, then the diffs
(``--diff``), the counts per code (``--statistics``) or the violations in the chosen format,
``--show-fixes``, the summary lines and the leak report's lines, and the exit status (ruff's:
0 nothing left, 1 violations left or fixed with ``--exit-non-zero-on-fix`` or a non-empty
diff, 2 an internal error or a fatal problem). Under ``--fix`` on stdin, stdout carries the
fixed source and the report goes to stderr. Nothing here prints: the CLI writes what
:func:`present` returns. The progress bar a long run draws on stderr is here too
(:class:`ProgressBar`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from lint_gpu_tests.config import baselines_in_force
from lint_gpu_tests.report.output import (
    OutputFormat,
    RenderOptions,
    confirmed_lines,
    render,
    show_fixes_lines,
    statistics_json,
    statistics_lines,
    summary_lines,
)

if TYPE_CHECKING:
    from lint_gpu_tests.config import Config, ConfigResolver
    from lint_gpu_tests.ftypes import FileResult, Violation
    from lint_gpu_tests.report.baseline import BaselineUpdate
    from lint_gpu_tests.running.discovery import Problem
    from lint_gpu_tests.running.leaks import LeakReport
    from lint_gpu_tests.running.run import RunResult

__all__ = ["PROGRESS_AFTER_S", "PresentOptions", "Presentation", "ProgressBar",
           "failure_lines", "present", "present_add_noqa", "present_files", "present_settings"]

PROGRESS_AFTER_S = 2.0
"""A ``check`` run still going after this many seconds draws a progress bar on stderr (on a
terminal only, and not with ``--quiet``)."""


@dataclass(frozen=True)
class PresentOptions:
    """How ``check`` reports a run: the options of the report, and those of the run that
    change it.

    Attributes:
        fmt: ``--output-format``.
        fix: ``--fix`` (and not ``--diff``): fixed violations count in the summary and the
            statistics.
        diff: ``--diff``: the run's diffs are the report.
        unsafe_fixes: ``--unsafe-fixes``: unsafe fixes count as applicable.
        show_fixes: ``--show-fixes`` (text formats, files on disk).
        statistics: ``--statistics``: counts per code instead of the violations.
        exit_zero: ``--exit-zero``.
        exit_non_zero_on_fix: ``--exit-non-zero-on-fix``.
        quiet: ``--quiet``: no summary lines.
        verbose: ``--verbose``: tracebacks are in the failures, so no hint about them.
        color: ANSI colours in text formats.
        cwd: the directory JSON and SARIF paths are resolved against.
        leaks: the leak report of ``--leak-report``, else ``None``.
        select_confirmed: ``--select-confirmed``: only the confirmed violations.
        paths: the paths as named (for the warning when no file was found).
        stdin: with ``--stdin-filename``, the source read from stdin (the result is of one
            file, or of none when ``--force-exclude`` excluded it), else ``None``.
        resolver: the run's settings, which name each file's baseline (``None``: no
            baseline is read).
        baseline_update: ``--update-baseline`` (``WRITE``) or ``--ratchet`` (``RATCHET``);
            ``None``: the baselines are only read.
    """

    fmt: OutputFormat = OutputFormat.CONCISE
    fix: bool = False
    diff: bool = False
    unsafe_fixes: bool = False
    show_fixes: bool = False
    statistics: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    quiet: bool = False
    verbose: bool = False
    color: bool = False
    cwd: str = "."
    leaks: LeakReport | None = None
    select_confirmed: bool = False
    paths: tuple[str, ...] = ()
    stdin: bytes | None = None
    resolver: ConfigResolver | None = None
    baseline_update: BaselineUpdate | None = None

    def confirm(self, violations: list[Violation], sources: dict[str, bytes] | None = None
                ) -> tuple[list[Violation], int]:
        """With ``--leak-report``: the violations with the confirmed ones marked and first,
        only those with ``--select-confirmed``; and how many that left out. ``sources``:
        the checked bytes of files not read from disk."""
        if self.leaks is None:
            return violations, 0
        from lint_gpu_tests.running.leaks import confirm

        marked = confirm(violations, self.leaks, cwd=self.cwd, sources=sources)
        if not self.select_confirmed:
            return marked, 0
        kept = [v for v in marked if v.confirmed]
        return kept, len(marked) - len(kept)

    def baselined(self, result: RunResult, violations: list[Violation],
                  sources: dict[str, bytes] | None = None) -> tuple[list[Violation], list[str]]:
        """The violations no baseline holds (:mod:`lint_gpu_tests.report.baseline`), the baselines
        updated as asked; and the lines on them, for stderr (none with ``--quiet``).

        Raises:
            BaselineError: a baseline file is missing, malformed or cannot be written.
        """
        if self.resolver is None:
            return violations, []
        if self.baseline_update is None and not baselines_in_force(
                [*(f.path for f in result.files if f.error is None),
                 *(v.path for v in violations)], self.resolver, self.cwd):
            return list(violations), []  # what no baseline filters (its module not imported)
        from lint_gpu_tests.report.baseline import (
            BaselineUpdate,
            apply_run_baselines,
            baseline_lines,
        )

        update = self.baseline_update or BaselineUpdate.NONE
        outcome = apply_run_baselines(result, self.resolver, update, violations=violations,
                                      sources=sources, cwd=self.cwd)
        return outcome.reported, [] if self.quiet else baseline_lines(outcome, update,
                                                                      cwd=self.cwd)

    def leak_lines(self, shown: list[Violation], left_out: int, checked: list[str]
                   ) -> list[str]:
        """The closing lines of ``--leak-report`` (none without it)."""
        if self.leaks is None:
            return []
        from lint_gpu_tests.running.leaks import unmatched_leaks

        unmatched = unmatched_leaks(self.leaks, shown, checked, cwd=self.cwd)
        return confirmed_lines(shown, self.leaks.path, left_out=left_out,
                               unmatched=list(dict.fromkeys(leak.nodeid for leak in unmatched)))


@dataclass
class Presentation:
    """What :func:`present` makes of a run: the pieces of output in the order they are
    written (``(to stderr, text or bytes)``; bytes only for the source ``--fix`` prints
    from stdin) and the exit status. It unpacks as ``stdout, stderr, status``."""

    pieces: list[tuple[bool, str | bytes]] = field(default_factory=list)
    status: int = 0

    def _joined(self, err: bool) -> str:
        return "".join(p if isinstance(p, str) else p.decode("utf-8", "surrogateescape")
                       for to_err, p in self.pieces if to_err is err)

    @property
    def stdout(self) -> str:
        """Everything written to stdout."""
        return self._joined(False)

    @property
    def stderr(self) -> str:
        """Everything written to stderr."""
        return self._joined(True)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.stdout, self.stderr, self.status))

    def write(self, text: str | bytes, err: bool = False) -> None:
        """Add ``text`` for stdout (or stderr)."""
        if text:
            self.pieces.append((err, text))

    def lines(self, lines: Sequence[str], err: bool = False) -> None:
        """Add ``lines``, each ended by a newline, for stdout (or stderr)."""
        self.write("".join(line + "\n" for line in lines), err)


def failure_lines(failed: Sequence[FileResult], verbose: bool) -> list[str]:
    """One ``error: failed to read|check|fix PATH: why`` line per file, then the
    ``--verbose`` hint when an exception's traceback is there to see."""
    verbs = {"read": "check", "check": "check", "fix": "fix"}
    lines = [f"error: failed to {verbs.get(file.error_stage, 'check')} {file.path}: "
             f"{file.error}" for file in failed]
    if not verbose and any(file.error_has_traceback for file in failed):
        lines.append("hint: run with --verbose to see the traceback")
    return lines


def _problem_lines(problems: Sequence[Problem]) -> list[str]:
    return [f"{'error' if p.fatal else 'warning'}: {p.path}: {p.message}" for p in problems]


def present(result: RunResult, options: PresentOptions) -> Presentation:
    """The report of ``result`` (a run over files, or over the source on stdin), less what
    the baselines hold (with ``options.resolver``).

    Returns:
        A :class:`Presentation`: stdout, stderr (in writing order) and the exit status.

    Raises:
        BaselineError: a baseline file is missing, malformed or cannot be written.
    """
    out = Presentation()
    stdin = options.stdin
    if stdin is not None and not result.files:  # excluded: the source goes through as is
        if options.fix:
            out.write(stdin)
        return out
    out.lines(_problem_lines(result.problems), err=True)
    out.lines(failure_lines(result.failed, options.verbose), err=True)
    if not result.files and not result.problems and not options.select_confirmed:
        out.lines([f"warning: No Python files found under {', '.join(options.paths) or '.'}"],
                  err=True)
    fatal = result.has_fatal_problem
    if options.diff:
        _present_diff(result, options, out)
        out.status = 2 if fatal else 1 if result.diffs and not options.exit_zero else 0
        return out
    sources = None
    if stdin is not None:  # the checked bytes are not on disk
        sources = {file.path: file.new_source if file.new_source is not None else stdin
                   for file in result.files}
        if options.fix:
            out.write(sources[result.files[0].path])
    remaining, left_out = options.confirm(result.violations, sources)
    remaining, baseline_notes = options.baselined(result, remaining, sources)
    _present_report(result, remaining, left_out, options, out)
    out.lines(baseline_notes, err=True)
    if fatal:
        out.status = 2
    elif options.exit_zero:
        out.status = 0
    else:
        out.status = 1 if remaining or (options.exit_non_zero_on_fix and result.fixed) else 0
    return out


def also_fixed_lines(result: RunResult, diff: bool) -> list[str]:
    """The note of the violations of unselected rules that the fixes removed with the
    selected ones (:attr:`~lint_gpu_tests.ftypes.FileResult.also_fixed`), one line each under
    a heading; none when there are none."""
    also = [v for file in result.files for v in file.also_fixed]
    if not also:
        return []
    verb = "would also remove" if diff else "also removed"
    return [f"note: the fixes {verb} {len(also)} violation{'' if len(also) == 1 else 's'} "
            "not selected:",
            *(f"  {v.path}:{v.location.row}:{v.location.column}: {v.code} {v.message}"
              for v in also)]


def _present_diff(result: RunResult, options: PresentOptions, out: Presentation) -> None:
    """``--diff``: the diffs on stdout; for files on disk, how many violations they fix."""
    for path in sorted(result.diffs):
        out.write(result.diffs[path])
    if options.quiet or options.stdin is not None:
        return
    fixes = len(result.fixed)
    out.lines([f"Would fix {fixes} violation{'' if fixes == 1 else 's'}." if fixes
               else "No violations would be fixed."], err=True)
    out.lines(also_fixed_lines(result, diff=True), err=True)


def _present_report(result: RunResult, remaining: list[Violation], left_out: int,
                    options: PresentOptions, out: Presentation) -> None:
    """The violations left (or their counts per code), the fixes, the summary and the leak
    report's lines; on stderr when stdout carries the source fixed from stdin."""
    fmt, unsafe, err = options.fmt, options.unsafe_fixes, options.fix and options.stdin is not None
    leak_lines = options.leak_lines(remaining, left_out, [file.path for file in result.files]) \
        if fmt.is_text and not options.quiet else []
    if options.statistics and fmt is OutputFormat.JSON:
        # As ruff: the counts as JSON, alone.
        out.write(statistics_json([*remaining, *result.fixed] if options.fix else remaining,
                                  unsafe), err)
        return
    if options.statistics:
        out.lines(statistics_lines([*remaining, *result.fixed] if options.fix else remaining,
                                   unsafe), err)
        if not options.quiet:
            # As ruff: how many `[*]` fixes `--fix` applies, and the unsafe ones apart
            # (hidden without `--unsafe-fixes`).
            out.lines(summary_lines(remaining, 0, unsafe_fixes=unsafe, fix_mode=False)[1:], err)
            out.lines(leak_lines, err)
        return
    color = options.color and fmt.is_text
    out.write(render(remaining, fmt, RenderOptions(
        unsafe_fixes=unsafe, color=color, cwd=options.cwd, edits=result.edits,
        leak_report=options.leaks is not None)), err)
    if not fmt.is_text:
        return
    if options.show_fixes and options.stdin is None:
        lines = show_fixes_lines(result.fixed, [(u.helper, u.paths) for u in result.units])
        if lines:
            out.write(("\n" if remaining else "") + "\n".join(lines) + "\n", err)
    if not options.quiet:
        out.lines(summary_lines(remaining, len(result.fixed), unsafe_fixes=unsafe,
                                fix_mode=options.fix), err)
        if options.fix:
            out.lines(also_fixed_lines(result, diff=False), err)
        out.lines(leak_lines, err)


def present_files(problems: Sequence[Problem], notes: Sequence[tuple[str, str]]
                  ) -> Presentation:
    """``--show-files``: the discovery ``problems``, then each file with its note (see
    :func:`lint_gpu_tests.api.file_notes`)."""
    out = Presentation()
    out.lines(_problem_lines(problems), err=True)
    out.lines([path + note for path, note in notes])
    return out


def present_settings(problems: Sequence[Problem], files: Sequence[str],
                     config: ConfigResolver) -> Presentation:
    """``--show-settings``: the discovery ``problems``, then the settings ``files`` get,
    once per set of settings (its files, config file, root and values as TOML)."""
    from lint_gpu_tests.config import config_as_toml

    out = Presentation()
    out.lines(_problem_lines(problems), err=True)
    groups: dict[int, tuple[Config, list[str]]] = {}
    for path in files:
        settings = config.for_file(path)
        groups.setdefault(id(settings), (settings, []))[1].append(path)
    for index, (settings, members) in enumerate(groups.values()):
        more = f" (and {len(members) - 1} more)" if len(members) > 1 else ""
        out.lines([("\n" if index else "") + f"Resolved settings for: {members[0]}{more}",
                   f"Settings path: {settings.source or '(none: defaults)'}",
                   f"Root: {settings.root}"])
        out.write(config_as_toml(settings))
    return out


def present_add_noqa(result: RunResult, added: int, errors: Sequence[tuple[str, str]]
                     ) -> Presentation:
    """``--add-noqa``: the problems and failures of its check, the files it could not
    change, and how many directives it added; exit 2 on a fatal problem or such a file."""
    out = Presentation()
    out.lines(_problem_lines(result.problems), err=True)
    out.lines(failure_lines(result.failed, verbose=False), err=True)
    out.lines([f"error: failed to add noqa to {path}: {message}" for path, message in errors],
              err=True)
    out.lines([f"Added {added} noqa directive{'' if added == 1 else 's'}."], err=True)
    out.status = 2 if result.has_fatal_problem or errors else 0
    return out


class ProgressBar:
    """A click progress bar on ``file``, drawn once a run has lasted
    :data:`PROGRESS_AFTER_S` (by ``clock``) with files still to check; a
    :class:`lint_gpu_tests.running.run.Progress` hook. Nothing is drawn unless ``enabled``."""

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
        """Remember how many files the run has."""
        self.total = total

    def advance(self, count: int) -> None:
        """Count ``count`` more files done; start the bar when it is time."""
        self.done += count
        if self.bar is None:
            if not self.enabled or self.done >= self.total or \
                    self.clock() - self.began < PROGRESS_AFTER_S:
                return
            import click

            self.bar = click.progressbar(length=self.total, label="Checking", file=self.file,
                                         show_pos=True)
            self.bar.__enter__()
            count = self.done
        self.bar.update(count)

    def finish(self) -> None:
        """Close the bar, if one was drawn."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
