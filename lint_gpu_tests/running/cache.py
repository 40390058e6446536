"""Content-hash result cache, laid out like ruff's.

The cache lives in ``.gpu-test-lint-cache/`` at the config root (or ``--cache-dir``, or the
``GPU_TEST_LINT_CACHE_DIR`` environment variable). Inside it, one JSON file per package
version and config fingerprint, ``<version>/<fingerprint>.json``, maps a file's absolute path
to the BLAKE2 hash of its bytes and the violations found in those bytes. An entry is used only
when the hash of the file's current bytes matches, so an edit, a config change (another
fingerprint) or an upgrade (another version) can never serve stale results. The same file
keeps the conftest index (:mod:`lint_gpu_tests.checking.conftest_index`): the hash of each
``conftest.py``'s bytes -> the engine fixtures it defines, so a warm run parses no conftest.

A file whose status (size, modification and change times, inode) and conftest fixtures are
what they were when its entry was stored is taken as unchanged without reading it, as ruff's
cache and git's index do: :func:`stat_key`. The change time cannot be set from user space, so
a file rewritten or replaced in place (even with its old size and modification time) gets
another key; an entry is given a key only when the file had not changed for
:data:`RACY_NS` before it was read (git's "racily clean" rule), so a change within the same
timestamp tick is never missed. Any other file is read and hashed.

Concurrent runs are safe: a cache file is written to a temporary file in the same directory and
moved into place with :func:`os.replace`, so readers see either the old or the new file, never a
torn one; entries written by another run in the meantime are merged, not dropped. A corrupt,
truncated or foreign cache file is treated as empty. Nothing here raises on I/O trouble: a cache
that cannot be read or written just makes the run slower.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lint_gpu_tests import __version__
from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation
from lint_gpu_tests.running.answers import (  # noqa: F401 - re-exported
    CACHE_DIR_ENV,
    CACHE_DIR_NAME,
    RACY_NS,
    package_stamp,
)

_FORMAT = 1


def stat_key(path: str, extra: str = "", now_ns: int | None = None) -> str | None:
    """The key under which a file's entry can be found without reading the file.

    Args:
        path: the file.
        extra: what else the entry depends on (the conftest engine fixtures it may receive).
        now_ns: the time of the ``stat`` (:func:`time.time_ns`, default now).

    Returns:
        ``"size:mtime_ns:ctime_ns:inode:extra"``, or ``None`` when the file cannot be
        ``stat``-ed or changed within :data:`RACY_NS` of ``now_ns``.
    """
    try:
        status = os.stat(path)
    except OSError:
        return None
    if now_ns is None:
        import time

        now_ns = time.time_ns()
    if max(status.st_mtime_ns, status.st_ctime_ns) > now_ns - RACY_NS:
        return None
    return f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}:{status.st_ino}:{extra}"


def content_hash(data: bytes) -> str:
    """Return the hex digest that keys a file's bytes in the cache."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def code_stamp() -> str:
    """Short hash of the checker's own sources (names, sizes, modification times), so that
    results cached by one build of the rules are never served to another, also between
    releases (an editable install, a patched rule); with the rules registered from outside
    the package (:func:`lint_gpu_tests.rules.register`: their class, code and source file's
    size and modification time), so a run with a project's own rule and one without never
    share results."""
    package = package_stamp()
    outside = _outside_rules()
    if not outside:
        return package
    return hashlib.blake2b("\n".join([package, *outside]).encode(), digest_size=6).hexdigest()


def _outside_rules() -> list[str]:
    """The rules registered from outside the package, one line each. Looked up only when the
    registry is loaded already (a run that the cache answers never loads it, and a rule
    registered by a wrapper script has loaded it)."""
    rules = sys.modules.get("lint_gpu_tests.rules")
    if rules is None:
        return []
    lines = []
    for rule in rules.outside_rules():
        source = getattr(sys.modules.get(rule.__module__), "__file__", None)
        try:
            stat = os.stat(source) if source else None
        except OSError:
            stat = None
        stamp = f"{stat.st_size}:{stat.st_mtime_ns}" if stat is not None else ""
        lines.append(f"{rule.__module__}.{rule.__qualname__}:{rule.code}:{stamp}")
    return sorted(lines)


