"""``--gpu-leak-report-file PATH``: the leak report as JSON (schema in
``lint_gpu_tests/runtime/leakfile.py``), on the stand-in ``vllm`` whose engine processes are
real child processes titled ``VLLM::EngineCore``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import plugin_args
from runtime_fakes import XDIST_WORKER_CONFTEST

CONFTEST = """
import pytest
import vllm


@pytest.fixture(scope="module")
def shared_engine():
    return vllm.LLM("m")


@pytest.fixture
def built_here():
    llm = vllm.LLM("m")
    yield llm
    llm.llm_engine.engine_core.shutdown()
"""

SUITE = """
import gc
import sys

import pytest
import vllm

ENGINE = None


class TestShared:
    @pytest.mark.parametrize("n", [1, 2])
    def test_uses_the_module_engine(self, shared_engine, n):
        assert shared_engine is not None


def test_fails_holding_an_engine():
    llm = vllm.LLM("m")
    assert llm is None


def test_cleans_up(built_here):
    assert built_here is not None


def test_module_global():
    global ENGINE
    ENGINE = vllm.LLM("m")


def test_cycle():
    d = {"e": vllm.LLM("m")}
    d["self"] = d


def test_release():
    global ENGINE
    ENGINE = None
    sys.last_type = sys.last_value = sys.last_traceback = None
    gc.collect()
"""


def _line(source: str, text: str) -> int:
    """The 1-based line of ``text`` in the file pytester writes from ``source`` (which
    drops the source's empty first line)."""
    return source.splitlines().index(text)


@pytest.mark.usefixtures("fake_vllm")
def test_the_file_names_each_leak_its_test_fixture_and_holder(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_leaks=SUITE)
    # in a subprocess: pytester's in-process recorder would keep the failed test's traceback
    result = pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-settle-s=2",
        "--gpu-leak-report-file", "out/leaks.json",
    )
    result.assert_outcomes(passed=6, failed=1)
    root = str(pytester.path)
    report_path = pytester.path / "out" / "leaks.json"
    result.stdout.fnmatch_lines([
        "*GPU leak report*",
        f"leak report file: {report_path} (3 leaks, schema gpu-test-lint-leak-report version 1)",
    ])
    report = json.loads(report_path.read_text())
    assert {k: report[k] for k in ("schema", "version", "rootdir", "tests_measured",
                                   "workers")} == {
        "schema": "gpu-test-lint-leak-report", "version": 1, "rootdir": root,
        "tests_measured": 7, "workers": {}}
    assert report["device_memory"].startswith("not measured")
    test_file = str(pytester.path / "test_leaks.py")
    conftest = str(pytester.path / "conftest.py")
    leaks = report["leaks"]
    assert [(e["kind"], e["nodeid"], e["path"], e["relpath"], e["line"], e["function"])
            for e in leaks] == [
        ("engine-processes", "test_leaks.py::TestShared::test_uses_the_module_engine[1]",
         test_file, "test_leaks.py", _line(SUITE, '    @pytest.mark.parametrize("n", [1, 2])'),
         "TestShared.test_uses_the_module_engine"),
        ("engine-processes", "test_leaks.py::test_fails_holding_an_engine", test_file,
         "test_leaks.py", _line(SUITE, "def test_fails_holding_an_engine():"),
         "test_fails_holding_an_engine"),
        ("engine-processes", "test_leaks.py::test_module_global", test_file, "test_leaks.py",
         _line(SUITE, "def test_module_global():"), "test_module_global"),
    ]
    shared, failed, global_ = leaks
    # the module-scoped fixture started the engine and still held it after the first test
    assert shared["fixtures"] == [{
        "name": "shared_engine", "function": "shared_engine", "path": conftest,
        "relpath": "conftest.py", "line": _line(CONFTEST, '@pytest.fixture(scope="module")'),
        "scope": "module", "started_engine": True, "holds_engine": True}]
    assert [p["started_by"] for p in shared["processes"]] == ["fixture shared_engine"]
    # it ends with the module's last test, when pytest finishes the module's fixtures
    assert shared["ended_after"] == [{"pid": shared["pids"][0],
                                      "nodeid": "test_leaks.py::test_release"}]
    fixture_line = _line(CONFTEST, '@pytest.fixture(scope="module")')
    assert shared["held_by"] == (
        f"fixture(s) 'shared_engine' (scope module, conftest.py:{fixture_line}): pytest "
        "caches the value until the scope ends")
    assert failed["fixtures"] == [] and global_["fixtures"] == []
    assert [p["started_by"] for p in failed["processes"]] == ["test"]
    assert failed["held_by"].startswith("the test failed")
    assert global_["held_by"] == "module global(s) 'ENGINE' of the test file"
    assert global_["ended_after"] == [{"pid": global_["pids"][0],
                                       "nodeid": "test_leaks.py::test_release"}]
    for entry in leaks:
        assert entry["measure"] == "engine-process-rss"
        assert entry["bytes"] == sum(p["rss_bytes"] for p in entry["processes"]) > 0
        assert entry["gib"] == round(entry["bytes"] / (1 << 30), 3)
        assert entry["pids"] == [p["pid"] for p in entry["processes"]]
        assert [p["name"] for p in entry["processes"]] == ["VLLM::EngineCor"]
        assert entry["alive_at_end"] == [] and entry["worker"] is None
    assert [(c["nodeid"], c["function"], c["held_by"]) for c in report["cycle_held"]] == [
        ("test_leaks.py::test_cycle", "test_cycle", "a reference cycle (gc.collect() ended it)")]
    # the fixture that cleans up after itself is nowhere
    assert "built_here" not in report_path.read_text()


