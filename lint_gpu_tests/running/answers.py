"""Whole-run answers: a ``check`` that reports only, run again on the same tree, answered
before the checker is imported.

The result cache (:mod:`lint_gpu_tests.running.cache`) answers each file without parsing it,
but a run still imports click, the configuration, discovery and the report before it can ask.
A report-only ``check`` started from the console (``gpu-test-lint``, ``python -m
lint_gpu_tests``) also keeps, in ``<cache dir>/runs/<key>.json``, what it printed, its exit
status and a snapshot of what that output depends on; the next run with the same key replays
it when the snapshot still holds, importing nothing but this module (the standard library's
``os``, ``sys``, ``time``, ``hashlib`` and ``json``).

The key is the hash of: the program and its arguments, the working directory, the whole
environment (but the shell's bookkeeping variables), Python's version and executable, the
package's version and sources (:func:`package_stamp`), and whether stdout and stderr are
terminals. The snapshot is the hash of, for every directory the run listed (discovery's
walk, the tree's helper index, and the module of a project's runner that a config names:
:data:`LISTED`), its entries' names and kinds and the status (size, modification and
change times, inode) of its ``.py`` files and settings files
(:data:`WATCHED_FILES`); and for every directory above those and above the named paths, the
status of its ``.py`` and settings files, and of ``.git/info/exclude``. An edit, a new or
removed file or directory where the run looked, a changed configuration, ``.gitignore`` or
conftest, another environment or another build of the checker each give another key or
snapshot, and the run is made in full.

A run writes its answer only when nothing it depends on changed within
:data:`~lint_gpu_tests.running.cache.RACY_NS` before it started (a file changed in the same
timestamp tick as the run, or during it, could go unseen), into a cache directory that
exists already (the one ``--cache-dir`` or ``$GPU_TEST_LINT_CACHE_DIR`` names, else the
nearest ``.gpu-test-lint-cache`` in the working directory or above it), and never for a run
that fixes, shows diffs, reads stdin or a file named by an option (``--config``,
``--leak-report``, a baseline), or runs rules registered from outside the package. Nothing
here raises: an answer that cannot be read, checked or written makes the run a full one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence

from lint_gpu_tests import __version__

FORMAT = 1
"""Version of the answer files' layout."""

RUNS_DIR = "runs"
"""Subdirectory of the cache directory holding the answers."""

CACHE_DIR_NAME = ".gpu-test-lint-cache"
CACHE_DIR_ENV = "GPU_TEST_LINT_CACHE_DIR"

RACY_NS = 2_000_000_000
"""2 s, in nanoseconds: the coarsest timestamp tick of a common filesystem (FAT's). A file
changed less than this long before the result cache read it gets no
:func:`~lint_gpu_tests.running.cache.stat_key`; one (or a listed directory) changed less
than this long before a run started makes the run keep no answer (git's "racily clean"
rule)."""

WATCHED_FILES = frozenset({
    "pyproject.toml", ".gpu-test-lint.toml", "ruff.toml", ".ruff.toml", "setup.cfg",
    "tox.ini", "pytest.ini", ".gitignore", "pyvenv.cfg",
})
"""Files other than ``.py`` whose status the snapshot holds: the settings the run reads
(its own, ruff's line length, pytest's root markers), ``.gitignore`` and the virtualenv
marker that discovery skips a directory for."""

UNLISTED = frozenset({"__pycache__", CACHE_DIR_NAME})
"""Directory entries the snapshot leaves out: nothing the run reads lives there, and tests
or the run itself create them."""

VOLATILE_ENVIRONMENT = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})
"""Variables the shell sets on its own, left out of the key (the working directory is in
it)."""

COMMANDS = frozenset({"rule", "rules", "prove", "server", "--help", "-h", "--version", "-V"})
"""First arguments that are not a ``check``: never answered."""

LISTED: set[str] | None = None
"""The directories the current run listed (absolute paths), while it may keep an answer;
``None`` otherwise. Discovery and the helper index add to it."""

_pending: tuple[str, str, int] | None = None
"""``(answers directory, key, start time in ns)`` of the current run, set by :func:`replay`
on a miss."""

_stamp: str | None = None
""":func:`package_stamp`, once computed."""


