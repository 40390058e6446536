"""create_new_process_for_each_test: outcomes come back from the child as outcomes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


@pytest.mark.parametrize("source", ["timeout_s=", "ini isolation_timeout"])
def test_timeout_kills_the_child(pytester: pytest.Pytester, source: str) -> None:
    options = ", timeout_s=0.2" if source == "timeout_s=" else ""
    if source != "timeout_s=":
        pytester.makeini("[pytest]\nisolation_timeout = 0.2\n")
    pytester.makepyfile(
        test_slow=f"""
        import time
        from lint_gpu_tests.runtime import create_new_process_for_each_test

        @create_new_process_for_each_test("fork"{options})
        def test_hangs():
            time.sleep(600)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*IsolatedTestTimeoutError: *ran past 0.2 s (limit from {source};*killed*"]
    )
    assert isolation._ini_timeout is None  # an inner session's ini is restored at its end


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
        'not use CUDA (torch raises "Cannot re-initialize CUDA in forked subprocess", or '
        '"CUDA driver initialization failed" when cuInit ran below torch), so isolated '
        "tests in this process use spawn instead of fork (said once)"
    )
    # filed under the isolated function's own line, not a line of the runtime
    assert caught[0].filename == __file__
    assert caught[0].lineno == _report_start.__code__.co_firstlineno
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


# -- time limits, processes left behind, the parent's death ---------------------------
def _wait_dead(pid: int, what: str) -> None:
    """Bounded wait (60 s) until ``pid`` is gone; fails naming ``what`` at the bound."""
    deadline = time.monotonic() + 60
    while not _dead(pid):
        assert time.monotonic() < deadline, f"{what} (pid {pid}) still alive"
        time.sleep(0.05)


LEAVES_A_NON_DAEMON_CHILD = """
import multiprocessing, os, time
from lint_gpu_tests.runtime import create_new_process_for_each_test

def _sleep():
    time.sleep(600)

@create_new_process_for_each_test("spawn", memory_wait_timeout_s=0)
def test_leaves_a_non_daemon_child():
    helper = multiprocessing.Process(target=_sleep)  # non-daemon: the exit joins it
    helper.start()
    with open({pidfile!r}, "w") as f:
        f.write(str(helper.pid))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_spawned_child_held_by_a_leftover_fails_naming_it(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "EXIT_GRACE_S", 0.5)
    pidfile = tmp_path / "helper.pid"
    pytester.makepyfile(test_leftover=LEAVES_A_NON_DAEMON_CHILD.format(pidfile=str(pidfile)))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    helper = int(pidfile.read_text())
    result.stdout.fnmatch_lines(
        [
            "*IsolatedTestTimeoutError: isolated test (spawn): the test returned, but child "
            f"* had not exited * s later: it waits for processes the test left behind "
            f"(killed now): * pid {helper}*"
        ]
    )
    _wait_dead(helper, "the leftover helper")


HANGS = """
import subprocess, sys, time
import pytest
from lint_gpu_tests.runtime import create_new_process_for_each_test

@pytest.mark.isolation_timeout({limit})
@create_new_process_for_each_test({method!r}, memory_wait_timeout_s=0)
def test_hangs():
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open({pidfile!r}, "w") as f:
        f.write(str(grandchild.pid))
    time.sleep(600)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_marker_limit_ends_the_whole_tree_and_names_it(
    pytester: pytest.Pytester, tmp_path: Path, method: str
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    limit = 0.5 if method == "fork" else 8  # a spawned child first starts an interpreter
    pytester.makepyfile(test_hangs=HANGS.format(method=method, pidfile=str(pidfile), limit=limit))
    # --strict-markers: the plugin registers the marker
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(failed=1)
    grandchild = int(pidfile.read_text())
    result.stdout.fnmatch_lines(
        [
            f"*IsolatedTestTimeoutError: isolated test ({method}) ran past {limit:g} s (limit from "
            "@pytest.mark.isolation_timeout; set it with *"
            f"the processes under it: * pid {grandchild} (parent *): "
            "* -c import time; time.sleep(600)*"
        ]
    )
    _wait_dead(grandchild, "the grandchild")


def test_time_limit_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(isolation.TIMEOUT_ENV, raising=False)
    monkeypatch.setattr(isolation, "_ini_timeout", None)
    monkeypatch.setattr(isolation, "_marker_timeout", None)
    assert isolation._time_limit(None) == (600.0, "the default")
    monkeypatch.setattr(isolation, "_ini_timeout", "120")
    assert isolation._time_limit(None) == (120.0, "ini isolation_timeout")
    monkeypatch.setenv(isolation.TIMEOUT_ENV, "90")
    assert isolation._time_limit(None) == (90.0, "GPU_TEST_LINT_ISOLATION_TIMEOUT")
    monkeypatch.setattr(isolation, "_marker_timeout", 30)
    assert isolation._time_limit(None) == (30.0, "@pytest.mark.isolation_timeout")
    assert isolation._time_limit(5) == (5.0, "timeout_s=")
    assert isolation._time_limit(0) == (None, "timeout_s=")  # 0: no limit
    monkeypatch.setattr(isolation, "_marker_timeout", "soon")
    with pytest.raises(ValueError, match="isolation_timeout: the time limit must be a number"):
        isolation._time_limit(None)
    with pytest.raises(ValueError, match=">= 0"):
        isolation._time_limit(-1)


BODIES = """
import os, subprocess, sys, time

def body(path):
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {grandchild.pid}")
    os.replace(path + ".tmp", path)
    time.sleep(600)
"""

PARENT = """
import sys
sys.path.insert(0, sys.argv[1])
import bodies
from lint_gpu_tests.runtime import create_new_process_for_each_test

create_new_process_for_each_test(sys.argv[2], timeout_s=0, memory_wait_timeout_s=0)(
    bodies.body
)(sys.argv[3])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_the_tree_ends_when_the_parent_is_killed(tmp_path: Path, method: str) -> None:
    (tmp_path / "bodies.py").write_text(BODIES)
    (tmp_path / "parent.py").write_text(PARENT)
    record = tmp_path / "pids"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(tmp_path), method, str(record)],
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not record.exists():
            assert parent.poll() is None, "the parent ended before the child started"
            assert time.monotonic() < deadline, "the isolated child never started"
            time.sleep(0.05)
        child, grandchild = map(int, record.read_text().split())
        parent.kill()  # SIGKILL: no handler, no finally runs in the parent
        parent.wait()
        _wait_dead(child, "the isolated child")
        _wait_dead(grandchild, "the test's grandchild")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_wait_for_child_tells_a_hang_from_a_child_that_does_not_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = tmp_path / "outcome"
    result.write_bytes(b"")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        # no outcome written: the test itself is still running at the limit
        assert isolation._wait_for_child(sleeper.pid, str(result), 0.2) == ("limit", 0.0)
        result.write_bytes(b"written")
        # the test returned; the limit comes before the exit grace ends: still "stuck"
        monkeypatch.setattr(isolation, "EXIT_GRACE_S", 600.0)
        end, since = isolation._wait_for_child(sleeper.pid, str(result), 0.2)
        assert end == "stuck" and since >= 0.0
        monkeypatch.setattr(isolation, "EXIT_GRACE_S", 0.2)
        end, since = isolation._wait_for_child(sleeper.pid, str(result), None)
        assert end == "stuck" and since >= 0.2
        sleeper.kill()  # not reaped yet: waitid sees it exited
        assert isolation._wait_for_child(sleeper.pid, str(result), None) == ("exited", 0.0)
    finally:
        sleeper.kill()
        sleeper.wait()
