"""One run over files on disk: discovery, the result cache, the prefilter, the worker pool,
and each file's check (and fix).

:func:`run_paths` is the pipeline behind :func:`lint_gpu_tests.api.check_paths`: it lists
the files (:func:`~lint_gpu_tests.running.discovery.discover_files`), gives each the settings of its
nearest config file, and hands them to a :class:`RunContext`, which holds everything the run
keeps while it goes (the caches, the conftest index and memo, the prefilters, the files
done and to do, the pool) and is thrown away with it: a second run in the same process
starts from nothing but what the result cache keeps. Each file's bytes are read and
hashed; the cache of its config (:mod:`lint_gpu_tests.running.cache`) answers for files it has seen
with the same bytes and settings; a byte-level prefilter (:func:`may_hold_violation`,
:mod:`lint_gpu_tests.parsing.prefilter`) settles the files that name nothing an enabled rule starts
from, unparsed (so ``GPU900`` is reported for analysed files only); the rest are checked by
:func:`check_one`, in worker processes when there are many of them. Fixing imports LibCST,
and only for files that have something to fix.

How the run is going is told to a :class:`Progress` hook (the CLI draws a bar with it);
this module prints nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from lint_gpu_tests.checking import conftest_index
from lint_gpu_tests.checking.conftest_index import ConftestIndex, conftest_engine_fixtures
from lint_gpu_tests.config import (
    Config,
    ConfigError,
    ConfigResolver,
    is_test_module,
    project_module,
)
from lint_gpu_tests.ftypes import (
    ENGINE_HELPER,
    FileResult,
    Violation,
    wanted_fixes,
    withholds_for_imported_factory,
)
from lint_gpu_tests.running.cache import ResultCache, content_hash, default_cache_dir, stat_key
from lint_gpu_tests.running.discovery import Discovery, Problem, discover_files, is_excluded

if TYPE_CHECKING:  # edits and the internal error: imported where a run needs them
    from concurrent.futures import Future

    from lint_gpu_tests.analysis.analysis import ModuleAnalysis
    from lint_gpu_tests.checking.checker import CheckResult
    from lint_gpu_tests.fixing import tree_units, unit_edits
    from lint_gpu_tests.fixing.edits import Edit
    from lint_gpu_tests.fixing.fixloop import FixOutcome
    from lint_gpu_tests.parsing.prefilter import Prefilter

__all__ = [
    "PARALLEL_THRESHOLD",
    "BufferUnit",
    "Progress",
    "RunContext",
    "RunOptions",
    "RunResult",
    "check_module",
    "check_one",
    "buffer_units",
    "check_source",
    "default_jobs",
    "edits_of",
    "file_digest",
    "fix_source",
    "may_hold_violation",
    "run_paths",
    "run_source",
]


def check_source(source: bytes, path: str, config: Config,
                 conftests: ConftestIndex | None = None) -> list[Violation]:
    """:func:`lint_gpu_tests.checking.checker.check_source` (the checker is imported on first use: a
    run that the cache answers whole never loads it)."""
    return check_module(source, path, config, conftests).violations


def check_module(source: bytes, path: str, config: Config,
                 conftests: ConftestIndex | None = None) -> CheckResult:
    """:func:`lint_gpu_tests.checking.checker.check_module`: the violations and the analysis their
    fixes' plans refer to (imported on first use, as :func:`check_source`)."""
    from lint_gpu_tests.checking.checker import check_module as check

    return check(source, path, config, conftests)


def _unselected_fixed(before: bytes, after: bytes, path: str, config: Config,
                      conftests: ConftestIndex) -> list[Violation]:
    """:func:`lint_gpu_tests.fixing.fixloop.unselected_fixed`, or nothing when a rule fails
    on either text (the fixes stand; only the note of what they also removed is lost)."""
    from lint_gpu_tests.fixing.fixloop import unselected_fixed
    from lint_gpu_tests.parsing.source import InternalError

    try:
        return unselected_fixed(before, after, path, config, conftests)
    except InternalError:
        return []


def fix_source(source: bytes, path: str, config: Config, *, unsafe: bool = False,
               violations: list[Violation] | None = None,
               analysis: ModuleAnalysis | None = None,
               conftests: ConftestIndex | None = None) -> FixOutcome:
    """:func:`lint_gpu_tests.fixing.fixloop.fix_source` (imported on first use, as
    :func:`check_source`)."""
    from lint_gpu_tests.fixing.fixloop import fix_source as fix

    return fix(source, path, config, unsafe=unsafe, violations=violations, analysis=analysis,
               conftests=conftests)


PARALLEL_THRESHOLD = 64
"""Below this many files to analyse, a run stays in one process (a pool costs more)."""


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class RunOptions:
    """How to run: the options of ``gpu-test-lint check`` that reach past the report, from
    the command line (or a library caller) down to each file's check.

    Attributes:
        fix: apply fixes and write changed files atomically (keeping mode, encoding, BOM and
            line endings).
        unsafe_fixes: apply unsafe fixes too (with ``fix`` or ``diff``).
        diff: compute fixes but write nothing; diffs land in :attr:`RunResult.diffs`.
        jobs: worker processes (``None``: the CPU count); one means in-process.
        cache: use and update the result cache.
        cache_dir: cache directory (default ``$GPU_TEST_LINT_CACHE_DIR`` or
            ``<config root>/.gpu-test-lint-cache``, per config).
        force_exclude: apply excludes to explicitly named files as well.
        respect_gitignore: honour ``.gitignore`` files while walking.
        prefilter: skip the analysis of files that cannot hold a violation.
        verbose: put full tracebacks in internal-error messages.
        parallel_threshold: fewest files to analyse for which worker processes are used.
        edits: (without ``fix`` or ``diff``) also compute what ``--fix`` would write, as
            the edits of each fixable violation, in :attr:`FileResult.edits` (JSON and SARIF
            output): the fix loop runs where the file is checked, and nothing is written.
    """

    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    jobs: int | None = None
    cache: bool = True
    cache_dir: str | None = None
    force_exclude: bool = False
    respect_gitignore: bool = True
    prefilter: bool = True
    verbose: bool = False
    parallel_threshold: int = PARALLEL_THRESHOLD
    edits: bool = False

    def fixes(self, violations: Sequence[Violation]) -> bool:
        """Whether this run fixes (or diffs) something among ``violations``."""
        return (self.fix or self.diff) and bool(wanted_fixes(violations, self.unsafe_fixes))

    def runs_fix_loop(self, violations: Sequence[Violation]) -> bool:
        """Whether this run puts a file with ``violations`` through the fix loop: to fix
        or diff it, or for the edits of its fixes (``edits``)."""
        return (self.fix or self.diff or self.edits) and bool(
            wanted_fixes(violations, self.unsafe_fixes))


