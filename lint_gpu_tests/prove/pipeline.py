"""``prove``: fix a copy of the tree, run the user's tests in both copies, compare.

1. The project's tree (``root``, the working directory) is copied twice (:func:`copy_tree`):
   the original, and the copy fixed as ``check --fix`` fixes it (the same options).
2. The test modules under the given paths that the fix changed (or whose ``conftest.py``
   files it changed, or that import another file it changed: :func:`module_helpers`), and
   every test module of a fix unit across modules (:class:`Unit`), each run twice, once per
   copy, each run in its own pytest session with the recorder (:mod:`.session`), side by
   side on ``jobs`` threads. A session's recording is kept in the cache directory under the
   key of its inputs (:mod:`.store`), so a re-run runs only the modules whose bytes changed.
3. Per module the two runs are compared (:func:`.compare.judge`).
4. With ``apply``, the fixed bytes of the modules proven the same are written to the tree;
   the conftest and other files the fix changed only when every module run was proven; the
   files of a unit together, when each of them may be written.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lint_gpu_tests.api import ConfigResolver, RunOptions, RunResult, check_paths
from lint_gpu_tests.config import is_test_module
from lint_gpu_tests.parsing.writer import atomic_write, atomic_write_all
from lint_gpu_tests.prove.compare import ModuleResult, Status, judge
from lint_gpu_tests.prove.devices import (
    engine_devices,
    find_devices,
    visibility_variable,
    visible_options,
)
from lint_gpu_tests.prove.diagnose import not_exercised
from lint_gpu_tests.prove.schedule import Job, run_jobs, run_on_devices
from lint_gpu_tests.prove.session import (
    PYTEST_OPTIONS,
    SESSION_TIMEOUT_S,
    SessionResult,
    run_session,
)
from lint_gpu_tests.prove.shard import shard_of
from lint_gpu_tests.prove.store import (
    Store,
    digest,
    environment_id,
    helpers_of,
    recording_inputs,
    support_files,
)
from lint_gpu_tests.running.cache import default_cache_dir
from lint_gpu_tests.runtime.recorder import RECORD_ENV

#: What a copy of the tree leaves out: version control, virtual environments, caches and
#: build outputs (a folder holding ``pyvenv.cfg`` is a virtual environment too).
SKIPPED = (".git", ".hg", ".svn", "__pycache__", ".venv*", "venv", ".tox", ".nox",
           ".*_cache", ".gpu-test-lint-cache", "node_modules", "build", "dist", "*.egg-info",
           ".e2e-cache")

VARIANTS = ("before", "after")

#: Where sessions run: this machine, or tasks of a Ray cluster (:mod:`.ray_executor`).
EXECUTORS = ("local", "ray")


@dataclass
class ProveOptions:
    """How to prove.

    Attributes:
        unsafe_fixes: fix with ``--unsafe-fixes`` too.
        overrides: configuration overrides, as ``check``'s command line gives them
            (``fix_strategy``, ``target``, ``select``, ...).
        config_file: ``--config``.
        pytest_args: the user's pytest arguments.
        jobs: sessions side by side on a machine without devices to schedule.
        devices: the devices to schedule sessions on (``0,1,2``; default: the visible ones,
            :func:`.devices.find_devices`); each session gets devices of its own.
        sessions_per_device: sessions a device takes at once (their engines start one at a
            time).
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
        shard: ``(K, N)``: prove only the K-th of N parts of the modules
            (:func:`.shard.shard_of`; ``prove merge`` joins the parts' reports).
        executor: where the sessions run: ``local`` (this machine, scheduled by ``jobs`` or
            ``devices``) or ``ray`` (tasks of a Ray cluster, :mod:`.ray_executor`).
        address: the Ray cluster's address (default: ``$RAY_ADDRESS``, else a local one).
    """

    unsafe_fixes: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict)
    config_file: str | None = None
    pytest_args: tuple[str, ...] = ()
    jobs: int = 1
    devices: str | None = None
    sessions_per_device: int = 1
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
    shard: tuple[int, int] | None = None
    executor: str = "local"
    address: str | None = None


@dataclass
class Unit:
    """A fix unit across modules: a factory helper and every call of it in the tree, which
    ``check --fix`` rewrites together (:mod:`lint_gpu_tests.fixing.tree_units`). Each of its
    test modules is proven, and ``--apply`` writes all of its files or none.

    Attributes:
        helpers: the helpers it rewrites, as ``make_llm() of tests/utils.py`` (units that
            share a file are one unit).
        files: the files it rewrote, ``/``-separated, relative to the root (a file outside
            the tree: its absolute path), the helpers' modules first.
        applied: ``--apply`` wrote them.
        withheld: why ``--apply`` wrote none of them (``tests/test_b.py differs``), else ``""``.
    """

    helpers: list[str]
    files: list[str]
    applied: bool = False
    withheld: str = ""

    @property
    def tests(self) -> list[str]:
        """Its test modules (``test_*.py``, ``*_test.py``)."""
        return [f for f in self.files if is_test_module(f)]


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
        shard: ``"K/N"`` for one part of the modules, else ``""``.
        to_prove: every module to prove, the other shards' too.
        fix: how the fix was made (``paths``, ``unsafe_fixes``, ``overrides``,
            ``config_file``): ``prove merge --apply`` makes it again.
        digests: per changed file, the SHA-256 of its bytes ``before`` and ``after`` the fix.
        units: the fix units across modules the fix rewrote (:class:`Unit`).
    """

    modules: list[ModuleResult] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    root: str = ""
    shard: str = ""
    to_prove: list[str] = field(default_factory=list)
    fix: dict[str, Any] = field(default_factory=dict)
    digests: dict[str, dict[str, str]] = field(default_factory=dict)
    units: list[Unit] = field(default_factory=list)

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
    it), sorted: those it wrote (their results hold the new bytes) and those its fix units
    across modules rewrote (a helper's module the run does not check among them), whose
    bytes now differ from ``before``'s; the trees are not walked."""
    root = after.resolve()
    written: list[tuple[str, bytes | None]] = [
        (file.path, file.new_source) for file in fixed.files if file.new_source is not None]
    written += [(path, None) for unit in fixed.units for path in unit.paths]
    changed = set()
    for path, new in written:
        relative = _relative(path, root)
        if relative is None:  # written outside the tree (through a link): not the tree's
            continue
        other = before / relative
        if new is None:
            new = (root / relative).read_bytes()
        if relative.endswith(".py") and (not other.is_file() or other.read_bytes() != new):
            changed.add(relative)
    return sorted(changed)


def _relative(path: str, root: Path) -> str | None:
    """``path`` (as the fix run names it) relative to ``root``, ``/``-separated; ``None``
    outside it."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def fix_units(fixed: RunResult, after: Path) -> list[Unit]:
    """The fix units across modules the fix run ``fixed`` rewrote in ``after``, those that
    share a file joined into one, each with its helpers' modules first and the rest sorted;
    files relative to ``after`` (absolute outside it)."""
    root = after.resolve()
    joined: list[tuple[list[str], list[str], set[str]]] = []  # helpers, heads, files
    for rewritten in fixed.units:
        files = [_relative(p, root) or str(Path(p).resolve()) for p in rewritten.paths]
        helpers, heads, members = [f"{rewritten.helper}() of {files[0]}"], [files[0]], \
            set(files)
        for unit in [u for u in joined if u[2] & members]:
            joined.remove(unit)
            helpers[:0], heads[:0] = unit[0], unit[1]
            members |= unit[2]
        joined.append((helpers, heads, members))
    return [Unit(helpers, [*dict.fromkeys(heads), *sorted(members - set(heads))])
            for helpers, heads, members in joined]


def modules_to_run(tests: Sequence[str], changed: Sequence[str], tree: Path,
                   helpers: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The test modules (of ``tests``) to prove: those the fix changed, those whose
    ``conftest.py`` (or pytest configuration) it changed, and those that may run another file
    it changed (``helpers``, per module, as :func:`module_helpers` finds them; without it,
    every module may run every such file)."""
    changed_set = set(changed)
    others = [c for c in changed if not is_test_module(c)
              and os.path.basename(c) != "conftest.py"]
    out = []
    for module in tests:
        support = {f.relative_to(tree).as_posix() for f in support_files(tree, module)}
        runs = others if helpers is None else helpers.get(module, [])
        if module in changed_set or support & changed_set or runs:
            out.append(module)
    return out


def module_helpers(tests: Sequence[str], changed: Sequence[str], trees: Mapping[str, Path]
                   ) -> dict[str, list[str]]:
    """Per test module of ``tests``, the files the fix changed other than conftests that its
    session may run, in either tree of ``trees``
    (:func:`~lint_gpu_tests.prove.store.helpers_of`): the other test modules it imports
    (``from tests.test_a import build_engine``) and the other files; and those other files
    no module's import reaches, which count as every module's (loaded by ``importlib``, read
    as data: not known). A test module no module imports is nobody's helper: pytest
    collects it."""
    others = [c for c in changed if not is_test_module(c)
              and os.path.basename(c) != "conftest.py"]
    changed_tests = [c for c in changed if is_test_module(c)]
    if not others and not changed_tests:
        return {m: [] for m in tests}
    present = {v: [h for h in [*others, *changed_tests] if (t / h).is_file()]
               for v, t in trees.items()}
    per_module = {m: sorted({h for v, t in trees.items()
                             for h in helpers_of(t, m, [p for p in present[v] if p != m])})
                  for m in tests}
    reached = {h for hs in per_module.values() for h in hs}
    unreached = [h for h in others if h not in reached]
    return {m: sorted({*hs, *unreached}) for m, hs in per_module.items()}


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
        ValueError: when a path is not under ``root``, ``apply`` is asked of a shard, or the
            executor is unknown or Ray is not installed for it.
        PathNotFoundError, ConfigError: as :func:`~lint_gpu_tests.api.check_paths`.
    """
    opts = options or ProveOptions()
    if opts.executor not in EXECUTORS:
        raise ValueError(f"--executor {opts.executor}: expected one of {', '.join(EXECUTORS)}")
    if opts.executor == "ray":
        from lint_gpu_tests.prove.ray_executor import ray_module

        ray_module()  # not installed: say so before copying and fixing
    if opts.shard is not None and opts.apply:
        raise ValueError("--apply with --shard: a shard proves only part of the modules; "
                         "give --apply to `prove merge` of the shards' reports")
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
    fix = {"paths": paths, "unsafe_fixes": opts.unsafe_fixes,
           "overrides": dict(opts.overrides), "config_file": opts.config_file}
    result = ProveResult(root=str(top), fix=fix)
    tests = copy_and_fix(top, trees, fix, result,
                         skip=[work, default_cache_dir(str(top), opts.cache_dir)])
    say(f"prove: copied {top} twice under {work}")
    tests = sorted({*tests, *(m for unit in result.units for m in unit.tests)})
    helpers = module_helpers(tests, result.changed, trees)
    run = modules_to_run(tests, result.changed, trees["after"], helpers)
    result.unchanged = [m for m in tests if m not in run]
    say(f"prove: the fix changed {len(result.changed)} file(s); "
        f"{len(run)} test module(s) to prove, {len(result.unchanged)} left as they were")
    for unit in result.units:
        say(f"prove: one fix unit ({', '.join(unit.helpers)} and its calls): "
            f"{', '.join(unit.files)}")
    environment = opts.environment or environment_id()
    inputs = {(m, v): recording_inputs(trees[v], m, harness=opts.harness,
                                       environment=environment, helpers=helpers[m],
                                       pytest_args=opts.pytest_args or None)
              for m in run for v in VARIANTS}
    result.to_prove = list(run)
    if opts.shard is not None:
        run = shard_of(run, *opts.shard, cost=_recorded_seconds(inputs, store))
        result.shard = f"{opts.shard[0]}/{opts.shard[1]}"
        say(f"prove: shard {result.shard}: {len(run)} of the {len(result.to_prove)} module(s)")
    devices = find_devices(opts.devices) if opts.executor == "local" else None
    if opts.executor == "ray":
        say(f"prove: sessions as tasks of the Ray cluster {opts.address or '(default)'}")
    if devices:
        say(f"prove: {len(devices)} device(s) ({','.join(devices)}), "
            f"{opts.sessions_per_device} session(s) a device")
    sessions = _run_sessions(run, trees, inputs, opts, store, work, say, start, devices)
    verdicts = {m: _verdict(m, sessions, trees, opts, work) for m in run}
    again = [m for m in run if verdicts[m].status in (Status.DIFFERS, Status.INCONCLUSIVE)]
    if again:
        say(f"prove: {len(again)} module(s) to run again alone: {', '.join(again)}")
        rerun = _run_sessions(again, trees, inputs, opts, store, work, say, start, devices,
                              alone=True)
        for module in again:
            first = verdicts[module]
            if not all((module, v) in rerun for v in VARIANTS):
                first.note += ("; " if first.note else "") + \
                    "not run again alone: the time limit was reached"
                continue
            verdicts[module] = _verdict(module, rerun, trees, opts, work)
            verdicts[module].rerun = f"{first.status.value} when first run" + (
                f" ({first.note})" if first.note else
                f" ({len(first.differences)} difference(s))")
    result.modules = [verdicts[m] for m in run]
    if opts.apply:
        apply(result, lambda path: (trees["after"] / path).read_bytes(), top, say)
    result.seconds = time.monotonic() - start
    return result


@dataclass
class _Session:
    """One variant of one module: run now or taken from a recording (``recorded``).

    ``not_exercised``: the tests its log shows did not exercise the fix
    (:func:`.diagnose.not_exercised`); ``returncode`` -9: killed past its limit."""

    records: dict[str, dict[str, Any]]
    seconds: float
    returncode: int
    recorded: bool = False
    log: str = ""
    complete: bool = True
    not_exercised: dict[str, str] = field(default_factory=dict)
    devices: tuple[str, ...] = ()


def _visible(session: SessionResult, folder: Path, name: str) -> Path:
    """Give the session's log and record file names ``ls`` shows (``folder/name.log``,
    ``folder/name.json``; pytest-xdist's per-worker record files are merged already and
    removed); returns the log's new path."""
    log = folder / f"{name}.log"
    os.replace(session.log, log)
    record = session.log.with_name(session.log.name.replace(".pytest-", ".record-", 1)
                                   ).with_suffix(".json")
    if record.exists():
        os.replace(record, folder / f"{name}.json")
    for worker in folder.glob(glob.escape(record.name) + ".*"):
        worker.unlink()
    return log


