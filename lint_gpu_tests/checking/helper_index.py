"""Engine helpers of a tree, summarised once per tree, followed through imports.

A test that gets its engine from a helper of another module (``from tests.utils import
setup_engine``; ``from .utils import ...``; ``from utils import ...`` with the test's
directories on ``sys.path``, as pytest's rootdir-relative and conftest-style imports put
them; ``import tests.utils as u``; a name re-exported one level deep, ``from .engine import
setup_engine`` in ``tests/utils/__init__.py``) owns that engine. What the checker needs of
the other module is a summary, computed once per tree and kept by content:

* ``f``: a module-level function that builds an engine and returns it
  (:attr:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.engine_factories`), with the engine's
  ``gpu_memory_utilization`` where the helper writes it as a literal;
* ``c``: a class whose methods store an engine on an attribute of ``self``
  (``self.llm = LLM(...)``), with those attributes;
* ``p``: a function that runs a function it is given as its own process
  (``multiprocessing.Process(target=target)``), with that parameter: what a test module
  hands it is isolated (and more kinds: :func:`~lint_gpu_tests.analysis.analysis.engine_helpers`).

The tree is the directory of the project root (the first directory up from a module holding
a root marker, as for the conftests), or, where none is found, the parent of the outermost
directory of the module's chain of packages and conftest directories (:func:`tree_root`).
Its ``.py`` files are listed once per index (hidden directories, ``__pycache__``, virtual
environments and ``site-packages`` left out; at most :data:`MAX_TREE_FILES`); test modules
count only when an import statement of the tree names them (:data:`IMPORT_STATEMENT`, read
in bytes when the tree's record misses). Only a file that names an engine class and
defines a class or a function not named ``test...`` at its top level is parsed
(:func:`may_define_helpers`); a
module that is not a test module and names an exported helper is read for its top-level
re-exports (:data:`REEXPORT`, no parse). The result cache keeps, beside the conftests'
entries, the summary of each parsed file by its content and its status (path, size,
modification time), and the whole tree's summaries by the status of all its files (not kept
while a file is younger than :data:`RACY_NS`), so a warm run reads no file for them. What a
module may import is handed to its analysis as entries beside the conftests'
(:data:`~lint_gpu_tests.ftypes.ENGINE_HELPER`), one per spelling of each helper's import
from the module's directory: so a module that imports none of them pays one look-up per
import, and the prefilter lets a file through that imports and names a helper (its bytes
need not name ``LLM``).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterable, Iterator
from typing import Protocol

import lint_gpu_tests.running.answers as answers
from lint_gpu_tests.config import ROOT_MARKERS, Config, is_test_module
from lint_gpu_tests.ftypes import CLEANUP_FUNCTIONS, ENGINE_HELPER

#: Directory names never walked for helpers.
SKIPPED_DIRECTORIES = frozenset({"__pycache__", "node_modules", "site-packages", "venv",
                                 "env", "build", "dist"})
#: Most ``.py`` files of one tree looked at; a larger tree is summarised in part.
MAX_TREE_FILES = 20000
MAX_LEVELS = 32
RACY_NS = 3_000_000_000
"""As :data:`lint_gpu_tests.checking.conftest_index.RACY_NS`: a file modified this recently is not
kept by its status."""

#: A top-level ``from X import a, b as c`` (one line, or parenthesised), read in bytes.
REEXPORT = re.compile(
    rb"^from[ \t]+(\.*[A-Za-z0-9_.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;\\]*)", re.M)
#: The first line of an import statement (``from X import ...``, ``import X``), at any
#: indentation, read in bytes.
IMPORT_STATEMENT = re.compile(rb"[ \t]*(?:from[ \t]+\.*[A-Za-z0-9_.]*[ \t]+import|import)[ \t(]")
#: Where any file may name a module to import it from a string: ``__import__(...)``; and a
#: ``conftest.py``, ``pytest_plugins = [...]`` too (:data:`CONFTEST_IMPORTS`).
DYNAMIC_IMPORTS = (b"__import__",)
CONFTEST_IMPORTS = (b"pytest_plugins", b"__import__")
#: The same in a file that imports ``importlib`` or ``runpy``: ``import_module(...)``, their
#: runs, a spec or a loader from a path.
IMPORTLIB_CALLS = (b"import_module", b"run_module", b"run_path", b"spec_from_file_location",
                   b"SourceFileLoader")
#: A name pytest collects as a test module (``test_*``, ``*_test``).
TEST_MODULE_NAME = re.compile(rb"\b(test_\w+|\w+_test)\b")
#: A top-level class, or a function not named ``test...``: where a helper can be.
DEFINITION = re.compile(rb"^(?:class[ \t]|(?:async[ \t]+)?def[ \t]+(?!test))", re.M)
#: Words one of which a cleanup helper's module writes (``gc.collect()``, an
#: ``empty_cache()``, a ``.shutdown()``; vLLM's cleanup functions are added from
#: :data:`~lint_gpu_tests.ftypes.CLEANUP_FUNCTIONS`): such a module is parsed for its cleanup
#: helpers (kind ``"x"``) though it names no engine class.
CLEANUP_WORDS = frozenset({b"collect", b"empty_cache", b"shutdown"})
#: Key prefix of a file's summary by status in the result cache's conftest entries.
STATUS_KEY = "tree-helpers:"

Summary = tuple[str, ...]
"""One file's summary: ``f|name|line|share`` and ``c|name|line|attr,attr`` entries."""


