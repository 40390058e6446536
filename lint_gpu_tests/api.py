"""The library surface: check (and fix) files and trees.

The CLI is a thin layer over :func:`check_paths`; the flake8 plugin calls the engine
directly. Everything a user can do from the command line can be done from here::

    from lint_gpu_tests.api import ConfigResolver, check_paths
    result = check_paths(["tests"], ConfigResolver())  # nearest config file per file
    for violation in result.violations:
        print(violation.path, violation.location.row, violation.code)

How a run goes: :func:`~lint_gpu_tests.discovery.discover_files` lists the files; each file
gets the settings of its nearest config file (:class:`~lint_gpu_tests.config.ConfigResolver`);
each file's bytes are read and hashed; the cache of that config (:mod:`lint_gpu_tests.cache`)
answers for files it has seen with the same bytes and settings; the rest are checked, in
worker processes when there are many of them. Before parsing, a byte-level prefilter
(:func:`may_hold_violation`, :mod:`lint_gpu_tests.prefilter`) keeps back the files that name
nothing an enabled rule starts from: those are neither parsed nor analysed (so ``GPU900`` is
reported for analysed files only). Fixing imports LibCST, and only for files that have
something to fix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from lint_gpu_tests import conftest_index
from lint_gpu_tests.cache import ResultCache, content_hash, default_cache_dir, stat_key
from lint_gpu_tests.codes import PARSE_ERROR_CODE
from lint_gpu_tests.config import Config, ConfigError, ConfigResolver, resolve_config
from lint_gpu_tests.conftest_index import conftest_engine_fixtures
from lint_gpu_tests.discovery import Discovery, PathNotFoundError, Problem, discover_files
from lint_gpu_tests.ftypes import FileResult, Location, Violation, wanted_fixes
from lint_gpu_tests.output import Edit
from lint_gpu_tests.source import InternalError, decode_source

if TYPE_CHECKING:
    from concurrent.futures import Future

    from lint_gpu_tests.analysis import ModuleAnalysis
    from lint_gpu_tests.engine import CheckResult
    from lint_gpu_tests.fixloop import FixOutcome
    from lint_gpu_tests.prefilter import Prefilter

__all__ = [
    "Config",
    "ConfigError",
    "ConfigResolver",
    "FileResult",
    "InternalError",
    "PathNotFoundError",
    "Problem",
    "RunResult",
    "Violation",
    "add_noqa_to_files",
    "check_file",
    "check_module",
    "check_paths",
    "check_source",
    "check_stdin",
    "discover_files",
    "fix_edits",
    "stdin_edits",
    "fix_source",
    "may_hold_violation",
    "resolve_config",
]

def check_source(source: bytes, path: str, config: Config) -> list[Violation]:
    """:func:`lint_gpu_tests.engine.check_source` (the checker is imported on first use: a
    run that the cache answers whole never loads it)."""
    return check_module(source, path, config).violations


def check_module(source: bytes, path: str, config: Config) -> CheckResult:
    """:func:`lint_gpu_tests.engine.check_module`: the violations and the analysis their
    fixes' plans refer to (imported on first use, as :func:`check_source`)."""
    from lint_gpu_tests.engine import check_module as check

    return check(source, path, config)


def fix_source(source: bytes, path: str, config: Config, *, unsafe: bool = False,
               violations: list[Violation] | None = None,
               analysis: ModuleAnalysis | None = None) -> FixOutcome:
    """:func:`lint_gpu_tests.fixloop.fix_source` (imported on first use, as
    :func:`check_source`)."""
    from lint_gpu_tests.fixloop import fix_source as fix

    return fix(source, path, config, unsafe=unsafe, violations=violations, analysis=analysis)


PARALLEL_THRESHOLD = 64
"""Below this many files to analyse, a run stays in one process (a pool costs more)."""


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------- prefilter


def may_hold_violation(source: bytes, path: str, config: Config,
                       memo: conftest_index.Memo | None = None) -> bool:
    """Return False only when no rule ``config`` enables for ``path`` can report on
    ``source`` (the file's raw bytes): it names nothing those rules start from (see
    :mod:`lint_gpu_tests.prefilter`; engine fixtures from the conftests of ``path`` count).
    Such a file is not parsed at all, so a syntax error in it is not reported (``GPU900``
    is for files that are analysed). ``memo`` as for :func:`file_digest`."""
    return _prefilter(path, config, memo).admits(source)