class Progress(Protocol):
    """What a run tells while it goes (e.g. to draw a progress bar)."""

    def start(self, total: int) -> None:
        """Called once, before checking starts, with the number of files found."""

    def advance(self, count: int) -> None:
        """Called as the run goes, with the number of files just finished."""


# --------------------------------------------------------------------------- prefilter


def may_hold_violation(source: bytes, path: str, config: Config,
                       memo: conftest_index.Memo | None = None,
                       conftests: ConftestIndex | None = None) -> bool:
    """Return False only when no rule ``config`` enables for ``path`` can report on
    ``source`` (the file's raw bytes): it names nothing those rules start from (see
    :mod:`lint_gpu_tests.parsing.prefilter`; engine fixtures from the conftests of ``path`` count).
    Such a file is not parsed at all, so a syntax error in it is not reported (``GPU900``
    is for files that are analysed). ``memo`` and ``conftests`` as for :func:`file_digest`.

    Raises:
        ValueError: e.g. when a ``per-file-ignores`` pattern is invalid.
    """
    return _prefilter(path, config, memo, conftests).admits(source)


def _prefilter(path: str, config: Config, memo: conftest_index.Memo | None,
               conftests: ConftestIndex | None,
               filters: dict[tuple[str, int], Prefilter] | None = None) -> Prefilter:
    """The :class:`~lint_gpu_tests.parsing.prefilter.Prefilter` of ``path`` under ``config``;
    ``filters`` keeps them for one run, per directory and config (``per-file-ignores``
    aside, every test module of a directory gets the same; its ``conftest.py`` and each
    other module, one of their own)."""
    directory, name = os.path.split(path)
    # A module other than a test module may define a helper of the tree, whose name its own
    # entries leave out: its prefilter is its own, not its directory's.
    key = (directory if name != "conftest.py" and is_test_module(name) else path, id(config))
    kept = filters if not config.per_file_ignores else None
    if kept is not None and (known := kept.get(key)) is not None:
        return known
    from lint_gpu_tests.analysis.analysis import FACTORY_FIXTURE, FACTORY_SHARE, RUNNER_CLASS
    from lint_gpu_tests.checking.checker import per_file_ignored_codes
    from lint_gpu_tests.ftypes import Trigger
    from lint_gpu_tests.parsing.prefilter import enabled_rule_codes, prefilter_for
    from lint_gpu_tests.rules import triggers_of

    triggers = triggers_of(enabled_rule_codes(config, per_file_ignored_codes(path, config)))
    # An engine fixture, runner class or factory fixture (of engines or runners) of a
    # conftest; the name of an engine helper of another module of the tree
    # (``engine-helper:tests.utils.setup_engine|...``).
    fixtures: set[str] = set()
    helpers: set[str] = set()
    defines = False
    if Trigger.ENGINE in triggers:
        for n in conftest_engine_fixtures(path, config, memo, conftests):
            if n.startswith(ENGINE_HELPER):
                spelled, kind = n[len(ENGINE_HELPER):].split("|", 2)[:2]
                if kind not in ("x", "p"):
                    # a cleanup or launcher helper matters only where an engine is built
                    helpers.add(spelled.rpartition(".")[2])
            elif (word := n.removeprefix(RUNNER_CLASS).removeprefix(FACTORY_FIXTURE)
                    .removeprefix(FACTORY_SHARE).split("|", 1)[0]).isidentifier():
                fixtures.add(word)
        # A test module that another module imports a helper from leaves that helper out
        # of its own entries: its prefilter is not its directory's.
        defines = conftests is not None and \
            conftests.tree(path, config).defines(os.path.abspath(path))
    found = prefilter_for(config, triggers, frozenset(fixtures), frozenset(helpers))
    if kept is not None and not defines:
        kept[key] = found
    return found


def file_digest(path: str, source: bytes, config: Config,
                memo: conftest_index.Memo | None = None,
                conftests: ConftestIndex | None = None) -> str:
    """Cache key of a file's results: its bytes plus the conftest engine fixtures it may
    receive (a conftest change can change a test module's violations); ``memo`` and
    ``conftests`` (the run's index) as for
    :func:`~lint_gpu_tests.checking.conftest_index.conftest_engine_fixtures`."""
    return _digest(source, _joined(conftest_engine_fixtures(path, config, memo, conftests)))


def _joined(fixtures: frozenset[str]) -> str:
    """Conftest engine fixtures as one string: what :func:`file_digest` adds to the bytes,
    and :func:`~lint_gpu_tests.running.cache.stat_key` to the file's status. The entries of the
    tree's engine helpers (many, and long) count by their hash."""

    helpers = sorted(n for n in fixtures if n.startswith(ENGINE_HELPER))
    if not helpers:
        return ",".join(sorted(fixtures))
    rest = ",".join(sorted(n for n in fixtures if not n.startswith(ENGINE_HELPER)))
    return f"{rest}#{content_hash(chr(10).join(helpers).encode('utf-8', 'surrogateescape'))}"


def _runner_class_key(path: str, config: Config, memo: dict[str | None, str]) -> str:
    """With ``target = "vllm"``, what a file's fixes also depend on: whether the project's
    tests/conftest.py binds vLLM's runner class, which they import from it, and how
    (:func:`lint_gpu_tests.fixplan.classes.runner_class_state`), and whether a plain
    ``pytest`` run can import it (:func:`lint_gpu_tests.fixplan.classes.tests_package_importable`);
    looked up once per conftest (``memo``)."""
    from lint_gpu_tests.fixplan.classes import (
        RUNNER_CLASS_MODULES,
        runner_class_state,
        tests_package_importable,
    )

    where = project_module(path, config, RUNNER_CLASS_MODULES["vllm"])
    if where not in memo:
        runner = config.runner_classes[0] if config.runner_classes else "VllmRunner"
        memo[where] = f"|{RUNNER_CLASS_MODULES['vllm']}:" + (
            "-" if where is None else runner_class_state(where, runner) +
            ("" if tests_package_importable(where) else ":m"))
    return memo[where]