def _run_sessions(run: list[str], trees: dict[str, Path],
                  inputs: dict[tuple[str, str], dict[str, Any]], opts: ProveOptions,
                  store: Store | None, work: Path, say: Callable[[str], None], start: float,
                  devices: tuple[str, ...] | None, *, alone: bool = False
                  ) -> dict[tuple[str, str], _Session]:
    """Run the sessions of ``run``'s modules (both variants), or take them from their
    recordings; with ``alone``, run every session anew, one at a time. With ``devices``,
    each session runs on devices of its own (as many as the module's engines take,
    :func:`.devices.engine_devices`); with the ``ray`` executor, as a Ray task asking for as
    many GPUs."""
    from lint_gpu_tests.prove.store import key_of

    sessions: dict[tuple[str, str], _Session] = {}
    jobs = []
    for module in run:
        for variant in VARIANTS:
            recording = store.get(key_of(inputs[(module, variant)])) \
                if store is not None and not alone else None
            if recording is not None:
                sessions[(module, variant)] = _Session(
                    recording.records, recording.seconds, recording.returncode, recorded=True)
            else:
                need = max(engine_devices((trees["before"] / module).read_bytes()), default=1)
                jobs.append(Job(module, variant, trees[variant], devices=need))
    if len(sessions):
        say(f"prove: {len(sessions)} session(s) taken from their recordings, "
            f"{len(jobs)} to run")
    total, done = len(jobs), [0]

    def folder(job: Job) -> Path:
        return work / "sessions" / job.variant

    def one(job: Job, given: tuple[str, ...] = ()) -> _Session | None:
        if opts.time_limit_s is not None and time.monotonic() - start > opts.time_limit_s:
            return None
        ran = run_session(job.tree, job.module,
                          pytest_args=[*device_options(given, opts, work), *opts.pytest_args],
                          timeout_s=opts.session_timeout_s, scratch=folder(job),
                          python_path=opts.python_path)
        return finish(job, ran, given)

    def finish(job: Job, ran: SessionResult, given: tuple[str, ...]) -> _Session:
        log = _visible(ran, folder(job), session_name(job.module, alone))
        text = log.read_text(encoding="utf-8", errors="replace")
        session = _Session(ran.records, ran.seconds, ran.returncode, log=str(log),
                           complete=ran.complete,
                           not_exercised=not_exercised(ran.records, text), devices=given)
        done[0] += 1
        what = "original" if job.variant == "before" else "fixed"
        state = "" if ran.complete else " (incomplete: not kept)"
        if session.not_exercised:
            state = f" ({len(session.not_exercised)} test(s) did not exercise the fix: not kept)"
        on = f", devices {','.join(given)}" if given else ""
        say(f"prove: [{done[0]}/{total}] {job.module} ({what}{', alone' if alone else ''}{on}): "
            f"{len(ran.records)} test(s), pytest exit {ran.returncode}, "
            f"{ran.seconds:.1f} s{state}")
        if ran.complete and not session.not_exercised and store is not None:
            store.put(inputs[(job.module, job.variant)], ran.records, ran.seconds,
                      ran.returncode)
        return session

    done_jobs: dict[Job, _Session] = {}
    if opts.executor == "ray":
        from lint_gpu_tests.prove.ray_executor import run_on_ray

        left = None if opts.time_limit_s is None else \
            time.time() + opts.time_limit_s - (time.monotonic() - start)
        done_jobs = run_on_ray(jobs, finish, folder=folder, address=opts.address,
                               pytest_args=opts.pytest_args, timeout_s=opts.session_timeout_s,
                               python_path=opts.python_path, deadline=left, alone=alone)
    elif devices and alone:
        for job in jobs:
            done_jobs.update(run_on_devices([job], one, devices=devices))
    elif devices:
        done_jobs = run_on_devices(jobs, one, devices=devices,
                                   per_device=opts.sessions_per_device)
    else:
        workers = 1 if alone else opts.jobs
        done_jobs = run_jobs(jobs, one, workers=workers, engine_budget=workers)
    for job, session in done_jobs.items():
        sessions[(job.module, job.variant)] = session
    return sessions


