"""The pytest plugin: fixtures, overrides, factory, opt-in cleanup, leak report, import cost."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import REPO_ROOT, plugin_args
from runtime_fakes import XDIST_WORKER_CONFTEST

RUNTIME = REPO_ROOT / "lint_gpu_tests" / "runtime"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


def test_vllm_runner_fixture_returns_the_class(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from lint_gpu_tests.runtime import VllmRunner

        def test_it(vllm_runner):
            assert vllm_runner is VllmRunner
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_a_project_conftest_fixture_of_the_same_name_wins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        class ProjectRunner:
            pass

        @pytest.fixture
        def vllm_runner():
            return ProjectRunner
        """
    )
    pytester.makepyfile(
        """
        def test_it(vllm_runner):
            assert vllm_runner.__name__ == "ProjectRunner"
        """
    )
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.usefixtures("fake_vllm")
def test_runner_through_the_fixture_frees_the_engine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import weakref

        REFS = []

        def test_uses_runner(vllm_runner):
            vllm_runner.memory_wait_timeout_s  # class attribute is there
            with vllm_runner("some/model", seed=0) as runner:
                llm = weakref.proxy(runner.llm)
                assert llm.generate(["hi"]) == ["HI"]
                REFS.append((weakref.ref(runner.llm), runner.llm.llm_engine.engine_core.process))

        def test_engine_of_previous_test_is_gone():
            ref, process = REFS[0]
            assert ref() is None
            assert not process.is_alive()
        """
    )
    run(pytester).assert_outcomes(passed=2)


@pytest.mark.usefixtures("fake_vllm")
def test_factory_fixture_closes_what_the_test_left_open(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import vllm

        PROCESSES = []

        def test_two_engines(vllm_runner_factory):
            a = vllm_runner_factory("a")
            with vllm_runner_factory("b") as b:
                PROCESSES.extend(
                    r.llm.llm_engine.engine_core.process for r in (a, b)
                )
                assert all(p.is_alive() for p in PROCESSES)
            assert vllm_runner_factory.open_runners == (a,)

        def test_after():
            assert not any(p.is_alive() for p in PROCESSES)
            assert vllm.EVENTS.count("engine_core.shutdown") == 2
        """
    )
    run(pytester).assert_outcomes(passed=2)


CLEAN_SUITE = """
import sys, types

EVENTS = []

def test_installs_fake_torch():
    torch = types.ModuleType("torch")
    dynamo = types.ModuleType("torch._dynamo")
    dynamo.reset = lambda: EVENTS.append("dynamo.reset")
    torch.cuda = types.SimpleNamespace(
        is_initialized=lambda: True, empty_cache=lambda: EVENTS.append("empty_cache")
    )
    sys.modules["torch"], sys.modules["torch._dynamo"] = torch, dynamo

def test_sees_cleanup_after_previous_test():
    try:
        assert EVENTS == {expected!r}
    finally:
        del sys.modules["torch"], sys.modules["torch._dynamo"]
"""


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        ((), "", []),
        (("--gpu-clean-between-tests",), "", ["dynamo.reset", "empty_cache"]),
        ((), "gpu_clean_between_tests = true", ["dynamo.reset", "empty_cache"]),
    ],
    ids=["off-by-default", "option", "ini"],
)
def test_clean_between_tests_is_opt_in(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str, expected: list[str]
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(CLEAN_SUITE.format(expected=expected))
    run(pytester, *args).assert_outcomes(passed=2)


LEAK_CONFTEST = """
from lint_gpu_tests.runtime.memory import DeviceMemory

GIB = 1 << 30
USED = [GIB // 2, GIB // 2]  # two devices, what the fake "GPU" holds now

class Reader:
    name = "fake"
    def device_count(self):
        return len(USED)
    def read(self, index):
        return DeviceMemory(index, USED[index], 80 * GIB, f"fake {index}")

def pytest_gpu_memory_reader(config):
    return Reader()
"""

LEAK_SUITE = """
import conftest

def test_clean():
    pass

def test_small_leak():
    conftest.USED[0] += conftest.GIB // 2  # below the 1 GiB threshold

def test_leaky():
    conftest.USED[1] += 40 * conftest.GIB

def test_after_the_leak():
    pass
"""


def test_leak_report_names_the_test_that_leaked(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LEAK_CONFTEST)
    pytester.makepyfile(test_leaks=LEAK_SUITE)
    result = run(pytester, "--gpu-leak-report", "--gpu-leak-settle-s=0")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*GPU leak report*",
            "engine processes (VLLM::*, psutil): none stayed alive after any test's teardown "
            "and gc.collect() (4 tests measured)",
            "device memory: baseline device 0 (fake 0): 0.50/80.00 GiB used",
            "device memory: baseline device 1 (fake 1): 0.50/80.00 GiB used",
            "device memory: 1 of 4 tests added more than 1.00 GiB to the memory above the "
            "baseline:",
            "  test_leaks.py::test_leaky: +40.00 GiB new, +40.50 GiB above baseline "
            "(device 0: +0.50 GiB, device 1: +40.00 GiB)  <- leaked here",
            "device memory: +40.50 GiB above the baseline after the last test",
        ]
    )
    out = result.stdout.str()
    # named once, where it appeared: not again for the test after it, nor the small one
    assert "test_after_the_leak" not in out and "test_small_leak" not in out
    assert "test_clean" not in out