def _digest(source: bytes, fixtures: str) -> str:
    return content_hash(source + b"\0" + fixtures.encode("utf-8") if fixtures else source)


def _check_bytes(source: bytes, path: str, config: Config, prefilter: bool) -> list[Violation]:
    """Check one file's bytes; with ``prefilter``, a file no enabled rule can report on
    (:func:`may_hold_violation`) is not even parsed."""
    return _checked_bytes(source, path, config, prefilter, ConftestIndex()).violations


def _checked_bytes(source: bytes, path: str, config: Config, prefilter: bool,
                   conftests: ConftestIndex) -> CheckResult:
    """:func:`_check_bytes`, with the analysis the violations were found on
    (:func:`lint_gpu_tests.checking.checker.check_module`), the conftests known to ``conftests``."""
    if prefilter and not may_hold_violation(source, path, config, conftests=conftests):
        from lint_gpu_tests.checking.checker import CheckResult

        return CheckResult()
    return check_module(source, path, config, conftests)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class RewrittenUnit:
    """A fix unit across modules (:mod:`lint_gpu_tests.fixing.tree_units`) that a run
    rewrote: its files written together (``fix``) or diffed together (``diff``).

    Attributes:
        helper: the factory helper's name (``make_llm``).
        paths: the files the unit rewrote, the helper's module first, as the run names them
            (the helper's module, when the run does not check it, as seen from the working
            directory).
    """

    helper: str
    paths: tuple[str, ...]