def device_options(devices: tuple[str, ...], opts: ProveOptions, work: Path) -> list[str]:
    """The pytest options that put a session on ``devices`` (:mod:`.visibility`): the
    platform's visibility variable, and with more than one session a device, a start lock
    per device (under ``work/locks``). ``[]`` without devices."""
    out = visible_options(devices)
    if devices and opts.sessions_per_device > 1:
        (work / "locks").mkdir(exist_ok=True)
        out += [f"--gpu-test-lint-start-lock={work / 'locks' / f'device-{d}.lock'}"
                for d in devices]
    return out


def session_name(module: str, rerun: bool = False) -> str:
    """The name of a module's session files (``tests-test_a.py``; ``.rerun`` appended for
    its run alone)."""
    return module.replace("/", "-") + (".rerun" if rerun else "")


def by_hand(tree: Path, module: str, record: Path, pytest_args: Sequence[str],
            devices: tuple[str, ...] = ()) -> str:
    """The shell command that runs ``module``'s session in ``tree`` as ``prove`` runs it
    (on ``devices``), writing its record to ``record``."""
    visible = [f"{visibility_variable()}={','.join(devices)}"] if devices else []
    return " ".join([f"cd {shlex.quote(str(tree))} &&", *visible,
                     f"{RECORD_ENV}={shlex.quote(str(record))}",
                     shlex.join([sys.executable, "-m", "pytest", *PYTEST_OPTIONS,
                                 *pytest_args, module])])


