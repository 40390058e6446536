"""``prove``: fix a copy of the tree, run the user's tests in both copies, compare.

1. The project's tree (``root``, the working directory) is copied twice (:func:`copy_tree`):
   the original, and the copy fixed as ``check --fix`` fixes it (the same options).
2. The test modules under the given paths that the fix changed (or whose ``conftest.py``
   files it changed; every module when it changed another file) each run twice, once per
   copy, each run in its own pytest session with the recorder (:mod:`.session`), side by
   side on ``jobs`` threads. A session's recording is kept in the cache directory under the
   key of its inputs (:mod:`.store`), so a re-run runs only the modules whose bytes changed.
3. Per module the two runs are compared (:func:`.compare.judge`).
4. With ``apply``, the fixed bytes of the modules proven the same are written to the tree;
   the conftest and other files the fix changed only when every module run was proven.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lint_gpu_tests.analysis import is_test_module
from lint_gpu_tests.api import ConfigResolver, RunOptions, RunResult, check_paths
from lint_gpu_tests.cache import default_cache_dir
from lint_gpu_tests.prove.compare import ModuleResult, Status, judge
from lint_gpu_tests.prove.schedule import Job, run_jobs
from lint_gpu_tests.prove.session import SESSION_TIMEOUT_S, SessionResult, run_session
from lint_gpu_tests.prove.store import Store, environment_id, recording_inputs, support_files
from lint_gpu_tests.writer import atomic_write

#: What a copy of the tree leaves out: version control, virtual environments, caches and
#: build outputs (a folder holding ``pyvenv.cfg`` is a virtual environment too).
SKIPPED = (".git", ".hg", ".svn", "__pycache__", ".venv*", "venv", ".tox", ".nox",
           ".*_cache", ".gpu-test-lint-cache", "node_modules", "build", "dist", "*.egg-info",
           ".e2e-cache")

VARIANTS = ("before", "after")


@dataclass
class ProveOptions:
    """How to prove.

    Attributes:
        unsafe_fixes: fix with ``--unsafe-fixes`` too.
        overrides: configuration overrides, as ``check``'s command line gives them
            (``fix_strategy``, ``target``, ``select``, ...).
        config_file: ``--config``.
        pytest_args: the user's pytest arguments.
        jobs: sessions side by side.
        session_timeout_s: the limit of one session, in seconds.
        time_limit_s: no session starts after this many seconds of the whole run (the
            modules left are ``not run``; a re-run resumes from the recordings).
        texts: how texts are compared (:data:`.compare.TEXT_MODES`).
        apply: write the fixes proven the same to the tree.
        cache: read and write recordings.
        cache_dir: the cache directory (recordings go under ``prove/`` in it).
        recordings: the recordings' folder itself, instead of the cache directory's.
        work_dir: where the two copies go (default: a temporary folder, removed at the end).
        python_path: folders put first on the sessions' ``PYTHONPATH``.
        strict_leaks: see :func:`.compare.compare_test`.
        harness: an extra digest every recording key takes (what else decides a session).
        environment: the recordings' environment (default :func:`.store.environment_id`).
    """

    unsafe_fixes: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict)
    config_file: str | None = None
    pytest_args: tuple[str, ...] = ()
    jobs: int = 1
    session_timeout_s: float = SESSION_TIMEOUT_S
    time_limit_s: float | None = None
    texts: str = "auto"
    apply: bool = False
    cache: bool = True
    cache_dir: str | None = None
    recordings: str | None = None
    work_dir: str | None = None
    python_path: tuple[str, ...] = ()
    strict_leaks: bool = False
    harness: str = ""
    environment: dict[str, str] | None = None


@dataclass
class ProveResult:
    """What ``prove`` found.

    Attributes:
        modules: the verdict on each module run, in path order.
        unchanged: test modules under the paths the fix leaves as they were (not run).
        changed: every file the fix changed, ``/``-separated, relative to the root.
        applied: the files ``apply`` wrote.
        withheld: the changed files ``apply`` did not write (not proven).
        errors: ``(path, message)`` of files the fixer failed on.
        seconds: the whole run's wall time.
        root: the tree proven.
    """

    modules: list[ModuleResult] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    root: str = ""

    @property
    def proven(self) -> bool:
        """True when every module run behaves the same after the fix."""
        return all(m.status.proven for m in self.modules) and not self.errors


def _skipped(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED)


def copy_tree(source: Path, destination: Path, *, skip: Sequence[Path] = ()) -> None:
    """Copy ``source`` into ``destination``, links as links, without what :data:`SKIPPED`
    names, virtual environments, or the folders of ``skip``."""
    skipped = {p.resolve() for p in skip}

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = set()
        for name in names:
            path = Path(folder, name)
            if _skipped(name) or path.resolve() in skipped or \
                    (path.is_dir() and (path / "pyvenv.cfg").exists()):
                out.add(name)
        return out

    shutil.copytree(source, destination, symlinks=True, ignore=ignore, dirs_exist_ok=True)


def changed_files(fixed: RunResult, before: Path, after: Path) -> list[str]:
    """The files the fix run ``fixed`` changed in ``after`` (``/``-separated, relative to
    it), sorted: those it wrote (their results hold the new bytes) whose bytes now differ
    from ``before``'s; the trees are not walked."""
    root = after.resolve()
    changed = set()
    for file in fixed.files:
        if file.new_source is None:
            continue
        try:
            relative = Path(file.path).resolve().relative_to(root).as_posix()
        except ValueError:  # written outside the tree (through a link): not the tree's
            continue
        other = before / relative
        if relative.endswith(".py") and (not other.is_file()
                                         or other.read_bytes() != file.new_source):
            changed.add(relative)
    return sorted(changed)


