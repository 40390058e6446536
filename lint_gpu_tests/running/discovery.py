"""File discovery: turn the paths a user names into the sorted list of files to check.

Directories are walked for ``*.py`` files. Skipped while walking:

* the default excludes (:data:`DEFAULT_EXCLUDES`: ``.git``, virtualenv folders, ``build``,
  ``dist``, ``__pycache__``, ``.tox``, ``.nox``, ``node_modules``, ``*.egg-info``, ...), which the
  config key ``exclude`` replaces and ``extend-exclude`` extends, both gitignore-style and
  relative to the config's directory, as ruff spells them; each entry is matched against the
  patterns of the config that governs its directory (the nearest one walking up, see
  :class:`~lint_gpu_tests.config.ConfigResolver`), so a sub-project's own excludes hold in it;
* any directory holding a ``pyvenv.cfg`` (a virtualenv, whatever its name; always on);
* whatever ``.gitignore`` files ignore: the ones of the enclosing git checkout above the
  walked directory, ``.git/info/exclude``, and every nested ``.gitignore`` below it.

A file named explicitly is always checked, even when excluded or not ending in ``.py``,
unless ``force_exclude`` is set (as ruff's ``--force-exclude``, for pre-commit hooks).
A named path that does not exist raises :class:`PathNotFoundError`. Trouble met while
walking (a symlink loop, a dangling link, an unreadable directory) is recorded in
:attr:`Discovery.problems` and the walk goes on.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import lint_gpu_tests.running.answers as answers
from lint_gpu_tests.config import Config, ConfigResolver

if TYPE_CHECKING:  # imported when a pattern needs it: most walks match base names only
    import pathspec

DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git/",
    ".hg/",
    ".svn/",
    ".bzr/",
    ".venv/",
    "venv/",
    ".tox/",
    ".nox/",
    "build/",
    "dist/",
    "__pycache__/",
    "node_modules/",
    "*.egg-info/",
    ".eggs/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".gpu-test-lint-cache/",
    "__pypackages__/",
)
"""Gitignore-style patterns skipped while walking unless ``exclude`` replaces them."""

PYTHON_SUFFIXES = (".py",)


class PathNotFoundError(Exception):
    """A path named by the user does not exist (the message names it)."""


@dataclass(frozen=True)
class Problem:
    """Something met while walking that did not stop the run.

    Attributes:
        path: the path concerned, as it would be printed.
        message: what went wrong, e.g. ``"symlink loop"``.
        fatal: True when files may have gone unchecked (an unreadable directory), which
            makes the run exit with status 2; False for a mere warning.
    """

    path: str
    message: str
    fatal: bool = False


@dataclass
class Discovery:
    """Result of :func:`discover_files`.

    Attributes:
        files: paths to check, as the user spelled their roots, deduplicated and sorted.
        problems: trouble met while walking.
    """

    files: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _spec(lines: Iterable[str]) -> pathspec.GitIgnoreSpec:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(lines))


def _is_simple(pattern: str) -> bool:
    """A pattern that matches by base name alone: no slash but a trailing one, no ``**``,
    no escape. (Git matches a slash-free pattern against the name at any depth.)"""
    body = pattern[:-1] if pattern.endswith("/") else pattern
    return bool(body) and "/" not in body and "**" not in body and "\\" not in body


def _names_regex(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


class _Ignore(NamedTuple):
    """A ``.gitignore`` (or exclude list) anchored at ``base`` (an absolute directory).

    Speed matters here (every walked entry is checked against every applicable list):
    slash-free patterns become one base-name regex; only the others go through pathspec
    with a relative path. A list with a negation (``!pattern``) goes wholly through
    pathspec, so git's last-match-wins order is kept exactly.
    """

    base: str
    spec: pathspec.GitIgnoreSpec | None
    names_any: re.Pattern[str] | None = None
    names_dir: re.Pattern[str] | None = None

    @classmethod
    def from_lines(cls, base: str, lines: Iterable[str]) -> _Ignore:
        patterns = [line.rstrip() for line in lines]
        patterns = [p for p in patterns if p and not p.startswith("#")]
        if any(p.startswith("!") for p in patterns):
            return cls(base, _spec(patterns))
        simple = [p for p in patterns if _is_simple(p)]
        rest = [p for p in patterns if not _is_simple(p)]
        return cls(
            base,
            _spec(rest) if rest else None,
            _names_regex([p for p in simple if not p.endswith("/")]),
            _names_regex([p[:-1] for p in simple if p.endswith("/")]),
        )

    def rebased(self, base: str) -> _Ignore:
        """The same patterns anchored at another directory."""
        return _Ignore(base, self.spec, self.names_any, self.names_dir)

    def check(self, abspath: str, is_dir: bool) -> bool | None:
        """True ignored, False re-included (``!pattern``), None when no pattern matches."""
        name = os.path.basename(abspath)
        if self.names_any is not None and self.names_any.match(name):
            return True
        if is_dir and self.names_dir is not None and self.names_dir.match(name):
            return True
        if self.spec is None:
            return None
        if not abspath.startswith(self.base + os.sep):
            return None
        rel = abspath[len(self.base) + 1:].replace(os.sep, "/")
        if is_dir:
            rel += "/"
        return self.spec.check_file(rel).include


def _read_gitignore(directory: str) -> _Ignore | None:
    path = os.path.join(directory, ".gitignore")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    return _Ignore.from_lines(directory, lines) if lines else None


def _git_root(start: str) -> str | None:
    for directory in (start, *_parents(start)):
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
    return None


def _parents(path: str) -> list[str]:
    out: list[str] = []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def _inherited_gitignores(start: str) -> list[_Ignore]:
    """The ignore files that apply to ``start`` from above: those between the git root
    (if any) and ``start``'s parent, plus ``.git/info/exclude``; outermost first."""
    root = _git_root(start)
    if root is None:
        return []
    chain: list[_Ignore] = []
    info = os.path.join(root, ".git", "info", "exclude")
    try:
        with open(info, encoding="utf-8", errors="replace") as handle:
            chain.append(_Ignore.from_lines(root, handle.read().splitlines()))
    except OSError:
        pass
    above = [d for d in reversed(_parents(start)) if d.startswith(root)] if start != root else []
    for directory in above:
        found = _read_gitignore(directory)
        if found:
            chain.append(found)
    return chain