def _verdict(module: str, sessions: dict[tuple[str, str], _Session], trees: dict[str, Path],
             opts: ProveOptions, work: Path) -> ModuleResult:
    got = {v: sessions.get((module, v)) for v in VARIANTS}
    logs = {v: s.log for v, s in got.items() if s is not None and s.log}
    commands = {v: by_hand(trees[v], module, work / "sessions" / v /
                           f"{session_name(module)}.json", opts.pytest_args,
                           s.devices if s is not None else ())
                for v, s in got.items()} if opts.work_dir else {}
    seconds = sum(s.seconds for s in got.values() if s is not None)
    recorded = [v for v, s in got.items() if s is not None and s.recorded]
    missing = [v for v, s in got.items() if s is None]
    broken = [v for v, s in got.items() if s is not None and not s.complete]
    what = {"before": "the original", "after": "the fixed module"}
    if missing or broken:
        notes = [f"{' and '.join(what[v] for v in missing)} not run: the time limit was "
                 "reached"] if missing else []
        for variant, session in got.items():
            if session is not None and not session.complete:
                notes.append(f"{what[variant]}'s session " + (
                    "ran past its limit" if session.returncode == -9
                    else f"ended with pytest's exit {session.returncode}") + (
                    f" (log: {session.log})" if opts.work_dir and session.log
                    else " (--work-dir keeps its log)"))
        timed_out = not missing and all(s is not None and (s.complete or s.returncode == -9)
                                        for s in got.values())
        return ModuleResult(module, Status.INCONCLUSIVE if timed_out else Status.NOT_RUN,
                            seconds=seconds, from_recordings=recorded,
                            note="; ".join(notes), logs=logs, commands=commands)
    before, after = got["before"], got["after"]
    assert before is not None and after is not None
    reasons: dict[str, list[str]] = {}
    for variant, session in (("before", before), ("after", after)):
        for test, why in session.not_exercised.items():
            reasons.setdefault(test, []).append(f"{variant}: {why}")
    original = (trees["before"] / module).read_bytes()
    verdict = judge(module, before.records, after.records, texts=opts.texts,
                    strict_leaks=opts.strict_leaks,
                    not_exercised={t: "; ".join(w) for t, w in reasons.items()},
                    expects_engines=bool(engine_devices(original)))
    verdict.seconds, verdict.from_recordings, verdict.logs = seconds, recorded, logs
    verdict.commands = commands
    return verdict


