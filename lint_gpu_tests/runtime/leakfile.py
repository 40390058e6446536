"""The leak report as a file: ``--gpu-leak-report-file PATH`` (JSON, schema below).

Written by the plugin's ``--gpu-leak-report`` (:mod:`~lint_gpu_tests.runtime.plugin`) at the
end of the session, read by ``gpu-test-lint check --leak-report PATH``, which marks the
violations in the tests and fixtures that leaked as *confirmed*. Imports nothing but the
standard library (and pytest's objects it is handed).

Schema ``gpu-test-lint-leak-report``, version 1 (a reader refuses another version)::

    {
      "schema": "gpu-test-lint-leak-report",
      "version": 1,
      "rootdir": "/abs/project",            # pytest's rootdir; "relpath"s are relative to it
      "tests_measured": 8,                  # summed over xdist workers
      "device_memory": "measured" | "not measured: <why>",
      "workers": {"gw0": {"tests_measured": 4, "sent": true}, ...},   # {} without xdist
      "leaks": [LEAK, ...],                 # what stayed alive after a test and gc.collect()
      "cycle_held": [LEAK, ...]             # ended only at the report's gc.collect()
    }

    LEAK = {
      "kind": "engine-processes" | "device-memory",
      "nodeid": "tests/test_x.py::TestA::test_b[2]",
      "path": "/abs/project/tests/test_x.py",       # the test's file
      "relpath": "tests/test_x.py",                 # "/"-separated; null outside rootdir
      "line": 12,                                   # first line of its definition (decorators)
      "function": "TestA.test_b",                   # qualified name; null when not a function
      "fixtures": [FIXTURE, ...],                   # those involved, where known
      "held_by": "module global(s) 'ENGINE' of the test file",
      "bytes": 1739000000, "gib": 1.62,             # what it left: engine RSS / device memory
      "measure": "engine-process-rss" | "device-memory-increase",
      "pids": [1552, 1560],                         # engine processes (device memory: [])
      "processes": [{"pid": 1552, "name": "VLLM::EngineCore", "rss_bytes": ...,
                     "started_by": "test" | "fixture <name>" | null}],
      "ended_after": [{"pid": 1552, "nodeid": "..."}],   # the test after which each ended
      "alive_at_end": [1560],                       # still alive when the session ended
      "worker": "gw0" | null                        # the xdist worker that measured it
    }

    FIXTURE = {"name": "llm", "function": "llm", "path": "/abs/.../conftest.py",
               "relpath": "tests/conftest.py", "line": 7, "scope": "module",
               "started_engine": true,   # a leaked process was started during its setup
               "holds_engine": false}    # its cached value still looks like an engine

A device-memory leak (``"kind": "device-memory"``) also has ``"excess_bytes"`` (above the
session baseline after the test) and ``"per_device"`` (``[{"device": 0, "bytes": ...}]``).
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA",
    "VERSION",
    "engine_like",
    "fixture_site",
    "holding_fixtures",
    "item_site",
    "gib",
    "write_report",
]

SCHEMA = "gpu-test-lint-leak-report"
VERSION = 1
_GIB = 1 << 30
_PYTEST_DIRS: tuple[str, ...] = ()  # pytest's and pluggy's folders, by _pytest_dirs()


def _pytest_dirs() -> tuple[str, ...]:
    global _PYTEST_DIRS
    if not _PYTEST_DIRS:
        import _pytest
        import pluggy

        _PYTEST_DIRS = tuple(
            os.path.dirname(os.path.abspath(str(m.__file__))) + os.sep for m in (_pytest, pluggy)
        )
    return _PYTEST_DIRS


def _relpath(path: str, root: str) -> str | None:
    rel = os.path.relpath(path, root)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


def _code_site(func: Any) -> tuple[str | None, str | None, int | None]:
    """``(qualified name, file, first line)`` of a function (unwrapped, bound or not)."""
    try:
        func = inspect.unwrap(getattr(func, "__func__", func))
    except Exception:
        pass
    func = getattr(func, "__func__", func)
    code = getattr(func, "__code__", None)
    qualname = getattr(func, "__qualname__", None)
    if code is None:
        return (qualname if isinstance(qualname, str) else None), None, None
    return (
        qualname if isinstance(qualname, str) else None,
        os.path.abspath(code.co_filename),
        int(code.co_firstlineno),
    )


def item_site(item: Any, root: str) -> dict[str, Any]:
    """The test's node id, file, first line and qualified function name (a LEAK's keys).

    The file is where the function is defined (a test inherited from a base class in
    another module is there), when the unwrapped function is the test's; else (a decorator
    without ``__wrapped__``) the test's module, with the name pytest knows and no line."""
    qualname, filename, line = _code_site(getattr(item, "obj", None))
    name = str(getattr(item, "originalname", None) or item.name)
    if qualname is not None and filename is not None and qualname.rpartition(".")[2] == name:
        path = filename
    else:
        cls = getattr(item, "cls", None)
        prefix = f"{cls.__qualname__}." if cls is not None else ""
        qualname = prefix + name if getattr(item, "obj", None) is not None else None
        path, line = os.path.abspath(str(getattr(item, "path", "") or "")), None
    return {
        "nodeid": item.nodeid,
        "path": path,
        "relpath": _relpath(path, root),
        "line": line,
        "function": qualname,
    }


