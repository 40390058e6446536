"""Leaks confirmed by a run: ``gpu-test-lint check --leak-report PATH``.

The pytest plugin's ``--gpu-leak-report-file PATH`` writes, per test after which an engine
stayed alive, the test's file and qualified function name and the fixtures that started or
still held the engine (schema: :mod:`lint_gpu_tests.runtime.leakfile`; this module reads it
and imports nothing of the runtime). :func:`confirm` marks each violation found in such a
test, in its class's xunit setup/teardown methods, or in such a fixture (wherever it is
defined: a ``conftest.py`` too) as *confirmed* (:attr:`Violation.leak
<lint_gpu_tests.ftypes.Violation.leak>`), and lists the confirmed ones first.

Matching is by file and enclosing function, not by line: the file is the same when the
absolute paths are (else, for a report made on another machine whose paths do not exist
here, when the violation's path ends with the report's rootdir-relative path); the function
is the report's qualified name (``TestA.test_b``; a parametrized test's ids do not matter)
among the qualified names of the ``def``\\s around the violation (a nested helper's violation
is in its outer test too). GPU008 (a leaked environment variable) and GPU900 (a file that
does not parse) are never confirmed: an engine that stayed alive says nothing about them.
The report's ``cycle_held`` engines (ended by its own ``gc.collect()``) confirm nothing.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lint_gpu_tests.codes import PARSE_ERROR_CODE
from lint_gpu_tests.ftypes import LeakEvidence, Violation

__all__ = [
    "NEVER_CONFIRMED",
    "SCHEMA",
    "VERSION",
    "LeakReport",
    "LeakReportError",
    "ReportedLeak",
    "Site",
    "confirm",
    "load_leak_report",
    "unmatched_leaks",
]

SCHEMA = "gpu-test-lint-leak-report"
VERSION = 1
NEVER_CONFIRMED = frozenset({"GPU008", PARSE_ERROR_CODE})
"""Codes that a leaked engine does not confirm: a leaked environment variable, a parse
error."""
XUNIT_METHODS = frozenset({
    "setup_method", "teardown_method", "setup_class", "teardown_class", "setup", "teardown",
    "setUp", "tearDown", "setUpClass", "tearDownClass",
})
"""Methods of a test's class that run around it: part of the test."""
XUNIT_FUNCTIONS = frozenset({
    "setup_module", "teardown_module", "setup_function", "teardown_function",
    "setUpModule", "tearDownModule",
})
"""Module-level functions that run around every test of the module: part of each."""


class LeakReportError(Exception):
    """The leak report cannot be read, or is not one (another schema or version)."""


@dataclass(frozen=True)
class Site:
    """Where a test or fixture is defined, as the report names it.

    Attributes:
        path: its file, absolute, normalised.
        relpath: ``/``-separated, relative to the report's rootdir (``None`` outside it).
        function: its qualified name (``TestA.test_b``, ``llm``).
        name: the fixture's name (``""`` for a test).
    """

    path: str
    relpath: str | None
    function: str
    name: str = ""

    def same_file(self, absolute: str) -> bool:
        """Whether ``absolute`` (a checked file) is this site's file."""
        if absolute == self.path:
            return True
        if self.relpath is None or os.path.exists(self.path):
            return False
        return absolute.replace(os.sep, "/").endswith("/" + self.relpath)


@dataclass(frozen=True)
class ReportedLeak:
    """One entry of the report's ``leaks``.

    Attributes:
        nodeid: the test after whose teardown the engine was still alive.
        kind: ``"engine-processes"`` or ``"device-memory"``.
        test: where the test function is (``None`` when the report could not say).
        fixtures: the fixtures that started or still held the engine.
        held_by: what held it, in the report's words.
        bytes: what it left (engine RSS or device memory).
    """

    nodeid: str
    kind: str
    test: Site | None
    fixtures: tuple[Site, ...]
    held_by: str
    bytes: int


@dataclass(frozen=True)
class LeakReport:
    """A leak report read by :func:`load_leak_report`.

    Attributes:
        path: the file it was read from.
        rootdir: the pytest rootdir of the run that wrote it.
        tests_measured: how many tests the run measured.
        leaks: its leaks, in the order the run found them.
    """

    path: str
    rootdir: str
    tests_measured: int
    leaks: tuple[ReportedLeak, ...]


def _site(data: Any, name: str = "") -> Site | None:
    if not isinstance(data, Mapping):
        return None
    path, function = data.get("path"), data.get("function")
    if not isinstance(path, str) or not isinstance(function, str) or not path or not function:
        return None
    relpath = data.get("relpath")
    return Site(os.path.normpath(os.path.abspath(path)),
                relpath if isinstance(relpath, str) and relpath else None, function, name)