def test_leak_threshold_option(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LEAK_CONFTEST)
    pytester.makepyfile(test_leaks=LEAK_SUITE)
    result = run(
        pytester, "--gpu-leak-report", "--gpu-leak-settle-s=0", "--gpu-leak-threshold-gib=50"
    )
    result.stdout.fnmatch_lines(
        [
            "device memory: no test added more than 50.00 GiB to the memory above the "
            "baseline (4 tests measured)"
        ]
    )


def test_leak_report_without_a_reader_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lint_gpu_tests.runtime import memory

    monkeypatch.setattr(memory, "default_memory_reader", lambda **_: None)
    pytester.makepyfile("def test_it(): pass")
    result = run(pytester, "--gpu-leak-report")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["device memory: not measured: no memory reader (install nvidia-ml-py*"]
    )


def test_plugin_does_nothing_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_it(request):
            names = {name for name, _ in request.config.pluginmanager.list_name_plugin()}
            assert not [n for n in names if n.startswith("gpu_test_lint-")], names
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "GPU leak report" not in result.stdout.str()


def test_options_are_documented_in_help(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--help")
    result.stdout.fnmatch_lines(
        [
            "*--gpu-clean-between-tests*",
            "*--gpu-leak-report*",
            "*--gpu-leak-threshold-gib=GIB*",
            "*gpu_clean_between_tests*",
        ]
    )


HEAVY = ["torch", "vllm", "pynvml", "amdsmi", "libcst", "numpy"]


def test_importing_the_plugin_loads_nothing_heavy() -> None:
    code = (
        "import sys, json; import lint_gpu_tests.runtime.plugin, lint_gpu_tests.runtime; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout
    loaded = set(json.loads(out))
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]
    linter = [
        m
        for m in loaded
        if m.startswith("lint_gpu_tests.") and not m.startswith("lint_gpu_tests.runtime")
    ]
    assert linter == [], "lint_gpu_tests/__init__.py must stay light: it loads " + str(linter)


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.append(str(node.args[0].value))
    return names


@pytest.mark.parametrize("path", sorted(RUNTIME.glob("*.py")), ids=lambda p: p.name)
def test_runtime_never_imports_the_linter_or_libcst(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        assert top != "libcst", f"{path.name} imports {name}"
        if top == "lint_gpu_tests":
            assert name.startswith("lint_gpu_tests.runtime"), f"{path.name} imports {name}"


def test_public_names_resolve_and_have_docstrings() -> None:
    import lint_gpu_tests.runtime as runtime

    for name in runtime.__all__:
        value = getattr(runtime, name)
        assert getattr(value, "__doc__", None), name
    assert isinstance(runtime, types.ModuleType)


PROCESS_LEAKS = """
import gc, sys
import vllm

ENGINE = None

def test_a_fails_holding_an_engine():
    llm = vllm.LLM("m", workers=1)
    assert llm is None  # fails: pytest keeps the traceback, the frame keeps llm

def test_b_innocent():
    pass

def test_c_module_global():
    global ENGINE
    ENGINE = vllm.LLM("m")

def test_d_cycle():
    llm = vllm.LLM("m")  # the stand-in's engine sits in a reference cycle
    del llm

def test_e_runner(vllm_runner):
    with vllm_runner("m", workers=1) as runner:
        assert runner.llm.generate(["x"]) == ["X"]

def test_f_release():
    global ENGINE
    ENGINE = None
    sys.last_type = sys.last_value = sys.last_traceback = None
    gc.collect()
"""


@pytest.mark.usefixtures("fake_vllm")
def test_leak_report_names_the_test_after_which_engine_processes_stayed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_procs=PROCESS_LEAKS)
    # in a subprocess: pytester's in-process hook recorder would keep the failed test's
    # traceback (and so its engine) after the suite released it
    result = pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:cacheprovider", "--gpu-leak-report", "--gpu-leak-settle-s=2"
    )
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*GPU leak report*",
            "engine processes (VLLM::*, psutil): 2 of 6 tests left engine processes alive "
            "after their teardown and gc.collect():",
            "  test_procs.py::test_a_fails_holding_an_engine: VLLM::EngineCor pid *, * GiB RSS;"
            " VLLM::Worker pid *, * GiB RSS  <- leaked here",
            "      held by: the test failed: pytest keeps its traceback (sys.last_traceback), "
            "whose frames hold the engine, until the next test's call begins",
            "      pid *, * ended after test_procs.py::test_b_innocent",
            "  test_procs.py::test_c_module_global: VLLM::EngineCor pid *, * GiB RSS"
            "  <- leaked here",
            "      held by: module global(s) 'ENGINE' of the test file",
            "      pid * ended after test_procs.py::test_f_release",
            "engine processes that ended only when the report's gc.collect() ran (held by a "
            "reference cycle; without a collection they outlive the test):",
            "  test_procs.py::test_d_cycle: VLLM::EngineCor pid *, * GiB RSS",
            "device memory: *",
        ]
    )
    out = result.stdout.str()
    assert out.count("<- leaked here") == 2  # once each, not again for later tests
    for innocent in ("test_b_innocent:", "test_e_runner:", "test_f_release:"):
        assert innocent not in out