def _prefilter(path: str, config: Config, memo: conftest_index.Memo | None,
               filters: dict[tuple[str, int], Prefilter] | None = None) -> Prefilter:
    """The :class:`~lint_gpu_tests.prefilter.Prefilter` of ``path`` under ``config``;
    ``filters`` keeps them for one run, per directory and config (``per-file-ignores``
    aside, every file of a directory but its ``conftest.py`` gets the same)."""
    directory, name = os.path.split(path)
    key = (directory if name != "conftest.py" else path, id(config))
    kept = filters if not config.per_file_ignores else None
    if kept is not None and (known := kept.get(key)) is not None:
        return known
    from lint_gpu_tests.engine import per_file_ignored_codes
    from lint_gpu_tests.ftypes import Trigger
    from lint_gpu_tests.prefilter import enabled_rule_codes, prefilter_for
    from lint_gpu_tests.rules import triggers_of

    triggers = triggers_of(enabled_rule_codes(config, per_file_ignored_codes(path, config)))
    fixtures = (frozenset(n for n in conftest_engine_fixtures(path, config, memo)
                          if n.isidentifier())
                if Trigger.ENGINE in triggers else frozenset())
    found = prefilter_for(config, triggers, fixtures)
    if kept is not None:
        kept[key] = found
    return found


def file_digest(path: str, source: bytes, config: Config,
                memo: conftest_index.Memo | None = None) -> str:
    """Cache key of a file's results: its bytes plus the conftest engine fixtures it may
    receive (a conftest change can change a test module's violations); ``memo`` as for
    :func:`~lint_gpu_tests.conftest_index.conftest_engine_fixtures`."""
    return _digest(source, _joined(conftest_engine_fixtures(path, config, memo)))


def _joined(fixtures: frozenset[str]) -> str:
    """Conftest engine fixtures as one string: what :func:`file_digest` adds to the bytes,
    and :func:`~lint_gpu_tests.cache.stat_key` to the file's status."""
    return ",".join(sorted(fixtures))


def _digest(source: bytes, fixtures: str) -> str:
    return content_hash(source + b"\0" + fixtures.encode("utf-8") if fixtures else source)


def _skipped(source: bytes, path: str, config: Config, memo: conftest_index.Memo,
             filters: dict[tuple[str, int], Prefilter]) -> bool | None:
    """True when the prefilter keeps ``source`` back, False when it admits it; ``None``
    when asking fails (the file's check then asks again, and reports the failure)."""
    try:
        return not _prefilter(path, config, memo, filters).admits(source)
    except Exception:  # noqa: BLE001 - e.g. a per-file-ignores pattern; checked normally
        return None


def _check_bytes(source: bytes, path: str, config: Config, prefilter: bool) -> list[Violation]:
    """Check one file's bytes; with ``prefilter``, a file no enabled rule can report on
    (:func:`may_hold_violation`) is not even parsed."""
    return _checked_bytes(source, path, config, prefilter).violations


def _checked_bytes(source: bytes, path: str, config: Config, prefilter: bool) -> CheckResult:
    """:func:`_check_bytes`, with the analysis the violations were found on
    (:func:`lint_gpu_tests.engine.check_module`)."""
    if prefilter and not may_hold_violation(source, path, config):
        from lint_gpu_tests.engine import CheckResult

        return CheckResult()
    return check_module(source, path, config)


# --------------------------------------------------------------------------- results