def note_listed(directory: str) -> None:
    """Record that the current run listed ``directory`` (absolute), when it collects them
    (:data:`LISTED`); else nothing."""
    if LISTED is not None:
        LISTED.add(directory)


def cache_dir_of(argv: Sequence[str], cwd: str) -> str | None:
    """The cache directory that keeps the answers of a ``check`` with arguments ``argv`` (the
    program's name excluded) run in ``cwd`` (an absolute path): ``--cache-dir``'s value, else
    ``$GPU_TEST_LINT_CACHE_DIR``, else the nearest existing ``.gpu-test-lint-cache`` in
    ``cwd`` or a directory above it (the result cache's, at the config root, for a run
    started below that root), else ``.gpu-test-lint-cache`` in ``cwd``; ``None`` with
    ``--no-cache``. Options after ``--`` are paths."""
    chosen: str | None = None
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--no-cache":
            return None
        if arg == "--cache-dir" and index + 1 < len(argv):
            chosen = argv[index + 1]
        elif arg.startswith("--cache-dir="):
            chosen = arg.partition("=")[2]
    chosen = chosen or os.environ.get(CACHE_DIR_ENV)
    if chosen:
        return os.path.join(cwd, chosen)
    current = cwd
    while True:
        candidate = os.path.join(current, CACHE_DIR_NAME)
        if os.path.isdir(candidate):
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return os.path.join(cwd, CACHE_DIR_NAME)
        current = parent


def package_stamp() -> str:
    """Short hash of the package's own sources (their names, sizes and modification times;
    the runtime and ``__pycache__`` aside), so nothing cached by one build of the checker is
    served by another (an editable install, a patched rule). Computed once a process."""
    global _stamp
    if _stamp is not None:
        return _stamp
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    parts: list[str] = []
    pending = [""]
    while pending:  # os.scandir, not Path.rglob: this runs at the start of every run
        relative = pending.pop()
        try:
            with os.scandir(os.path.join(package, relative)) as entries:
                found = list(entries)
        except OSError:
            continue
        for entry in found:
            name = os.path.join(relative, entry.name) if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in ("runtime", "__pycache__"):
                    pending.append(name)
            elif entry.name.endswith(".py"):
                try:
                    stat = entry.stat()
                except OSError:
                    continue
                parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    parts.sort()
    _stamp = hashlib.blake2b("\n".join(parts).encode(), digest_size=6).hexdigest()
    return _stamp


def answer_key(argv: Sequence[str], cwd: str) -> str:
    """The key of a run of the program with ``argv`` (``sys.argv``: the program first) in
    ``cwd``, in this process's environment (see the module's docstring)."""
    environment = sorted((k, v) for k, v in os.environ.items() if k not in VOLATILE_ENVIRONMENT)
    terminals = []
    for stream in (sys.stdout, sys.stderr):
        try:
            terminals.append(stream.isatty())
        except (AttributeError, ValueError):
            terminals.append(None)
    text = json.dumps([FORMAT, __version__, package_stamp(), sys.version, sys.executable,
                       list(argv), cwd, environment, terminals])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def snapshot(listed: Iterable[str], above: Iterable[str], since_ns: int | None = None
             ) -> str | None:
    """The hash of what a run that listed the directories ``listed`` and looked into the
    directories ``above`` (absolute paths) depends on (see the module's docstring); ``None``
    when one of them cannot be read or, with ``since_ns``, changed after ``since_ns - RACY_NS``
    (a listed directory's own status counts; one above only through its watched files)."""
    limit = None if since_ns is None else since_ns - RACY_NS
    lines: list[str] = []
    listed_set = set(listed)
    for directory in sorted(listed_set | set(above)):
        whole = directory in listed_set
        try:
            if whole and limit is not None:
                status = os.stat(directory)
                if max(status.st_mtime_ns, status.st_ctime_ns) > limit:
                    return None
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except FileNotFoundError:
            lines.append(f"{directory}\0-")
            continue
        except OSError:
            return None
        lines.append(directory)
        for entry in entries:
            name = entry.name
            watched = name.endswith(".py") or name in WATCHED_FILES
            if name == ".git":  # a root marker, a directory or a worktree's file
                exclude = _status(os.path.join(entry.path, "info", "exclude"), limit)
                if exclude == "racy":
                    return None
                lines.append(f"\0{name}\0{exclude}")
                continue
            try:
                is_dir = entry.is_dir()
                if is_dir:
                    if whole and name not in UNLISTED:
                        lines.append(f"\0{name}/")
                    continue
                if not watched:
                    continue
                status = entry.stat()
            except OSError:
                return None
            if limit is not None and max(status.st_mtime_ns, status.st_ctime_ns) > limit:
                return None
            lines.append(f"\0{name}\0{status.st_size}:{status.st_mtime_ns}:"
                         f"{status.st_ctime_ns}:{status.st_ino}")
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=16).hexdigest()