CUDA_CONTEXT = """
import sys, types
import conftest

def test_a_first_cuda_context():
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(
        is_initialized=lambda: True, device_count=lambda: 1,
        memory_reserved=lambda i: conftest.RESERVED[0],
    )
    sys.modules["torch"] = torch
    conftest.USED[0] += conftest.GIB // 2  # the context
    conftest.USED[0] += {tensor_gib} * conftest.GIB  # a tensor the test keeps
    conftest.RESERVED[0] += {tensor_gib} * conftest.GIB

def test_b_keeps_a_tensor():
    conftest.USED[0] += conftest.GIB // 2
    conftest.RESERVED[0] += conftest.GIB // 2

def test_c_done():
    del sys.modules["torch"]
"""


@pytest.mark.parametrize("tensor_gib", [0, 0.5])
def test_the_first_cuda_context_is_not_a_leak(pytester: pytest.Pytester, tensor_gib: float) -> None:
    pytester.makeconftest(
        LEAK_CONFTEST.replace("USED = [GIB // 2, GIB // 2]", "USED = [0]") + "RESERVED = [0]\n"
    )
    pytester.makepyfile(test_cuda=CUDA_CONTEXT.format(tensor_gib=tensor_gib))
    result = run(
        pytester, "--gpu-leak-report", "--gpu-leak-settle-s=0", "--gpu-leak-threshold-gib=0.25"
    )
    result.assert_outcomes(passed=3)
    lines = [
        "device memory: the first CUDA context of this process, created during "
        "test_cuda.py::test_a_first_cuda_context: +0.50 GiB, not counted as a leak",
    ]
    if tensor_gib:
        lines += [
            "device memory: 2 of 3 tests added more than 0.25 GiB to the memory above the "
            "baseline:",
            "  test_cuda.py::test_a_first_cuda_context: +0.50 GiB new, +0.50 GiB above "
            "baseline (device 0: +1.00 GiB)  <- leaked here",
            "  test_cuda.py::test_b_keeps_a_tensor: +0.50 GiB new, +1.00 GiB above baseline "
            "(device 0: +1.50 GiB)  <- leaked here",
        ]
    else:
        lines += [
            "device memory: 1 of 3 tests added more than 0.25 GiB to the memory above the "
            "baseline:",
            "  test_cuda.py::test_b_keeps_a_tensor: +0.50 GiB new, +0.50 GiB above baseline "
            "(device 0: +1.00 GiB)  <- leaked here",
        ]
    result.stdout.fnmatch_lines(lines)


