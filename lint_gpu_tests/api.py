"""The library surface: check (and fix) files and trees.

The CLI is a thin layer over :func:`check_paths`; the flake8 plugin calls the engine
directly. Everything a user can do from the command line can be done from here::

    from lint_gpu_tests.api import ConfigResolver, RunOptions, check_paths
    result = check_paths(["tests"], ConfigResolver())  # nearest config file per file
    for violation in result.violations:
        print(violation.path, violation.location.row, violation.code)
    check_paths(["tests"], ConfigResolver(), RunOptions(fix=True))  # fix in place
    # the violations in tests that leaked in a run (pytest --gpu-leak-report-file leaks.json)
    confirmed = [v for v in confirm_leaks(result.violations, load_leak_report("leaks.json"))
                 if v.confirmed]
    # only what the baseline file does not hold (`baseline` in the config, or given here)
    new = apply_run_baselines(result, ConfigResolver(overrides={"baseline": "b.json"})).reported

This module is a facade: the run itself (discovery, the result cache, the prefilter, the
worker pool, each file's check and fix) is :mod:`lint_gpu_tests.running.run`; fixes as edits and
diffs are :mod:`lint_gpu_tests.fixing.edits`; baselines are :mod:`lint_gpu_tests.report.baseline`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lint_gpu_tests.config import Config, ConfigError, ConfigResolver, resolve_config
from lint_gpu_tests.ftypes import FileResult, LeakEvidence, Violation
from lint_gpu_tests.running.discovery import PathNotFoundError, Problem, discover_files
from lint_gpu_tests.running.run import (
    BufferUnit,
    Progress,
    RunOptions,
    RunResult,
    buffer_units,
    check_module,
    check_one,
    check_source,
    edits_of,
    fix_source,
    may_hold_violation,
    run_paths,
    run_source,
)

if TYPE_CHECKING:
    from lint_gpu_tests.fixing.edits import Edit, fix_edits, unified_diff
    from lint_gpu_tests.parsing.source import InternalError
    from lint_gpu_tests.report.baseline import (
        BaselineEntry,
        BaselineError,
        BaselineOutcome,
        BaselineUpdate,
        apply_baselines,
        apply_run_baselines,
        baseline_lines,
        read_baseline,
        write_baseline,
    )
    from lint_gpu_tests.running.leaks import LeakReport, LeakReportError, load_leak_report
    from lint_gpu_tests.running.leaks import confirm as confirm_leaks

#: Names this facade re-exports from modules a plain check does not need (baselines, leak
#: reports, edits, the internal error): each is imported on first use (PEP 562), so that a
#: warm run, answered by the cache, imports none of them. ``name -> (module, its name)``.
_LAZY = {
    **{name: ("lint_gpu_tests.report.baseline", name) for name in (
        "BaselineEntry", "BaselineError", "BaselineOutcome", "BaselineUpdate",
        "apply_baselines", "apply_run_baselines", "baseline_lines", "read_baseline",
        "write_baseline")},
    **{name: ("lint_gpu_tests.fixing.edits", name) for name in ("Edit", "fix_edits",
                                                                "unified_diff")},
    **{name: ("lint_gpu_tests.running.leaks", name) for name in (
        "LeakReport", "LeakReportError", "load_leak_report")},
    "confirm_leaks": ("lint_gpu_tests.running.leaks", "confirm"),
    "InternalError": ("lint_gpu_tests.parsing.source", "InternalError"),
}


def __getattr__(name: str) -> Any:
    """The re-exported name ``name`` of :data:`_LAZY`, imported now.

    Raises:
        AttributeError: ``name`` is not one of them.
    """
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value

__all__ = [
    "BaselineEntry",
    "BaselineError",
    "BaselineOutcome",
    "BaselineUpdate",
    "BufferUnit",
    "Config",
    "ConfigError",
    "ConfigResolver",
    "Edit",
    "FileResult",
    "InternalError",
    "LeakEvidence",
    "LeakReport",
    "LeakReportError",
    "PathNotFoundError",
    "Problem",
    "Progress",
    "RunOptions",
    "RunResult",
    "Violation",
    "add_noqa_to_files",
    "apply_baselines",
    "apply_run_baselines",
    "baseline_lines",
    "buffer_units",
    "check_buffer",
    "check_confirmed",
    "check_file",
    "check_module",
    "check_paths",
    "check_source",
    "check_stdin",
    "confirm_leaks",
    "discover_files",
    "file_notes",
    "fix_edits",
    "fix_source",
    "load_leak_report",
    "may_hold_violation",
    "read_baseline",
    "resolve_config",
    "stdin_edits",
    "unified_diff",
    "write_baseline",
]


def check_paths(paths: Sequence[str], config: Config | ConfigResolver,
                options: RunOptions | None = None, *, progress: Progress | None = None,
                **changes: Any) -> RunResult:
    """Check every file under ``paths``; with ``options.fix``, rewrite the fixable ones in
    place.

    Args:
        paths: files and directories as the user named them (``[]`` means ``["."]``).
        config: a :class:`~lint_gpu_tests.config.ConfigResolver` (each file gets its nearest
            config file's settings), or one :class:`Config` for every file.
        options: how to run (:class:`RunOptions`; default: check only, with the cache).
        progress: told the number of files found, then each file finished (:class:`Progress`).
        changes: fields of :class:`RunOptions` to change in ``options``, by name (the
            keyword form: ``check_paths(paths, config, fix=True, jobs=1)``).

    Returns:
        A :class:`RunResult`. Per-file failures are in :attr:`RunResult.errors`; the run
        never stops for one file.

    Raises:
        PathNotFoundError: when a named path does not exist.
        ConfigError: when a config file that governs a file is invalid.
        TypeError: when a keyword of ``changes`` is not a field of :class:`RunOptions`.
    """
    chosen = options if options is not None else RunOptions()
    if changes:
        chosen = replace(chosen, **changes)
    return run_paths(paths, ConfigResolver.of(config), chosen, progress)


def check_buffer(source: bytes, path: str, config: Config | ConfigResolver,
                 options: RunOptions | None = None) -> RunResult:
    """:func:`check_paths` for one buffer that is not on disk (``--stdin-filename``):
    ``source`` checked as the file at ``path``; with ``options.fix`` the fixed bytes are
    the file's ``new_source`` and nothing is written.

    Returns:
        A :class:`RunResult` of that one file (of none when ``options.force_exclude`` and
        the excludes leave it out).

    Raises:
        ConfigError: when the config file that governs ``path`` is invalid.
    """
    return run_source(source, path, ConfigResolver.of(config),
                      options if options is not None else RunOptions())


def check_confirmed(paths: Sequence[str], config: Config | ConfigResolver,
                    options: RunOptions, leaks: LeakReport, *,
                    progress: Progress | None = None) -> RunResult:
    """``--select-confirmed`` with ``fix`` or ``diff``: check ``paths``, then fix (or
    diff) only the files that hold a violation ``leaks`` confirms (every fix of those
    files). Arguments and errors as :func:`check_paths`.

    Returns:
        The :class:`RunResult` of the files fixed, with the problems of the whole check
        (and, when no file holds a confirmed violation, the files that failed).
    """
    import os

    from lint_gpu_tests.running.leaks import confirm as confirm_leaks

    checked = check_paths(paths, config, replace(options, fix=False, diff=False, edits=False),
                          progress=progress)
    marked = confirm_leaks(checked.violations, leaks, cwd=os.getcwd())
    files = sorted({v.path for v in marked if v.confirmed})
    if not files:
        return RunResult(problems=checked.problems,
                         files=[file for file in checked.files if file.error is not None])
    fixed = check_paths(files, config, replace(options, force_exclude=False))
    fixed.problems[:0] = checked.problems
    return fixed


def check_file(path: str, config: Config, *, fix: bool = False, unsafe_fixes: bool = False
               ) -> FileResult:
    """Check (and with ``fix``, fix in place) one file, without the cache.

    Returns:
        Its :class:`FileResult`; a read failure or internal error is in ``error``.
    """
    return check_one(path, None, config, RunOptions(fix=fix, unsafe_fixes=unsafe_fixes))


def check_stdin(source: bytes, path: str, config: Config, *, fix: bool = False,
                unsafe_fixes: bool = False, verbose: bool = False) -> FileResult:
    """Check (and with ``fix``, fix) a buffer that is not on disk, e.g. an editor's unsaved
    file, as if it were the file at ``path``; nothing is written.

    Returns:
        Its :class:`FileResult`: with ``fix``, ``new_source`` holds the fixed bytes (``None``
        when nothing changed) and ``violations`` what is left; ``error`` as for files.
    """
    options = RunOptions(diff=fix, unsafe_fixes=unsafe_fixes, verbose=verbose)
    return check_one(path, source, config, options)


def stdin_edits(source: bytes, result: FileResult, config: Config, *,
                unsafe_fixes: bool = False) -> dict[Violation, tuple[Edit, ...]]:
    """The edits of the fixable violations of a buffer checked by :func:`check_stdin`
    (without ``fix``), for JSON and SARIF output: what ``--fix`` would write, as edits."""
    return edits_of(result, config, unsafe_fixes, source)


def file_notes(files: Sequence[str], config: ConfigResolver) -> list[tuple[str, str]]:
    """``--show-files``: each of ``files`` with what a check would make of it: ``""`` (it is
    analysed), or why not (`` (cannot read: why)``, `` (not analysed: ...)`` when the
    prefilter settles it unparsed, `` (not a test module: ...)``, `` (does not parse:
    GPU900)``)."""
    from lint_gpu_tests.checking.checker import in_scope
    from lint_gpu_tests.checking.conftest_index import ConftestIndex

    memo: dict[tuple[str, int], frozenset[str]] = {}
    conftests = ConftestIndex()
    notes: list[tuple[str, str]] = []
    for path in files:
        settings = config.for_file(path)
        try:
            source = Path(path).read_bytes()
        except OSError as exc:
            notes.append((path, f" (cannot read: {exc.strerror or exc})"))
            continue
        if not may_hold_violation(source, path, settings, memo, conftests):
            # As a check run does: such a file is not even parsed.
            notes.append((path, " (not analysed: names nothing the rules look for)"))
            continue
        notes.append((path, {True: "", False: " (not a test module: no rule applies)",
                             None: " (does not parse: GPU900)"}[in_scope(source, path,
                                                                         settings)]))
    return notes


def add_noqa_to_files(result: RunResult) -> tuple[int, list[tuple[str, str]]]:
    """Add ``# noqa: CODES`` for every violation in ``result`` to its file, in place
    (``--add-noqa``; see :func:`~lint_gpu_tests.checking.checker.add_noqa`).

    Returns:
        ``(lines given a directive, [(path, error message)...] for files that could not be
        read, decoded or written)``.
    """
    from lint_gpu_tests.codes import PARSE_ERROR_CODE

    added = 0
    errors: list[tuple[str, str]] = []
    for file in result.files:
        if not any(v.code != PARSE_ERROR_CODE for v in file.violations):
            continue
        try:
            source = Path(file.path).read_bytes()
            from lint_gpu_tests.checking.checker import add_noqa

            new, count = add_noqa(source, file.violations)
            if new is not None:
                from lint_gpu_tests.parsing.writer import atomic_write

                atomic_write(file.path, new)
        except (OSError, SyntaxError) as exc:
            errors.append((file.path, f"cannot add noqa: {exc}"))
            continue
        added += count
    return added, errors
