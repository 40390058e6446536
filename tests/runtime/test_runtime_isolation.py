"""create_new_process_for_each_test: outcomes come back from the child as outcomes."""

from __future__ import annotations

import os
import sys
import types
import warnings
from pathlib import Path

import pytest

from lint_gpu_tests.runtime import create_new_process_for_each_test, isolation
from lint_gpu_tests.runtime.isolation import _in_isolated_child
from lint_gpu_tests.runtime.memory import GIB

OUTCOMES = """
import os
import pytest
from lint_gpu_tests.runtime import create_new_process_for_each_test

isolated = create_new_process_for_each_test({method!r})

@isolated
def test_passes(tmp_path):
    (tmp_path / "pid").write_text(str(os.getpid()))
    assert os.getpid() != {parent}

@isolated
def test_fails():
    def inner():
        raise ValueError("boom from the child")
    inner()

@isolated
def test_assert_fails():
    assert 1 + 1 == 3, "arithmetic in the child"

@isolated
def test_pytest_fail():
    pytest.fail("explicit failure in the child")

@isolated
def test_skips():
    pytest.skip("no GPU in the child")

@isolated
def test_xfails():
    pytest.xfail("known bug in the child")

@pytest.mark.xfail(raises=ZeroDivisionError, strict=True)
@isolated
def test_xfail_marker_sees_the_child_exception():
    1 / 0

@pytest.mark.parametrize("n", [1, 2])
@isolated
def test_fixtures_and_params_reach_the_child(n, tmp_path):
    assert n in (1, 2) and tmp_path.is_dir()

class Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(a)

@isolated
def test_unpicklable_exception():
    raise Unpicklable("weird", "args")
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_child_outcomes_become_parent_outcomes(pytester: pytest.Pytester, method: str) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES.format(method=method, parent=os.getpid()))
    if method == "fork":
        result = pytester.runpytest_inprocess("-rsx", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=3, failed=4, skipped=1, xfailed=2)
        result.stdout.fnmatch_lines(["*AssertionError: arithmetic in the child*"])
        result.stdout.fnmatch_lines(["*explicit failure in the child*"])
        result.stdout.fnmatch_lines(["*IsolatedTestError: *Unpicklable: weird*"])
    else:  # each spawned child starts an interpreter: run the four kinds of outcome only
        only = "test_passes or test_fails or test_skips or test_xfails"
        result = pytester.runpytest_inprocess("-rsx", "-p", "no:cacheprovider", "-k", only)
        result.assert_outcomes(passed=1, failed=1, skipped=1, xfailed=1)
    out = result.stdout.str()
    # the child's own exception, with the child's traceback text
    result.stdout.fnmatch_lines(["*ValueError: boom from the child*"])
    assert "in isolated child process" in out
    assert 'raise ValueError("boom from the child")' in out
    assert "in inner" in out  # a frame only the child had
    # at the test's own location (the line of its decorator), not inside the runtime
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_outcomes.py:*: no GPU in the child"])
    result.stdout.fnmatch_lines(["XFAIL *known bug in the child*"])


GROUP = """
import subprocess, sys
from lint_gpu_tests.runtime import create_new_process_for_each_test

@create_new_process_for_each_test({method!r})
def test_leaves_a_grandchild(tmp_path):
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open({pidfile!r}, "w") as f:
        f.write(str(grandchild.pid))
"""


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for init to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_child_process_group_is_killed(
    pytester: pytest.Pytester, tmp_path: Path, method: str
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    pytester.makepyfile(test_group=GROUP.format(method=method, pidfile=str(pidfile)))
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    pid = int(pidfile.read_text())
    # SIGKILL was sent before the test returned; the kernel ends the process right away,
    # but let it be scheduled (no timing assertion: a hang would show as the suite's timeout)
    while not _dead(pid):
        os.sched_yield()


def test_timeout_kills_the_child(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_slow="""
        import time
        from lint_gpu_tests.runtime import create_new_process_for_each_test

        @create_new_process_for_each_test("fork", timeout_s=0.2)
        def test_hangs():
            time.sleep(600)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*IsolatedTestTimeoutError: *ran past 0.2 s*killed*"])