@dataclass
class RunResult:
    """Outcome of :func:`check_paths`.

    Attributes:
        files: one :class:`FileResult` per file checked, in path order.
        problems: trouble met while discovering files (see :class:`Problem`).
        diffs: path -> unified diff text, in ``diff`` mode, for files a fix would change.
        cache_hits: how many files the cache answered for.
        edits: with ``edits=True``, the edits of each fixable violation's fix (see
            :func:`fix_edits`).
    """

    files: list[FileResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    cache_hits: int = 0
    edits: dict[Violation, tuple[Edit, ...]] = field(default_factory=dict)

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


class _Mode(NamedTuple):
    fix: bool
    unsafe: bool
    diff: bool
    prefilter: bool
    verbose: bool
    cache: bool = True


class _Outcome(NamedTuple):
    result: FileResult
    digest: str | None = None
    cacheable: list[Violation] | None = None
    diff: str | None = None


def _error_text(path: str, exc: BaseException, verbose: bool) -> str:
    text = str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    if verbose:
        import traceback

        text += "\n" + "".join(traceback.format_exception(exc)).rstrip()
    return text


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """Return a unified diff (``--- path`` / ``+++ path``) between two versions of a file."""

    def lines(data: bytes) -> list[str]:
        try:
            text = decode_source(data)
        except SyntaxError:
            text = data.decode("utf-8", "replace")
        return text.splitlines(keepends=True)

    import difflib

    out: list[str] = []
    for line in difflib.unified_diff(lines(old), lines(new), fromfile=path, tofile=path):
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _process(path: str, source: bytes | None, config: Config, mode: _Mode,
             digest: str | None = None, admitted: bool = False) -> _Outcome:
    """Check (and maybe fix) one file; raises nothing but ``KeyboardInterrupt`` and
    ``SystemExit`` (a ``BaseException`` such as LibCST's ``PanicException`` is this file's
    error). ``source``: its bytes when already read, with their cache key ``digest`` (else
    computed here when ``mode`` caches) and ``admitted`` when the prefilter has passed them."""
    if source is None:
        digest, admitted = None, False
        try:
            source = Path(path).read_bytes()
        except OSError as exc:
            return _Outcome(FileResult(path, error=f"cannot read file: {exc.strerror or exc}",
                                       error_stage="read"))
    if digest is None and mode.cache:
        digest = file_digest(path, source, config)
    try:
        checked = _checked_bytes(source, path, config, mode.prefilter and not admitted)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - reported for this file, the run goes on
        return _Outcome(FileResult(path, error=_error_text(path, exc, mode.verbose),
                                   error_has_traceback=True), digest)
    violations = checked.violations
    if not (mode.fix or mode.diff) or not wanted_fixes(violations, mode.unsafe):
        return _Outcome(FileResult(path, violations), digest, violations)
    return _fix(path, source, digest, checked, config, mode)


def _fix(path: str, source: bytes, digest: str | None, checked: CheckResult,
         config: Config, mode: _Mode) -> _Outcome:
    violations = checked.violations
    try:
        outcome: FixOutcome = fix_source(source, path, config, unsafe=mode.unsafe,
                                         violations=violations, analysis=checked.module)
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
    if mode.diff:
        return _Outcome(result, digest, violations,
                        diff=unified_diff(path, source, outcome.new_source))
    from lint_gpu_tests.writer import atomic_write  # tempfile & co: only runs that write

    try:
        atomic_write(path, outcome.new_source)
    except OSError as exc:
        result = FileResult(path, violations, [], None, f"cannot write fixed file: {exc}")
        return _Outcome(result, digest, violations)
    new_digest = file_digest(path, outcome.new_source, config) if mode.cache else None
    return _Outcome(result, new_digest, outcome.remaining if outcome.error is None else None)


_WORKER_MODE: _Mode | None = None


def _init_worker(mode: _Mode) -> None:
    global _WORKER_MODE
    _WORKER_MODE = mode


class _Item(NamedTuple):
    """One file for a worker: its bytes as the parent read them, their cache key (``None``
    without the cache) and whether the prefilter admitted them (else it asks again)."""

    path: str
    config: Config
    source: bytes
    digest: str | None
    admitted: bool


def _work(item: _Item) -> _Outcome:
    assert _WORKER_MODE is not None
    return _process(item.path, item.source, item.config, _WORKER_MODE, item.digest,
                    item.admitted)


class _Pool:
    """Worker processes fed one file at a time while the parent still reads the rest
    (started only once a run has more files to analyse than its threshold). Workers that
    start by ``fork`` inherit the conftest index the parent built before the first file."""

    def __init__(self, mode: _Mode, jobs: int) -> None:
        from concurrent.futures import ProcessPoolExecutor  # only for parallel runs

        import lint_gpu_tests.rules  # noqa: F401 - once here, not in every worker

        self._executor = ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker,
                                             initargs=(mode,))
        self._futures: list[Future[_Outcome]] = []

    def submit(self, item: _Item) -> None:
        self._futures.append(self._executor.submit(_work, item))

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
    unless ``--cache-dir`` or the environment names one; keyed by its fingerprint)."""

    def __init__(self, cache_dir: str | None) -> None:
        self.cache_dir = cache_dir
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
        conftest_index.remember(config, store.conftests)
        self._by_config[id(config)] = (config, store)
        return store

    def save(self) -> None:
        """Write every store, with the conftest index entries its configs' runs found."""
        found: dict[Config, dict[str, list[str]]] = {}
        for config, store in self._by_config.values():
            if config not in found:  # equal configs (other roots) share what was learned
                found[config] = conftest_index.learned(config)
            store.store_conftests(found[config])
        for store in self._stores.values():
            store.save()


