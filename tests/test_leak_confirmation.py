"""``check --leak-report PATH``: violations in tests and fixtures that a run's leak report
(``pytest --gpu-leak-report-file``) shows leaking are *confirmed*. Hand-written
reports, no engine: the runtime side is ``tests/runtime/test_leak_report_file.py``, both
together on the CPU engine ``tests/e2e/test_leak_confirmed_e2e.py``."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.ftypes import LeakEvidence, Location, Violation
from lint_gpu_tests.interfaces import cli
from lint_gpu_tests.running.leaks import LeakReportError, confirm, load_leak_report

CONFTEST = '''\
import pytest
from vllm import LLM


@pytest.fixture(scope="module")
def shared():
    return LLM("m")


@pytest.fixture(name="renamed")
def _renamed_fixture():
    return LLM("m")


@pytest.fixture
def unused():
    return LLM("m")
'''

TESTS = '''\
import os

import pytest
from vllm import LLM

MODULE_ENGINE = LLM("m")


class TestA:
    def setup_method(self):
        self.llm = LLM("m")

    @pytest.mark.parametrize("n", [1, 2])
    def test_p(self, n):
        llm = LLM("m")
        assert llm


class TestB:
    def setup_method(self):
        self.llm = LLM("m")

    def test_p(self):
        llm = LLM("m")
        assert llm


def test_nested():
    def helper():
        return LLM("m")

    os.environ["VLLM_X"] = "1"
    assert helper()


def test_clean(shared, renamed):
    assert shared and renamed


def test_quiet():
    llm = LLM("m")
    assert llm
'''

OTHER = '''\
from vllm import LLM


def test_nested():
    llm = LLM("m")
    assert llm
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST)
    (tmp_path / "tests" / "test_a.py").write_text(TESTS)
    (tmp_path / "tests" / "test_other.py").write_text(OTHER)
    return tmp_path


def _leak(root: Path, nodeid: str, function: str, *, path: str = "tests/test_a.py",
          fixtures: tuple[dict[str, Any], ...] = (), held_by: str = "", size: int = 0,
          kind: str = "engine-processes") -> dict[str, Any]:
    return {"kind": kind, "nodeid": nodeid, "path": str(root / path), "relpath": path,
            "line": 1, "function": function, "fixtures": list(fixtures), "held_by": held_by,
            "bytes": size, "gib": round(size / (1 << 30), 3), "pids": [], "processes": [],
            "ended_after": [], "alive_at_end": [], "worker": None}


def _fixture(root: Path, name: str, function: str) -> dict[str, Any]:
    return {"name": name, "function": function, "path": str(root / "tests/conftest.py"),
            "relpath": "tests/conftest.py", "line": 1, "scope": "module",
            "started_engine": True, "holds_engine": False}


def _write(root: Path, *leaks: dict[str, Any], name: str = "leaks.json") -> Path:
    path = root / name
    path.write_text(json.dumps({
        "schema": "gpu-test-lint-leak-report", "version": 1, "rootdir": str(root),
        "tests_measured": 9, "device_memory": "not measured", "workers": {},
        "leaks": list(leaks),
        "cycle_held": [_leak(root, "tests/test_a.py::test_quiet", "test_quiet")],
    }))
    return path


GIB = 1 << 30


def _report(root: Path) -> Path:
    return _write(
        root,
        _leak(root, "tests/test_a.py::TestA::test_p[1]", "TestA.test_p",
              held_by="the test failed: ...", size=GIB),
        _leak(root, "tests/test_a.py::TestA::test_p[2]", "TestA.test_p",
              held_by="the test failed: ...", size=GIB),
        _leak(root, "tests/test_a.py::TestA::test_p[2]", "TestA.test_p", size=3 * GIB,
              kind="device-memory"),
        _leak(root, "tests/test_a.py::test_nested", "test_nested",
              held_by="module global(s) 'X' of the test file", size=GIB // 2),
        _leak(root, "tests/test_a.py::test_clean", "test_clean",
              fixtures=(_fixture(root, "shared", "shared"),
                        _fixture(root, "renamed", "_renamed_fixture")),
              held_by="a reference that survived gc.collect()", size=2 * GIB),
    )


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), catch_exceptions=False)


def _lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


def _rows(result: Result) -> list[tuple[str, int, str, bool]]:
    """``(path, row, code, confirmed)`` of each concise line, in order."""
    out = []
    for line in _lines(result):
        if ": GPU" not in line:
            continue
        where, rest = line.split(": ", 1)
        path, row, _ = where.split(":")
        out.append((path, int(row), rest.split()[0], "[leak confirmed]" in rest))
    return out


CONFIRMED = [
    ("tests/conftest.py", 7, "GPU001", True),  # shared: the fixture that held it
    ("tests/conftest.py", 7, "GPU002", True),
    ("tests/conftest.py", 12, "GPU001", True),  # renamed: matched by its function's name
    ("tests/conftest.py", 12, "GPU002", True),
    ("tests/test_a.py", 11, "GPU001", True),  # TestA.setup_method: xunit, part of the test
    ("tests/test_a.py", 15, "GPU001", True),  # TestA.test_p, both parameters
    ("tests/test_a.py", 30, "GPU001", True),  # the helper nested in test_nested
]
NOT_CONFIRMED = [
    ("tests/conftest.py", 17, "GPU001", False),  # unused: no leak names it
    ("tests/conftest.py", 17, "GPU002", False),
    ("tests/test_a.py", 6, "GPU001", False),  # module level: no test's
    ("tests/test_a.py", 21, "GPU001", False),  # TestB.setup_method: another class
    ("tests/test_a.py", 24, "GPU001", False),  # TestB.test_p: the same name, another class
    ("tests/test_a.py", 32, "GPU008", False),  # an environment variable: never confirmed
    ("tests/test_a.py", 41, "GPU001", False),  # test_quiet: only a reference cycle
    ("tests/test_other.py", 5, "GPU001", False),  # test_nested of another file
]


def test_concise_marks_the_confirmed_and_lists_them_first(project: Path) -> None:
    plain = run("check", "--no-cache", "tests")
    assert sorted(_rows(plain)) == sorted(
        (p, r, c, False) for p, r, c, _ in CONFIRMED + NOT_CONFIRMED)
    report = _report(project)
    result = run("check", "--no-cache", "tests", "--leak-report", str(report))
    assert result.exit_code == 1
    assert _rows(result) == CONFIRMED + NOT_CONFIRMED
    # the same lines as without the report, the mark after the fix mark
    unmarked = [line.replace(" [leak confirmed]", "") for line in _lines(result)]
    assert sorted(unmarked[:len(CONFIRMED) + len(NOT_CONFIRMED)]) == sorted(
        _lines(plain)[:len(CONFIRMED) + len(NOT_CONFIRMED)])
    assert "tests/test_a.py:15:15: GPU001 [*] [leak confirmed] Engine" in result.stdout
    assert _lines(result)[-1] == (
        f"[leak confirmed] 7 violations confirmed by the leak report {report} (listed first).")


def test_select_confirmed_reports_only_them(project: Path) -> None:
    report = _report(project)
    result = run("check", "--no-cache", "tests", "--leak-report", str(report),
                 "--select-confirmed")
    assert result.exit_code == 1
    assert _rows(result) == CONFIRMED
    assert _lines(result)[-2:] == [
        f"[leak confirmed] 7 violations confirmed by the leak report {report}.",
        "8 violations not confirmed left out (--select-confirmed).",
    ]
    assert run("check", "--no-cache", "tests/test_other.py", "--leak-report", str(report),
               "--select-confirmed", "--quiet").stdout == ""
    nothing = run("check", "--no-cache", "tests/test_other.py", "--leak-report", str(report),
                  "--select-confirmed")
    assert nothing.exit_code == 0
    assert _lines(nothing) == [
        "All checks passed!",
        f"[leak confirmed] 0 violations confirmed by the leak report {report}.",
        "1 violation not confirmed left out (--select-confirmed).",
    ]


def test_a_leaking_test_with_no_violation_is_named(project: Path) -> None:
    report = _write(project, _leak(project, "tests/test_other.py::test_gone", "test_gone",
                                   path="tests/test_other.py"),
                    _leak(project, "tests/test_elsewhere.py::test_x", "test_x",
                          path="tests/test_elsewhere.py"))
    result = run("check", "--no-cache", "tests/test_other.py", "--leak-report", str(report))
    assert _lines(result)[-2:] == [
        f"[leak confirmed] 0 violations confirmed by the leak report {report}.",
        "1 leaking test of the checked files confirms no violation: "
        "tests/test_other.py::test_gone",
    ]


def test_full_says_what_leaked(project: Path) -> None:
    result = run("check", "--no-cache", "tests/test_a.py", "--leak-report",
                 str(_report(project)), "--output-format", "full", "--select-confirmed")
    leak_lines = [line for line in _lines(result) if line.startswith("leak: ")]
    assert leak_lines == [
        "leak: an engine stayed alive after tests/test_a.py::TestA::test_p[1], "
        "tests/test_a.py::TestA::test_p[2] (4.00 GiB; held by: the test failed: ...)",
        "leak: an engine stayed alive after tests/test_a.py::TestA::test_p[1], "
        "tests/test_a.py::TestA::test_p[2] (4.00 GiB; held by: the test failed: ...)",
        "leak: an engine stayed alive after tests/test_a.py::test_nested (0.50 GiB; held by: "
        "module global(s) 'X' of the test file)",
    ]
    headers = [line for line in _lines(result) if line.startswith("GPU")]
    assert [h.split(" Engine")[0] for h in headers] == [  # no fix: the nested helper's
        "GPU001 [*] [leak confirmed]", "GPU001 [*] [leak confirmed]", "GPU001 [leak confirmed]"]


def test_json_sarif_github_junit_carry_it(project: Path) -> None:
    report = str(_report(project))
    args = ("check", "--no-cache", "tests/conftest.py", "--leak-report", report)
    shared_leak = {"bytes": 2 * GIB, "held_by": ["a reference that survived gc.collect()"],
                   "tests": ["tests/test_a.py::test_clean"], "via": "fixture shared"}
    data = json.loads(run(*args, "--output-format", "json").stdout)
    assert [(v["location"]["row"], v["code"], v["confirmed"], v.get("leak")) for v in data] == [
        (7, "GPU001", True, shared_leak),
        (7, "GPU002", True, shared_leak),
        (12, "GPU001", True, {**shared_leak, "via": "fixture renamed"}),
        (12, "GPU002", True, {**shared_leak, "via": "fixture renamed"}),
        (17, "GPU001", False, None),
        (17, "GPU002", False, None),
    ]
    # without a report the JSON is as it was: no "confirmed" key
    assert all("confirmed" not in v for v in json.loads(
        run("check", "--no-cache", "tests/conftest.py", "--output-format", "json").stdout))
    sarif = json.loads(run(*args, "--output-format", "sarif").stdout)
    results = sarif["runs"][0]["results"]
    assert [r["properties"] for r in results] == [
        {"confirmed": True, "leak": shared_leak}, {"confirmed": True, "leak": shared_leak},
        {"confirmed": True, "leak": {**shared_leak, "via": "fixture renamed"}},
        {"confirmed": True, "leak": {**shared_leak, "via": "fixture renamed"}},
        {"confirmed": False}, {"confirmed": False}]
    github = _lines(run(*args, "--output-format", "github"))
    assert github[0].startswith(
        "::error title=gpu-test-lint (GPU001%2C leak confirmed),file=tests/conftest.py,line=7,")
    assert github[0].endswith(
        "%0A[leak confirmed] an engine stayed alive after tests/test_a.py::test_clean through "
        "its fixture shared (2.00 GiB; held by: a reference that survived gc.collect())")
    assert github[4].startswith("::error title=gpu-test-lint (GPU001),file=tests/conftest.py,"
                                "line=17,")
    junit = run(*args, "--output-format", "junit").stdout
    assert junit.count('<failure message="[leak confirmed] ') == 4
    assert junit.count("<failure message=") == 6


def test_applied_after_the_cache(project: Path) -> None:
    report = str(_report(project))
    first = run("check", "tests", "--leak-report", report)
    again = run("check", "tests", "--leak-report", report)
    assert _rows(again) == _rows(first) == CONFIRMED + NOT_CONFIRMED
    # a warm run without the report confirms nothing: nothing of it was cached
    assert not any(confirmed for *_, confirmed in _rows(run("check", "tests")))


def test_select_confirmed_with_diff_fixes_only_files_holding_one(project: Path) -> None:
    report = str(_write(project, _leak(project, "tests/test_other.py::test_nested",
                                       "test_nested", path="tests/test_other.py")))
    result = run("check", "--no-cache", "tests", "--leak-report", report, "--select-confirmed",
                 "--diff")
    assert result.exit_code == 1
    assert [line for line in _lines(result) if line.startswith("+++ ")] == [
        "+++ tests/test_other.py"]


def test_stdin_is_confirmed_as_its_filename(project: Path) -> None:
    report = str(_report(project))
    result = CliRunner().invoke(cli.cli, ["check", "--stdin-filename", "tests/test_a.py",
                                          "--leak-report", report, "--select-confirmed"],
                                input=TESTS)
    assert [row[1] for row in _rows(result)] == [11, 15, 30]


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read the leak report {path}: No such file or directory"),
    ("{", "the leak report {path} is not JSON: "),
    ('{"leaks": []}', '{path} is not a leak report (no "schema": "gpu-test-lint-leak-report"; '
                      "write one with pytest --gpu-leak-report-file)"),
    ('{"schema": "gpu-test-lint-leak-report", "version": 2}',
     "the leak report {path} has version 2; this gpu-test-lint reads version 1"),
    ('{"schema": "gpu-test-lint-leak-report", "version": 1, "leaks": [{}]}',
     "the leak report {path} has a leak without a node id"),
])
def test_a_bad_report_is_a_usage_error(project: Path, content: str | None,
                                       message: str) -> None:
    path = project / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LeakReportError) as caught:
        load_leak_report(str(path))
    assert str(caught.value).startswith(message.format(path=path))
    result = run("check", "--no-cache", "tests", "--leak-report", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: " + message.format(path=path))


def test_select_confirmed_needs_a_report(project: Path) -> None:
    result = run("check", "tests", "--select-confirmed")
    assert (result.exit_code, result.stderr) == (
        2, "error: --select-confirmed needs --leak-report PATH\n")


def test_a_report_from_another_machine_matches_by_relative_path(project: Path) -> None:
    elsewhere = Path("/nonexistent/checkout")
    report = _write(project, _leak(elsewhere, "tests/test_a.py::test_nested", "test_nested"))
    result = run("check", "--no-cache", "tests", "--leak-report", str(report),
                 "--select-confirmed")
    assert [row[:3] for row in _rows(result)] == [("tests/test_a.py", 30, "GPU001")]
    # a path that exists here but is another file matches nothing
    (project / "copy").mkdir()
    (project / "copy" / "tests").mkdir()
    other = _write(project, _leak(project / "copy", "tests/test_a.py::test_nested",
                                  "test_nested"), name="other.json")
    (project / "copy" / "tests" / "test_a.py").write_text(TESTS)
    assert _rows(run("check", "--no-cache", "tests", "--leak-report", str(other),
                     "--select-confirmed")) == []


def test_a_confirmed_violation_equals_its_unconfirmed_self(project: Path) -> None:
    plain = Violation("GPU001", "engine-outside-runner", "m", "tests/test_a.py",
                      Location(15, 15), Location(15, 23))
    [marked] = confirm([plain], load_leak_report(str(_report(project))))
    assert marked.leak == LeakEvidence(
        tests=("tests/test_a.py::TestA::test_p[1]", "tests/test_a.py::TestA::test_p[2]"),
        via="test", held_by=("the test failed: ...",), bytes=4 * GIB)
    assert marked.confirmed and not plain.confirmed
    assert marked == plain and hash(marked) == hash(plain)
    assert {plain: 1}[marked] == 1  # edits keyed by the unconfirmed violation still apply
    assert replace(marked, leak=None) == marked
    assert os.path.isabs(load_leak_report(str(_report(project))).leaks[0].test.path)
