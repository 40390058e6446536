"""The ``gpu_test_lint`` pytest plugin (entry point ``pytest11``).

Loaded in every pytest run once the package is installed, so it imports nothing but
pytest and the standard library, and does nothing unless asked:

* fixtures ``vllm_runner`` (the :class:`~lint_gpu_tests.runtime.runner.VllmRunner`
  class) and ``vllm_runner_factory`` (several engines alive at once); a project's own
  fixture of the same name, in a ``conftest.py``, overrides these as pytest always does;
* ``--gpu-clean-between-tests`` (or ini ``gpu_clean_between_tests = true``): after each
  test's teardown, ``torch._dynamo.reset()``, ``cleanup_dist_env_and_memory()``,
  ``gc.collect()`` and ``empty_cache()``, each only if its library was already imported;
  then engine processes orphaned by an engine the collection freed get up to 10 s to end;
* ini ``isolation_timeout`` and marker ``@pytest.mark.isolation_timeout(seconds)``: the
  time limit of the child of ``create_new_process_for_each_test`` (handed to
  :mod:`~lint_gpu_tests.runtime.isolation`, imported only when one is used);
* ``--gpu-leak-report``: after each test's teardown, ``gc.collect()``, then the engine
  processes (``VLLM::*`` descendants, with psutil: no GPU needed) still alive and the device
  memory above the session's baseline; the terminal summary names the test after which
  each engine process or each excess first stayed (``<- leaked here``), once, with a hint of
  what holds it. See :class:`_LeakReport`.
* ``--gpu-leak-report-file PATH`` (implies ``--gpu-leak-report``): the same findings as
  JSON, for ``gpu-test-lint check --leak-report PATH`` (schema:
  :mod:`~lint_gpu_tests.runtime.leakfile`); also which fixture started or holds each engine.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .memory import DeviceMemory, MemoryReader
    from .procs import EngineProcess
    from .runner import VllmRunner, VllmRunnerFactory

__all__ = ["vllm_runner", "vllm_runner_factory"]

_GIB = 1 << 30
_CLEAN_NAME = "gpu_test_lint-clean-between-tests"
_LEAK_NAME = "gpu_test_lint-leak-report"
_XDIST_KEY = "gpu_test_lint_leak_report"
_XDIST_JSON_KEY = "gpu_test_lint_leak_report_json"
_SHUTDOWN_WAIT_S = 10.0
"""Seconds the leak report waits for the rest of an engine whose first process has ended
(vLLM 0.32's CPU EngineCore ended 2.7 s after its worker; vLLM kills after 5 s)."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-test-lint", "GPU memory hygiene (gpu-test-lint runtime)")
    group.addoption(
        "--gpu-clean-between-tests",
        action="store_true",
        default=None,
        help="after each test: torch._dynamo.reset(), cleanup_dist_env_and_memory(), "
        "gc.collect(), empty_cache() (ini: gpu_clean_between_tests)",
    )
    group.addoption(
        "--gpu-leak-report",
        action="store_true",
        default=False,
        help="after each test: gc.collect(), then count engine processes (VLLM::*) still "
        "alive and read device memory; name the test after which each first stayed",
    )
    group.addoption(
        "--gpu-leak-report-file",
        default=None,
        metavar="PATH",
        help="write the leak report as JSON to PATH (implies --gpu-leak-report; read by "
        "gpu-test-lint check --leak-report PATH)",
    )
    group.addoption(
        "--gpu-leak-threshold-gib",
        type=float,
        default=1.0,
        metavar="GIB",
        help="with --gpu-leak-report: report tests leaving more than this many GiB (default 1)",
    )
    group.addoption(
        "--gpu-leak-settle-s",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="with --gpu-leak-report: wait up to this long for engine processes to end and "
        "memory to come back before a reading counts (default 3)",
    )
    parser.addini(
        "isolation_timeout",
        type="string",
        default="",
        help="time limit of each create_new_process_for_each_test child, seconds (default "
        "600; 0: none); a test's @pytest.mark.isolation_timeout(seconds) and the "
        "environment variable GPU_TEST_LINT_ISOLATION_TIMEOUT take precedence",
    )
    parser.addini(
        "gpu_clean_between_tests",
        type="bool",
        default=False,
        help="clean process GPU state after each test (as --gpu-clean-between-tests)",
    )


_ISOLATION_INI = pytest.StashKey[tuple[bool, "str | None"]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "isolation_timeout(seconds): time limit of this test's isolated child "
        "(create_new_process_for_each_test), seconds; 0: none",
    )
    ini_timeout = str(config.getini("isolation_timeout") or "").strip()
    if ini_timeout:
        from . import isolation

        config.stash[_ISOLATION_INI] = (True, isolation._ini_timeout)
        isolation._ini_timeout = ini_timeout
    clean = config.getoption("gpu_clean_between_tests")
    if clean is None:
        clean = bool(config.getini("gpu_clean_between_tests"))
    if clean:
        config.pluginmanager.register(_CleanBetweenTests(), _CLEAN_NAME)
    if config.getoption("gpu_leak_report") or config.getoption("gpu_leak_report_file"):
        config.pluginmanager.register(_LeakReport(config), _LEAK_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(_ISOLATION_INI, (False, None))
    if saved[0]:
        from . import isolation

        isolation._ini_timeout = saved[1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Hands the test's ``isolation_timeout`` marker to isolation for the length of the
    call (isolation reads it when the test's isolated child starts)."""
    marker = item.get_closest_marker("isolation_timeout")
    if marker is None:
        yield
        return
    from . import isolation

    value = marker.args[0] if marker.args else marker.kwargs.get("seconds", "")
    saved, isolation._marker_timeout = isolation._marker_timeout, value
    try:
        yield
    finally:
        isolation._marker_timeout = saved


@pytest.fixture
def vllm_runner() -> type[VllmRunner]:
    """The :class:`~lint_gpu_tests.runtime.runner.VllmRunner` class::

    def test_generate(vllm_runner):
        with vllm_runner("facebook/opt-125m", enforce_eager=True) as runner:
            llm = weakref.proxy(runner.llm)
            ...
    """
    from .runner import VllmRunner

    return VllmRunner


@pytest.fixture
def vllm_runner_factory() -> Iterator[VllmRunnerFactory]:
    """A :class:`~lint_gpu_tests.runtime.runner.VllmRunnerFactory`: call it like
    ``vllm_runner`` to have several engines alive at once; the memory wait runs once, when
    the last exits; runners still open at the end of the test are closed then."""
    from .runner import VllmRunnerFactory

    factory = VllmRunnerFactory()
    try:
        yield factory
    finally:
        factory.close()


class _CleanBetweenTests:
    """Registered only with ``--gpu-clean-between-tests`` / ini ``gpu_clean_between_tests``."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, float], EngineProcess] = {}

    def _see(self) -> None:
        from .procs import engine_processes

        self.seen.update((p.key, p) for p in engine_processes())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        yield
        self._see()  # the engines the test left, before a collection may free them

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        self._see()
        yield
        from .procs import alive, engine_processes
        from .runner import release_process_state

        self._see()
        before, self.seen = list(self.seen.values()), {}
        release_process_state()
        if not before:
            return
        # An engine the collection freed is shut down by vLLM's finalizer, which kills an
        # EngineCore that outlives its 5 s; its worker, orphaned then, lingers a few seconds
        # more. Let such orphans end before the next test starts (held engines stay ours).
        ours = {p.key for p in engine_processes()}
        orphans = [p for p in alive(before) if p.key not in ours]
        deadline = time.monotonic() + _SHUTDOWN_WAIT_S
        while orphans and time.monotonic() < deadline:
            time.sleep(0.05)
            orphans = alive(orphans)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config: pytest.Config) -> bool:
    return not _is_xdist_worker(config) and config.pluginmanager.has_plugin("dsession")


def _cuda_initialised() -> bool:
    """Whether this process holds a CUDA context (asks torch only if it is imported)."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        return bool(cuda.is_initialized()) if cuda is not None else False
    except Exception:
        return False


def _cuda_reserved_bytes() -> int:
    """Bytes torch's caching allocator holds on all CUDA devices of this process."""
    cuda = sys.modules["torch"].cuda
    try:
        return sum(int(cuda.memory_reserved(i)) for i in range(int(cuda.device_count())))
    except Exception:
        return 0


@dataclass
class _ProcessLeak:
    """Engine processes first seen alive after ``nodeid``'s teardown; ``site``: the test's
    file, line, function and the fixtures involved (a LEAK's keys of
    :mod:`~lint_gpu_tests.runtime.leakfile`), with ``--gpu-leak-report-file``."""

    nodeid: str
    processes: list[EngineProcess]
    holder: str
    ended_after: dict[int, str] = field(default_factory=dict)  # pid -> nodeid
    site: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _MemoryLeak:
    nodeid: str
    excess_bytes: int
    increase_bytes: int
    per_device: tuple[tuple[int, int], ...]
    site: dict[str, Any] = field(default_factory=dict, compare=False)


def _module_globals_holding_an_engine(item: pytest.Item) -> list[str]:
    """Names in the test's module whose value looks like an engine (has ``llm_engine``)."""
    module = getattr(item, "module", None)
    names = []
    for name, value in vars(module).items() if module is not None else ():
        try:
            if hasattr(value, "llm_engine") and not isinstance(value, type):
                names.append(name)
        except Exception:
            continue
    return names


class _LeakReport:
    """Registered only with ``--gpu-leak-report``.

    After each test's teardown (outermost: after every fixture and
    ``--gpu-clean-between-tests``):

    1. engine processes (:func:`~lint_gpu_tests.runtime.procs.engine_processes`) not seen
       before are read; those still alive after a short wait are noted, then
       ``gc.collect()`` runs and they get ``--gpu-leak-settle-s`` to end. Those that end
       now were held by a reference cycle (listed apart: they end at the next collection,
       which in a real suite may come many tests later); those still alive are a leak of
       this test, reported once, with what probably holds them (the failed test's
       traceback, a module global, else "a reference: global, fixture cache, alias");
       when they end is recorded too.
    2. device memory is compared with the session-start baseline (when a reader exists,
       and not under pytest-xdist: the workers share the devices, so a reading cannot be
       pinned on one test). A test is named when the memory above the baseline grew by
       more than the threshold during it. The first CUDA context this process creates is
       not a leak: at the reading after which ``torch.cuda.is_initialized()`` first turns
       true, the growth less torch's reserved bytes is added to the baseline (and said).

    Under pytest-xdist each worker measures its own engine processes and sends its lines to
    the controller (``workeroutput``); the controller's summary prints them per worker and
    says which workers sent nothing.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.threshold_bytes = int(float(config.getoption("gpu_leak_threshold_gib")) * _GIB)
        self.settle_s = max(0.0, float(config.getoption("gpu_leak_settle_s")))
        self.worker = _is_xdist_worker(config)
        self.reader: MemoryReader | None = None
        self.baseline: list[DeviceMemory] | None = None
        self.unavailable = ""
        self.measured = 0
        self.previous_excess = 0
        self.allowance_bytes = 0
        self.cuda_seen = _cuda_initialised()
        self.context_note = ""
        self.memory_leaks: list[_MemoryLeak] = []
        self.known: dict[tuple[int, float], _ProcessLeak] = {}
        self.process_leaks: list[_ProcessLeak] = []
        self.cycle_held: list[tuple[str, list[EngineProcess]]] = []
        self.failed: set[str] = set()
        self.preexisting: list[EngineProcess] = []
        self.worker_reports: dict[str, list[str]] = {}
        self.workers_down: list[str] = []
        path = config.getoption("gpu_leak_report_file")
        self.file: str | None = (
            os.path.join(str(config.invocation_params.dir), str(path)) if path else None
        )
        self.root = str(config.rootpath)
        self.file_note = ""
        self.cycle_sites: list[dict[str, Any]] = []
        self.started_by: dict[tuple[int, float], dict[str, Any] | None] = {}  # None: the test
        self.fixture_sites: dict[Any, dict[str, Any] | None] = {}
        self.worker_json: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if _is_xdist_controller(self.config):
            return
        from .procs import engine_processes

        self.preexisting = engine_processes()
        if self.worker:
            self.unavailable = (
                "not measured under pytest-xdist: the workers share the devices, so a "
                "reading cannot be pinned on one test (engine processes are counted per worker)"
            )
            return
        from .memory import default_memory_reader, read_all

        try:
            reader = self.config.hook.pytest_gpu_memory_reader(config=self.config)
            if reader is None:
                reader = default_memory_reader()
            if reader is None:
                self.unavailable = (
                    "not measured: no memory reader (install nvidia-ml-py, or amdsmi on ROCm)"
                )
                return
            self.baseline = read_all(reader)
            self.reader = reader
        except Exception as exc:
            self.unavailable = f"not measured: reading device memory failed: {exc!r}"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.when == "call":
            self.failed.add(report.nodeid)

    # -- who started each engine (for --gpu-leak-report-file) ------------------------
    def _started(self) -> set[tuple[int, float]]:
        from .procs import engine_processes

        return {p.key for p in engine_processes()}

    def _attribute(self, before: set[tuple[int, float]], origin: dict[str, Any] | None) -> None:
        for key in self._started() - before:
            self.started_by.setdefault(key, origin)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        if self.file is None:
            yield
            return
        if fixturedef not in self.fixture_sites:
            from .leakfile import fixture_site

            self.fixture_sites[fixturedef] = fixture_site(fixturedef, self.root)
        site = self.fixture_sites[fixturedef]
        if site is None:  # pytest's own fixtures start no engine
            yield
            return
        before = self._started()
        yield
        self._attribute(before, site)  # an inner fixture's setup has claimed its own

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if self.file is None:
            yield
            return
        before = self._started()
        yield
        self._attribute(before, None)

    def _site(self, item: pytest.Item, processes: list[EngineProcess]) -> dict[str, Any]:
        """The test's site and the fixtures that started one of ``processes`` or still hold
        an engine (only with ``--gpu-leak-report-file``)."""
        if self.file is None:
            return {}
        from .leakfile import holding_fixtures, item_site

        site = item_site(item, self.root)
        fixtures: dict[tuple[Any, ...], dict[str, Any]] = {}
        for process in processes:
            origin = self.started_by.get(process.key)
            if origin is not None:
                key = (origin["path"], origin["line"], origin["name"])
                fixtures.setdefault(key, dict(origin))["started_engine"] = True
        for held in holding_fixtures(item, self.root):
            key = (held["path"], held["line"], held["name"])
            fixtures.setdefault(key, held)["holds_engine"] = True
        site["fixtures"] = list(fixtures.values())
        return site

    # tryfirst: the outermost wrapper, so this reads after every other teardown step
    # (fixtures, --gpu-clean-between-tests) has run.
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        yield
        self.measured += 1
        self._read_processes(item)
        if self.reader is not None and self.baseline is not None:
            self._read_memory(item)

    # -- engine processes -----------------------------------------------------------
    def _read_processes(self, item: pytest.Item) -> None:
        from .procs import engine_processes

        seen = {p.key for p in self.preexisting} | set(self.known)
        new = [p for p in engine_processes() if p.key not in seen]
        # already on their way out (a shutdown in progress): a moment, without collecting
        new = self._wait_for_end(new, min(1.0, self.settle_s))
        gc.collect()
        left = self._wait_for_end(new, self.settle_s)
        freed = [p for p in new if p not in left]
        if freed:
            self.cycle_held.append((item.nodeid, freed))
            self.cycle_sites.append(self._site(item, freed))
        self._note_ended(item)
        if left:
            leak = _ProcessLeak(item.nodeid, left, self._holder(item), site=self._site(item, left))
            self.process_leaks.append(leak)
            self.known.update((p.key, leak) for p in left)

    def _note_ended(self, item: pytest.Item) -> None:
        """Record which earlier leaks ended by now. An engine of which some processes have
        ended is shutting down (its worker ends first, the EngineCore some seconds later):
        the rest get up to :data:`_SHUTDOWN_WAIT_S`, so that one engine ends at one test."""
        from .procs import alive

        groups: dict[int, tuple[_ProcessLeak, list[EngineProcess]]] = {}
        for leak in self.known.values():
            groups[id(leak)] = (leak, [p for p in leak.processes if p.key in self.known])
        for leak, processes in groups.values():
            left = alive(processes)
            if left and len(left) < len(processes):
                left = self._wait_for_end(left, _SHUTDOWN_WAIT_S)
            for process in processes:
                if process not in left:
                    leak.ended_after[process.pid] = item.nodeid
                    del self.known[process.key]

    @staticmethod
    def _wait_for_end(processes: list[EngineProcess], timeout_s: float) -> list[EngineProcess]:
        from .procs import alive

        deadline = time.monotonic() + timeout_s
        left = alive(processes)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = alive(left)
        return left

    def _holder(self, item: pytest.Item) -> str:
        if item.nodeid in self.failed:
            return (
                "the test failed: pytest keeps its traceback (sys.last_traceback), whose "
                "frames hold the engine, until the next test's call begins"
            )
        names = _module_globals_holding_an_engine(item)
        if names:
            return "module global(s) " + ", ".join(repr(n) for n in names) + " of the test file"
        from .leakfile import holding_fixtures

        fixtures = holding_fixtures(item, self.root)
        if fixtures:
            return "fixture(s) " + ", ".join(
                f"{f['name']!r} (scope {f['scope']}, {f['relpath'] or f['path']}:{f['line']})"
                for f in fixtures
            ) + ": pytest caches the value until the scope ends"
        return "a reference that survived gc.collect(): a global, a fixture cache, an alias"

    # -- device memory --------------------------------------------------------------
    def _read_memory(self, item: pytest.Item) -> None:
        from .memory import GpuMemoryTimeoutError, read_all, wait_for_memory_to_return

        assert self.reader is not None and self.baseline is not None
        devices = [m.index for m in self.baseline]
        if self.settle_s > 0:
            try:
                wait_for_memory_to_return(
                    self.baseline,
                    slack_bytes=self.threshold_bytes + self.allowance_bytes,
                    timeout_s=self.settle_s,
                    reader=self.reader,
                )
            except GpuMemoryTimeoutError:
                pass
        now = read_all(self.reader, devices)
        per_device = tuple(
            (after.index, max(0, after.used_bytes - before.used_bytes))
            for before, after in zip(self.baseline, now, strict=True)
        )
        increase = sum(delta for _, delta in per_device) - self.allowance_bytes
        increase -= self.previous_excess
        if not self.cuda_seen and _cuda_initialised():
            self.cuda_seen = True
            context = min(max(0, increase), max(0, increase - _cuda_reserved_bytes()))
            self.allowance_bytes += context
            increase -= context
            self.context_note = (
                f"the first CUDA context of this process, created during {item.nodeid}: "
                f"+{context / _GIB:.2f} GiB, not counted as a leak"
            )
        excess = self.previous_excess + increase
        self.previous_excess = excess
        if increase > self.threshold_bytes:
            site = self._site(item, [])
            if site:
                site["held_by"] = self._holder(item)
            self.memory_leaks.append(_MemoryLeak(item.nodeid, excess, increase, per_device, site))

    # -- the report -----------------------------------------------------------------
    def _lines(self) -> list[str]:
        from .procs import alive, describe_processes

        lines = []
        if self.process_leaks:
            lines.append(
                f"engine processes (VLLM::*, psutil): {len(self.process_leaks)} of "
                f"{self.measured} tests left engine processes alive after their teardown "
                "and gc.collect():"
            )
            for leak in self.process_leaks:
                lines.append(
                    f"  {leak.nodeid}: {describe_processes(leak.processes)}  <- leaked here"
                )
                lines.append(f"      held by: {leak.holder}")
                ended = sorted(set(leak.ended_after.values()))
                still = alive(leak.processes)
                for nodeid in ended:
                    pids = [str(pid) for pid, at in leak.ended_after.items() if at == nodeid]
                    lines.append(f"      pid {', '.join(pids)} ended after {nodeid}")
                if still:
                    still_pids = ", ".join(str(p.pid) for p in still)
                    lines.append(f"      pid {still_pids} still alive at the end of the session")
        else:
            lines.append(
                "engine processes (VLLM::*, psutil): none stayed alive after any test's "
                f"teardown and gc.collect() ({self.measured} tests measured)"
            )
        if self.cycle_held:
            lines.append(
                "engine processes that ended only when the report's gc.collect() ran "
                "(held by a reference cycle; without a collection they outlive the test):"
            )
            for nodeid, processes in self.cycle_held:
                lines.append(f"  {nodeid}: {describe_processes(processes)}")
        if self.preexisting:
            lines.append(
                "engine processes alive before the first test (not counted): "
                + describe_processes(self.preexisting)
            )
        lines.extend(self._memory_lines())
        return lines

    def _memory_lines(self) -> list[str]:
        threshold = self.threshold_bytes / _GIB
        if self.baseline is None:
            return [f"device memory: {self.unavailable}"]
        lines = [f"device memory: baseline {m.describe()}" for m in self.baseline]
        if self.context_note:
            lines.append(f"device memory: {self.context_note}")
        if not self.memory_leaks:
            lines.append(
                f"device memory: no test added more than {threshold:.2f} GiB to the memory "
                f"above the baseline ({self.measured} tests measured)"
            )
            return lines
        lines.append(
            f"device memory: {len(self.memory_leaks)} of {self.measured} tests added more than "
            f"{threshold:.2f} GiB to the memory above the baseline:"
        )
        for leak in self.memory_leaks:
            devices = ", ".join(
                f"device {index}: +{delta / _GIB:.2f} GiB" for index, delta in leak.per_device
            )
            lines.append(
                f"  {leak.nodeid}: +{leak.increase_bytes / _GIB:.2f} GiB new, "
                f"+{leak.excess_bytes / _GIB:.2f} GiB above baseline ({devices})  <- leaked here"
            )
        lines.append(
            f"device memory: +{max(0, self.previous_excess) / _GIB:.2f} GiB above the baseline "
            "after the last test"
        )
        return lines

    # -- pytest-xdist ---------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker:
            output = self.config.workeroutput  # type: ignore[attr-defined]
            output[_XDIST_KEY] = self._lines()
            if self.file is not None:
                output[_XDIST_JSON_KEY] = self._payload()
            return
        if self.file is not None:
            self._write_file()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        workerid = str(getattr(node, "workerinput", {}).get("workerid", node))
        output = getattr(node, "workeroutput", {})
        lines = output.get(_XDIST_KEY)
        if lines is None:
            self.workers_down.append(workerid)
        else:
            self.worker_reports[workerid] = list(lines)
        payload = output.get(_XDIST_JSON_KEY)
        if isinstance(payload, dict):
            self.worker_json[workerid] = payload

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        terminalreporter.section("GPU leak report")
        if not _is_xdist_controller(self.config):
            for line in self._lines():
                write(line)
            if self.file_note:
                write(self.file_note)
            return
        write("pytest-xdist: each worker measured the tests it ran:")
        for workerid in sorted(self.worker_reports):
            write(f"worker {workerid}:")
            for line in self.worker_reports[workerid]:
                write(f"  {line}")
        for workerid in sorted(self.workers_down):
            write(
                f"worker {workerid}: not measured: it sent no findings (it crashed, or "
                "ran without --gpu-leak-report)"
            )
        if not self.worker_reports and not self.workers_down:
            write("not measured: no worker reported back")
        if self.file_note:
            write(self.file_note)

    # -- the report as JSON (--gpu-leak-report-file) --------------------------------
    def _process_json(self, leak: _ProcessLeak, alive_now: set[tuple[int, float]] | None
                      ) -> dict[str, Any]:
        from .leakfile import gib

        rss = sum(p.rss_bytes for p in leak.processes)
        entry: dict[str, Any] = {"kind": "engine-processes", **leak.site}
        entry.update(
            nodeid=leak.nodeid,
            held_by=leak.holder,
            bytes=rss,
            gib=gib(rss),
            measure="engine-process-rss",
            pids=[p.pid for p in leak.processes],
            processes=[
                {
                    "pid": p.pid,
                    "name": p.name,
                    "rss_bytes": p.rss_bytes,
                    "started_by": self._started_by(p),
                }
                for p in leak.processes
            ],
            ended_after=[{"pid": pid, "nodeid": at} for pid, at in leak.ended_after.items()],
            alive_at_end=[p.pid for p in leak.processes if alive_now is None or p.key in alive_now],
            worker=None,
        )
        return entry

    def _started_by(self, process: EngineProcess) -> str | None:
        if process.key not in self.started_by:
            return None
        origin = self.started_by[process.key]
        return "test" if origin is None else f"fixture {origin['name']}"

    def _payload(self) -> dict[str, Any]:
        """This process's findings in the file's schema (a worker's, or the whole run's)."""
        from .leakfile import SCHEMA, VERSION, gib
        from .procs import alive

        everything = [p for leak in self.process_leaks for p in leak.processes]
        alive_now = {p.key for p in alive(everything)}
        leaks = [self._process_json(leak, alive_now) for leak in self.process_leaks]
        for memory in self.memory_leaks:
            entry: dict[str, Any] = {"kind": "device-memory", **memory.site}
            entry.update(
                nodeid=memory.nodeid,
                held_by=memory.site.get("held_by", ""),
                bytes=memory.increase_bytes,
                gib=gib(memory.increase_bytes),
                measure="device-memory-increase",
                pids=[],
                processes=[],
                ended_after=[],
                alive_at_end=[],
                worker=None,
                excess_bytes=memory.excess_bytes,
                per_device=[{"device": i, "bytes": b} for i, b in memory.per_device],
            )
            leaks.append(entry)
        cycles = []
        for (nodeid, processes), site in zip(self.cycle_held, self.cycle_sites, strict=True):
            cycle = _ProcessLeak(nodeid, processes, "a reference cycle (gc.collect() ended it)",
                                 site=site)
            cycles.append(self._process_json(cycle, set()))
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "rootdir": self.root,
            "tests_measured": self.measured,
            "device_memory": "measured" if self.baseline is not None else self.unavailable,
            "workers": {},
            "leaks": leaks,
            "cycle_held": cycles,
        }

    def _merged(self) -> dict[str, Any]:
        """The controller's file: every worker's leaks, each with its worker id."""
        from .leakfile import SCHEMA, VERSION

        merged: dict[str, Any] = {
            "schema": SCHEMA,
            "version": VERSION,
            "rootdir": self.root,
            "tests_measured": 0,
            "device_memory": "not measured under pytest-xdist: the workers share the devices",
            "workers": {},
            "leaks": [],
            "cycle_held": [],
        }
        for workerid in sorted(set(self.worker_json) | set(self.worker_reports)
                               | set(self.workers_down)):
            payload = self.worker_json.get(workerid)
            measured = int(payload.get("tests_measured", 0)) if payload else 0
            merged["workers"][workerid] = {"tests_measured": measured, "sent": bool(payload)}
            merged["tests_measured"] += measured
            for key in ("leaks", "cycle_held"):
                for entry in (payload or {}).get(key, []):
                    merged[key].append({**entry, "worker": workerid})
        return merged

    def _write_file(self) -> None:
        from .leakfile import write_report

        assert self.file is not None
        payload = self._merged() if _is_xdist_controller(self.config) else self._payload()
        try:
            write_report(self.file, payload)
        except OSError as exc:
            self.file_note = f"leak report file: cannot write {self.file}: {exc}"
            return
        count = len(payload["leaks"])
        self.file_note = (
            f"leak report file: {self.file} ({count} leak{'' if count == 1 else 's'}, "
            f"schema {payload['schema']} version {payload['version']})"
        )