def check_file(path: str, config: Config, *, fix: bool = False, unsafe_fixes: bool = False
               ) -> FileResult:
    """Check (and with ``fix``, fix in place) one file, without the cache.

    Returns:
        Its :class:`FileResult`; a read failure or internal error is in ``error``.
    """
    mode = _Mode(fix=fix, unsafe=unsafe_fixes, diff=False, prefilter=True, verbose=False)
    return _process(path, None, config, mode).result


def fix_edits(old: bytes, new: bytes) -> list[Edit]:
    """The minimal line-level edits that turn ``old`` into ``new`` (both a file's bytes, as
    ``--fix`` read and wrote them), positions in ``old``'s decoded text: 1-based rows, 1-based
    character columns, the end exclusive. Applied from the last to the first, they give
    exactly ``new``'s text.

    Raises:
        SyntaxError: when either cannot be decoded.
    """
    from difflib import SequenceMatcher

    from lint_gpu_tests.engine import physical_lines

    a = physical_lines(decode_source(old))
    b = physical_lines(decode_source(new))

    def position(index: int) -> Location:
        if index < len(a):
            return Location(index + 1, 1)
        if not a:
            return Location(1, 1)
        if a[-1].endswith(("\n", "\r")):
            return Location(len(a) + 1, 1)
        return Location(len(a), len(a[-1]) + 1)

    return [Edit("".join(b[j1:j2]), position(i1), position(i2))
            for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if tag != "equal"]


def _assign_edits(fixed: Sequence[Violation], edits: Sequence[Edit]
                  ) -> dict[Violation, tuple[Edit, ...]]:
    """Give each edit to one fixed violation: the first whose rows overlap it, else the
    nearest (an added import goes to the first fix below it). Together the violations'
    edits are the whole rewrite, each edit carried once."""
    out: dict[Violation, list[Edit]] = {v: [] for v in fixed}
    for edit in edits:
        last = edit.end_location.row - (1 if edit.end_location.column == 1
                                        and edit.end_location.row > edit.location.row else 0)

        def distance(v: Violation, first: int = edit.location.row, last: int = last) -> int:
            if v.end_location.row < first:
                return first - v.end_location.row
            return max(0, v.location.row - last)

        owner = min(fixed, key=lambda v: (distance(v), v.location.row, v.location.column))
        out[owner].append(edit)
    return {v: tuple(e) for v, e in out.items()}


def _edits_for(result: FileResult, config: Config, unsafe: bool,
               source: bytes | None = None) -> dict[Violation, tuple[Edit, ...]]:
    """The edits of ``result``'s fixable violations: what ``--fix`` would write, as edits.

    Args:
        source: the checked bytes when they are not the file on disk (``--stdin-filename``);
            ``None`` reads ``result.path``.
    """
    if result.error is not None or not wanted_fixes(result.violations, unsafe):
        return {}
    try:
        if source is None:
            source = Path(result.path).read_bytes()
        outcome = fix_source(source, result.path, config, unsafe=unsafe,
                             violations=result.violations)
        if outcome.new_source is None or outcome.error is not None or not outcome.fixed:
            return {}
        # Edits belong to fixes that were applied; a violation that only disappeared with
        # them (no fix of its own) carries none.
        owners = [v for v in outcome.fixed if v.fix is not None] or outcome.fixed
        return _assign_edits(owners, fix_edits(source, outcome.new_source))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - no edits then; --fix reports the failure
        return {}