def _internal(filename: str | None) -> bool:
    return filename is None or filename.startswith(_pytest_dirs())


def fixture_site(fixturedef: Any, root: str) -> dict[str, Any] | None:
    """A FIXTURE's keys (``started_engine``/``holds_engine`` false), or ``None`` for pytest's
    own fixtures (``tmp_path``, ``monkeypatch``, the xunit ``setup_method`` wrappers)."""
    qualname, filename, line = _code_site(getattr(fixturedef, "func", None))
    if _internal(filename):
        return None
    assert filename is not None
    return {
        "name": str(getattr(fixturedef, "argname", qualname)),
        "function": qualname,
        "path": filename,
        "relpath": _relpath(filename, root),
        "line": line,
        "scope": str(getattr(fixturedef, "scope", "function")),
        "started_engine": False,
        "holds_engine": False,
    }


def engine_like(value: Any) -> bool:
    """Whether ``value`` looks like an engine (has ``llm_engine``) or a runner holding one
    (its ``llm``); never raises (a dead ``weakref.proxy`` raises ``ReferenceError``)."""
    try:
        if isinstance(value, type):
            return False
        if hasattr(value, "llm_engine"):
            return True
        inner = getattr(value, "llm", None)
        return inner is not None and not isinstance(inner, type) and hasattr(inner, "llm_engine")
    except Exception:
        return False


def holding_fixtures(item: Any, root: str) -> list[dict[str, Any]]:
    """The fixtures of ``item`` (pytest's resolved definitions) whose cached value still
    looks like an engine after the test's teardown: a module- or session-scoped fixture
    that keeps one for the next tests."""
    info = getattr(item, "_fixtureinfo", None)
    found = []
    for defs in getattr(info, "name2fixturedefs", {}).values():
        if not defs:
            continue
        fixturedef = defs[-1]
        cached = getattr(fixturedef, "cached_result", None)
        if not cached or not engine_like(cached[0]):
            continue
        site = fixture_site(fixturedef, root)
        if site is not None:
            site["holds_engine"] = True
            found.append(site)
    return found


def gib(count: int) -> float:
    """Bytes as GiB, rounded to 3 places."""
    return round(count / _GIB, 3)


def write_report(path: str, payload: dict[str, Any]) -> None:
    """Write ``payload`` as JSON to ``path`` atomically (a temporary file moved into place),
    making its folder.

    Raises:
        OSError: when it cannot be written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