def load_leak_report(path: str) -> LeakReport:
    """Read the JSON that ``--gpu-leak-report-file`` wrote.

    Raises:
        LeakReportError: when the file cannot be read or parsed, or holds another schema or
            version.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise LeakReportError(f"cannot read the leak report {path}: "
                              f"{exc.strerror or exc}") from exc
    except ValueError as exc:
        raise LeakReportError(f"the leak report {path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise LeakReportError(f"{path} is not a leak report (no \"schema\": \"{SCHEMA}\"; "
                              "write one with pytest --gpu-leak-report-file)")
    if data.get("version") != VERSION:
        raise LeakReportError(f"the leak report {path} has version {data.get('version')!r}; "
                              f"this gpu-test-lint reads version {VERSION}")
    leaks = []
    for entry in data.get("leaks") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("nodeid"), str):
            raise LeakReportError(f"the leak report {path} has a leak without a node id")
        fixtures = tuple(
            site for fixture in entry.get("fixtures") or []
            if (site := _site(fixture, str(fixture.get("name", "")))) is not None)
        size = entry.get("bytes")
        leaks.append(ReportedLeak(
            nodeid=entry["nodeid"],
            kind=str(entry.get("kind", "")),
            test=_site(entry),
            fixtures=fixtures,
            held_by=str(entry.get("held_by") or ""),
            bytes=size if isinstance(size, int) and not isinstance(size, bool) else 0,
        ))
    measured = data.get("tests_measured")
    return LeakReport(path=path, rootdir=str(data.get("rootdir") or ""),
                      tests_measured=measured if isinstance(measured, int) else 0,
                      leaks=tuple(leaks))


# --------------------------------------------------------------------------- functions


@dataclass(frozen=True)
class _Def:
    qualname: str
    first: int  # its first decorator's line, else its def line
    last: int
    cls: str | None  # qualified name of the class it is a method of


def _defs(tree: ast.Module) -> list[_Def]:
    """Every function of the module with its qualified name, as Python names them."""
    found: list[_Def] = []

    def visit(body: Iterable[ast.stmt], prefix: str, cls: str | None) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = prefix + node.name
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append(_Def(qualname, first, node.end_lineno or node.lineno, cls))
                visit(node.body, qualname + ".<locals>.", None)
            elif isinstance(node, ast.ClassDef):
                qualname = prefix + node.name
                visit(node.body, qualname + ".", qualname)
            else:  # a def under if/try/with at this level keeps the same prefix
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit([n for n in inner if isinstance(n, ast.stmt)]
                              + [s for h in inner if isinstance(h, ast.ExceptHandler)
                                 for s in h.body], prefix, cls)

    visit(tree.body, "", None)
    return found


def _enclosing(defs: Sequence[_Def], row: int) -> list[_Def]:
    return [d for d in defs if d.first <= row <= d.last]


# --------------------------------------------------------------------------- matching


def _via(leak: ReportedLeak, absolute: str, around: list[_Def]) -> str | None:
    """How the function around a violation took part in ``leak`` (``None``: not at all)."""
    names = {d.qualname for d in around}
    test = leak.test
    if test is not None and test.same_file(absolute):
        if test.function in names:
            return "test"
        cls = test.function.rpartition(".")[0]
        for d in around:
            name = d.qualname.rpartition(".")[2]
            if (cls and d.cls == cls and name in XUNIT_METHODS) or (
                    d.cls is None and d.qualname in XUNIT_FUNCTIONS):
                return "test"
    for fixture in leak.fixtures:
        if fixture.same_file(absolute) and fixture.function in names:
            return f"fixture {fixture.name or fixture.function}"
    return None


def _evidence(matches: list[tuple[ReportedLeak, str]]) -> LeakEvidence:
    tests: dict[str, int] = {}
    held: dict[str, None] = {}
    for leak, _ in matches:
        tests[leak.nodeid] = max(tests.get(leak.nodeid, 0), leak.bytes)
        if leak.held_by:
            held[leak.held_by] = None
    vias = [via for _, via in matches]
    via = "test" if "test" in vias else vias[0]
    return LeakEvidence(tests=tuple(tests), via=via, held_by=tuple(held),
                        bytes=sum(tests.values()))


def _tree(path: str, sources: Mapping[str, bytes]) -> ast.Module | None:
    try:
        data = sources[path] if path in sources else Path(path).read_bytes()
        return ast.parse(data)
    except (OSError, SyntaxError, ValueError):
        return None


def confirm(violations: Sequence[Violation], report: LeakReport, *, cwd: str | None = None,
            sources: Mapping[str, bytes] | None = None) -> list[Violation]:
    """Mark the violations that ``report`` confirms and list them first.

    Args:
        violations: a run's violations, in the order to keep within each group.
        report: the leak report.
        cwd: the directory the violations' relative paths are relative to (default: the
            current one).
        sources: a file's bytes where they are not on disk (``--stdin-filename``).

    Returns:
        The violations, each confirmed one with its :class:`LeakEvidence`, confirmed ones
        first.
    """
    base = cwd if cwd is not None else os.getcwd()
    texts = dict(sources or {})
    by_file: dict[str, list[_Def] | None] = {}
    confirmed: list[Violation] = []
    rest: list[Violation] = []
    for violation in violations:
        matches: list[tuple[ReportedLeak, str]] = []
        if violation.code not in NEVER_CONFIRMED and report.leaks:
            absolute = os.path.normpath(os.path.join(base, violation.path))
            if violation.path not in by_file:
                tree = _tree(violation.path if violation.path in texts else absolute, texts)
                by_file[violation.path] = _defs(tree) if tree is not None else None
            defs = by_file[violation.path]
            around = _enclosing(defs, violation.location.row) if defs else []
            if around:
                for leak in report.leaks:
                    via = _via(leak, absolute, around)
                    if via is not None:
                        matches.append((leak, via))
        if matches:
            confirmed.append(replace(violation, leak=_evidence(matches)))
        else:
            rest.append(violation)
    return confirmed + rest


def unmatched_leaks(report: LeakReport, violations: Sequence[Violation],
                    checked: Iterable[str], *, cwd: str | None = None) -> list[ReportedLeak]:
    """The report's leaks whose test file was checked but that confirm none of
    ``violations`` (already through :func:`confirm`): what the rules did not see, or saw
    in a helper function the report does not name."""
    base = cwd if cwd is not None else os.getcwd()
    files = [os.path.normpath(os.path.join(base, path)) for path in checked]
    seen = {nodeid for v in violations if v.leak is not None for nodeid in v.leak.tests}
    return [leak for leak in report.leaks
            if leak.nodeid not in seen and leak.test is not None
            and any(leak.test.same_file(path) for path in files)]