@dataclass
class RunResult:
    """Outcome of a run (:func:`run_paths`, :func:`lint_gpu_tests.api.check_paths`).

    Attributes:
        files: one :class:`FileResult` per file checked, in path order.
        problems: trouble met while discovering files (see :class:`Problem`).
        diffs: path -> unified diff text, in ``diff`` mode, for files a fix would change.
        cache_hits: how many files the cache answered for.
        units: the fix units across modules the run rewrote, in the order it rewrote them
            (their files belong together: ``prove`` proves and writes them as one).
    """

    files: list[FileResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    cache_hits: int = 0
    units: list[RewrittenUnit] = field(default_factory=list)

    @property
    def edits(self) -> dict[Violation, tuple[Edit, ...]]:
        """With ``edits=True``, the edits of each fixable violation's fix, from every
        file's :attr:`FileResult.edits` (see :func:`~lint_gpu_tests.fixing.edits.fix_edits`)."""
        return {v: e for result in self.files for v, e in result.edits.items()}

    @property
    def violations(self) -> list[Violation]:
        """Violations left in every file, sorted by path and position."""
        return [v for result in self.files for v in result.violations]

    @property
    def fixed(self) -> list[Violation]:
        """Violations that fixes removed (or would remove, in ``diff`` mode)."""
        return [v for result in self.files for v in result.fixed]

    @property
    def errors(self) -> list[tuple[str, str]]:
        """``(path, message)`` for each file whose check or fix failed."""
        return [(r.path, r.error) for r in self.files if r.error is not None]

    @property
    def failed(self) -> list[FileResult]:
        """The files whose read, check or fix failed (their ``error`` is set), in path order."""
        return [r for r in self.files if r.error is not None]

    @property
    def has_fatal_problem(self) -> bool:
        """True when an internal error or an unreadable directory makes the run exit 2."""
        return bool(self.errors) or any(p.fatal for p in self.problems)


class _Outcome(NamedTuple):
    result: FileResult
    digest: str | None = None
    cacheable: list[Violation] | None = None
    diff: str | None = None
    record: tree_units.CallerRecord | None = None  # a run that only reports: for its units


# --------------------------------------------------------------------------- one file


def _error_text(path: str, exc: BaseException, verbose: bool) -> str:
    from lint_gpu_tests.parsing.source import InternalError

    text = str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    if verbose:
        import traceback

        text += "\n" + "".join(traceback.format_exception(exc)).rstrip()
    return text


def check_one(path: str, source: bytes | None, config: Config, options: RunOptions
              ) -> FileResult:
    """Check (with ``options.fix``, fix in place; with ``options.diff``, fix without
    writing) one file, without the cache: the file at ``path`` when ``source`` is ``None``,
    else the bytes ``source`` as if they were that file.

    Returns:
        Its :class:`FileResult`; a read failure or an internal error is in ``error``. Raises
        nothing but ``KeyboardInterrupt`` and ``SystemExit``.
    """
    return _process(path, source, config, options, ConftestIndex()).result


def _process(path: str, source: bytes | None, config: Config, mode: RunOptions,
             conftests: ConftestIndex, digest: str | None = None,
             admitted: bool = False) -> _Outcome:
    """Check (and maybe fix) one file; raises nothing but ``KeyboardInterrupt`` and
    ``SystemExit`` (a ``BaseException`` such as LibCST's ``PanicException`` is this file's
    error). ``source``: its bytes when already read, with their cache key ``digest`` (else
    computed here when ``mode`` caches) and ``admitted`` when the prefilter has passed them;
    ``conftests``: the run's conftest index."""
    if source is None:
        digest, admitted = None, False
        try:
            source = Path(path).read_bytes()
        except OSError as exc:
            return _Outcome(FileResult(path, error=f"cannot read file: {exc.strerror or exc}",
                                       error_stage="read"))
    if digest is None and mode.cache:
        digest = file_digest(path, source, config, conftests=conftests)
    try:
        checked = _checked_bytes(source, path, config, mode.prefilter and not admitted,
                                 conftests)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - reported for this file, the run goes on
        return _Outcome(FileResult(path, error=_error_text(path, exc, mode.verbose),
                                   error_has_traceback=True), digest)
    violations = checked.violations
    if not mode.runs_fix_loop(violations):
        record = None
        if not (mode.fix or mode.diff or mode.edits) and checked.module is not None and \
                withholds_for_imported_factory(violations):
            found = _caller_record(checked.module, source, path, mode.verbose)
            if isinstance(found, str):
                return _Outcome(FileResult(path, violations, error=found,
                                           error_has_traceback=True), digest)
            record = found
        return _Outcome(FileResult(path, violations), digest, violations, record=record)
    if not (mode.fix or mode.diff):  # only the edits, from the same check's analysis
        edits = _edits(source, path, config, mode.unsafe_fixes, violations, checked.module,
                       conftests)
        return _Outcome(FileResult(path, violations, edits=edits), digest, violations)
    return _fix(path, source, digest, checked, config, mode, conftests)


def _caller_record(module: ModuleAnalysis, source: bytes, path: str, verbose: bool
                   ) -> tree_units.CallerRecord | str | None:
    """:func:`lint_gpu_tests.fixing.tree_units.caller_record` of the module at ``path``, or
    the text of the internal error it raised."""
    from lint_gpu_tests.fixing.tree_units import caller_record

    try:
        return caller_record(module, source)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - reported for this file, the run goes on
        return _error_text(path, exc, verbose)


def _fix(path: str, source: bytes, digest: str | None, checked: CheckResult,
         config: Config, mode: RunOptions, conftests: ConftestIndex) -> _Outcome:
    violations = checked.violations
    try:
        outcome: FixOutcome = fix_source(source, path, config, unsafe=mode.unsafe_fixes,
                                         violations=violations, analysis=checked.module,
                                         conftests=conftests)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - e.g. LibCST's PanicException; run goes on
        return _Outcome(FileResult(path, violations, error=_error_text(path, exc, mode.verbose),
                                   error_stage="fix", error_has_traceback=True),
                        digest, violations)
    error = outcome.error
    if error is not None and outcome.exception is not None and mode.verbose:
        import traceback

        error += "\n" + "".join(traceback.format_exception(outcome.exception)).rstrip()
    result = FileResult(path, outcome.remaining, outcome.fixed, outcome.new_source, error,
                        error_stage="fix", error_has_traceback=outcome.exception is not None)
    if outcome.new_source is None:
        return _Outcome(result, digest, outcome.remaining if outcome.error is None else None)
    result.also_fixed = _unselected_fixed(source, outcome.new_source, path, config, conftests)
    if mode.diff:
        from lint_gpu_tests.fixing.edits import unified_diff

        return _Outcome(result, digest, violations,
                        diff=unified_diff(path, source, outcome.new_source))
    from lint_gpu_tests.parsing.writer import atomic_write  # tempfile & co: only runs that write

    try:
        atomic_write(path, outcome.new_source)
    except OSError as exc:
        result = FileResult(path, violations, [], None, f"cannot write fixed file: {exc}")
        return _Outcome(result, digest, violations)
    new_digest = file_digest(path, outcome.new_source, config, conftests=conftests) \
        if mode.cache else None
    return _Outcome(result, new_digest, outcome.remaining if outcome.error is None else None)


def edits_of(result: FileResult, config: Config, unsafe: bool,
             source: bytes | None = None, conftests: ConftestIndex | None = None
             ) -> dict[Violation, tuple[Edit, ...]]:
    """The edits of ``result``'s fixable violations: what ``--fix`` would write, as edits
    (empty when the file failed, has nothing to fix, or its fix fails; nothing is written).

    Args:
        result: a file's result, checked without ``fix``.
        config: the settings it was checked with.
        unsafe: count unsafe fixes too.
        source: the checked bytes when they are not the file on disk (``--stdin-filename``);
            ``None`` reads ``result.path``.
        conftests: the run's conftest index (``None``: one for this call alone).
    """
    if result.error is not None or not wanted_fixes(result.violations, unsafe):
        return {}
    try:
        if source is None:
            source = Path(result.path).read_bytes()
    except OSError:
        return {}
    return _edits(source, result.path, config, unsafe, result.violations, None, conftests)


def _edits(source: bytes, path: str, config: Config, unsafe: bool,
           violations: list[Violation], analysis: ModuleAnalysis | None,
           conftests: ConftestIndex | None) -> dict[Violation, tuple[Edit, ...]]:
    """:func:`edits_of` on bytes already checked: ``violations`` and, when at hand, the
    ``analysis`` they were found on (the fix loop's first pass applies their plans)."""
    try:
        outcome = fix_source(source, path, config, unsafe=unsafe, violations=violations,
                             analysis=analysis, conftests=conftests)
        if outcome.new_source is None or outcome.error is not None or not outcome.fixed:
            return {}
        # Edits belong to fixes that were applied; a violation that only disappeared with
        # them (no fix of its own) carries none.
        owners = [v for v in outcome.fixed if v.fix is not None] or outcome.fixed
        from lint_gpu_tests.fixing.edits import assign_edits, pass_edits

        return assign_edits(owners, *pass_edits(outcome.passes))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - no edits then; --fix reports the failure
        return {}


# --------------------------------------------------------------------------- workers


class _Item(NamedTuple):
    """One file for a worker: its bytes as the parent read them, their cache key (``None``
    without the cache) and whether the prefilter admitted them (else it asks again)."""

    path: str
    config: Config
    source: bytes
    digest: str | None
    admitted: bool


_WORKER_CONFTESTS: ConftestIndex | None = None
"""In a worker process of a run's pool, the run's conftest index (:func:`_start_worker`);
``None`` elsewhere."""


def _start_worker(conftests: ConftestIndex | None) -> None:
    """Start a worker process: take the parent run's conftest index (handed over only to
    a worker started by ``fork``, which inherits it whole, the analyses of the conftests
    included), else make one for the worker's run."""
    global _WORKER_CONFTESTS
    _WORKER_CONFTESTS = conftests if conftests is not None else ConftestIndex()


def _work(item: _Item, options: RunOptions) -> _Outcome:
    conftests = _WORKER_CONFTESTS if _WORKER_CONFTESTS is not None else ConftestIndex()
    return _process(item.path, item.source, item.config, options, conftests, item.digest,
                    item.admitted)


def _outside_rules_registered() -> bool:
    """True when rules from outside the package are registered in this process
    (:func:`lint_gpu_tests.rules.register`; the registry is not imported to ask)."""
    rules = sys.modules.get("lint_gpu_tests.rules")
    return rules is not None and bool(rules.outside_rules())


def _can_fork() -> bool:
    """True where worker processes can start by ``fork`` (and so inherit this process's
    registered rules)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


class _Pool:
    """Worker processes fed one file at a time while the parent still reads the rest
    (started only once a run has more files to analyse than its threshold). Workers that
    start by ``fork`` inherit the conftest index the parent built before the first file."""

    def __init__(self, options: RunOptions, jobs: int, conftests: ConftestIndex) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor  # only for parallel runs

        import lint_gpu_tests.rules  # noqa: F401 - once here, not in every worker

        self._options = options
        # Rules registered from outside the package live only in this process: workers
        # inherit them by fork (whatever the default start method: Python 3.14's is
        # forkserver, macOS's spawn); where there is no fork the run stays in one process
        # (RunContext).
        context = multiprocessing.get_context("fork") if _outside_rules_registered() else None
        forks = (context or multiprocessing.get_context()).get_start_method() == "fork"
        # The index goes to a forked worker by inheritance; to another, it would be pickled.
        self._executor = ProcessPoolExecutor(max_workers=jobs, mp_context=context,
                                             initializer=_start_worker,
                                             initargs=(conftests if forks else None,))
        self._futures: list[Future[_Outcome]] = []

    def submit(self, item: _Item) -> None:
        self._futures.append(self._executor.submit(_work, item, self._options))

    def outcomes(self) -> Iterator[_Outcome]:
        """Each submitted file's outcome, as they finish; the workers stop after the last."""
        from concurrent.futures import as_completed

        try:
            for future in as_completed(self._futures):
                yield future.result()
        finally:
            self._executor.shutdown(cancel_futures=True)


class _Caches:
    """One :class:`ResultCache` per config in play (its directory at that config's root,
    unless ``--cache-dir`` or the environment names one; keyed by its fingerprint), and the
    conftest index entries they keep, exchanged with the run's ``conftests``."""

    def __init__(self, cache_dir: str | None, conftests: ConftestIndex) -> None:
        self.cache_dir = cache_dir
        self.conftests = conftests
        self._stores: dict[tuple[str, str], ResultCache] = {}
        self._by_config: dict[int, tuple[Config, ResultCache]] = {}

    def __call__(self, config: Config) -> ResultCache:
        known = self._by_config.get(id(config))
        if known is not None and known[0] is config:
            return known[1]
        directory = default_cache_dir(config.root, self.cache_dir)
        key = (str(directory), config.fingerprint())
        store = self._stores.get(key)
        if store is None:
            store = self._stores[key] = ResultCache(directory, key[1])
        self.conftests.remember(config, store.conftests)
        self._by_config[id(config)] = (config, store)
        return store

    def save(self) -> None:
        """Write every store, with the conftest index entries its configs' runs found."""
        found: dict[Config, dict[str, list[str]]] = {}
        for config, store in self._by_config.values():
            if config not in found:  # equal configs (other roots) share what was learned
                found[config] = self.conftests.learned(config)
            store.store_conftests(found[config])
        for store in self._stores.values():
            store.save()


# --------------------------------------------------------------------------- the run


MAX_UNIT_ROUNDS = 10
"""Most rounds of fix units across modules in one run (units sharing a module are applied in
rounds, each planned on the bytes the round before left)."""


class RunContext:
    """The state of one run over discovered files, made for it and dropped after it: the
    settings of each file, the result caches, the conftest index and memo, the prefilters,
    the files settled and still to check, and the worker pool once there is one.

    The conftest index (:class:`~lint_gpu_tests.checking.conftest_index.ConftestIndex`) is built
    for every directory before the first file is checked; the checks read it, and workers
    forked for the run inherit it.
    """

    def __init__(self, found: Discovery, resolver: ConfigResolver, options: RunOptions,
                 progress: Progress | None = None) -> None:
        self.found = found
        self.options = options
        self.progress = progress
        self.resolver = resolver
        self.configs = {path: resolver.for_file(path) for path in found.files}
        self.conftests = ConftestIndex()
        self.caches = _Caches(options.cache_dir, self.conftests) if options.cache else None
        self.result = RunResult(problems=found.problems)
        self.memo: conftest_index.Memo = {}
        self.filters: dict[tuple[str, int], Prefilter] = {}
        self.stat_keys: dict[str, tuple[str, str]] = {}  # path -> (digest read, stat key)
        self.done: dict[str, _Outcome] = {}
        self.todo: list[_Item] = []
        self.workers = options.jobs if options.jobs is not None else default_jobs()
        if _outside_rules_registered() and not _can_fork():
            self.workers = 1  # workers could not see the rules registered here (_Pool)
        self.pool: _Pool | None = None

    def run(self) -> RunResult:
        """Check every file found, in this process or in workers; save the caches.

        Returns:
            The run's :class:`RunResult`, files in path order.
        """
        files = self.found.files
        # The conftest index first, for every directory: workers forked later inherit it;
        # a store loads the conftest index its cache holds, so the stores come before it.
        stores = {path: self.caches(self.configs[path]) for path in files} \
            if self.caches is not None else {}
        joined: dict[frozenset[str], str] = {}
        fixtures: dict[str, str] = {}  # path -> its conftest engine fixtures, joined
        runner_classes: dict[str | None, str] = {}
        for path in files:
            names = conftest_engine_fixtures(path, self.configs[path], self.memo,
                                             self.conftests)
            text = joined.get(names)
            fixtures[path] = text if text is not None else joined.setdefault(names,
                                                                             _joined(names))
            if self.configs[path].target == "vllm":
                fixtures[path] += _runner_class_key(path, self.configs[path], runner_classes)
        for path in files:
            self._admit(path, stores.get(path), fixtures[path])
        self._collect()
        if self.caches is not None:
            self.caches.save()
        run = self.result
        run.files = [self.done[path].result for path in files]
        run.diffs = {path: text for path in files if (text := self.done[path].diff)}
        self._tree_units(run)
        return run

    def _tree_units(self, run: RunResult) -> None:
        """The fix units across modules (:mod:`lint_gpu_tests.fixing.tree_units`) of the files
        whose violations withhold a fix for another module's factory helper: their
        violations relabelled, and with ``fix`` or ``diff`` each unit that applies rewritten
        whole (written together, or diffed); with ``edits`` alone, rewritten in memory from
        the bytes each file's own fixes leave, its fix's edits on every violation it removes
        (:mod:`lint_gpu_tests.fixing.unit_edits`). Units that share a module are applied one
        round after another, each planned on the bytes the one before left."""
        seeds = [r.path for r in run.files
                 if r.error is None and withholds_for_imported_factory(r.violations)]
        if not seeds:
            return
        by_path = {r.path: i for i, r in enumerate(run.files)}
        memo = self._units_memo(seeds)
        if memo is not None:
            known = memo[0].unit_outcome(memo[1])
            if known is not None:
                for path, violations in known.items():
                    if path in by_path:
                        run.files[by_path[path]] = replace(run.files[by_path[path]],
                                                           violations=violations)
                return
        settled = self._plan_units(run, by_path)
        if memo is not None:
            store, key = memo
            store.store_unit_outcome(key, {p: run.files[by_path[p]].violations
                                           for p in sorted(settled)})
            store.save()

    def _units_memo(self, seeds: list[str]) -> tuple[ResultCache, str] | None:
        """Where a report-only run keeps what its fix units leave (the store of the first
        seed's settings) and the key: the status of every file of the seeds' trees
        (:func:`~lint_gpu_tests.checking.helper_index.tree_status`), the settings in play
        and the seeds. None when the run fixes, diffs or shows edits (those need the plans),
        runs uncached, or a file of a tree is too young for its status to be trusted."""
        options = self.options
        if self.caches is None or options.fix or options.diff or options.edits:
            return None
        from lint_gpu_tests.checking.helper_index import tree_root, tree_status

        parts = []
        for root in sorted({tree_root(os.path.dirname(os.path.abspath(s))) for s in seeds}):
            status = tree_status(root)
            if status is None:
                return None
            parts.append(f"{root}\0{status}")
        stores = {id(c): self.caches(c) for c in self.configs.values()}
        parts += sorted({store.file.name for store in stores.values()})
        parts += seeds
        return self.caches(self.configs[seeds[0]]), content_hash("\n".join(parts).encode())

    def _plan_units(self, run: RunResult, by_path: dict[str, int]) -> set[str]:
        """Plan the units (and apply them, as :meth:`_tree_units` says) round by round;
        returns the checked modules whose violations a unit relabelled."""
        from lint_gpu_tests.fixing import tree_units
        from lint_gpu_tests.fixing.unit_edits import UnitEdits

        options = self.options
        checked = {os.path.abspath(path): path for path in self.found.files}
        settled: set[str] = set()
        diffed: dict[str, bytes] = {}  # absolute path -> bytes a unit left, with ``diff``
        staged = UnitEdits() if options.edits and not (options.fix or options.diff) else None

        def read(absolute: str) -> bytes | None:
            if staged is not None:
                return self._staged(staged, absolute, checked, run, by_path)
            if absolute in diffed:
                return diffed[absolute]
            path = checked.get(absolute)
            if path is not None and options.diff:
                new = run.files[by_path[path]].new_source
                if new is not None:
                    return new
            try:
                return Path(absolute).read_bytes()
            except OSError:
                return None

        def config_of(absolute: str) -> Config:
            # A module the run does not check (a helper module) gets its own settings: its
            # nearest config file's, which decide its fix (``target``), not a caller's.
            path = checked.get(absolute)
            if path is not None:
                return self.configs[path]
            try:
                return self.resolver.for_file(absolute)
            except ConfigError:
                return first

        done: set[tuple[str, str]] = set()
        # What the checking processes recorded of each caller (a run that only reports: its
        # files keep the bytes they were checked on).
        recorded = {os.path.abspath(path): (outcome.record, outcome.result.violations)
                    for path, outcome in self.done.items() if outcome.record is not None} \
            if not (options.fix or options.diff or options.edits) else None
        for _ in range(MAX_UNIT_ROUNDS):
            seeds = [r.path for r in run.files
                     if r.error is None and withholds_for_imported_factory(r.violations)]
            if not seeds:
                break
            first = self.configs[seeds[0]]
            touched: set[str] = set()
            applied = False
            for unit in tree_units.plan_tree_units(seeds, checked, read, config_of,
                                                   self.conftests, recorded):
                key = (unit.helper.module, unit.helper.name)
                if touched & set(unit.members):
                    continue  # planned again on the new bytes, next round
                apply = key not in done and (options.fix or options.diff or
                                             staged is not None) and \
                    unit.applies(options.unsafe_fixes)
                if apply:  # one that only relabels leaves the bytes to the others
                    touched |= set(unit.members)
                done.add(key)
                applied |= apply
                if staged is not None:
                    self._stage_unit(run, unit, by_path, staged, apply)
                else:
                    self._settle_unit(run, unit, by_path, diffed, apply)
                settled |= {p for p, m in unit.members.items() if m.checked and p in by_path}
            if not applied:
                break
        if staged is not None:
            for absolute, edits in staged.edits().items():
                index = by_path.get(checked.get(absolute, ""))
                if index is not None:
                    old = run.files[index]
                    run.files[index] = replace(old, edits={**old.edits, **edits})
        return settled

    def _staged(self, staged: unit_edits.UnitEdits, absolute: str, checked: dict[str, str],
                run: RunResult, by_path: dict[str, int]) -> bytes | None:
        """The bytes of the file at ``absolute`` as ``--fix`` would have left them by now
        (its own fixes applied, when the run shows edits for them, then the units so far),
        its versions kept in ``staged``; ``None``: it cannot be read."""
        from lint_gpu_tests.fixing.unit_edits import Staged

        known = staged.files.get(absolute)
        if known is not None:
            return known.current
        try:
            source = Path(absolute).read_bytes()
        except OSError:
            return None
        path = checked.get(absolute)
        known = Staged(path if path is not None else os.path.relpath(absolute), source)
        if path is not None and run.files[by_path[path]].edits:  # its own fixes first
            outcome = fix_source(source, path, self.configs[path],
                                 unsafe=self.options.unsafe_fixes, conftests=self.conftests)
            if outcome.error is None and outcome.new_source is not None:
                known.passes = outcome.passes
                known.owners = [v for v in outcome.fixed if v.fix is not None] or \
                    outcome.fixed
        staged.files[absolute] = known
        return known.current

    def _stage_unit(self, run: RunResult, unit: tree_units.TreeUnit, by_path: dict[str, int],
                    staged: unit_edits.UnitEdits, apply: bool) -> None:
        """Relabel the violations (as read) of ``unit``'s modules and, with ``apply``,
        rewrite them in memory and record the rewrite in ``staged``, with every violation
        it removes (a failure leaves the unit without edits, as a file's failed fix
        does)."""
        from lint_gpu_tests.fixing import tree_units
        from lint_gpu_tests.fixing.unit_edits import carry_fixes

        news = tree_units.unit_sources(unit) if apply else {}
        number = staged.add({os.path.abspath(path): new for path, new in news.items()}) \
            if isinstance(news, dict) and news else None
        for path, member in unit.members.items():
            index = by_path.get(path)
            if index is None or not member.checked:
                continue
            old = run.files[index]
            labelled = unit.relabel(path, member.violations)
            removed = {id(new) for v, new in zip(member.violations, labelled, strict=True)
                       if number is not None and unit.covered(path, v)}
            violations: list[Violation] = []
            for v, new in carry_fixes(old.violations, member.violations, labelled):
                if new is None:
                    violations.append(v)
                    continue
                violations.append(replace(v, fix=new.fix))
                if number is not None and id(new) in removed:
                    staged.cover(number, os.path.abspath(path), violations[-1])
            run.files[index] = replace(old, violations=violations)

    def _settle_unit(self, run: RunResult, unit: tree_units.TreeUnit, by_path: dict[str, int],
                     diffed: dict[str, bytes], apply: bool) -> None:
        """Relabel the violations of ``unit``'s modules and, with ``apply``, rewrite them all
        (written together with ``fix``; diffed with ``diff``, the new bytes in ``diffed``);
        a failure is each checked module's error, and no module of the unit changes."""
        from lint_gpu_tests.fixing import tree_units
        from lint_gpu_tests.fixing.edits import unified_diff
        from lint_gpu_tests.fixing.unit_edits import carry_fixes

        options = self.options
        news: dict[str, bytes] | str = tree_units.unit_sources(unit) if apply else {}
        # Before anything is written: the tree's helper index reads the helper's module.
        also = {path: _unselected_fixed(member.source, news[path], path, member.config,
                                        self.conftests)
                for path, member in unit.members.items()
                if member.checked and isinstance(news, dict) and path in news}
        if isinstance(news, dict) and news and options.fix:
            from lint_gpu_tests.parsing.writer import atomic_write_all

            try:
                atomic_write_all(news)
            except OSError as exc:
                news = f"cannot write the fixed files of `{unit.helper.name}()`: {exc}"
        if isinstance(news, dict) and news:
            run.units.append(RewrittenUnit(unit.helper.name, tuple(news)))
        for path, member in unit.members.items():
            index = by_path.get(path)
            if isinstance(news, dict) and path in news and options.diff:
                diffed[os.path.abspath(path)] = news[path]
                try:
                    original = Path(path).read_bytes()
                except OSError:
                    original = member.source
                run.diffs[path] = unified_diff(path, original, news[path])
            if index is None or not member.checked:
                continue
            old = run.files[index]
            labelled = unit.relabel(path, member.violations)
            if isinstance(news, str):
                run.files[index] = replace(old, violations=labelled, error=news,
                                           error_stage="fix")
            elif path not in news:
                # Only what this unit relabels: a module of two units keeps the other's.
                run.files[index] = replace(old, violations=[
                    v if new is None else replace(v, fix=new.fix)
                    for v, new in carry_fixes(old.violations, member.violations, labelled)])
            else:
                fixed = [new for v, new in zip(member.violations, labelled, strict=True)
                         if unit.covered(path, v)]
                left = check_module(news[path], path, member.config, self.conftests).violations
                run.files[index] = replace(old, violations=left, fixed=[*old.fixed, *fixed],
                                           new_source=news[path],
                                           also_fixed=[*old.also_fixed, *also[path]])

    def _serves(self, cached: list[Violation]) -> bool:
        """Whether cached results answer this run: no fix asked of them, nor the edits of
        one (the cache keeps violations without the plans their fixes need)."""
        return not self.options.runs_fix_loop(cached)

    def _settle(self, path: str, violations: list[Violation], *, hit: bool,
                error: str | None = None) -> None:
        self.done[path] = _Outcome(FileResult(path, violations, error=error,
                                              error_stage="read"))
        self.result.cache_hits += hit
        if self.progress is not None:
            self.progress.advance(1)

    def _admit(self, path: str, store: ResultCache | None, fixtures: str) -> None:
        """Settle ``path`` from the cache or the prefilter, or queue it for a check."""
        key = None
        if store is not None:
            key = stat_key(path, fixtures)
            cached = store.lookup_unchanged(path, key) if key is not None else None
            if cached is not None and self._serves(cached):
                self._settle(path, cached, hit=True)
                return
        try:
            source = Path(path).read_bytes()
        except OSError as exc:
            self._settle(path, [], hit=False, error=f"cannot read file: {exc.strerror or exc}")
            return
        digest = None
        if store is not None:
            digest = _digest(source, fixtures)
            cached = store.lookup(path, digest)
            if cached is not None and self._serves(cached):
                store.store(path, digest, cached, key)  # found by its status next time
                self._settle(path, cached, hit=True)
                return
            if key is not None:
                self.stat_keys[path] = (digest, key)
        prefilter = self.options.prefilter
        skipped = self._skipped(source, path) if prefilter else False
        if skipped:
            # Decided here: only files to analyse count towards the parallel threshold.
            if store is not None and digest is not None:
                store.store(path, digest, [], key)
            self._settle(path, [], hit=False)
            return
        item = _Item(path, self.configs[path], source, digest, skipped is False and prefilter)
        if self.pool is not None:
            self.pool.submit(item)
            return
        self.todo.append(item)
        if self.workers > 1 and len(self.todo) > self.options.parallel_threshold:
            self.pool = _Pool(self.options, self.workers, self.conftests)
            # Largest first, so no worker is left with a big file at the end while the
            # other idles; results are kept by path, not by order.
            for waiting in sorted(self.todo, key=lambda i: -len(i.source)):
                self.pool.submit(waiting)
            self.todo.clear()

    def _skipped(self, source: bytes, path: str) -> bool | None:
        """True when the prefilter keeps ``source`` back, False when it admits it; ``None``
        when asking fails (the file's check then asks again, and reports the failure)."""
        try:
            return not _prefilter(path, self.configs[path], self.memo, self.conftests,
                                  self.filters).admits(source)
        except Exception:  # noqa: BLE001 - e.g. a per-file-ignores pattern; checked normally
            return None

    def _collect(self) -> None:
        """Check the queued files (or take the workers' outcomes) and store them."""
        options = self.options
        outcomes: Iterator[_Outcome] = self.pool.outcomes() if self.pool is not None else (
            _process(i.path, i.source, i.config, options, self.conftests, i.digest, i.admitted)
            for i in self.todo)
        for outcome in outcomes:
            path = outcome.result.path
            self.done[path] = outcome
            if self.caches is not None and outcome.digest is not None and \
                    outcome.cacheable is not None:
                read = self.stat_keys.get(path)
                # The status key only when the worker's bytes are the ones read here, unfixed.
                key = read[1] if read is not None and read[0] == outcome.digest else None
                self.caches(self.configs[path]).store(path, outcome.digest, outcome.cacheable,
                                                      key)
            if self.progress is not None:
                self.progress.advance(1)


def run_paths(paths: Sequence[str], resolver: ConfigResolver, options: RunOptions,
              progress: Progress | None = None) -> RunResult:
    """Discover the files under ``paths`` and check them in a new :class:`RunContext`
    (see :func:`lint_gpu_tests.api.check_paths`, which documents the arguments).

    Raises:
        PathNotFoundError: when a named path does not exist.
        ConfigError: when a config file that governs a file is invalid.
    """
    if options.fix or options.diff or options.edits:
        resolver.want_fix_settings()
    found = discover_files(paths, resolver, respect_gitignore=options.respect_gitignore,
                           force_exclude=options.force_exclude)
    if progress is not None:
        progress.start(len(found.files))
    return RunContext(found, resolver, options, progress).run()


@dataclass(frozen=True)
class BufferUnit:
    """A fix unit across modules (:mod:`lint_gpu_tests.fixing.tree_units`) that removes
    violations of a buffer (an editor's document): what applying it writes.

    Attributes:
        violations: the buffer's violations the unit removes, each with the unit's fix (as
            ``check`` of the tree reports them).
        sources: the new bytes of every file of the unit, by absolute path, the helper's
            module first (the buffer's own among them).
    """

    violations: tuple[Violation, ...]
    sources: dict[str, bytes]


def buffer_units(source: bytes, path: str, resolver: ConfigResolver,
                 buffers: Mapping[str, bytes] | None = None) -> list[BufferUnit]:
    """The fix units across modules of the buffer ``source`` checked as the file at
    ``path``, planned as ``check`` of its tree plans them (every file of the tree that
    ``check`` of the tree's root would check counts as checked), each on the files' current
    texts: ``buffers`` (absolute path -> bytes: other documents open in the editor) where
    given, else the files on disk. Only units with a fix (safe or unsafe) whose rewrite
    succeeds; nothing is written.

    Args:
        source: the buffer's bytes.
        path: the file it is checked as.
        resolver: the settings of each file.
        buffers: texts of other files that are not those on disk.

    Returns:
        One :class:`BufferUnit` per unit that removes a violation of the buffer, in the
        order of the helper's module and name.

    Raises:
        ConfigError: when a config file that governs a file of the tree is invalid.
    """
    config = resolver.for_file(path)
    conftests = ConftestIndex()
    if not withholds_for_imported_factory(check_source(source, path, config, conftests)):
        return []
    from lint_gpu_tests.checking.helper_index import tree_root
    from lint_gpu_tests.fixing import tree_units
    from lint_gpu_tests.fixplan.factories import FactoryPlan

    own = os.path.abspath(path)
    found = discover_files([tree_root(os.path.dirname(own))], resolver)
    checked = {os.path.abspath(p): p for p in found.files}
    checked[own] = path
    texts = {**(buffers or {}), own: source}

    def read(absolute: str) -> bytes | None:
        if absolute in texts:
            return texts[absolute]
        try:
            return Path(absolute).read_bytes()
        except OSError:
            return None

    out: list[BufferUnit] = []
    for unit in tree_units.plan_tree_units([path], checked, read,
                                           lambda a: resolver.for_file(checked.get(a, a)),
                                           conftests):
        member = unit.members.get(path)
        if member is None or not isinstance(unit.fix, FactoryPlan):
            continue
        removed = tuple(new for v, new in zip(member.violations,
                                              unit.relabel(path, member.violations),
                                              strict=True) if unit.covered(path, v))
        news = tree_units.unit_sources(unit) if removed else None
        if isinstance(news, dict):
            out.append(BufferUnit(removed, {os.path.abspath(p): b for p, b in news.items()}))
    return out


def run_source(source: bytes, path: str, resolver: ConfigResolver, options: RunOptions
               ) -> RunResult:
    """A run of one file that is not on disk (``--stdin-filename``): ``source`` checked as
    the file at ``path``, with its settings; ``fix`` fixes it without writing anything
    (the fixed bytes are its ``new_source``), ``diff`` diffs it, ``edits`` as for files.
    Without the cache and the pool.

    Returns:
        A :class:`RunResult` of that one file, or of none when ``options.force_exclude``
        and the excludes leave it out.

    Raises:
        ConfigError: when the config file that governs ``path`` is invalid.
    """
    if options.fix or options.diff or options.edits:
        resolver.want_fix_settings()
    config = resolver.for_file(path)
    if options.force_exclude and is_excluded(path, config):
        return RunResult()
    mode = replace(options, fix=False, diff=options.fix or options.diff, cache=False)
    outcome = _process(path, source, config, mode, ConftestIndex())
    diffs = {path: outcome.diff} if options.diff and outcome.diff else {}
    return RunResult(files=[outcome.result], diffs=diffs)