class SummaryStore(Protocol):
    """What :func:`build_tree` asks of the index it builds for
    (:class:`~lint_gpu_tests.checking.conftest_index.ConftestIndex`)."""

    def recall(self, config: Config, key: str) -> frozenset[str] | None:
        """What is known under ``key``, else ``None``."""

    def keep(self, config: Config, key: str, names: frozenset[str]) -> None:
        """Know ``names`` under ``key`` (and keep them in the result cache)."""

    def tree_summary(self, path: str, size: int, mtime_ns: int, config: Config,
                     now_ns: int, source: bytes | None = None) -> Summary:
        """The summary of one version of the file at ``path`` (``source``: its bytes, when
        already read)."""


def tree_root(directory: str) -> str:
    """The directory whose ``.py`` files make the tree of a module in ``directory``: the
    first directory up from it holding a root marker (``pyproject.toml``, ``.git``, ...: the
    project's root, as for the conftests), else the parent of the outermost directory of
    the packages and conftest directories around the module, the first of them the nearest
    above it where ``directory`` is neither (pytest puts a conftest's directory on
    ``sys.path``, so ``tests/e2e/test_x.py`` imports ``tests/util.py`` as ``util`` beside
    ``tests/conftest.py``); ``directory`` itself where none is around it."""
    current = os.path.abspath(directory)
    for _ in range(MAX_LEVELS):
        if any(os.path.exists(os.path.join(current, m)) for m in ROOT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    def holds(path: str) -> bool:
        return os.path.isfile(os.path.join(path, "__init__.py")) or \
            os.path.isfile(os.path.join(path, "conftest.py"))

    start = os.path.abspath(directory)
    current = start
    for _ in range(MAX_LEVELS):
        if holds(current):
            break
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent
    else:
        return start
    while holds(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def _python_files(root: str) -> Iterator[tuple[str, int, int]]:
    """``(path, size, modification time in ns)`` of the tree's ``.py`` files."""
    stack = [root]
    count = 0
    while stack:
        directory = stack.pop()
        answers.note_listed(directory)
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not name.startswith(".") and name not in SKIPPED_DIRECTORIES:
                        stack.append(entry.path)
                    continue
                if not name.endswith(".py") or not entry.is_file():
                    continue
                stat = entry.stat()
            except OSError:
                continue
            count += 1
            if count > MAX_TREE_FILES:
                return
            yield entry.path, stat.st_size, stat.st_mtime_ns


def _listing_digest(files: Iterable[tuple[str, int, int]]) -> str:
    """Digest of ``(path, size, modification time)`` rows, as :func:`_python_files` gives."""
    listing = hashlib.blake2b(digest_size=16)
    for path, size, mtime in files:
        listing.update(f"{path}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return listing.hexdigest()


def list_tree(root: str) -> int:
    """Walk the tree at ``root`` as its helper summaries do, listing its directories (into
    :data:`lint_gpu_tests.running.answers.LISTED` when a run collects them); return how many
    ``.py`` files it holds (at most :data:`MAX_TREE_FILES`)."""
    return sum(1 for _ in _python_files(root))


def tree_status(root: str, now_ns: int | None = None) -> str | None:
    """A key for the state of every ``.py`` file of the tree at ``root`` (test modules
    included) found without reading them: the digest of their paths, sizes and modification
    times. None when one of them was modified within :data:`RACY_NS` of ``now_ns`` (default
    now): a change in the same timestamp tick could then go unseen."""
    files = list(_python_files(root))
    now = time.time_ns() if now_ns is None else now_ns
    if any(now - mtime <= RACY_NS for _, _, mtime in files):
        return None
    return _listing_digest(files)


def tree_files(root: str) -> list[str]:
    """The ``.py`` files of the tree at ``root`` (test modules included), as the index
    lists them (at most :data:`MAX_TREE_FILES`)."""
    return [path for path, _, _ in _python_files(root)]


class TreeHelpers:
    """The engine helpers of one tree: each file's summary, and the re-exports of them."""

    def __init__(self, root: str, summaries: dict[str, Summary],
                 reexports: dict[str, list[tuple[str, str, str]]],
                 helpers_imported: frozenset[str] = frozenset(),
                 test_modules_named: frozenset[str] | None = None) -> None:
        self.root = root
        #: Absolute paths of the test modules one of whose helpers an import of the tree
        #: names (or that a module imports whole).
        self.helpers_imported = helpers_imported
        #: The test modules' names (``test_x``) that an import, a ``pytest_plugins`` entry
        #: or a dynamic import (``importlib.import_module``, ``__import__``, ``runpy``) of
        #: the tree names; ``None`` where the tree's files were not scanned for them.
        self.test_modules_named = test_modules_named
        #: Absolute path -> its summary (files with at least one helper).
        self.summaries = summaries
        #: Absolute path -> ``(module as written, name, local name)`` of its top-level
        #: ``from ... import`` of a helper's name.
        self.reexports = reexports
        self._entries: dict[str, frozenset[str]] = {}
        self._exports: dict[str, list[tuple[str, str, str, str]]] | None = None

    def entries(self, module_path: str) -> frozenset[str]:
        """The entries (:data:`~lint_gpu_tests.ftypes.ENGINE_HELPER`) of the helpers a
        module at ``module_path`` may import, by every spelling of the import (its own
        helpers left out)."""

        module_path = os.path.abspath(module_path)
        directory = os.path.dirname(module_path)
        found = self._entries.get(directory)
        if found is None:
            out: set[str] = set()
            if self._exports is None:
                self._exports = self._exported()
            for path, helpers in self._exports.items():
                for spelling in _spellings(path, directory, self.root):
                    for local, entry, defined, via in helpers:
                        out.add(f"{ENGINE_HELPER}{spelling}.{local}|{entry}|{defined}|{via}")
            found = self._entries[directory] = frozenset(out)
        if not self.defines(module_path):
            return found
        own = f"|{self.shown(module_path)}|"
        return frozenset(e for e in found if not e.endswith(own))

    def private_test_module(self, module_path: str) -> bool:
        """True when ``module_path`` is a test module or a ``conftest.py`` that no file of
        the tree imports or names for a dynamic import (:attr:`test_modules_named`; any
        import naming a ``conftest`` counts for every conftest): pytest collects or loads
        it, no other module calls its helpers."""
        named = self.test_modules_named
        base = os.path.basename(module_path)
        return named is not None and base.endswith(".py") and (
            is_test_module(module_path) or base == "conftest.py") and base[:-3] not in named

    def defines(self, module_path: str) -> bool:
        """Whether the module at ``module_path`` (absolute) defines a helper: its entries
        leave its own out, where every other module of its directory gets the same."""
        return module_path in self.summaries

    def shown(self, path: str) -> str:
        """``path`` relative to the tree's root, with ``/``."""
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def _exported(self) -> dict[str, list[tuple[str, str, str, str]]]:
        """Absolute path of a module -> ``(name, summary entry, defining module, module
        re-exporting it or "")`` of each helper importable from it: its own, and those it
        re-exports (one level)."""
        out: dict[str, list[tuple[str, str, str, str]]] = {
            path: [(entry.split("|")[1], entry, self.shown(path), "") for entry in summary]
            for path, summary in self.summaries.items()}
        for path, found in self.reexports.items():
            for module, name, local in found:
                target = resolve_import(module, path, self.root)
                if target is None or target == path:
                    continue
                for entry in self.summaries.get(target, ()):
                    if entry.split("|")[1] == name:
                        out.setdefault(path, []).append(
                            (local, entry, self.shown(target), self.shown(path)))
        return out


def _module_parts(path: str, base: str) -> list[str] | None:
    """The dotted parts naming the module at ``path`` from the directory ``base`` (``None``
    when it is not below it)."""
    relative = os.path.relpath(path, base)
    if relative.startswith(os.pardir):
        return None
    parts = relative[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts.pop()
    return parts if parts and all(p.isidentifier() for p in parts) else None


def _spellings(path: str, directory: str, root: str) -> list[str]:
    """How a module in ``directory`` may name the module at ``path`` in an import:
    absolute from each directory between it and ``root`` (both included), and relative
    (``.x``, ``..x``) from its package and those above it."""
    out: list[str] = []
    current = directory
    level = 1
    while True:
        parts = _module_parts(path, current)
        if parts:
            out.append(".".join(parts))
            out.append("." * level + ".".join(parts))
        if current == root or len(current) <= len(root):
            break
        current = os.path.dirname(current)
        level += 1
    return out


def resolve_import(module: str, importer: str, root: str) -> str | None:
    """The file a module at ``importer`` imports as ``module`` (``.engine``,
    ``tests.utils.engine``), looked for as :func:`_spellings` spells them.

    Args:
        module: the dotted name as the import spells it, leading dots for a relative import.
        importer: the importing file's absolute path.
        root: the tree's root (absolute); an absolute import is looked for from each
            directory between the importer's and it, both included.

    Returns:
        The absolute path of the ``.py`` file (or package ``__init__.py``), or None when no
        file of the tree is that module.
    """
    level = len(module) - len(module.lstrip("."))
    parts = [p for p in module.lstrip(".").split(".") if p]
    bases: list[str] = []
    directory = os.path.dirname(importer)
    if level:
        base = directory
        for _ in range(level - 1):
            base = os.path.dirname(base)
        bases.append(base)
    else:
        current = directory
        while True:
            bases.append(current)
            if current == root or len(current) <= len(root):
                break
            current = os.path.dirname(current)
    for base in bases:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def may_define_helpers(source: bytes, config: Config) -> bool:
    """Whether the module with the bytes ``source`` may define an engine helper: it names
    an engine class or a cleanup call a cleanup helper is made of (:data:`CLEANUP_WORDS`,
    the configured ``cleanup-functions``), or spells every part of a process launcher's
    qualified name (``multiprocessing`` and ``Process``: what a launcher helper must write,
    :func:`~lint_gpu_tests.analysis.process_targets.spells_a_launcher`), and defines a
    class or a function not named ``test...`` at its top level."""
    from lint_gpu_tests.analysis.process_targets import spells_a_launcher
    from lint_gpu_tests.parsing.prefilter import Prefilter

    if DEFINITION.search(source) is None:
        return False
    names = (*config.engine_classes, *CLEANUP_FUNCTIONS, *config.cleanup_functions)
    words = tuple(sorted({c.rsplit(".", 1)[-1].encode() for c in names} | CLEANUP_WORDS))
    return Prefilter(words, False).admits(source) or \
        spells_a_launcher(source, config.process_launchers)


def summarise(source: bytes, path: str, config: Config) -> Summary:
    """The summary of the module at ``path`` (its bytes ``source``): its engine helpers
    (:func:`~lint_gpu_tests.analysis.analysis.engine_helpers`); empty when it does not parse."""
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis, engine_helpers
    from lint_gpu_tests.parsing.source import parse_source

    tree, text, error = parse_source(source, path)
    if error is not None or tree is None:
        return ()
    try:
        module = ModuleAnalysis.build(tree, text, path, config, summarise=True)
        return engine_helpers(module)
    except (RecursionError, MemoryError):
        return ()


def build_tree(root: str, config: Config, index: SummaryStore) -> TreeHelpers:
    """Summarise the tree at ``root`` under ``config``, with what ``index`` knows: the
    whole tree by the status of all its files (one entry, when none was modified in the last
    :data:`RACY_NS`), else file by file (:meth:`SummaryStore.tree_summary`)."""
    listed = list(_python_files(root))
    now = time.time_ns()
    key = f"{STATUS_KEY}tree:{_listing_digest(listed)}"
    known = index.recall(config, key)
    if known is not None:
        return _from_record(root, known)
    # Each file is read once here, its bytes handed to every step (dropped when built).
    sources: dict[str, bytes] = {}
    for path, _, _ in listed:
        try:
            with open(path, "rb") as handle:
                sources[path] = handle.read()
        except OSError:
            continue
    # A test module's helpers serve its own tests (the module's own engine_factories); it is
    # summarised only when a module of the tree imports it by name.
    imported, named = _imported_test_modules(sources.items())
    named.update(imported)
    files = [f for f in listed if f[0] in sources and (
        not is_test_module(f[0]) or os.path.basename(f[0])[:-3] in imported)]
    summaries: dict[str, Summary] = {}
    for path, size, mtime in files:
        summary = index.tree_summary(path, size, mtime, config, now, sources[path])
        if summary:
            summaries[path] = summary
    reexports: dict[str, list[tuple[str, str, str]]] = {}
    names = {entry.split("|")[1] for s in summaries.values() for entry in s}
    if names:
        needles = tuple(sorted(n.encode() for n in names))
        for path, _, _ in files:
            found = _reexports_in(sources[path], needles, names)
            if found:
                reexports[path] = found
    helpers_imported = _imported_helpers(summaries, imported)
    if all(now - mtime > RACY_NS for _, _, mtime in listed):
        index.keep(config, key, frozenset(
            [f"S\t{path}\t{entry}" for path, summary in summaries.items() for entry in summary]
            + [f"R\t{path}\t{m}\t{n}\t{local}" for path, found in reexports.items()
               for m, n, local in found]
            + [f"T\t{path}" for path in helpers_imported]
            + [f"N\t{stem}" for stem in named] + ["N"]))
    return TreeHelpers(root, summaries, reexports, helpers_imported, frozenset(named))


def _imported_test_modules(sources: Iterable[tuple[str, bytes]]
                           ) -> tuple[dict[str, frozenset[str] | None], set[str]]:
    """The test modules (``test_x``, ``x_test``) that an import statement of one of
    ``sources`` (each file's path and bytes) names on its first line (``from tests.test_x
    import f``, ``from .test_x import f``, ``from . import test_x``, ``import
    tests.test_x``), at any indentation, each with the names imported from it: ``None``
    when the module itself is imported, or its names do not stand on that line (a
    parenthesised list). Second, the names of the test modules that may be imported
    otherwise: listed by a parenthesised ``from ... import (`` on its next lines, or named
    in a string for a dynamic import (:data:`DYNAMIC_IMPORTS`, :data:`CONFTEST_IMPORTS`;
    :data:`IMPORTLIB_CALLS` in a file importing ``importlib`` or ``runpy``)."""
    found: dict[str, frozenset[str] | None] = {}
    named: set[str] = set()
    for path, data in sources:
        importlib = False
        at = data.find(b"import")
        while at >= 0:  # bytes.find, not a regex over the whole file: this runs on every file
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            line = data[start:end]
            opens = b"(" in line and b")" not in line
            if not importlib and (b"importlib" in line or b"runpy" in line) and \
                    IMPORT_STATEMENT.match(line):
                importlib = True
            if (opens or b"test" in line) and IMPORT_STATEMENT.match(line):
                if b"test" in line:
                    if b"conftest" in line:
                        named.add("conftest")
                    for module, names in _test_modules_on(line):
                        known = found.get(module, frozenset())
                        found[module] = None if names is None or known is None else \
                            known | names
                if opens:
                    # ``from tests import (`` with the modules on the lines after it
                    close = data.find(b")", end)
                    rest = data[end:len(data) if close < 0 else close]
                    named.update(m.group(1).decode("ascii", "replace")
                                 for m in TEST_MODULE_NAME.finditer(rest))
                    if b"conftest" in rest:
                        named.add("conftest")
            at = data.find(b"import", end)
        needles = CONFTEST_IMPORTS if os.path.basename(path) == "conftest.py" else \
            DYNAMIC_IMPORTS
        for needle in needles + IMPORTLIB_CALLS if importlib else needles:
            at = data.find(needle)
            while at >= 0:
                close = _closing(data, at)
                named.update(m.group(1).decode("ascii", "replace")
                             for m in TEST_MODULE_NAME.finditer(data, at + len(needle), close))
                if data.find(b"conftest", at, close) >= 0:
                    named.add("conftest")
                at = data.find(needle, close)
    return found, named


def _closing(data: bytes, at: int) -> int:
    """Where the expression that starts at ``at`` of ``data`` ends, as far as a scan for
    module names needs: the first ``)`` or ``]`` after it (a ``pytest_plugins`` list, a
    call's arguments), else the end of its line."""
    ends = [i for i in (data.find(b")", at), data.find(b"]", at)) if i >= 0]
    if ends:
        return min(ends)
    end = data.find(b"\n", at)
    return len(data) if end < 0 else end


def _test_modules_on(line: bytes) -> Iterator[tuple[str, frozenset[str] | None]]:
    """The test modules the import statement starting ``line`` names, with the names it
    imports from each (``None``: the module itself, or names not on this line)."""
    head, sep, tail = line.partition(b" import ")
    from_import = bool(sep) and line.lstrip().startswith(b"from")
    names: frozenset[str] | None = None
    if from_import and b"(" not in tail and not tail.rstrip().endswith(b"\\"):
        names = frozenset(item.split()[0].decode("ascii", "replace")
                          for item in tail.split(b"#")[0].split(b",") if item.split())
    for match in TEST_MODULE_NAME.finditer(line):
        module = match.group(1).decode("ascii", "replace")
        yield module, names if from_import and match.start() < len(head) else None


def _imported_helpers(summaries: dict[str, Summary],
                      imported: dict[str, frozenset[str] | None]) -> frozenset[str]:
    """The test modules of ``summaries`` (absolute paths) one of whose helpers an import of
    the tree may name (:func:`_imported_test_modules`)."""
    out = set()
    for path, summary in summaries.items():
        if not is_test_module(path):
            continue
        names = imported.get(os.path.basename(path)[:-3], frozenset())
        if names is None or any(entry.split("|")[1] in names for entry in summary):
            out.add(path)
    return frozenset(out)


def _from_record(root: str, record: frozenset[str]) -> TreeHelpers:
    """The :class:`TreeHelpers` a tree's record (:func:`build_tree`) keeps."""
    summaries: dict[str, list[str]] = {}
    reexports: dict[str, list[tuple[str, str, str]]] = {}
    imported: set[str] = set()
    named: set[str] | None = None
    for line in sorted(record):
        parts = line.split("\t")
        if parts[0] == "N":
            named = set() if named is None else named
            if len(parts) == 2:
                named.add(parts[1])
        elif parts[0] == "S" and len(parts) == 3:
            summaries.setdefault(parts[1], []).append(parts[2])
        elif parts[0] == "R" and len(parts) == 5:
            reexports.setdefault(parts[1], []).append((parts[2], parts[3], parts[4]))
        elif parts[0] == "T" and len(parts) == 2:
            imported.add(parts[1])
    return TreeHelpers(root, {p: tuple(s) for p, s in summaries.items()}, reexports,
                       frozenset(imported), None if named is None else frozenset(named))


def _reexports_in(source: bytes, needles: tuple[bytes, ...], names: set[str]
                  ) -> list[tuple[str, str, str]]:
    """The top-level ``from M import name [as local]`` of a helper's name in a file's bytes
    ``source`` (parsed only when they name one)."""
    if not any(n in source for n in needles):
        return []
    out: list[tuple[str, str, str]] = []
    for match in REEXPORT.finditer(source):
        module = match.group(1).decode("ascii", "replace")
        for item in match.group(2).strip(b"()").split(b","):
            words = item.split()
            if not words:
                continue
            name = words[0].decode("ascii", "replace")
            local = words[2].decode("ascii", "replace") if len(words) == 3 and \
                words[1] == b"as" else name
            if name in names and local.isidentifier():
                out.append((module, name, local))
    return out
