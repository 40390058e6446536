"""Engine fixtures defined in the ``conftest.py`` files pytest loads for a test module.

GPU004 fires in a function that *receives* an engine from a fixture (docs/rules.md, GPU004). Such
fixtures usually live in a ``conftest.py`` beside or above the test module, so the checker
reads those too: every ``conftest.py`` from the module's directory up to the project root
(the first directory holding ``pyproject.toml``, ``setup.cfg``, ``tox.ini``, ``pytest.ini``
or ``.git``, as pytest's rootdir search does). Which directories hold a conftest or a root
marker is asked again whenever a directory's modification time changes (a process that checks
twice sees a conftest added in between).

What a run learns of the conftests lives in its :class:`ConftestIndex` (the run's context
owns it, :class:`lint_gpu_tests.running.run.RunContext`; a check without a run makes one for
itself): each conftest is read once per index (memoised by its path, size and modification
time) and parsed only when its content is new: the names found are kept by the BLAKE2b hash
of its bytes, and the result cache persists that index (:meth:`ConftestIndex.remember` loads
it, :meth:`ConftestIndex.learned` hands back what a run found), so a warm run parses no
conftest at all.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from lint_gpu_tests.checking.helper_index import (
    STATUS_KEY,
    Summary,
    TreeHelpers,
    build_tree,
    may_define_helpers,
    summarise,
    tree_root,
)
from lint_gpu_tests.config import ROOT_MARKERS, STDIN_PATH, Config, project_module
from lint_gpu_tests.ftypes import IMPORTED_TEST_MODULE, PRIVATE_TEST_MODULE

if TYPE_CHECKING:
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis

MAX_ANALYSED = 64
"""Most analyses of conftests an index keeps for :meth:`ConftestIndex.analysed`."""
MAX_READ = 256
"""Most conftest versions (path, size, modification time, config) an index keeps read."""

MAX_LEVELS = 32

#: Prefix of the entries of a conftest's index naming a module of its ``pytest_plugins``
#: (``pytest-plugin:tests.fixtures.engines``), whose entries it hands on as its own.
PYTEST_PLUGIN = "pytest-plugin:"
PLUGINS_NAME = b"pytest_plugins"
#: Prefix of the entries of a conftest's index naming a fixture it defines that provides no
#: engine (``fixture:llm``): it hides an engine fixture of that name further from the module.
DEFINED_FIXTURE = "fixture:"


def conftest_files(path: str, chains: dict[str, tuple[str, ...]] | None = None
                   ) -> list[str]:
    """The ``conftest.py`` files pytest would load for the module at ``path``, innermost
    first (``path`` itself excluded). Empty for a path that is not a file on disk, but for a
    nameless source read from standard input (:data:`~lint_gpu_tests.config.STDIN_PATH`), a
    module of the current directory. ``chains`` (directory -> its conftests, for one run)
    keeps what each directory's walk found, so a directory's parents are looked at once per
    run."""
    if path != STDIN_PATH and not os.path.isfile(path):
        return []
    absolute = os.path.abspath(path)
    return [c for c in _conftests_from(os.path.dirname(absolute), chains) if c != absolute]


_LEVELS: dict[str, tuple[int, bool, bool]] = {}
"""Absolute directory -> (its modification time in ns, whether it holds a ``conftest.py``
file, whether it is a project root), for :func:`_level`."""
MAX_LEVELS_KEPT = 4096
RACY_NS = 3_000_000_000
"""A directory modified less than this long ago (ns) is not kept: file systems stamp
times from a coarse clock (a few ms on Linux, 2 s on FAT), so an entry added in the same
tick as the answer was found would leave the time unchanged (git's "racily clean" case)."""


def _level(directory: str) -> tuple[bool, bool]:
    """``(holds a conftest.py file, is the project root)`` for ``directory``. Kept for as
    long as the directory's modification time stays the same: creating, removing or
    renaming an entry in a directory changes it, so a process that checks again (an
    editor's, a test's) sees a ``conftest.py`` or root marker added since; one stat per
    directory asks, where the answer itself takes six. A directory modified in the last
    :data:`RACY_NS` is asked in full each time."""
    parent = os.path.dirname(directory)
    try:
        mtime = os.stat(directory).st_mtime_ns
    except OSError:
        return False, parent == directory
    known = _LEVELS.get(directory)
    if known is not None and known[0] == mtime:
        return known[1], known[2]
    here = os.path.isfile(os.path.join(directory, "conftest.py"))
    at_root = parent == directory or any(
        os.path.exists(os.path.join(directory, m)) for m in ROOT_MARKERS)
    if time.time_ns() - mtime > RACY_NS:
        if len(_LEVELS) >= MAX_LEVELS_KEPT:
            _LEVELS.clear()
        _LEVELS[directory] = (mtime, here, at_root)
    return here, at_root


def _conftests_from(directory: str, chains: dict[str, tuple[str, ...]] | None = None
                    ) -> tuple[str, ...]:
    """``conftest.py`` files in ``directory`` and its parents up to the project root
    (``chains``: as :func:`conftest_files`)."""
    walked: list[tuple[str, bool]] = []
    tail: tuple[str, ...] = ()
    while True:
        if chains is not None and directory in chains:
            tail = chains[directory]
            break
        here, at_root = _level(directory)
        walked.append((directory, here))
        if at_root or directory.count(os.sep) > MAX_LEVELS:  # at_root: "/" too
            break
        directory = os.path.dirname(directory)
    for walked_dir, here in reversed(walked):  # outermost first: each gets its chain
        if here:
            tail = (os.path.join(walked_dir, "conftest.py"), *tail)
        if chains is not None:
            chains[walked_dir] = tail
    return tail


_SUMMARIES: dict[tuple[str, int, int, Config], Summary] = {}
"""(path, size, modification time in ns, config) -> the helper summary of that version of a
file, for the process (a language server checks one buffer at a time, each with an index of
its own): only summaries that name a helper, of versions older than :data:`RACY_NS`."""


Memo = dict[tuple[str, int], frozenset[str]]
"""(conftest path, or a test module's directory with a trailing separator; ``id`` of the
config) -> engine fixtures, for one run over files on disk: a run that holds one stats each
conftest once, and looks the conftests up once per directory, not once per module."""


#: The entries added to a test module's own (:data:`PRIVATE_TEST_MODULE`).
_PRIVATE = frozenset({PRIVATE_TEST_MODULE})


class ConftestIndex:
    """What one run knows of the conftests: the engine fixtures each defines, by content
    (what the result cache keeps, and what was found by parsing since it was last asked),
    each conftest read by path, size and modification time, and the analyses built to index
    them. Made for a run and dropped with it (no state is kept between runs in one process);
    a worker process forked after the parent built it inherits it.

    Args:
        learns: keep what parsing found for :meth:`learned` (for a result cache to keep;
            ``False`` where nothing asks, e.g. the flake8 plugin's process).
    """

    def __init__(self, *, learns: bool = True) -> None:
        self.learns = learns
        #: (config, content hash of a conftest) -> the engine fixtures it defines.
        self._known: dict[tuple[Config, str], frozenset[str]] = {}
        #: Entries found by parsing since the last :meth:`learned` call, per config.
        self._learned: dict[Config, dict[str, list[str]]] = {}
        #: (path, size, modification time in ns, config) -> the engine fixtures of that
        #: version of a conftest, the most recently used last (at most :data:`MAX_READ`).
        self._read: dict[tuple[str, int, int, Config], frozenset[str]] = {}
        #: Directory -> its conftests (:func:`conftest_files`), for the run's lookups.
        self._chains: dict[str, tuple[str, ...]] = {}
        #: Absolute path of a conftest -> (its bytes, the config, the analysis) built to
        #: index it, for :meth:`analysed` (at most :data:`MAX_ANALYSED`).
        self._analysed: dict[str, tuple[bytes, Config, ModuleAnalysis]] = {}
        #: (tree root, config) -> its engine helpers (:mod:`lint_gpu_tests.checking.helper_index`).
        self._trees: dict[tuple[str, Config], TreeHelpers] = {}
        #: Directory -> the root of its tree
        # (:func:`~lint_gpu_tests.checking.helper_index.tree_root`).
        self._roots: dict[str, str] = {}
        #: (path, size, modification time in ns, config) -> that file's helper summary.
        self._summaries: dict[tuple[str, int, int, Config], Summary] = {}
        #: Conftests (and ``pytest_plugins`` modules) being parsed now: a plugin module's
        #: own conftests may name it again.
        self._parsing: set[str] = set()

    def engine_fixtures(self, path: str, config: Config, memo: Memo | None = None
                        ) -> frozenset[str]:
        """:func:`conftest_engine_fixtures`, with what this index knows; with the engine
        helpers of the module's tree that it may import
        (:meth:`~lint_gpu_tests.checking.helper_index.TreeHelpers.entries`)."""
        if memo is not None and os.path.basename(path) != "conftest.py":
            key = (os.path.join(os.path.dirname(path), ""), id(config))
            known = memo.get(key)
            if known is None:
                known = memo[key] = self._engine_fixtures(conftest_files(path, self._chains),
                                                          config, memo)
        else:
            known = self._engine_fixtures(conftest_files(path), config, memo)
        if memo is None and path != STDIN_PATH and not os.path.isfile(path):
            return known  # a run's files are on disk; a named buffer's may not be
        tree = self.tree(path, config)
        absolute = os.path.abspath(path)
        if memo is not None and not tree.defines(absolute) and \
                os.path.basename(path) != "conftest.py":
            # The same for every module of a directory but a helper's own and the
            # directory's conftest (whose own fixtures are not its): once per run.
            key = (os.path.dirname(absolute) + os.sep + "\0helpers", id(config))
            union = memo.get(key)
            if union is None:
                helpers = tree.entries(absolute)
                union = memo[key] = known | helpers if helpers else known
            return union | _PRIVATE if tree.private_test_module(absolute) else union
        helpers = tree.entries(absolute)
        if absolute in tree.helpers_imported:
            helpers = helpers | {IMPORTED_TEST_MODULE}
        elif tree.private_test_module(absolute):
            helpers = helpers | _PRIVATE
        return known | helpers if helpers else known

    def tree(self, path: str, config: Config) -> TreeHelpers:
        """The engine helpers of the tree of the module at ``path`` (built on first use)."""
        directory = os.path.dirname(os.path.abspath(path))
        root = self._roots.get(directory)
        if root is None:
            root = self._roots[directory] = tree_root(directory)
        found = self._trees.get((root, config))
        if found is None:
            found = self._trees[(root, config)] = build_tree(root, config, self)
        return found

    def tree_summary(self, path: str, size: int, mtime_ns: int, config: Config,
                     now_ns: int, source: bytes | None = None) -> Summary:
        """The helper summary of one version of the file at ``path``
        (:func:`~lint_gpu_tests.checking.helper_index.summarise`): known by its status or its
        content, else read (unless ``source``, its bytes, is given) and summarised. Only a
        file that had to be parsed is kept by its status and content (one that names no
        engine is settled by its bytes alone)."""
        key = (path, size, mtime_ns, config)
        found = self._summaries.get(key) or _SUMMARIES.get(key)
        if found is not None:
            return found
        status = f"{STATUS_KEY}{path}:{size}:{mtime_ns}"
        known = self.recall(config, status)
        if known is None:
            if source is None:
                try:
                    with open(path, "rb") as handle:
                        source = handle.read()
                except OSError:
                    return ()
            known = frozenset()
            if may_define_helpers(source, config):
                from lint_gpu_tests.analysis.analysis import is_test_module_path

                # The summary says whether the rules look at the module, which its path
                # decides as well as its bytes (a conftest.py, a test root).
                digest = STATUS_KEY + hashlib.blake2b(source, digest_size=16).hexdigest() + (
                    ":scoped" if is_test_module_path(path, config) else "")
                known = self.recall(config, digest)
                if known is None:
                    known = frozenset(summarise(source, path, config))
                    self.keep(config, digest, known)
                if now_ns - mtime_ns > RACY_NS:
                    self.keep(config, status, known)
        found = self._summaries[key] = tuple(sorted(known))
        if found and now_ns - mtime_ns > RACY_NS:
            if len(_SUMMARIES) >= MAX_LEVELS_KEPT:
                _SUMMARIES.clear()
            _SUMMARIES[key] = found
        return found

    def recall(self, config: Config, key: str) -> frozenset[str] | None:
        """What this index knows under ``key`` for ``config`` (a conftest's content hash, or
        a key of :mod:`lint_gpu_tests.checking.helper_index`), else ``None``."""
        return self._known.get((config, key))

    def keep(self, config: Config, key: str, names: frozenset[str]) -> None:
        """Know ``names`` under ``key`` for ``config``, and hand them to :meth:`learned`."""
        self._known[(config, key)] = names
        if self.learns:
            self._learned.setdefault(config, {})[key] = sorted(names)

    def _engine_fixtures(self, conftests: list[str], config: Config, memo: Memo | None
                         ) -> frozenset[str]:
        names: frozenset[str] = frozenset()
        # A fixture of a conftest nearer the module hides one of that name further up.
        shadowed: set[str] = set()
        for conftest in conftests:
            key = (conftest, id(config))
            found = memo.get(key) if memo is not None else None
            if found is None:
                try:
                    stat = os.stat(conftest)
                except OSError:
                    continue
                found = self._with_plugins(conftest, self._fixtures_of(
                    conftest, stat.st_size, stat.st_mtime_ns, config), config)
                if memo is not None:
                    memo[key] = found
            if shadowed:
                found = _unshadowed(found, shadowed)
            names = names | found if found else names
            shadowed |= _defined(found)
        return names

    def _with_plugins(self, conftest: str, found: frozenset[str], config: Config
                      ) -> frozenset[str]:
        """``found`` (the entries of the conftest at ``conftest``) with those of the modules
        its ``pytest_plugins`` names (:func:`pytest_plugins`), and of the modules theirs name,
        each found in the project as an import would (each read as a conftest is, by its
        own status and content)."""
        seen: set[str] = set()
        pending = [e[len(PYTEST_PLUGIN):] for e in found if e.startswith(PYTEST_PLUGIN)]
        while pending:
            dotted = pending.pop()
            path = project_module(conftest, config, dotted)
            if path is None or path in seen or len(seen) >= MAX_LEVELS:
                continue
            seen.add(path)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            plugin = self._fixtures_of(path, stat.st_size, stat.st_mtime_ns, config)
            found = found | _unshadowed(plugin, _defined(found))
            pending.extend(e[len(PYTEST_PLUGIN):] for e in plugin
                           if e.startswith(PYTEST_PLUGIN))
        return found

    def remember(self, config: Config, entries: Mapping[str, Iterable[str]]) -> None:
        """Take ``entries`` (content hash -> fixture names, as :meth:`learned` gave them,
        e.g. from the result cache of ``config``) as known: a conftest with those bytes is
        not parsed."""
        for digest, names in entries.items():
            self._known.setdefault((config, digest), frozenset(names))

    def learned(self, config: Config) -> dict[str, list[str]]:
        """The entries (content hash -> sorted fixture names) found by parsing conftests
        under ``config`` since the last call, for the result cache to keep."""
        return self._learned.pop(config, {})

    def _fixtures_of(self, conftest: str, size: int, mtime_ns: int, config: Config
                     ) -> frozenset[str]:
        key = (conftest, size, mtime_ns, config)
        found = self._read.pop(key, None)
        if found is None:
            found = self._fixtures_in(conftest, config)
            if len(self._read) >= MAX_READ:
                self._read.pop(next(iter(self._read)))
        self._read[key] = found
        return found

    def _fixtures_in(self, conftest: str, config: Config) -> frozenset[str]:
        try:
            with open(conftest, "rb") as handle:
                source = handle.read()
        except OSError:
            return frozenset()
        digest = hashlib.blake2b(source, digest_size=16).hexdigest()
        known = self._known.get((config, digest))
        if known is None:
            if conftest in self._parsing:
                return frozenset()  # a plugin naming the conftest that names it, being read
            self._parsing.add(conftest)
            try:
                known = _parse_fixtures(conftest, source, config, self)
            finally:
                self._parsing.discard(conftest)
            self._known[(config, digest)] = known
            if self.learns:
                self._learned.setdefault(config, {})[digest] = sorted(known)
        return known

    def keep_analysis(self, conftest: str, source: bytes, config: Config,
                      module: ModuleAnalysis) -> None:
        """Keep the analysis ``module`` of the conftest at ``conftest`` (from the bytes
        ``source`` under ``config``) for :meth:`analysed`."""
        if len(self._analysed) >= MAX_ANALYSED:
            self._analysed.pop(next(iter(self._analysed)))
        self._analysed[conftest] = (source, config, module)

    def analysed(self, path: str, source: bytes, config: Config) -> ModuleAnalysis | None:
        """The analysis this index built of the conftest at ``path`` to index it, when it
        was built from the bytes ``source`` under ``config`` (``None`` otherwise); handed
        out once. The check of a conftest takes it instead of parsing and analysing the file
        again: the analysis depends on the path only through its absolute form and file
        name, and a worker process forked after the index was built inherits it."""
        if not self._analysed or os.path.basename(path) != "conftest.py":
            return None
        entry = self._analysed.pop(os.path.abspath(path), None)
        if entry is None or entry[1] != config or entry[1].root != config.root or \
                entry[0] != source:
            return None
        return entry[2]


def conftest_engine_fixtures(path: str, config: Config, memo: Memo | None = None,
                             index: ConftestIndex | None = None) -> frozenset[str]:
    """Names of the fixtures in the conftests of ``path`` that provide an engine (or a
    runner's engine), for GPU004. Unreadable or unparsable conftests count as empty.
    ``memo`` (see :data:`Memo`; its configs must outlive it) keeps what one run found;
    ``index`` is the run's :class:`ConftestIndex` (``None``: one for this call alone)."""
    return (index if index is not None else ConftestIndex()).engine_fixtures(path, config,
                                                                             memo)


def _parse_fixtures(conftest: str, source: bytes, config: Config, index: ConftestIndex
                    ) -> frozenset[str]:
    """The engine fixtures the conftest at ``conftest`` (bytes ``source``) defines; its
    analysis is kept in ``index`` where its own check can take it."""
    from lint_gpu_tests.analysis.analysis import (
        ENV_READ,
        FACTORY_FIXTURE,
        FACTORY_SHARE,
        OWN_RUNNER_FIXTURE,
        OWN_RUNNER_INSTANCE,
        OWN_RUNNER_MODEL,
        RUNNER_CLASS,
        ModuleAnalysis,
        environment_reads,
        runner_fixture_hands_instance,
        runner_model_parameter,
        written_share,
    )
    from lint_gpu_tests.parsing.prefilter import engine_prefilter
    from lint_gpu_tests.parsing.source import parse_source

    if not engine_prefilter(config).admits(source) and b"environ" not in source and \
            b"getenv" not in source and PLUGINS_NAME not in source and \
            b"fixture" not in source:
        return frozenset()  # no engine, runner, environment, plugin nor fixture: nothing to parse
    tree, text, error = parse_source(source, conftest)
    if error is not None or tree is None:
        return frozenset()
    try:
        module = ModuleAnalysis.build(tree, text, conftest, config)
    except (RecursionError, MemoryError):
        return frozenset()
    if os.path.basename(conftest) == "conftest.py" and \
            not index.engine_fixtures(conftest, config):
        # What its own check would build (no engine fixtures from conftests above it).
        index.keep_analysis(conftest, source, config, module)
    names = set(module.engine_fixtures)
    if module.own_runner_fixture == "this module":
        names.add(OWN_RUNNER_FIXTURE + config.runner_fixture)
        model = runner_model_parameter(module)
        if model is not None:
            names.add(OWN_RUNNER_MODEL + model)
        if runner_fixture_hands_instance(module):
            names.add(OWN_RUNNER_INSTANCE)
    names.update(RUNNER_CLASS + name for name in module.runner_subclasses
                 if name not in config.runner_classes)
    names.update(FACTORY_FIXTURE + name for name, line in module.factory_fixtures.items()
                 if line)
    names.update(f"{FACTORY_SHARE}{name}|{written_share(module, call)}"
                 for name, call in module.handed_out_factories().items())
    patterns = config.environment_patterns
    names.update(ENV_READ + name for name in environment_reads(module)
                 if any(fnmatch.fnmatchcase(name, p) for p in patterns))
    names.update(PYTEST_PLUGIN + dotted for dotted in pytest_plugins(tree))
    names.update(DEFINED_FIXTURE + f.fixture_name for f in module.functions
                 if f.fixture_name is not None and f.parent is None
                 and f.owner_class is None and f.fixture_name not in module.engine_fixtures)
    return frozenset(names)


def _defined(entries: Iterable[str]) -> set[str]:
    """The names of the fixtures that ``entries`` (a conftest's) say it defines: its engine
    fixtures and the others (:data:`DEFINED_FIXTURE`)."""
    return {n.removeprefix(DEFINED_FIXTURE) for n in entries
            if n.isidentifier() or n.startswith(DEFINED_FIXTURE)}


def _unshadowed(entries: frozenset[str], shadowed: set[str]) -> frozenset[str]:
    """``entries`` without the fixtures (engine, factory or other) named in ``shadowed``:
    pytest hands a test the fixture defined nearest to it."""
    from lint_gpu_tests.analysis.analysis import FACTORY_FIXTURE, FACTORY_SHARE

    return frozenset(n for n in entries if n.removeprefix(FACTORY_FIXTURE).removeprefix(
        DEFINED_FIXTURE).removeprefix(FACTORY_SHARE).split("|", 1)[0] not in shadowed)


def pytest_plugins(tree: ast.Module) -> list[str]:
    """The modules a conftest names in its top-level ``pytest_plugins`` (a string, split at
    its commas as pytest does, or a list or tuple of strings), whose fixtures pytest
    registers for the session; empty where it has none or spells it otherwise."""
    found: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
                continue
            value = stmt.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                # pytest splits a string at its commas
                found = [p.strip() for p in value.value.split(",") if p.strip()]
                continue
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else []
            found = [i.value for i in items
                     if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return found