def _ignored_by(chain: Sequence[_Ignore], abspath: str, is_dir: bool) -> bool:
    """Git semantics: the deepest ignore file with a matching pattern decides."""
    for ignore in reversed(chain):
        verdict = ignore.check(abspath, is_dir)
        if verdict is not None:
            return verdict
    return False


def _exclude_spec(config: Config) -> _Ignore:
    patterns = list(config.exclude) if config.exclude else list(DEFAULT_EXCLUDES)
    patterns.extend(config.extend_exclude)
    return _Ignore.from_lines(os.path.abspath(config.root), patterns)


class _Excludes:
    """The exclude patterns that govern each directory's entries, built once per config."""

    def __init__(self, resolver: ConfigResolver) -> None:
        self.resolver = resolver
        self._specs: dict[int, tuple[Config, _Ignore]] = {}

    def __call__(self, directory: str) -> _Ignore:
        config = self.resolver.for_directory(directory)
        entry = self._specs.get(id(config))
        if entry is None or entry[0] is not config:
            entry = self._specs[id(config)] = (config, _exclude_spec(config))
        return entry[1]


def _excluded(exclude: _Ignore, abspath: str, is_dir: bool, walk_root: str) -> bool:
    verdict = exclude.check(abspath, is_dir)
    if verdict is None and not abspath.startswith(exclude.base + os.sep):
        # Outside the config root: anchor the patterns at the directory being walked.
        verdict = exclude.rebased(walk_root).check(abspath, is_dir)
    return bool(verdict)


def _file_excluded(absolute: str, exclude: _Ignore, respect_gitignore: bool) -> bool:
    """Whether an explicitly named file would have been skipped by a walk from the config
    root (used only with ``force_exclude``)."""
    parent = os.path.dirname(absolute)
    if _excluded(exclude, absolute, False, parent):
        return True
    if any(_excluded(exclude, d, True, parent) for d in _parents(absolute)
           if d.startswith(exclude.base + os.sep)):
        return True
    if respect_gitignore:
        chain = _inherited_gitignores(parent)
        own = _read_gitignore(parent)
        return _ignored_by([*chain, own] if own else chain, absolute, False)
    return False


def is_excluded(path: str, config: Config | ConfigResolver, *,
                respect_gitignore: bool = False) -> bool:
    """Whether a walk would skip ``path``: it or a directory above it (up to the config root)
    matches the ``exclude``/``extend-exclude`` patterns of the config governing it (and, with
    ``respect_gitignore``, a ``.gitignore``). The flake8 plugin asks this of each file flake8
    hands it, so both front ends check the same files.

    Raises:
        ConfigError: when the config file found is invalid.
    """
    absolute = os.path.abspath(path)
    if isinstance(config, ConfigResolver):
        config = config.for_file(absolute)
    return _file_excluded(absolute, _cached_exclude_spec(config, config.root), respect_gitignore)


@functools.lru_cache(maxsize=64)
def _cached_exclude_spec(config: Config, root: str) -> _Ignore:
    """:func:`_exclude_spec`, built once per config (``root`` is part of the key: configs
    that differ only in their root compare equal)."""
    return _exclude_spec(config)


def _display(given: str, rel_parts: Sequence[str]) -> str:
    return os.path.normpath(os.path.join(given, *rel_parts))