def modules_to_run(tests: Sequence[str], changed: Sequence[str], tree: Path) -> list[str]:
    """The test modules (of ``tests``) to prove: those the fix changed, those whose
    ``conftest.py`` (or pytest configuration) it changed, and all of them when it changed
    any other file (a helper they may import)."""
    changed_set = set(changed)
    helpers = [c for c in changed if not is_test_module(c)
               and os.path.basename(c) != "conftest.py"]
    if helpers:
        return list(tests)
    out = []
    for module in tests:
        support = {f.relative_to(tree).as_posix() for f in support_files(tree, module)}
        if module in changed_set or support & changed_set:
            out.append(module)
    return out


def prove_paths(paths: Sequence[str], options: ProveOptions | None = None, *,
                root: str | None = None, progress: Callable[[str], None] | None = None
                ) -> ProveResult:
    """Prove the fixes of ``paths`` (files and folders under ``root``) on the user's tests.

    Args:
        paths: what ``check --fix`` would fix (``[]`` means ``root``).
        options: how (:class:`ProveOptions`).
        root: the project's tree, copied whole (default: the working directory); the user's
            pytest runs in each copy's root.
        progress: told one line per step (the CLI prints them on stderr).

    Returns:
        The :class:`ProveResult`.

    Raises:
        ValueError: when a path is not under ``root``.
        PathNotFoundError, ConfigError: as :func:`~lint_gpu_tests.api.check_paths`.
    """
    opts = options or ProveOptions()
    say = progress or (lambda line: None)
    start = time.monotonic()
    top = Path(root or os.getcwd()).resolve()
    relative = []
    for given in paths or ["."]:
        absolute = Path(top, given).resolve()
        if absolute != top and top not in absolute.parents:
            raise ValueError(f"{given}: not under the tree proven ({top})")
        if not absolute.exists():
            from lint_gpu_tests.api import PathNotFoundError

            raise PathNotFoundError(f"{given}: path does not exist")
        relative.append(absolute.relative_to(top).as_posix())
    cache_folder = Path(opts.recordings) if opts.recordings else \
        default_cache_dir(str(top), opts.cache_dir) / "prove"
    work = Path(opts.work_dir).resolve() if opts.work_dir else \
        Path(tempfile.mkdtemp(prefix="gpu-test-lint-prove-"))
    try:
        return _prove(top, relative, opts, work, Store(cache_folder) if opts.cache else None,
                      say, start)
    finally:
        if not opts.work_dir:
            shutil.rmtree(work, ignore_errors=True)


def _prove(top: Path, paths: list[str], opts: ProveOptions, work: Path, store: Store | None,
           say: Callable[[str], None], start: float) -> ProveResult:
    trees = {v: work / v for v in VARIANTS}
    skip = [work, default_cache_dir(str(top), opts.cache_dir)]
    for tree in trees.values():
        if tree.exists():
            shutil.rmtree(tree)
        copy_tree(top, tree, skip=skip)
    say(f"prove: copied {top} twice under {work}")
    config = ConfigResolver(opts.config_file, opts.overrides, cwd=str(trees["after"]))
    fixed = check_paths([str(trees["after"] / p) for p in paths], config,
                        RunOptions(fix=True, unsafe_fixes=opts.unsafe_fixes, cache=False))
    result = ProveResult(root=str(top))
    result.errors = [(os.path.relpath(p, trees["after"]), m) for p, m in fixed.errors]
    tests = sorted(Path(f.path).resolve().relative_to(trees["after"].resolve()).as_posix()
                   for f in fixed.files if is_test_module(f.path))
    result.changed = changed_files(fixed, trees["before"], trees["after"])
    run = modules_to_run(tests, result.changed, trees["after"])
    result.unchanged = [m for m in tests if m not in run]
    say(f"prove: the fix changed {len(result.changed)} file(s); "
        f"{len(run)} test module(s) to prove, {len(result.unchanged)} left as they were")
    helpers = [c for c in result.changed if not is_test_module(c)
               and os.path.basename(c) != "conftest.py"]
    environment = opts.environment or environment_id()
    inputs = {(m, v): recording_inputs(trees[v], m, harness=opts.harness,
                                       environment=environment, helpers=helpers,
                                       pytest_args=opts.pytest_args or None)
              for m in run for v in VARIANTS}
    sessions = _run_sessions(run, trees, inputs, opts, store, work, say, start)
    for module in run:
        result.modules.append(_verdict(module, sessions, opts))
    if opts.apply:
        _apply(result, trees, top, say)
    result.seconds = time.monotonic() - start
    return result