def default_cache_dir(config_root: str, override: str | None = None) -> Path:
    """Return the cache directory: ``override``, else ``$GPU_TEST_LINT_CACHE_DIR``, else
    ``<config_root>/.gpu-test-lint-cache``."""
    chosen = override or os.environ.get(CACHE_DIR_ENV)
    return Path(chosen) if chosen else Path(config_root) / CACHE_DIR_NAME


def encode_violation(violation: Violation) -> list[Any]:
    """Encode a violation as a compact JSON-able list (without its path)."""
    fix = violation.fix
    return [
        violation.code,
        violation.name,
        violation.message,
        violation.location.row,
        violation.location.column,
        violation.end_location.row,
        violation.end_location.column,
        None if fix is None else [fix.applicability.value, fix.title, fix.reason],
    ]


def decode_violation(data: Sequence[Any], path: str) -> Violation:
    """Inverse of :func:`encode_violation`, for the file at ``path``.

    Raises:
        ValueError, TypeError, IndexError: when ``data`` is not a valid encoding.
    """
    code, name, message, row, col, end_row, end_col, fix = data
    return Violation(
        code=str(code),
        name=str(name),
        message=str(message),
        path=path,
        location=Location(int(row), int(col)),
        end_location=Location(int(end_row), int(end_col)),
        fix=None if fix is None else FixInfo(Applicability(fix[0]), str(fix[1]), str(fix[2])),
    )