def test_child_that_dies_reports_how(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_dies="""
        import os
        from lint_gpu_tests.runtime import create_new_process_for_each_test

        @create_new_process_for_each_test("fork")
        def test_exits_hard():
            os._exit(3)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*IsolatedTestError: *exited with code 3 before reporting*"])


def test_wrapper_keeps_name_signature_and_bare_use() -> None:
    def test_something(vllm_runner: object, tmp_path: Path) -> None:
        """Doc."""

    wrapped = create_new_process_for_each_test(test_something)
    assert wrapped.__name__ == "test_something"
    assert wrapped.__doc__ == "Doc."
    import inspect

    assert list(inspect.signature(wrapped).parameters) == ["vllm_runner", "tmp_path"]
    with pytest.raises(ValueError, match="method"):
        create_new_process_for_each_test("thread")  # type: ignore[call-overload]


@create_new_process_for_each_test()
def test_this_suite_runs_isolated_itself(tmp_path: Path) -> None:
    from lint_gpu_tests.runtime import isolation

    assert isolation._in_isolated_child
    assert not _in_isolated_child  # the name imported in the parent is a copy of the flag


def test_waits_for_device_memory_after_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_fakes import FakeMemoryReader

    from lint_gpu_tests.runtime import memory

    # before the child: 1 GiB; after: the driver still shows 41 GiB once, then 1 GiB
    reader = FakeMemoryReader(script=[GIB, 41 * GIB, GIB])
    monkeypatch.setattr(memory, "default_memory_reader", lambda **_: reader)

    @create_new_process_for_each_test("fork")
    def body() -> None:
        pass

    body()
    assert reader.reads == 3  # baseline, one reading above, one back within the slack


def test_memory_not_back_after_the_child_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_fakes import FakeMemoryReader

    from lint_gpu_tests.runtime import GpuMemoryLeakWarning, memory

    reader = FakeMemoryReader(script=[GIB, 41 * GIB])
    monkeypatch.setattr(memory, "default_memory_reader", lambda **_: reader)

    @create_new_process_for_each_test("fork", memory_wait_timeout_s=1e-9)
    def body() -> None:
        pass

    with pytest.warns(GpuMemoryLeakWarning, match=r"41.00/80.00 GiB used"):
        body()


def _report_start(path: str) -> None:
    """Isolated body for the fork-guard tests: records whether the fake torch (in the
    parent's sys.modules, never importable) reached the child: it does only by fork."""
    Path(path).write_text(f"{os.getpid()} {'torch' in sys.modules}")


def _fake_torch(**cuda: object) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(**cuda)  # type: ignore[attr-defined]
    return torch


@pytest.mark.parametrize(
    ("cuda", "reason"),
    [
        ({"is_initialized": lambda: True}, "torch.cuda.is_initialized() is True"),
        (
            {"is_initialized": lambda: False, "_is_in_bad_fork": lambda: True},
            "torch.cuda._is_in_bad_fork() is True",
        ),
    ],
)
def test_never_forks_after_cuda_is_initialised(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cuda: dict[str, object], reason: str
) -> None:
    monkeypatch.setattr(isolation, "_warned_fork_after_cuda", False)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(**cuda))
    isolated = create_new_process_for_each_test("fork", memory_wait_timeout_s=0)(_report_start)
    with pytest.warns(isolation.ForkAfterCudaWarning) as caught:
        isolated(str(tmp_path / "first"))
        isolated(str(tmp_path / "second"))  # said once
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"create_new_process_for_each_test: {reason} in this process; a forked child could "
        'not use CUDA ("Cannot re-initialize CUDA in forked subprocess"), so isolated tests '
        "in this process use spawn instead of fork (said once)"
    )
    for name in ("first", "second"):
        pid, torch_in_child = (tmp_path / name).read_text().split()
        assert int(pid) != os.getpid() and torch_in_child == "False"  # spawned


def test_forks_when_torch_is_imported_but_cuda_is_not_initialised(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(isolation, "_warned_fork_after_cuda", False)
    fake = _fake_torch(is_initialized=lambda: False, _is_in_bad_fork=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", fake)
    isolated = create_new_process_for_each_test("fork", memory_wait_timeout_s=0)(_report_start)
    with warnings.catch_warnings():
        warnings.simplefilter("error", isolation.ForkAfterCudaWarning)
        isolated(str(tmp_path / "out"))
    pid, torch_in_child = (tmp_path / "out").read_text().split()
    assert int(pid) != os.getpid() and torch_in_child == "True"  # forked
    assert isolation._warned_fork_after_cuda is False