def test_an_xdist_worker_sends_its_findings_and_measures_no_memory(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "workeroutput.json"
    monkeypatch.setenv("WORKEROUTPUT_JSON", str(out))
    pytester.makeconftest(XDIST_WORKER_CONFTEST)
    pytester.makepyfile("def test_it(): pass")
    run(pytester, "--gpu-leak-report", "--gpu-leak-settle-s=0").assert_outcomes(passed=1)
    assert json.loads(out.read_text()) == {
        "gpu_test_lint_leak_report": [
            "engine processes (VLLM::*, psutil): none stayed alive after any test's teardown "
            "and gc.collect() (1 tests measured)",
            "device memory: not measured under pytest-xdist: the workers share the devices, "
            "so a reading cannot be pinned on one test (engine processes are counted per "
            "worker)",
        ]
    }


XDIST_CONTROLLER_CONFTEST = """
import types
import pytest

def pytest_configure(config):
    config.pluginmanager.register(object(), "dsession")  # as pytest-xdist's controller

@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(config):
    report = config.pluginmanager.get_plugin("gpu_test_lint-leak-report")
    report.pytest_testnodedown(types.SimpleNamespace(
        workerinput={"workerid": "gw0"},
        workeroutput={"gpu_test_lint_leak_report": ["engine processes: a line from gw0"]},
    ), None)
    report.pytest_testnodedown(types.SimpleNamespace(
        workerinput={"workerid": "gw1"}, workeroutput={}), "crashed")
"""


def test_the_xdist_controller_prints_each_workers_findings_and_who_sent_none(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(XDIST_CONTROLLER_CONFTEST)
    pytester.makepyfile("def test_it(): pass")
    result = run(pytester, "--gpu-leak-report", "--gpu-leak-settle-s=0")
    result.stdout.fnmatch_lines(
        [
            "*GPU leak report*",
            "pytest-xdist: each worker measured the tests it ran:",
            "worker gw0:",
            "  engine processes: a line from gw0",
            "worker gw1: not measured: it sent no findings (it crashed, or ran without "
            "--gpu-leak-report)",
        ]
    )
    assert "none stayed alive" not in result.stdout.str()  # no all-clear of its own


ORPHAN_SUITE = """
import vllm

WORKERS = []

def test_a_engine_left_in_a_cycle():
    llm = vllm.LLM("m", workers=1, worker_linger_s=2.0)  # the stand-in sits in a cycle
    WORKERS.extend(p for p in __import__("psutil").Process().children(recursive=True)
                   if p.name().startswith("VLLM::Worker"))
    assert len(WORKERS) == 1

def test_b_next():
    import psutil
    worker = WORKERS[0]
    alive = worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE
    assert alive is {alive_expected}
"""


@pytest.mark.usefixtures("fake_vllm")
@pytest.mark.parametrize(
    ("args", "alive_expected"), [((), True), (("--gpu-clean-between-tests",), False)]
)
def test_clean_between_tests_waits_for_workers_a_collected_engine_orphaned(
    pytester: pytest.Pytester, args: tuple[str, ...], alive_expected: bool
) -> None:
    """The collection frees the engine, its core ends, its worker lingers (as vLLM's did
    for some seconds after its EngineCore was killed): the option waits for it."""
    pytester.makepyfile(test_orphan=ORPHAN_SUITE.format(alive_expected=alive_expected))
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=2)