def copy_and_fix(top: Path, trees: dict[str, Path], fix: dict[str, Any],
                 result: ProveResult, *, skip: Sequence[Path] = ()) -> list[str]:
    """Copy ``top`` into each of ``trees`` (emptied first) and fix the ``after`` copy as
    ``fix`` says (``paths``, ``unsafe_fixes``, ``overrides``, ``config_file``); set
    ``result``'s ``errors``, ``units``, ``changed`` and ``digests``. Returns the test
    modules the fixer saw (``/``-separated, sorted)."""
    for tree in trees.values():
        if tree.exists():
            shutil.rmtree(tree)
        copy_tree(top, tree, skip=skip)
    after = trees["after"]
    config = ConfigResolver(fix["config_file"], fix["overrides"], cwd=str(after))
    fixed = check_paths([str(after / p) for p in fix["paths"]], config,
                        RunOptions(fix=True, unsafe_fixes=fix["unsafe_fixes"], cache=False))
    result.errors = [(os.path.relpath(p, after), m) for p, m in fixed.errors]
    result.units = fix_units(fixed, after)
    if "before" in trees:
        result.changed = changed_files(fixed, trees["before"], after)
        for unit in result.units:
            unit.files = [f for f in unit.files if f in result.changed or os.path.isabs(f)]
        result.units = [u for u in result.units if u.files]
        result.digests = {
            path: {"before": digest((trees["before"] / path).read_bytes())
                   if (trees["before"] / path).is_file() else "",
                   "after": digest((after / path).read_bytes())}
            for path in result.changed}
    return sorted(Path(f.path).resolve().relative_to(after.resolve()).as_posix()
                  for f in fixed.files if is_test_module(f.path))