class ResultCache:
    """Results of earlier runs for one (version, config fingerprint) pair.

    Use :meth:`lookup` before checking a file and :meth:`store` after, then :meth:`save`
    once at the end of the run.
    """

    def __init__(self, directory: Path, fingerprint: str) -> None:
        """Open (lazily create) the cache for ``fingerprint`` under ``directory``."""
        self.directory = directory
        self.file = directory / __version__ / f"{fingerprint}-{code_stamp()}.json"
        self._entries, self._conftests, self._units = self._read()
        self._dirty: dict[str, list[Any]] = {}
        self._new_conftests: dict[str, list[str]] = {}
        self._new_units: dict[str, dict[str, list[Any]]] = {}

    def _read(self) -> tuple[dict[str, list[Any]], dict[str, list[str]],
                             dict[str, dict[str, list[Any]]]]:
        try:
            data = json.loads(self.file.read_bytes())
        except (OSError, ValueError):
            return {}, {}, {}
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return {}, {}, {}
        entries = data.get("entries")
        conftests = data.get("conftests")
        units = data.get("units")
        return (entries if isinstance(entries, dict) else {},
                {k: v for k, v in conftests.items()
                 if isinstance(v, list) and all(isinstance(n, str) for n in v)}
                if isinstance(conftests, dict) else {},
                {k: v for k, v in units.items() if isinstance(v, dict)}
                if isinstance(units, dict) else {})

    def unit_outcome(self, key: str) -> dict[str, list[Violation]] | None:
        """The violations, by path, that the fix units across modules of a report-only run
        left on their modules, kept under ``key`` (the status of the trees' files, the
        configs in play and the modules that call a helper: the run makes it); None when none
        is kept or it does not decode."""
        entry = self._units.get(key)
        if entry is None:
            return None
        out: dict[str, list[Violation]] = {}
        for path, items in entry.items():
            decoded = self._decoded([None, items], path)
            if decoded is None:
                return None
            out[path] = decoded
        return out

    def store_unit_outcome(self, key: str, outcome: dict[str, Sequence[Violation]]) -> None:
        """Keep ``outcome`` (path -> violations) under ``key`` for :meth:`unit_outcome`; the
        outcomes kept before are dropped (one tree state is kept)."""
        self._units = {key: {p: [encode_violation(v) for v in vs] for p, vs in outcome.items()}}
        self._new_units = dict(self._units)

    @property
    def conftests(self) -> dict[str, list[str]]:
        """The conftest index kept here: content hash -> engine fixture names."""
        return self._conftests

    def store_conftests(self, entries: dict[str, list[str]]) -> None:
        """Keep conftest index entries (content hash -> fixture names) for later runs."""
        for digest, names in entries.items():
            if self._conftests.get(digest) != names:
                self._conftests[digest] = names
                self._new_conftests[digest] = names

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, path: str, digest: str) -> list[Violation] | None:
        """Return the cached violations of ``path`` if its bytes still hash to ``digest``.

        Args:
            path: the file's path as it will be reported (the key is its absolute form).
            digest: :func:`content_hash` of the file's current bytes.
        """
        entry = self._entries.get(os.path.abspath(path))
        if not isinstance(entry, list) or len(entry) not in (2, 3) or entry[0] != digest:
            return None
        return self._decoded(entry, path)

    def lookup_unchanged(self, path: str, key: str) -> list[Violation] | None:
        """Return the cached violations of ``path`` if its entry was stored under ``key``
        (:func:`stat_key` of the file now), without reading the file."""
        entry = self._entries.get(os.path.abspath(path))
        if not isinstance(entry, list) or len(entry) != 3 or entry[2] != key:
            return None
        return self._decoded(entry, path)

    @staticmethod
    def _decoded(entry: list[Any], path: str) -> list[Violation] | None:
        try:
            return [decode_violation(item, path) for item in entry[1]]
        except (ValueError, TypeError, IndexError, KeyError):
            return None

    def store(self, path: str, digest: str, violations: Sequence[Violation],
              key: str | None = None) -> None:
        """Remember that bytes hashing to ``digest`` at ``path`` gave ``violations``; with
        ``key`` (:func:`stat_key` taken before those bytes were read), also findable by
        :meth:`lookup_unchanged`."""
        entry: list[Any] = [digest, [encode_violation(v) for v in violations]]
        if key is not None:
            entry.append(key)
        path_key = os.path.abspath(path)
        if self._entries.get(path_key) != entry:
            self._entries[path_key] = entry
            self._dirty[path_key] = entry

    def save(self) -> None:
        """Write new entries, merged over whatever another run saved meanwhile.

        Never raises for I/O errors (a read-only checkout simply runs uncached).
        """
        if not self._dirty and not self._new_conftests and not self._new_units:
            return
        from lint_gpu_tests.parsing.writer import (
            atomic_write,  # tempfile & co: only runs that write
        )

        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            _mark_cache_dir(self.directory)
            merged, conftests, units = self._read()
            merged.update(self._dirty)
            conftests.update(self._new_conftests)
            units = self._new_units or units
            payload = json.dumps({"format": _FORMAT, "version": __version__, "entries": merged,
                                  "conftests": conftests, "units": units},
                                 separators=(",", ":")).encode()
            atomic_write(self.file, payload)
        except OSError:
            return
        self._entries, self._conftests, self._units = merged, conftests, units
        self._dirty, self._new_conftests, self._new_units = {}, {}, {}


def _mark_cache_dir(directory: Path) -> None:
    """Add a ``.gitignore`` and a ``CACHEDIR.TAG`` as ruff does, once."""
    from lint_gpu_tests.parsing.writer import atomic_write

    gitignore = directory / ".gitignore"
    if not gitignore.exists():
        atomic_write(gitignore, b"# Automatically created by gpu-test-lint.\n*\n")
    tag = directory / "CACHEDIR.TAG"
    if not tag.exists():
        atomic_write(tag, b"Signature: 8a477f597d28d172789f06886806bc55\n")