def test_the_file_option_alone_turns_the_report_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(): pass")
    result = pytester.runpytest_inprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-settle-s=0",
        "--gpu-leak-report-file", str(pytester.path / "r.json"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*GPU leak report*", "engine processes (VLLM::*, psutil): none*"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert (report["leaks"], report["cycle_held"], report["tests_measured"]) == ([], [], 1)


def test_an_unwritable_file_is_said_in_the_summary(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(): pass")
    (pytester.path / "blocker").write_text("a file, not a folder")
    result = pytester.runpytest_inprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-settle-s=0",
        "--gpu-leak-report-file", "blocker/r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"leak report file: cannot write {pytester.path}/blocker/"
                                 "r.json: *"])


def test_an_xdist_worker_sends_its_json_and_writes_no_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "workeroutput.json"
    monkeypatch.setenv("WORKEROUTPUT_JSON", str(out))
    pytester.makeconftest(XDIST_WORKER_CONFTEST)
    pytester.makepyfile("def test_it(): pass")
    result = pytester.runpytest_inprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-settle-s=0",
        "--gpu-leak-report-file", "r.json")
    result.assert_outcomes(passed=1)
    sent = json.loads(out.read_text())["gpu_test_lint_leak_report_json"]
    assert (sent["schema"], sent["tests_measured"], sent["leaks"]) == (
        "gpu-test-lint-leak-report", 1, [])
    assert not (pytester.path / "r.json").exists()


def _entry(nodeid: str) -> dict[str, Any]:
    return {"kind": "engine-processes", "nodeid": nodeid, "pids": [1], "worker": None}


XDIST_CONTROLLER_CONFTEST = """
import types
import pytest

def pytest_configure(config):
    config.pluginmanager.register(object(), "dsession")  # as pytest-xdist's controller

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    report = session.config.pluginmanager.get_plugin("gpu_test_lint-leak-report")
    report.pytest_testnodedown(types.SimpleNamespace(
        workerinput={"workerid": "gw0"},
        workeroutput={"gpu_test_lint_leak_report": ["engine processes: a line from gw0"],
                      "gpu_test_lint_leak_report_json": PAYLOAD},
    ), None)
    report.pytest_testnodedown(types.SimpleNamespace(
        workerinput={"workerid": "gw1"}, workeroutput={}), "crashed")
"""


