"""Run each test in a fresh child process, so its exit frees everything the test held.

vLLM's ``tests/utils.py`` has ``fork_new_process_for_each_test`` and
``spawn_new_process_for_each_test``; this is the same idea with the gaps closed:

* the child's outcome comes back as an outcome, not as an exit code: a skip or xfail in
  the child is a skip or xfail in the parent (vLLM's forked helper reports a forked skip
  as a pass), a failure re-raises the child's exception (when it pickles) with the
  child's traceback text chained as its cause;
* the child leads its own process group, and the whole group (the engine-core processes a
  test started included) is killed once the child has exited or timed out; it also ends
  with the parent (``PR_SET_PDEATHSIG`` and a watcher process);
* a time limit bounds the child's run (600 s unless ``timeout_s=``, the
  ``isolation_timeout`` marker, ``GPU_TEST_LINT_ISOLATION_TIMEOUT`` or the ini option say
  otherwise), and a child whose test has returned gets :data:`EXIT_GRACE_S` to exit; a hang
  fails the test naming the processes left;
* ``fork`` becomes ``spawn`` where the parent has CUDA initialised, by torch or through the
  driver (:mod:`._cuda`).

``fork`` runs the test function in a copy of the pytest process (fixture values are
inherited as they are). ``spawn`` starts a new interpreter that imports the test module
again and calls the undecorated function: its arguments (fixture values) must pickle,
and plain ``assert`` messages in the child are not rewritten by pytest.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.util
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from ._cuda import CUDA_INIT_FAILURES, cuda_initialised_reason
from ._platform import default_start_method
from ._stack import warn_at_function
from .memory import (
    DEFAULT_SLACK_RATIO,
    GIB,
    DeviceMemory,
    GpuMemoryLeakWarning,
    GpuMemoryTimeoutError,
    first_context_allowance,
    read_baseline,
    wait_for_memory_to_return,
)

__all__ = [
    "ForkAfterCudaWarning",
    "IsolatedTestError",
    "IsolatedTestTimeoutError",
    "RemoteTraceback",
    "create_new_process_for_each_test",
    "fork_new_process_for_each_test",
    "spawn_new_process_for_each_test",
]

StartMethod = Literal["fork", "spawn"]
F = TypeVar("F", bound=Callable[..., Any])

_ORIGINAL_ATTR = "__gpu_test_lint_isolated__"
_in_isolated_child = False
_warned_fork_after_cuda = False


DEFAULT_TIMEOUT_S: float = 600.0
"""Default time limit of an isolated child, in seconds (10 min: a real vLLM 0.25 engine took
25-30 s to build on an H200; a test building several stays well within it)."""

TIMEOUT_ENV = "GPU_TEST_LINT_ISOLATION_TIMEOUT"
"""Environment variable: the time limit in seconds (over the ini option, under a marker)."""

TIMEOUT_MARKER = "isolation_timeout"
"""``@pytest.mark.isolation_timeout(seconds)`` (read by the pytest plugin) and the ini
option ``isolation_timeout = seconds`` share this name."""

EXIT_GRACE_S: float = 30.0
"""Seconds an isolated child gets to exit once its test has returned (its outcome is
written). A spawned child's interpreter joins the non-daemon processes the test left
(multiprocessing's exit handler), which can be forever; a healthy exit, a real vLLM engine
shut down by its finalizer included, took under 3 s on an H200."""

_ini_timeout: str | None = None
"""The ini option's raw value, set by the plugin at configure (``None``: not set)."""
_marker_timeout: object = None
"""The running test's ``isolation_timeout`` marker value, set by the plugin around the
test's call (``None``: no marker)."""


def _parse_timeout(value: object, source: str) -> float | None:
    """Seconds from ``value``; 0 means no limit (``None``).

    Raises:
        ValueError: not a number, or negative.
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"{source}: the time limit must be a number of seconds, not {value!r}"
        ) from None
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"{source}: the time limit must be >= 0 seconds (0: none), not {value!r}")
    return seconds or None


def _time_limit(explicit: float | None) -> tuple[float | None, str]:
    """The isolated child's time limit (seconds; ``None``: none) and where it comes from:
    the decorator's ``timeout_s``, else the test's ``isolation_timeout`` marker, else
    :data:`TIMEOUT_ENV`, else the ini option ``isolation_timeout``, else
    :data:`DEFAULT_TIMEOUT_S`.

    Raises:
        ValueError: the value found is not a number of seconds >= 0.
    """
    if explicit is not None:
        return _parse_timeout(explicit, "timeout_s="), "timeout_s="
    if _marker_timeout is not None:
        source = f"@pytest.mark.{TIMEOUT_MARKER}"
        return _parse_timeout(_marker_timeout, source), source
    env = os.environ.get(TIMEOUT_ENV, "").strip()
    if env:
        return _parse_timeout(env, TIMEOUT_ENV), TIMEOUT_ENV
    if _ini_timeout is not None and _ini_timeout.strip():
        source = f"ini {TIMEOUT_MARKER}"
        return _parse_timeout(_ini_timeout.strip(), source), source
    return DEFAULT_TIMEOUT_S, "the default"


def _start_method(
    chosen: StartMethod | None, func: Callable[..., Any] | None = None
) -> StartMethod:
    """The start method to use now: ``chosen`` (or the platform's default), except that
    ``fork`` becomes ``spawn`` when CUDA is initialised here (by torch or below it, through
    the driver: :func:`~lint_gpu_tests.runtime._cuda.cuda_initialised_reason`), with a
    :class:`ForkAfterCudaWarning` the first time, filed under the test's ``def``."""
    global _warned_fork_after_cuda
    start: StartMethod = chosen or default_start_method()
    if start != "fork":
        return start
    reason = cuda_initialised_reason()
    if reason is None:
        return start
    if not _warned_fork_after_cuda:
        _warned_fork_after_cuda = True
        warn_at_function(
            f"create_new_process_for_each_test: {reason}; a forked child could not use "
            'CUDA (torch raises "Cannot re-initialize CUDA in forked subprocess", or "CUDA '
            'driver initialization failed" when cuInit ran below torch), so isolated tests '
            "in this process use spawn instead of fork (said once)",
            ForkAfterCudaWarning,
            func,
        )
    return "spawn"


class IsolatedTestError(Exception):
    """The isolated child failed and its exception could not be re-raised as itself
    (it did not pickle), or the child died without reporting an outcome (crash, signal)."""


class ForkAfterCudaWarning(RuntimeWarning):
    """CUDA was already initialised in the parent, so isolation used ``spawn`` instead of
    ``fork`` (a forked child cannot use CUDA: "Cannot re-initialize CUDA in forked
    subprocess"). Given once per process."""


class IsolatedTestTimeoutError(TimeoutError):
    """The isolated child ran past its time limit, or its test returned and it did not exit
    within :data:`EXIT_GRACE_S`; its whole process tree was killed, and the message names
    each process of it (pid, parent, command line) and where the limit came from."""


class RemoteTraceback(Exception):
    """Carries the child's formatted traceback; chained as ``__cause__`` of the re-raised
    exception so that pytest prints it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


# -- the child side ------------------------------------------------------------------
def _capture_outcome(func: Callable[..., Any], args: Any, kwargs: Any) -> dict[str, Any]:
    """Run ``func`` and describe how it ended, as a picklable dict."""
    import pytest

    try:
        func(*args, **kwargs)
    except pytest.skip.Exception as exc:
        return {"outcome": "skipped", "message": str(exc.msg or "")}
    except pytest.xfail.Exception as exc:  # before fail.Exception: XFailed subclasses Failed
        return {"outcome": "xfailed", "message": str(exc.msg or "")}
    except BaseException as exc:
        try:
            exception: bytes | None = pickle.dumps(exc)
        except Exception:
            exception = None
        return {
            "outcome": "failed",
            "summary": "".join(traceback.format_exception_only(type(exc), exc)).strip(),
            # skip this function's own frame: the child's traceback starts at the test
            "traceback": "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)
                if exc.__traceback__ is not None
                else traceback.format_exception_only(type(exc), exc)
            ),
            "exception": exception,
        }
    return {"outcome": "passed"}


def _write_outcome(path: str, outcome: dict[str, Any]) -> None:
    try:
        data = pickle.dumps(outcome)
    except Exception:  # e.g. an exception whose pickle breaks later
        outcome = dict(outcome, exception=None)
        data = pickle.dumps(outcome)
    # whole or not at all: the parent takes a non-empty file as "the test has returned"
    with open(path + ".part", "wb") as file:
        file.write(data)
    os.replace(path + ".part", path)


_PR_SET_PDEATHSIG = 1
"""``prctl`` option (``linux/prctl.h``): the signal this process gets when its parent ends."""


def _die_with_parent(parent_pid: int) -> bool:
    """Linux: have the kernel SIGKILL this process when the thread that started it ends
    (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ctypes); ends at once when the parent is
    already gone. ``False`` where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent_pid:  # the parent ended before prctl took effect
        os._exit(1)
    return True


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _resolve_test_function(module_name: str, module_file: str | None, qualname: str) -> Any:
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError:
        if module_file is None:
            raise
        spec = importlib.util.spec_from_file_location(module_name, module_file)
        if spec is None or spec.loader is None:
            raise
        target = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = target
        spec.loader.exec_module(target)
    for part in qualname.split("."):
        target = getattr(target, part)
    return getattr(target, _ORIGINAL_ATTR, target)


#: The parent's pid, handed to a spawned child in its environment: the child's command line
#: stays ``python -c <code> <payload> <result>``, which tools that watch for isolated
#: children recognise.
PARENT_PID_ENV = "GPU_TEST_LINT_ISOLATION_PARENT_PID"


def _record_in_child() -> None:
    """Where ``gpu-test-lint prove`` records the test (``$GPU_TEST_LINT_RECORD_CHILD`` set by
    its recorder), hand the engines and texts of this child to the recorder's file: they are
    built here, not in the process that records."""
    record = os.environ.get("GPU_TEST_LINT_RECORD_CHILD")
    if record:
        from lint_gpu_tests.runtime.recorder import install_child

        install_child(record)


def _spawn_main(payload_path: str, result_path: str, parent_pid: str | None = None) -> None:
    """Entry of a spawned child: read the payload, run the test, write the outcome. Dies
    with the parent (``parent_pid``, else :data:`PARENT_PID_ENV` of the environment, which
    is removed so the test's own processes do not inherit it) on Linux."""
    global _in_isolated_child
    _in_isolated_child = True
    from_env = os.environ.pop(PARENT_PID_ENV, None)
    parent_pid = parent_pid if parent_pid is not None else from_env
    if parent_pid is not None:
        _die_with_parent(int(parent_pid))
    _record_in_child()
    with open(payload_path, "rb") as file:
        sys_path, module_name, module_file, qualname = pickle.load(file)
        sys.path[:] = sys_path
        try:
            args, kwargs = pickle.load(file)
            func = _resolve_test_function(module_name, module_file, qualname)
        except BaseException:
            outcome = {
                "outcome": "failed",
                "summary": "the spawned child could not load the test",
                "traceback": traceback.format_exc(),
                "exception": None,
            }
            _write_outcome(result_path, outcome)
            return
    _write_outcome(result_path, _capture_outcome(func, args, kwargs))
    _flush_stdio()


# -- the parent side -----------------------------------------------------------------
ChildEnd = Literal["exited", "limit", "stuck"]
"""How the wait for the child ended: it exited; it ran past its time limit; or its test
returned but it did not exit within :data:`EXIT_GRACE_S`."""

_SENTINEL = """\
import os, signal, sys
fd = int(sys.argv[2])
try:
    while os.read(fd, 64):
        pass
except OSError:
    pass
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except OSError:
    pass
"""
"""Runs in a small watcher process: blocks on a pipe whose only writer is the parent, so it
reads end-of-file when the parent closes it or dies in any way (SIGKILL included), and then
kills the child's process group. ``PR_SET_PDEATHSIG`` ends the child alone; its own children
(an engine core) would outlive it."""


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (so its group id stays ours)."""
    if hasattr(os, "waitid"):
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, pid, flags) is not None
    raise NotImplementedError("process isolation needs os.waitid (Linux, macOS)")


def _returned(result_path: str) -> bool:
    """Whether the child has written its outcome (the file is replaced whole)."""
    try:
        return os.path.getsize(result_path) > 0
    except OSError:
        return False


def _wait_for_child(pid: int, result_path: str, limit_s: float | None) -> tuple[ChildEnd, float]:
    """Poll until ``pid`` exits, ``limit_s`` seconds pass, or the test has returned and the
    child has not exited :data:`EXIT_GRACE_S` seconds later. Returns how it ended and the
    seconds since the test returned (0 when it had not). A child still exiting when the
    limit comes counts as stuck: its test had returned."""
    now = time.monotonic()
    deadline = None if limit_s is None else now + limit_s
    returned_at: float | None = None
    delay = 0.001
    while not _exited(pid):
        now = time.monotonic()
        if returned_at is None and _returned(result_path):
            returned_at = now
        since = 0.0 if returned_at is None else now - returned_at
        if deadline is not None and now >= deadline:
            return ("limit" if returned_at is None else "stuck"), since
        if returned_at is not None and since >= EXIT_GRACE_S:
            return "stuck", since
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return "exited", 0.0


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of group ``pgid``, read from ``/proc`` (Linux)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc/self") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def _tree(pid: int) -> list[Any]:
    """psutil processes of the child's tree, the child first: its descendants and the live
    members of its process group (re-parented ones included); ``[]`` without psutil."""
    try:
        import psutil
    except ImportError:
        return []
    found: dict[int, Any] = {}
    try:
        child = psutil.Process(pid)
        found[pid] = child
        for process in child.children(recursive=True):
            found.setdefault(process.pid, process)
    except psutil.Error:
        pass
    for member in _group_members(pid):
        try:
            found.setdefault(member, psutil.Process(member))
        except psutil.Error:
            continue
    return list(found.values())


def _describe(process: Any) -> str | None:
    """``"python3 pid 1234 (parent 1200): python3 -c import time; time.sleep(600)"``
    (the command line with its whitespace collapsed: setproctitle pads a title such as
    ``VLLM::EngineCore`` with spaces; cut at 100 characters); ``None`` for a process that
    has ended or is a zombie."""
    try:
        import psutil

        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            command = " ".join(" ".join(process.cmdline()).split())
            name = process.name()
            parent = process.ppid()
    except Exception:
        return None
    if len(command) > 100:
        command = command[:97] + "..."
    return f"{name} pid {process.pid} (parent {parent})" + (
        f": {command}" if command and command != name else ""
    )


def _kill_group(pgid: int, wait_s: float = 5.0, others: Sequence[Any] = ()) -> None:
    """SIGKILL the group (and ``others``, psutil processes that left it); on Linux, wait
    (at most ``wait_s``) until they are gone, so that the memory they held is being
    released when the test returns."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for process in others:
        try:
            process.kill()
        except Exception:
            continue
    if not os.path.isdir("/proc/self"):
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        # the child itself is still unreaped (waitid WNOWAIT) and shows as a zombie
        if not _group_members(pgid) and all(_describe(p) is None for p in others):
            return
        time.sleep(0.005)


def _start_sentinel(pgid: int) -> tuple[subprocess.Popen[bytes], int] | None:
    """Start the watcher of :data:`_SENTINEL` for group ``pgid``; returns it and the write
    end of its pipe (the parent holds it until the child is dealt with), or ``None``."""
    read_fd, write_fd = os.pipe()
    try:
        watcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _SENTINEL, str(pgid), str(read_fd)],
            pass_fds=(read_fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a kill of pytest's own process group spares it
        )
    except OSError:
        os.close(write_fd)
        return None
    finally:
        os.close(read_fd)
    return watcher, write_fd


def _stop_sentinel(sentinel: tuple[subprocess.Popen[bytes], int] | None) -> None:
    """Close the watcher's pipe (it then kills the group once more: harmless, the child is
    not reaped yet, so its group id is not reused) and wait for it (at most 10 s)."""
    if sentinel is None:
        return
    watcher, write_fd = sentinel
    os.close(write_fd)
    try:
        watcher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()


def _supervise(
    pid: int, result_path: str, limit_s: float | None
) -> tuple[ChildEnd, float, list[str]]:
    """Wait for the child; then end its whole process tree. Returns how the wait ended and,
    the seconds since the test returned, and when the child did not exit by itself, its tree
    as it was then: the child's own
    description first, then the other processes'. Whatever interrupts the wait
    (KeyboardInterrupt, another plugin's timeout) ends the tree too. The caller reaps the
    child afterwards."""
    sentinel = _start_sentinel(pid)
    try:
        end, since = _wait_for_child(pid, result_path, limit_s)
        left: list[str] = []
        tree: list[Any] = []
        if end != "exited":
            tree = _tree(pid)
            child = [_describe(p) or f"pid {pid}" for p in tree if p.pid == pid] or [f"pid {pid}"]
            others = [_describe(p) for p in tree if p.pid != pid]
            left = child + [text for text in others if text is not None]
        _kill_group(pid, others=tree)
        return end, since, left
    except BaseException:
        _kill_group(pid, others=_tree(pid))
        raise
    finally:
        _stop_sentinel(sentinel)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"was killed by signal {name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


@dataclass
class _Run:
    """One isolated run, as the parent saw it."""

    pid: int
    method: StartMethod
    end: ChildEnd
    since_return_s: float
    how: str
    left: list[str]
    limit_s: float | None
    limit_source: str


def _run_forked(
    func: Callable[..., Any], args: Any, kwargs: Any, result_path: str, limit_s: float | None
) -> tuple[int, ChildEnd, float, str, list[str]]:
    global _in_isolated_child
    parent = os.getpid()
    _flush_stdio()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.setpgid(0, 0)
            _die_with_parent(parent)
            _in_isolated_child = True
            _record_in_child()
            _write_outcome(result_path, _capture_outcome(func, args, kwargs))
        except BaseException:
            code = 1
        finally:
            _flush_stdio()
            os._exit(code)
    try:
        os.setpgid(pid, pid)
    except (PermissionError, ProcessLookupError):
        pass  # the child did it first, or already exited
    try:
        end, since, left = _supervise(pid, result_path, limit_s)
    finally:
        _, status = os.waitpid(pid, 0)
    return pid, end, since, _describe_status(status), left


def _run_spawned(
    func: Callable[..., Any], args: Any, kwargs: Any, result_path: str, limit_s: float | None
) -> tuple[int, ChildEnd, float, str, list[str]]:
    module = sys.modules.get(func.__module__)
    module_file = getattr(module, "__file__", None)
    try:
        arguments = pickle.dumps((args, kwargs))
    except Exception as exc:
        raise TypeError(
            f"spawn isolation sends the test's arguments to the child by pickle, and "
            f"they do not pickle ({exc}); use method='fork' or picklable fixtures"
        ) from exc
    fd, payload_path = tempfile.mkstemp(prefix="gpu-test-lint-payload-")
    try:
        with os.fdopen(fd, "wb") as file:
            pickle.dump((list(sys.path), func.__module__, module_file, func.__qualname__), file)
            file.write(arguments)
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        env[PARENT_PID_ENV] = str(os.getpid())
        code = (
            "import sys; from lint_gpu_tests.runtime.isolation import _spawn_main; "
            "_spawn_main(sys.argv[1], sys.argv[2])"
        )
        _flush_stdio()
        process = subprocess.Popen(
            [sys.executable, "-c", code, payload_path, result_path],
            env=env,
            start_new_session=True,
        )
        try:
            end, since, left = _supervise(process.pid, result_path, limit_s)
        finally:
            process.wait()
        status = process.returncode
        described = (
            f"was killed by signal {signal.Signals(-status).name}"
            if status < 0
            else f"exited with code {status}"
        )
        return process.pid, end, since, described, left
    finally:
        os.unlink(payload_path)


def _cuda_hint(outcome: dict[str, Any], method: str) -> str:
    """For a forked child that failed to initialise CUDA: that its parent had CUDA, and the
    fix; ``""`` otherwise."""
    if method != "fork" or outcome.get("outcome") != "failed":
        return ""
    text = f"{outcome.get('summary', '')}\n{outcome.get('traceback', '')}"
    if not any(marker in text for marker in CUDA_INIT_FAILURES):
        return ""
    reason = cuda_initialised_reason()
    had = (
        f"the parent process has CUDA initialised ({reason})"
        if reason is not None
        else "its parent process had CUDA initialised when it forked (cuInit, through torch "
        "or below it: a CUDA library, a profiler), which this process could not see"
    )
    return (
        f"the forked child could not initialise CUDA: {had}, and a child forked after "
        'cuInit cannot use CUDA; fix: use spawn (create_new_process_for_each_test("spawn") '
        "or @spawn_new_process_for_each_test)"
    )


def _report(outcome: dict[str, Any] | None, run: _Run) -> None:
    """Turn the child's outcome into the same outcome in the parent."""
    import pytest

    __tracebackhide__ = True
    pid, method = run.pid, run.method
    left = "; ".join(run.left[1:]) or "none"
    if run.end == "limit":
        limit = f"{run.limit_s:g} s" if run.limit_s is not None else "its limit"
        child = run.left[0] if run.left else f"pid {pid}"
        raise IsolatedTestTimeoutError(
            f"isolated test ({method}) ran past {limit} (limit from {run.limit_source}; "
            f"set it with @pytest.mark.{TIMEOUT_MARKER}(seconds), ini {TIMEOUT_MARKER}, "
            f"{TIMEOUT_ENV} or timeout_s=, 0 for none); child {pid} and its processes were "
            f"killed: the child ({child}) and the processes under it: {left}"
        )
    stuck = ""
    if run.end == "stuck":
        stuck = (
            f"the test returned, but child {pid} had not exited "
            f"{round(run.since_return_s, 1):g} s later: it waits for processes the test left "
            f"behind (killed now): {left}"
        )
        if outcome is None or outcome["outcome"] in ("passed", "skipped", "xfailed"):
            raise IsolatedTestTimeoutError(f"isolated test ({method}): {stuck}")
    if outcome is None:
        raise IsolatedTestError(
            f"isolated test ({method}): child {pid} {run.how} before reporting an outcome"
        )
    kind = outcome["outcome"]
    if kind == "passed":
        return
    if kind == "skipped":
        # reported at the test's own location, not at this helper (hidden from tracebacks)
        skip = pytest.skip.Exception(outcome["message"])
        skip._use_item_location = True
        raise skip
    if kind == "xfailed":
        pytest.xfail(outcome["message"])
    notes = [note for note in (_cuda_hint(outcome, method), stuck) if note]
    header = f"(in isolated child process {pid}, {method})"
    remote = RemoteTraceback("\n".join([header, *notes, outcome["traceback"]]))
    exception: BaseException | None = None
    if outcome.get("exception") is not None:
        try:
            exception = pickle.loads(outcome["exception"])
        except Exception:
            exception = None
    if not isinstance(exception, BaseException):
        exception = IsolatedTestError(outcome["summary"])
    add_note = getattr(exception, "add_note", None)  # Python 3.11+
    for note in notes:
        if callable(add_note):
            add_note(note)
    raise exception from remote


def _wait_for_release(
    baseline: list[DeviceMemory],
    cuda_at_baseline: bool,
    timeout_s: float,
    slack: int,
    slack_ratio: float,
    func: Callable[..., Any],
) -> None:
    try:
        wait_for_memory_to_return(
            baseline,
            slack_bytes=slack,
            slack_ratio=slack_ratio,
            context_allowance=first_context_allowance(cuda_at_baseline),
            timeout_s=timeout_s,
        )
    except GpuMemoryTimeoutError as exc:
        warn_at_function(
            f"device memory not released after the isolated test's processes ended: {exc}",
            GpuMemoryLeakWarning,
            func,
        )
    except Exception:  # the reader broke: nothing to wait with
        pass


def _read_outcome(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as file:
            data = file.read()
        return pickle.loads(data) if data else None
    except Exception:
        return None


@overload
def create_new_process_for_each_test(
    method: F,
    *,
    timeout_s: float | None = None,
    memory_wait_timeout_s: float = 60.0,
    memory_slack_bytes: int = GIB,
    memory_slack_ratio: float = DEFAULT_SLACK_RATIO,
) -> F: ...


@overload
def create_new_process_for_each_test(
    method: StartMethod | None = None,
    *,
    timeout_s: float | None = None,
    memory_wait_timeout_s: float = 60.0,
    memory_slack_bytes: int = GIB,
    memory_slack_ratio: float = DEFAULT_SLACK_RATIO,
) -> Callable[[F], F]: ...


def create_new_process_for_each_test(
    method: StartMethod | Callable[..., Any] | None = None,
    *,
    timeout_s: float | None = None,
    memory_wait_timeout_s: float = 60.0,
    memory_slack_bytes: int = GIB,
    memory_slack_ratio: float = DEFAULT_SLACK_RATIO,
) -> Any:
    """Decorator: run the test function in a new child process.

    Use as ``@create_new_process_for_each_test()``, ``@create_new_process_for_each_test``,
    ``@create_new_process_for_each_test("spawn", timeout_s=600)``.

    Args:
        method: ``"fork"`` or ``"spawn"``; ``None`` picks ``"spawn"`` on ROCm and XPU and
            ``"fork"`` elsewhere, when the test runs (see ``_platform.detect_platform``;
            torch is not imported to decide).
        timeout_s: the child's time limit, in seconds (0: none). ``None`` (the default)
            takes it from the test's ``@pytest.mark.isolation_timeout(seconds)``, else the
            environment variable ``GPU_TEST_LINT_ISOLATION_TIMEOUT``, else the ini option
            ``isolation_timeout``, else :data:`DEFAULT_TIMEOUT_S` (600 s). At the limit the
            child's whole process tree is killed and the test fails with
            :class:`IsolatedTestTimeoutError` naming the processes. A child whose test has
            returned gets :data:`EXIT_GRACE_S` (30 s) more to exit (a spawned interpreter
            joins the non-daemon processes the test left), then the same.
        memory_wait_timeout_s: after the child's group is gone, wait up to this many
            seconds until every visible device is back within its slack of what it used
            before the child started (the driver frees a dead process's memory a moment
            after it exits: about 0.1 s was seen on an H200), so the next test starts on a
            clean device; at the timeout a
            :class:`~lint_gpu_tests.runtime.memory.GpuMemoryLeakWarning`. 0 disables it;
            it is skipped where memory cannot be read (no NVML/amdsmi and no CUDA
            initialised here; torch is never initialised for it).
        memory_slack_bytes: bytes a device may stay above its pre-test reading, at least
            (1 GiB) ...
        memory_slack_ratio: ... or this fraction of the device when more (0.01).

    The wrapper keeps the function's name and signature (``functools.wraps``), so pytest
    still injects fixtures. In the parent: a pass is a pass; ``pytest.skip``/``xfail``
    in the child become the same in the parent; any other exception is re-raised (itself
    when it pickles, else :class:`IsolatedTestError`) from a :class:`RemoteTraceback`
    holding the child's traceback. A child that dies without an outcome raises
    :class:`IsolatedTestError` naming its exit code or signal. After the child exits, its
    process group (every process it started that did not leave the group) is sent
    SIGKILL. The child leads its own process group and, on Linux, dies with the parent
    (``PR_SET_PDEATHSIG``); a small watcher process kills the group when the parent ends
    in any way, so a killed pytest leaves no engine behind.

    Inside an isolated child, a nested isolated call runs in place.

    Never forks after CUDA is initialised: when torch is already imported and
    ``torch.cuda.is_initialized()`` (or ``torch.cuda._is_in_bad_fork()``) is true, or the
    CUDA driver reports ``cuInit`` done (a library or profiler initialised CUDA below
    torch: :mod:`~lint_gpu_tests.runtime._cuda`), ``fork`` (asked for or the default)
    becomes ``spawn``, with a :class:`ForkAfterCudaWarning` the first time in the process.
    torch is never imported to decide, nor CUDA initialised. A forked child that fails to
    initialise CUDA anyway says that its parent had CUDA and that spawn is the fix.

    Raises:
        ValueError: ``method`` is neither ``"fork"`` nor ``"spawn"``; (when the test runs)
            a time limit that is not a number of seconds >= 0.
    """
    options: dict[str, Any] = {
        "timeout_s": timeout_s,
        "memory_wait_timeout_s": memory_wait_timeout_s,
        "memory_slack_bytes": memory_slack_bytes,
        "memory_slack_ratio": memory_slack_ratio,
    }
    if callable(method):
        return create_new_process_for_each_test(None, **options)(method)
    if method not in (None, "fork", "spawn"):
        raise ValueError(f"method must be 'fork', 'spawn' or None, not {method!r}")
    chosen: StartMethod | None = method

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            __tracebackhide__ = True
            if _in_isolated_child:
                func(*args, **kwargs)
                return
            limit_s, limit_source = _time_limit(timeout_s)
            start = _start_method(chosen, func)
            cuda_at_baseline = cuda_initialised_reason() is not None
            baseline = read_baseline() if memory_wait_timeout_s > 0 else None
            fd, result_path = tempfile.mkstemp(prefix="gpu-test-lint-outcome-")
            os.close(fd)
            try:
                execute = _run_forked if start == "fork" else _run_spawned
                pid, end, since, how, left = execute(func, args, kwargs, result_path, limit_s)
                outcome = _read_outcome(result_path) if end != "limit" else None
            finally:
                for path in (result_path, result_path + ".part"):
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
            if baseline:
                _wait_for_release(
                    baseline,
                    cuda_at_baseline,
                    memory_wait_timeout_s,
                    memory_slack_bytes,
                    memory_slack_ratio,
                    func,
                )
            run = _Run(pid, start, end, since, how, left, limit_s, limit_source)
            _report(outcome, run)

        setattr(wrapper, _ORIGINAL_ATTR, func)
        return wrapper  # type: ignore[return-value]

    return decorate


def fork_new_process_for_each_test(func: F) -> F:
    """``create_new_process_for_each_test("fork")`` as a bare decorator (vLLM's name)."""
    decorated: F = create_new_process_for_each_test("fork")(func)
    return decorated


def spawn_new_process_for_each_test(func: F) -> F:
    """``create_new_process_for_each_test("spawn")`` as a bare decorator (vLLM's name)."""
    decorated: F = create_new_process_for_each_test("spawn")(func)
    return decorated