def check_stdin(source: bytes, path: str, config: Config, *, fix: bool = False,
                unsafe_fixes: bool = False, verbose: bool = False) -> FileResult:
    """Check (and with ``fix``, fix) a buffer that is not on disk, e.g. an editor's unsaved
    file, as if it were the file at ``path``; nothing is written.

    Returns:
        Its :class:`FileResult`: with ``fix``, ``new_source`` holds the fixed bytes (``None``
        when nothing changed) and ``violations`` what is left; ``error`` as for files.
    """
    mode = _Mode(fix=False, unsafe=unsafe_fixes, diff=fix, prefilter=True, verbose=verbose)
    return _process(path, source, config, mode).result


def stdin_edits(source: bytes, result: FileResult, config: Config, *,
                unsafe_fixes: bool = False) -> dict[Violation, tuple[Edit, ...]]:
    """The edits of the fixable violations of a buffer checked by :func:`check_stdin`
    (without ``fix``), for JSON and SARIF output: what ``--fix`` would write, as edits."""
    return _edits_for(result, config, unsafe_fixes, source)


def add_noqa_to_files(result: RunResult) -> tuple[int, list[tuple[str, str]]]:
    """Add ``# noqa: CODES`` for every violation in ``result`` to its file, in place
    (``--add-noqa``; see :func:`~lint_gpu_tests.engine.add_noqa`).

    Returns:
        ``(lines given a directive, [(path, error message)...] for files that could not be
        read, decoded or written)``.
    """
    added = 0
    errors: list[tuple[str, str]] = []
    for file in result.files:
        if not any(v.code != PARSE_ERROR_CODE for v in file.violations):
            continue
        try:
            source = Path(file.path).read_bytes()
            from lint_gpu_tests.engine import add_noqa

            new, count = add_noqa(source, file.violations)
            if new is not None:
                from lint_gpu_tests.writer import atomic_write

                atomic_write(file.path, new)
        except (OSError, SyntaxError) as exc:
            errors.append((file.path, f"cannot add noqa: {exc}"))
            continue
        added += count
    return added, errors