def test_the_xdist_controller_writes_every_workers_leaks(pytester: pytest.Pytester) -> None:
    payload = {"schema": "gpu-test-lint-leak-report", "version": 1, "tests_measured": 3,
               "leaks": [_entry("test_a.py::test_x")],
               "cycle_held": [_entry("test_a.py::test_y")]}
    pytester.makeconftest(XDIST_CONTROLLER_CONFTEST.replace("PAYLOAD", repr(payload)))
    pytester.makepyfile("def test_it(): pass")
    result = pytester.runpytest_inprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-settle-s=0",
        "--gpu-leak-report-file", "r.json")
    result.stdout.fnmatch_lines(["worker gw0:", "  engine processes: a line from gw0",
                                 "leak report file: */r.json (1 leak, schema *"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["tests_measured"] == 3
    assert report["workers"] == {"gw0": {"tests_measured": 3, "sent": True},
                                 "gw1": {"tests_measured": 0, "sent": False}}
    assert report["leaks"] == [{**_entry("test_a.py::test_x"), "worker": "gw0"}]
    assert report["cycle_held"] == [{**_entry("test_a.py::test_y"), "worker": "gw0"}]


def test_the_site_of_an_inherited_test_and_of_an_opaque_decorator(
    pytester: pytest.Pytester,
) -> None:
    from lint_gpu_tests.runtime.leakfile import item_site

    pytester.makepyfile(base="class Base:\n    def test_inherited(self):\n        pass\n")
    pytester.syspathinsert()
    items = pytester.getitems(
        "from base import Base\n\n\n"
        "def opaque(f):\n"
        "    def wrapper(*args):  # no functools.wraps: nothing leads back to f\n"
        "        return f(*args)\n"
        "    return wrapper\n\n\n"
        "class TestChild(Base):\n"
        "    pass\n\n\n"
        "@opaque\n"
        "def test_wrapped():\n"
        "    pass\n"
    )
    root = str(pytester.path)
    sites = {item.name: item_site(item, root) for item in items}
    module = str(items[0].path)
    assert sites == {
        # where the function is defined: the base class's module
        "test_inherited": {"nodeid": items[0].nodeid, "path": str(pytester.path / "base.py"),
                           "relpath": "base.py", "line": 2, "function": "Base.test_inherited"},
        # the wrapper is not the test: the name pytest knows, in the test's module, no line
        "test_wrapped": {"nodeid": items[1].nodeid, "path": module,
                         "relpath": os.path.basename(module), "line": None,
                         "function": "test_wrapped"},
    }


def test_a_device_memory_leak_is_in_the_file(pytester: pytest.Pytester) -> None:
    from test_runtime_plugin import LEAK_CONFTEST, LEAK_SUITE  # a fake memory reader

    pytester.makeconftest(LEAK_CONFTEST)
    pytester.makepyfile(test_leaks=LEAK_SUITE)
    pytester.runpytest_inprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-settle-s=0",
        "--gpu-leak-report-file", "r.json").assert_outcomes(passed=4)
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["device_memory"] == "measured"
    gib = 1 << 30
    assert report["leaks"] == [{
        "kind": "device-memory", "nodeid": "test_leaks.py::test_leaky",
        "path": str(pytester.path / "test_leaks.py"), "relpath": "test_leaks.py",
        "line": _line(LEAK_SUITE, "def test_leaky():"), "function": "test_leaky",
        "fixtures": [],
        "held_by": "a reference that survived gc.collect(): a global, a fixture cache, an alias",
        "bytes": 40 * gib, "gib": 40.0, "measure": "device-memory-increase", "pids": [],
        "processes": [], "ended_after": [], "alive_at_end": [], "worker": None,
        "excess_bytes": 40 * gib + gib // 2,
        "per_device": [{"device": 0, "bytes": gib // 2}, {"device": 1, "bytes": 40 * gib}],
    }]