def _recorded_seconds(inputs: dict[tuple[str, str], dict[str, Any]], store: Store | None
                      ) -> dict[str, float]:
    """Per module whose sessions are both recorded, their seconds together."""
    from lint_gpu_tests.prove.store import key_of

    out: dict[str, float] = {}
    if store is None:
        return out
    for module in {m for m, _ in inputs}:
        got = [store.get(key_of(inputs[(module, v)])) for v in VARIANTS]
        if all(r is not None for r in got):
            out[module] = sum(r.seconds for r in got if r is not None)
    return out


def apply(result: ProveResult, fixed: Callable[[str], bytes | None], top: Path,
          say: Callable[[str], None]) -> None:
    """Write the proven modules' fixed bytes (``fixed(path)``; None or bytes other than those
    proven, ``result.digests``, are not written); other changed files only when every module
    run was proven. A file changed in the tree since it was copied is left alone. The files
    of a fix unit across modules (``result.units``) are written together
    (:func:`~lint_gpu_tests.parsing.writer.atomic_write_all`) when every one of them may be,
    else none of them; the unit's ``withheld`` says why.

    Raises:
        OSError: when a file cannot be written (a unit's files are then left as they were).
    """
    verdicts = {m.module: m for m in result.modules}

    def blocked(path: str) -> str:
        """Why the verdicts keep ``path`` from being written (``""``: they do not)."""
        if is_test_module(path):
            verdict = verdicts.get(path)
            return f"{path} was not proven" if verdict is None else \
                "" if verdict.status.proven else f"{path} {_VERDICT_SAYS[verdict.status]}"
        if result.errors:
            return f"the fixer failed on {result.errors[0][0]}"
        first = next((m for m in result.modules if not m.status.proven), None)
        if first is not None:
            return f"{first.module} {_VERDICT_SAYS[first.status]}"
        missing = [m for m in result.to_prove if m not in verdicts]
        return f"{missing[0]} was not proven" if missing else ""

    def bytes_of(path: str) -> bytes | str:
        """The bytes to write to ``path``, or why they are not written."""
        target = top / path
        known = result.digests.get(path, {})
        if target.is_file() and digest(target.read_bytes()) != known.get("before"):
            return f"{path} changed since it was copied"
        data = fixed(path)
        if data is None or digest(data) != known.get("after"):
            return f"{path}: the fix now gives other bytes than those proven"
        return data

    in_unit = {f: unit for unit in result.units for f in unit.files}
    for unit in result.units:
        reasons = (f"{f} lies outside the tree proven" if os.path.isabs(f) else blocked(f)
                   for f in [*unit.tests, *(f for f in unit.files if f not in unit.tests)])
        why = next((w for w in reasons if w), "")  # its own test modules' verdicts first
        news: dict[str, bytes] = {}
        for path in unit.files if not why else ():
            got = bytes_of(path)
            if isinstance(got, str):
                why = got
                break
            news[path] = got
        if why:
            unit.withheld = why
            say(f"prove: the fix unit of {', '.join(unit.helpers)}: not written: {why}")
        else:
            atomic_write_all({str(top / path): data for path, data in news.items()})
            unit.applied = True
    for path in result.changed:
        home = in_unit.get(path)
        if home is not None:
            (result.applied if home.applied else result.withheld).append(path)
            continue
        data: bytes | str | None = None if blocked(path) else bytes_of(path)
        if isinstance(data, str):
            say(f"prove: {data}: not written")
        if isinstance(data, bytes):
            atomic_write(str(top / path), data)
            result.applied.append(path)
        else:
            result.withheld.append(path)


#: How a reason for not writing a file says a module's verdict (``tests/test_b.py differs``).
_VERDICT_SAYS = {Status.SAME: "is the same", Status.LEAK_FIXED: "leaked before, fixed after",
                 Status.DIFFERS: "differs", Status.INCONCLUSIVE: "is inconclusive",
                 Status.NOT_RUN: "was not run"}