def check_paths(
    paths: Sequence[str],
    config: Config | ConfigResolver,
    *,
    fix: bool = False,
    unsafe_fixes: bool = False,
    diff: bool = False,
    jobs: int | None = None,
    cache: bool = True,
    cache_dir: str | None = None,
    force_exclude: bool = False,
    respect_gitignore: bool = True,
    prefilter: bool = True,
    verbose: bool = False,
    parallel_threshold: int = PARALLEL_THRESHOLD,
    edits: bool = False,
    progress: Callable[[int], None] | None = None,
    on_discovered: Callable[[Discovery], None] | None = None,
) -> RunResult:
    """Check every file under ``paths``; with ``fix``, rewrite the fixable ones in place.

    Args:
        paths: files and directories as the user named them (``[]`` means ``["."]``).
        config: a :class:`~lint_gpu_tests.config.ConfigResolver` (each file gets its nearest
            config file's settings), or one :class:`Config` for every file.
        fix: apply fixes and write changed files atomically (keeping mode, encoding, BOM and
            line endings).
        unsafe_fixes: apply unsafe fixes too (with ``fix`` or ``diff``).
        diff: compute fixes but write nothing; diffs land in :attr:`RunResult.diffs`.
        jobs: worker processes (default: the CPU count); one means in-process.
        cache: use and update the result cache.
        cache_dir: cache directory (default ``$GPU_TEST_LINT_CACHE_DIR`` or
            ``<config root>/.gpu-test-lint-cache``, per config).
        force_exclude: apply excludes to explicitly named files as well.
        respect_gitignore: honour ``.gitignore`` files while walking.
        prefilter: skip the analysis of files that cannot hold a violation.
        verbose: put full tracebacks in internal-error messages.
        parallel_threshold: fewest files to analyse for which worker processes are used.
        edits: (without ``fix``) also compute what ``--fix`` would write, as the edits of
            each fixable violation, in :attr:`RunResult.edits` (JSON and SARIF output).
        progress: called with the number of files just finished, as the run goes.
        on_discovered: called once with the discovered files, before checking starts.

    Returns:
        A :class:`RunResult`. Per-file failures are in :attr:`RunResult.errors`; the run
        never stops for one file.

    Raises:
        PathNotFoundError: when a named path does not exist.
        ConfigError: when a config file that governs a file is invalid.
    """
    resolver = ConfigResolver.of(config)
    found = discover_files(paths, resolver, respect_gitignore=respect_gitignore,
                           force_exclude=force_exclude)
    if on_discovered is not None:
        on_discovered(found)
    mode = _Mode(fix=fix, unsafe=unsafe_fixes, diff=diff, prefilter=prefilter, verbose=verbose,
                 cache=cache)
    configs = {path: resolver.for_file(path) for path in found.files}
    caches = _Caches(cache_dir) if cache else None
    run = RunResult(problems=found.problems)
    done: dict[str, _Outcome] = {}
    todo: list[_Item] = []
    memo: conftest_index.Memo = {}
    filters: dict[tuple[str, int], Prefilter] = {}
    stat_keys: dict[str, tuple[str, str]] = {}  # path -> (digest read, stat key before it)
    workers = jobs if jobs is not None else default_jobs()
    pool: _Pool | None = None

    def serves(cached: list[Violation]) -> bool:
        """Whether cached results answer this run (no fix asked of them)."""
        return not (fix or diff) or not wanted_fixes(cached, unsafe_fixes)

    def settle(path: str, violations: list[Violation], *, hit: bool,
               error: str | None = None) -> None:
        done[path] = _Outcome(FileResult(path, violations, error=error, error_stage="read"))
        run.cache_hits += hit
        if progress is not None:
            progress(1)

    # The conftest index first, for every directory: workers forked later inherit it.
    stores = {path: caches(configs[path]) for path in found.files} if caches is not None \
        else {}  # first: a store loads the conftest index its cache holds
    joined: dict[frozenset[str], str] = {}
    fixtures: dict[str, str] = {}  # path -> its conftest engine fixtures, joined
    for path in found.files:
        names = conftest_engine_fixtures(path, configs[path], memo)
        text = joined.get(names)
        fixtures[path] = text if text is not None else joined.setdefault(names, _joined(names))
    for path in found.files:
        key = None
        if caches is not None:
            store = stores[path]
            key = stat_key(path, fixtures[path])
            cached = store.lookup_unchanged(path, key) if key is not None else None
            if cached is not None and serves(cached):
                settle(path, cached, hit=True)
                continue
        try:
            source = Path(path).read_bytes()
        except OSError as exc:
            settle(path, [], hit=False, error=f"cannot read file: {exc.strerror or exc}")
            continue
        digest = None
        if caches is not None:
            digest = _digest(source, fixtures[path])
            cached = store.lookup(path, digest)
            if cached is not None and serves(cached):
                store.store(path, digest, cached, key)  # found by its status next time
                settle(path, cached, hit=True)
                continue
            if key is not None:
                stat_keys[path] = (digest, key)
        skipped = _skipped(source, path, configs[path], memo, filters) if prefilter else False
        if skipped:
            # Decided here: only files to analyse count towards the parallel threshold.
            if caches is not None and digest is not None:
                store.store(path, digest, [], key)
            settle(path, [], hit=False)
            continue
        item = _Item(path, configs[path], source, digest, skipped is False and prefilter)
        if pool is not None:
            pool.submit(item)
            continue
        todo.append(item)
        if workers > 1 and len(todo) > parallel_threshold:
            pool = _Pool(mode, workers)
            # Largest first, so no worker is left with a big file at the end while the
            # other idles; results are kept by path, not by order.
            for waiting in sorted(todo, key=lambda i: -len(i.source)):
                pool.submit(waiting)
            todo.clear()
    outcomes: Iterator[_Outcome] = pool.outcomes() if pool is not None else (
        _process(i.path, i.source, i.config, mode, i.digest, i.admitted) for i in todo)
    for outcome in outcomes:
        path = outcome.result.path
        done[path] = outcome
        if caches is not None and outcome.digest is not None and outcome.cacheable is not None:
            read = stat_keys.get(path)
            # The status key only when the worker's bytes are the ones read here, unfixed.
            key = read[1] if read is not None and read[0] == outcome.digest else None
            caches(configs[path]).store(path, outcome.digest, outcome.cacheable, key)
        if progress is not None:
            progress(1)
    if caches is not None:
        caches.save()
    run.files = [done[path].result for path in found.files]
    run.diffs = {path: text for path in found.files if (text := done[path].diff)}
    if edits and not fix:
        for file in run.files:
            run.edits.update(_edits_for(file, configs[file.path], unsafe_fixes))
    return run