def _status(path: str, limit: int | None) -> str:
    """The status of the file at ``path`` as a snapshot line's tail: ``-`` when there is none,
    ``racy`` when it changed after ``limit``."""
    try:
        status = os.stat(path)
    except OSError:
        return "-"
    if limit is not None and max(status.st_mtime_ns, status.st_ctime_ns) > limit:
        return "racy"
    return f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}:{status.st_ino}"


def above(directories: Iterable[str]) -> set[str]:
    """Every directory above ``directories`` (absolute paths), up to the filesystem's root."""
    found: set[str] = set()
    for directory in directories:
        current = os.path.dirname(directory)
        while current not in found:
            found.add(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    return found


def replay(argv: Sequence[str]) -> None:
    """Answer the run of ``argv`` (``sys.argv``) from its kept answer when that still holds:
    write what it printed and leave the process with its exit status. Otherwise return, with
    the run set up to keep its answer (:data:`LISTED` collecting) when it may."""
    global LISTED, _pending
    args = list(argv[1:])
    if (args and args[0] in COMMANDS) or "lint_gpu_tests.rules" in sys.modules:
        return
    try:
        cwd = os.getcwd()
        directory = cache_dir_of(args, cwd)
        if directory is None:
            return
        runs = os.path.join(directory, RUNS_DIR)
        key = answer_key(argv, cwd)
        _pending = (runs, key, time.time_ns())
        LISTED = set()
        try:
            with open(os.path.join(runs, key + ".json"), "rb") as handle:
                kept = json.loads(handle.read())
        except (OSError, ValueError):
            return
        if not isinstance(kept, dict) or kept.get("format") != FORMAT or \
                snapshot(kept["listed"], kept["above"]) != kept["snapshot"]:
            return
        pieces = [(bool(err), str(text)) for err, text in kept["pieces"]]
        status = int(kept["status"])
    except Exception:  # noqa: BLE001 - an answer that cannot be used: the full run
        return
    for err, text in pieces:
        stream = sys.stderr if err else sys.stdout
        try:
            stream.write(text)
        except BrokenPipeError:
            status = 1
            break
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            status = status or 1
    os._exit(status)


def keep(paths: Sequence[str], pieces: Sequence[tuple[bool, str]], status: int) -> None:
    """Keep the answer of the current run (set up by :func:`replay`): ``pieces`` as the
    report wrote them (``(to stderr, text)``), its exit ``status``, for ``paths`` as named,
    with the snapshot taken now; nothing when the run was not set up, its cache directory
    does not exist, or something it depends on changed less than :data:`RACY_NS` before the
    run started or since."""
    global LISTED
    listed, LISTED = LISTED, None
    if _pending is None or listed is None:
        return
    runs, key, started_ns = _pending
    try:
        cache = os.path.dirname(runs)
        if not os.path.isdir(cache):
            return
        inside = os.path.join(cache, "")
        listed = {d for d in listed if d != cache and not d.startswith(inside)}
        cwd = os.getcwd()
        named = {os.path.abspath(os.path.join(cwd, p)) for p in paths} or {cwd}
        for path in named:
            listed.add(path if os.path.isdir(path) else os.path.dirname(path))
        higher = sorted(above(listed) - listed)
        taken = snapshot(listed, higher, started_ns)
        if taken is None:
            return
        data = json.dumps({"format": FORMAT, "listed": sorted(listed), "above": higher,
                           "snapshot": taken, "pieces": [list(p) for p in pieces],
                           "status": status})
        os.makedirs(runs, exist_ok=True)
        temporary = os.path.join(runs, f".{key}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(temporary, os.path.join(runs, key + ".json"))
    except Exception:  # noqa: BLE001 - an answer that cannot be kept: the next run is full
        return
