"""Engine fixtures defined in the ``conftest.py`` files pytest loads for a test module.

GPU004 fires in a function that *receives* an engine from a fixture (SPEC §3). Such
fixtures usually live in a ``conftest.py`` beside or above the test module, so the checker
reads those too: every ``conftest.py`` from the module's directory up to the project root
(the first directory holding ``pyproject.toml``, ``setup.cfg``, ``tox.ini``, ``pytest.ini``
or ``.git``, as pytest's rootdir search does). Each conftest is parsed once per run and
cached by its path, size and modification time.
"""

from __future__ import annotations

import os
from functools import lru_cache

from lint_gpu_tests.config import Config

ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "tox.ini", "pytest.ini", ".git")
MAX_LEVELS = 32


def conftest_files(path: str) -> list[str]:
    """The ``conftest.py`` files pytest would load for the module at ``path``, innermost
    first (``path`` itself excluded). Empty for a path that is not a file on disk."""
    if not os.path.isfile(path):
        return []
    absolute = os.path.abspath(path)
    return [c for c in _conftests_from(os.path.dirname(absolute)) if c != absolute]


@lru_cache(maxsize=4096)
def _conftests_from(directory: str) -> tuple[str, ...]:
    """``conftest.py`` files in ``directory`` and its parents up to the project root (memoised
    per directory: a run asks once per directory, not once per file)."""
    here = (os.path.join(directory, "conftest.py"),) if os.path.isfile(
        os.path.join(directory, "conftest.py")) else ()
    parent = os.path.dirname(directory)
    at_root = parent == directory or any(
        os.path.exists(os.path.join(directory, m)) for m in ROOT_MARKERS)
    if at_root or directory.count(os.sep) > MAX_LEVELS:
        return here
    return here + _conftests_from(parent)


def conftest_engine_fixtures(path: str, config: Config) -> frozenset[str]:
    """Names of the fixtures in the conftests of ``path`` that provide an engine (or a
    runner's engine), for GPU004. Unreadable or unparsable conftests count as empty."""
    names: set[str] = set()
    for conftest in conftest_files(path):
        try:
            stat = os.stat(conftest)
        except OSError:
            continue
        names |= _fixtures_of(conftest, stat.st_size, stat.st_mtime_ns, config)
    return frozenset(names)


@lru_cache(maxsize=256)
def _fixtures_of(conftest: str, size: int, mtime_ns: int, config: Config) -> frozenset[str]:
    from lint_gpu_tests.analysis import ModuleAnalysis
    from lint_gpu_tests.source import parse_source

    try:
        with open(conftest, "rb") as handle:
            source = handle.read()
    except OSError:
        return frozenset()
    names = {c.rsplit(".", 1)[-1] for c in config.engine_classes}
    names |= {config.runner_fixture, *config.runner_classes}
    if source.isascii() and not any(n.encode() in source for n in names if n):
        return frozenset()  # no engine nor runner named: nothing to parse (warm runs stay fast)
    tree, text, error = parse_source(source, conftest)
    if error is not None or tree is None:
        return frozenset()
    try:
        module = ModuleAnalysis.build(tree, text, conftest, config)
    except (RecursionError, MemoryError):
        return frozenset()
    return frozenset(module.engine_fixtures)