def discover_files(
    paths: Sequence[str],
    config: Config | ConfigResolver,
    *,
    respect_gitignore: bool = True,
    force_exclude: bool = False,
) -> Discovery:
    """Expand ``paths`` (files and directories) into the files to check.

    Args:
        paths: files or directories, as the user typed them; ``[]`` means ``["."]``.
        config: supplies ``exclude``/``extend-exclude`` and the root they are relative to;
            a :class:`~lint_gpu_tests.config.ConfigResolver` supplies them per directory.
        respect_gitignore: honour ``.gitignore`` files (default True).
        force_exclude: apply the excludes to explicitly named files too.

    Returns:
        A :class:`Discovery` whose ``files`` are normalised (``./a/../b.py`` -> ``b.py``),
        deduplicated by real location and sorted.

    Raises:
        PathNotFoundError: when a named path does not exist (a dangling link included).
        ConfigError: when a config file met on the way is invalid.
    """
    excludes = _Excludes(ConfigResolver.of(config))
    result = Discovery()
    seen: dict[str, str] = {}
    for given in paths or ["."]:
        if not os.path.lexists(given) or not os.path.exists(given):
            kind = "is a dangling symlink" if os.path.lexists(given) else "does not exist"
            raise PathNotFoundError(f"{given}: path {kind}")
        absolute = os.path.abspath(given)
        if not os.path.isdir(given):
            if force_exclude and _file_excluded(absolute, excludes(os.path.dirname(absolute)),
                                                respect_gitignore):
                continue
            seen.setdefault(absolute, os.path.normpath(given))
            continue
        chain = _inherited_gitignores(absolute) if respect_gitignore else []
        real = os.path.realpath(absolute)
        _walk(_Walk(given, absolute, excludes, respect_gitignore, seen, result, {real}),
              absolute, real, [], chain)
    result.files = sorted(set(seen.values()))
    return result


class _Walk(NamedTuple):
    """What stays the same during the walk of one named directory.

    Attributes:
        given: the directory as the user named it (reported paths start with it).
        root: its absolute path (excludes outside the config root are anchored there).
        active: the real paths of the directories on the current path (symlink loops).
    """

    given: str
    root: str
    excludes: _Excludes
    respect_gitignore: bool
    seen: dict[str, str]
    result: Discovery
    active: set[str]


def _walk(walk: _Walk, directory: str, real: str, rel_parts: list[str],
          chain: list[_Ignore]) -> None:
    """Depth-first walk of ``directory`` (absolute and normalised; ``real`` is its real
    path). A directory holding a ``pyvenv.cfg`` is a virtualenv and skipped whole."""
    answers.note_listed(directory)
    try:
        with os.scandir(directory) as entries:
            listing = sorted(entries, key=_entry_name)
    except OSError as exc:
        walk.result.problems.append(Problem(_display(walk.given, rel_parts),
                                            f"cannot read directory: {exc.strerror or exc}",
                                            fatal=True))
        return
    names = {entry.name for entry in listing}
    if rel_parts and "pyvenv.cfg" in names and os.path.exists(
            os.path.join(directory, "pyvenv.cfg")):
        return
    if walk.respect_gitignore and ".gitignore" in names:
        own = _read_gitignore(directory)
        if own is not None:
            chain = [*chain, own]
    exclude = walk.excludes(directory)
    shown = _display(walk.given, rel_parts)
    for entry in listing:
        path = entry.path
        name = entry.name
        try:
            is_dir = entry.is_dir()  # follows symlinks
            is_file = not is_dir and entry.is_file()
        except OSError as exc:
            walk.result.problems.append(Problem(_shown(shown, name), f"cannot stat: {exc}"))
            continue
        if not is_dir and not is_file:
            if entry.is_symlink():
                walk.result.problems.append(Problem(_shown(shown, name), "dangling symlink"))
            continue
        if is_dir:
            if _excluded(exclude, path, True, walk.root) or (
                chain and _ignored_by(chain, path, True)
            ):
                continue
            # Only a symlink can lead back up: other entries' real path is the parent's + name.
            child_real = os.path.realpath(path) if entry.is_symlink() else \
                os.path.join(real, name)
            if child_real in walk.active:
                walk.result.problems.append(Problem(_shown(shown, name), "symlink loop"))
                continue
            walk.active.add(child_real)
            _walk(walk, path, child_real, [*rel_parts, name], chain)
            walk.active.discard(child_real)
        elif name.endswith(PYTHON_SUFFIXES):
            if _excluded(exclude, path, False, walk.root) or (
                chain and _ignored_by(chain, path, False)
            ):
                continue
            walk.seen.setdefault(path, _shown(shown, name))


def _entry_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _shown(directory: str, name: str) -> str:
    """``name`` inside ``directory`` as reported (``directory`` as :func:`_display` gives it)."""
    return name if directory == "." else os.path.join(directory, name)