@dataclass
class _Session:
    """One variant of one module: run now (``fresh``) or taken from a recording."""

    records: dict[str, dict[str, Any]]
    seconds: float
    returncode: int
    recorded: bool = False
    log: str = ""
    complete: bool = True


def _run_sessions(run: list[str], trees: dict[str, Path],
                  inputs: dict[tuple[str, str], dict[str, Any]], opts: ProveOptions,
                  store: Store | None, work: Path, say: Callable[[str], None], start: float
                  ) -> dict[tuple[str, str], _Session]:
    from lint_gpu_tests.prove.store import key_of

    sessions: dict[tuple[str, str], _Session] = {}
    jobs = []
    for (module, variant), given in inputs.items():
        recording = store.get(key_of(given)) if store is not None else None
        if recording is not None:
            sessions[(module, variant)] = _Session(recording.records, recording.seconds,
                                                   recording.returncode, recorded=True)
        else:
            jobs.append(Job(module, variant, trees[variant]))
    if len(sessions):
        say(f"prove: {len(sessions)} session(s) taken from their recordings, "
            f"{len(jobs)} to run")
    total, done = len(jobs), [0]

    def one(job: Job) -> SessionResult | None:
        if opts.time_limit_s is not None and time.monotonic() - start > opts.time_limit_s:
            return None
        session = run_session(job.tree, job.module, pytest_args=opts.pytest_args,
                              timeout_s=opts.session_timeout_s,
                              scratch=work / "sessions" / job.variant,
                              python_path=opts.python_path)
        done[0] += 1
        what = "original" if job.variant == "before" else "fixed"
        state = "" if session.complete else " (incomplete: not kept)"
        say(f"prove: [{done[0]}/{total}] {job.module} ({what}): {len(session.records)} "
            f"test(s), pytest exit {session.returncode}, {session.seconds:.1f} s{state}")
        if session.complete and store is not None:
            store.put(inputs[(job.module, job.variant)], session.records, session.seconds,
                      session.returncode)
        return session

    for job, session in run_jobs(jobs, one, workers=opts.jobs, engine_budget=opts.jobs).items():
        sessions[(job.module, job.variant)] = _Session(
            session.records, session.seconds, session.returncode, log=str(session.log),
            complete=session.complete)
    return sessions


def _verdict(module: str, sessions: dict[tuple[str, str], _Session], opts: ProveOptions
             ) -> ModuleResult:
    got = {v: sessions.get((module, v)) for v in VARIANTS}
    logs = {v: s.log for v, s in got.items() if s is not None and s.log}
    seconds = sum(s.seconds for s in got.values() if s is not None)
    recorded = [v for v, s in got.items() if s is not None and s.recorded]
    missing = [v for v, s in got.items() if s is None]
    broken = [v for v, s in got.items() if s is not None and not s.complete]
    if missing or broken:
        what = {"before": "the original", "after": "the fixed module"}
        notes = [f"{' and '.join(what[v] for v in missing)} not run: the time limit was "
                 "reached"] if missing else []
        for variant, session in got.items():
            if session is not None and not session.complete:
                notes.append(f"{what[variant]}'s session " + (
                    "ran past its limit" if session.returncode == -9
                    else f"ended with pytest's exit {session.returncode}") + (
                    f" (log: {session.log})" if opts.work_dir and session.log
                    else " (--work-dir keeps its log)"))
        return ModuleResult(module, Status.NOT_RUN, seconds=seconds, from_recordings=recorded,
                            note="; ".join(notes), logs=logs)
    before, after = got["before"], got["after"]
    assert before is not None and after is not None
    verdict = judge(module, before.records, after.records, texts=opts.texts,
                    strict_leaks=opts.strict_leaks)
    verdict.seconds, verdict.from_recordings, verdict.logs = seconds, recorded, logs
    return verdict


def _apply(result: ProveResult, trees: dict[str, Path], top: Path,
           say: Callable[[str], None]) -> None:
    """Write the proven modules' fixed bytes; other changed files only when every module run
    was proven. A file changed in the tree since it was copied is left alone."""
    proven = {m.module for m in result.modules if m.status.proven}
    every = all(m.status.proven for m in result.modules) and not result.errors
    for path in result.changed:
        writable = path in proven if is_test_module(path) else every
        target = top / path
        original = (trees["before"] / path)
        if writable and target.is_file() and original.is_file() and \
                target.read_bytes() != original.read_bytes():
            say(f"prove: {path} changed since it was copied: not written")
            writable = False
        if writable:
            atomic_write(str(target), (trees["after"] / path).read_bytes())
            result.applied.append(path)
        else:
            result.withheld.append(path)
