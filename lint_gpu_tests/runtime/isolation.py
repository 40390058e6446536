"""Run each test in a fresh child process, so its exit frees everything the test held.

vLLM's ``tests/utils.py`` has ``fork_new_process_for_each_test`` and
``spawn_new_process_for_each_test``; this is the same idea with the gaps closed:

* the child's outcome comes back as an outcome, not as an exit code: a skip or xfail in
  the child is a skip or xfail in the parent (vLLM's forked helper reports a forked skip
  as a pass), a failure re-raises the child's exception (when it pickles) with the
  child's traceback text chained as its cause;
* the child leads its own process group, and the whole group (the engine-core processes a
  test started included) is killed once the child has exited or timed out;
* ``timeout_s`` bounds the child's run.

``fork`` runs the test function in a copy of the pytest process (fixture values are
inherited as they are). ``spawn`` starts a new interpreter that imports the test module
again and calls the undecorated function: its arguments (fixture values) must pickle,
and plain ``assert`` messages in the child are not rewritten by pytest.
"""

from __future__ import annotations

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
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from ._platform import default_start_method
from .memory import (
    GIB,
    DeviceMemory,
    GpuMemoryLeakWarning,
    GpuMemoryTimeoutError,
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


def _cuda_initialised_here() -> str | None:
    """Why forking now would break CUDA in the child, or ``None``.

    Only asks torch when it is already imported (never imports it): ``torch.cuda
    .is_initialized()`` (this process holds a CUDA context) or ``torch.cuda
    ._is_in_bad_fork()`` (this process is itself a child forked after CUDA was
    initialised). A torch whose ``cuda`` module raises counts as not initialised.
    """
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    for probe, reason in (
        ("is_initialized", "torch.cuda.is_initialized() is True in this process"),
        ("_is_in_bad_fork", "torch.cuda._is_in_bad_fork() is True in this process"),
    ):
        function = getattr(cuda, probe, None)
        try:
            if callable(function) and function():
                return reason
        except Exception:
            continue
    return None


def _start_method(chosen: StartMethod | None) -> StartMethod:
    """The start method to use now: ``chosen`` (or the platform's default), except that
    ``fork`` becomes ``spawn`` when CUDA is initialised here, with a
    :class:`ForkAfterCudaWarning` the first time."""
    global _warned_fork_after_cuda
    start: StartMethod = chosen or default_start_method()
    if start != "fork":
        return start
    reason = _cuda_initialised_here()
    if reason is None:
        return start
    if not _warned_fork_after_cuda:
        _warned_fork_after_cuda = True
        warnings.warn(
            f"create_new_process_for_each_test: {reason}; a forked child could not use "
            'CUDA ("Cannot re-initialize CUDA in forked subprocess"), so isolated tests '
            "in this process use spawn instead of fork (said once)",
            ForkAfterCudaWarning,
            stacklevel=3,
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
    """The isolated child ran past ``timeout_s``; its process group was killed."""


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
    with open(path, "wb") as file:
        file.write(data)


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


def _spawn_main(payload_path: str, result_path: str) -> None:
    """Entry of a spawned child: read the payload, run the test, write the outcome."""
    global _in_isolated_child
    _in_isolated_child = True
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
def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (so its group id stays ours)."""
    if hasattr(os, "waitid"):
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, pid, flags) is not None
    raise NotImplementedError("process isolation needs os.waitid (Linux, macOS)")


def _wait_for_exit(pid: int, timeout_s: float | None) -> bool:
    """Poll until ``pid`` exits; ``False`` when ``timeout_s`` ran out first."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    delay = 0.001
    while not _exited(pid):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of group ``pgid``, read from ``/proc`` (Linux)."""
    members = []
    for entry in os.listdir("/proc"):
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


def _kill_group(pgid: int, wait_s: float = 5.0) -> None:
    """SIGKILL the group; on Linux, wait (at most ``wait_s``) until its members are gone,
    so that the memory they held is being released when the test returns."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    if not os.path.isdir("/proc/self"):
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        # the child itself is still unreaped (waitid WNOWAIT) and shows as a zombie
        if not _group_members(pgid):
            return
        time.sleep(0.005)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"was killed by signal {name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


def _run_forked(
    func: Callable[..., Any], args: Any, kwargs: Any, result_path: str, timeout_s: float | None
) -> tuple[int, bool, str]:
    global _in_isolated_child
    _flush_stdio()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.setpgid(0, 0)
            _in_isolated_child = True
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
    finished = _wait_for_exit(pid, timeout_s)
    _kill_group(pid)
    _, status = os.waitpid(pid, 0)
    return pid, finished, _describe_status(status)


def _run_spawned(
    func: Callable[..., Any], args: Any, kwargs: Any, result_path: str, timeout_s: float | None
) -> tuple[int, bool, str]:
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
        finished = _wait_for_exit(process.pid, timeout_s)
        _kill_group(process.pid)
        process.wait()
        status = process.returncode
        described = (
            f"was killed by signal {signal.Signals(-status).name}"
            if status < 0
            else f"exited with code {status}"
        )
        return process.pid, finished, described
    finally:
        os.unlink(payload_path)


def _report(
    outcome: dict[str, Any] | None,
    pid: int,
    method: str,
    finished: bool,
    how: str,
    timeout_s: float | None,
) -> None:
    """Turn the child's outcome into the same outcome in the parent."""
    import pytest

    __tracebackhide__ = True
    if not finished:
        raise IsolatedTestTimeoutError(
            f"isolated test ({method}) ran past {timeout_s:g} s; "
            f"child {pid} and its process group were killed"
        )
    if outcome is None:
        raise IsolatedTestError(
            f"isolated test ({method}): child {pid} {how} before reporting an outcome"
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
    remote = RemoteTraceback(f"(in isolated child process {pid}, {method})\n{outcome['traceback']}")
    exception: BaseException | None = None
    if outcome.get("exception") is not None:
        try:
            exception = pickle.loads(outcome["exception"])
        except Exception:
            exception = None
    if not isinstance(exception, BaseException):
        exception = IsolatedTestError(outcome["summary"])
    raise exception from remote


def _wait_for_release(baseline: list[DeviceMemory], timeout_s: float, slack: int) -> None:
    try:
        wait_for_memory_to_return(baseline, slack_bytes=slack, timeout_s=timeout_s)
    except GpuMemoryTimeoutError as exc:
        warnings.warn(
            f"device memory not released after the isolated test's processes ended: {exc}",
            GpuMemoryLeakWarning,
            stacklevel=3,
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
) -> F: ...


@overload
def create_new_process_for_each_test(
    method: StartMethod | None = None,
    *,
    timeout_s: float | None = None,
    memory_wait_timeout_s: float = 60.0,
    memory_slack_bytes: int = GIB,
) -> Callable[[F], F]: ...


def create_new_process_for_each_test(
    method: StartMethod | Callable[..., Any] | None = None,
    *,
    timeout_s: float | None = None,
    memory_wait_timeout_s: float = 60.0,
    memory_slack_bytes: int = GIB,
) -> Any:
    """Decorator: run the test function in a new child process.

    Use as ``@create_new_process_for_each_test()``, ``@create_new_process_for_each_test``,
    ``@create_new_process_for_each_test("spawn", timeout_s=600)``.

    Args:
        method: ``"fork"`` or ``"spawn"``; ``None`` picks ``"spawn"`` on ROCm and XPU and
            ``"fork"`` elsewhere, when the test runs (see ``_platform.detect_platform``;
            torch is not imported to decide).
        timeout_s: kill the child's process group and fail the test after this many
            seconds; ``None``: no limit.
        memory_wait_timeout_s: after the child's group is gone, wait up to this many
            seconds until every visible device is back within ``memory_slack_bytes`` of
            what it used before the child started (the driver frees a dead process's
            memory a moment after it exits: about 0.1 s was seen on an H200), so the next
            test starts on a clean device; at the timeout a
            :class:`~lint_gpu_tests.runtime.memory.GpuMemoryLeakWarning`. 0 disables it;
            it is skipped where memory cannot be read (no NVML/amdsmi; torch is never
            initialised for it).
        memory_slack_bytes: bytes a device may stay above its pre-test reading (1 GiB).

    The wrapper keeps the function's name and signature (``functools.wraps``), so pytest
    still injects fixtures. In the parent: a pass is a pass; ``pytest.skip``/``xfail``
    in the child become the same in the parent; any other exception is re-raised (itself
    when it pickles, else :class:`IsolatedTestError`) from a :class:`RemoteTraceback`
    holding the child's traceback. A child that dies without an outcome raises
    :class:`IsolatedTestError` naming its exit code or signal; one past the timeout raises
    :class:`IsolatedTestTimeoutError`. After the child exits, its process group (every
    process it started that did not leave the group) is sent SIGKILL.

    Inside an isolated child, a nested isolated call runs in place.

    Never forks after CUDA is initialised: when torch is already imported and
    ``torch.cuda.is_initialized()`` (or ``torch.cuda._is_in_bad_fork()``) is true, ``fork``
    (asked for or the default) becomes ``spawn``, with a :class:`ForkAfterCudaWarning` the
    first time in the process. torch is never imported to decide.

    Raises:
        ValueError: ``method`` is neither ``"fork"`` nor ``"spawn"``.
    """
    options: dict[str, Any] = {
        "timeout_s": timeout_s,
        "memory_wait_timeout_s": memory_wait_timeout_s,
        "memory_slack_bytes": memory_slack_bytes,
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
            start = _start_method(chosen)
            baseline = read_baseline() if memory_wait_timeout_s > 0 else None
            fd, result_path = tempfile.mkstemp(prefix="gpu-test-lint-outcome-")
            os.close(fd)
            try:
                run = _run_forked if start == "fork" else _run_spawned
                pid, finished, how = run(func, args, kwargs, result_path, timeout_s)
                outcome = _read_outcome(result_path) if finished else None
            finally:
                os.unlink(result_path)
            if baseline:
                _wait_for_release(baseline, memory_wait_timeout_s, memory_slack_bytes)
            _report(outcome, pid, start, finished, how, timeout_s)

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
