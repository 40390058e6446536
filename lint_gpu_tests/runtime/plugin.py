"""The ``gpu_test_lint`` pytest plugin (entry point ``pytest11``).

Loaded in every pytest run once the package is installed, so it imports nothing but
pytest and the standard library, and does nothing unless asked:

* fixtures ``vllm_runner`` (the :class:`~lint_gpu_tests.runtime.runner.VllmRunner`
  class) and ``vllm_runner_factory`` (several engines alive at once); a project's own
  fixture of the same name, in a ``conftest.py``, overrides these as pytest always does;
* ``--gpu-clean-between-tests`` (or ini ``gpu_clean_between_tests = true``): after each
  test's teardown, ``torch._dynamo.reset()``, ``cleanup_dist_env_and_memory()``,
  ``gc.collect()`` and ``empty_cache()``, each only if its library was already imported;
* ``--gpu-leak-report``: device memory is read at session start (the baseline) and after
  each test's teardown; the terminal summary names every test after which memory stayed
  more than ``--gpu-leak-threshold-gib`` (default 1 GiB) above the baseline, and marks the
  test where the excess appeared. ``--gpu-leak-settle-s`` (default 3 s) is how long to let
  memory come back before a reading counts (a child process takes a moment to exit).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .memory import DeviceMemory, MemoryReader
    from .runner import VllmRunner, VllmRunnerFactory

__all__ = ["vllm_runner", "vllm_runner_factory"]

_GIB = 1 << 30
_CLEAN_NAME = "gpu_test_lint-clean-between-tests"
_LEAK_NAME = "gpu_test_lint-leak-report"


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
        help="read device memory after each test and name the tests that left memory "
        "above the session's baseline",
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
        help="with --gpu-leak-report: wait up to this long for memory to come back before "
        "reading it (default 3)",
    )
    parser.addini(
        "gpu_clean_between_tests",
        type="bool",
        default=False,
        help="clean process GPU state after each test (as --gpu-clean-between-tests)",
    )


def pytest_configure(config: pytest.Config) -> None:
    clean = config.getoption("gpu_clean_between_tests")
    if clean is None:
        clean = bool(config.getini("gpu_clean_between_tests"))
    if clean:
        config.pluginmanager.register(_CleanBetweenTests(), _CLEAN_NAME)
    if config.getoption("gpu_leak_report"):
        config.pluginmanager.register(_LeakReport(config), _LEAK_NAME)


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

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        yield
        from .runner import release_process_state

        release_process_state()


@dataclass(frozen=True)
class _Leak:
    nodeid: str
    excess_bytes: int
    increase_bytes: int
    per_device: tuple[tuple[int, int], ...]


class _LeakReport:
    """Registered only with ``--gpu-leak-report``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.threshold_bytes = int(float(config.getoption("gpu_leak_threshold_gib")) * _GIB)
        self.settle_s = max(0.0, float(config.getoption("gpu_leak_settle_s")))
        self.reader: MemoryReader | None = None
        self.baseline: list[DeviceMemory] | None = None
        self.unavailable = ""
        self.measured = 0
        self.previous_excess = 0
        self.leaks: list[_Leak] = []

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .memory import default_memory_reader, read_all

        try:
            reader = self.config.hook.pytest_gpu_memory_reader(config=self.config)
            if reader is None:
                reader = default_memory_reader()
            if reader is None:
                self.unavailable = "no memory reader (install nvidia-ml-py, or amdsmi on ROCm)"
                return
            self.baseline = read_all(reader)
            self.reader = reader
        except Exception as exc:
            self.unavailable = f"reading device memory failed: {exc!r}"

    # tryfirst: the outermost wrapper, so this reads memory after every other
    # teardown step (fixtures, --gpu-clean-between-tests) has run.
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        yield
        if self.reader is None or self.baseline is None:
            return
        from .memory import GpuMemoryTimeoutError, read_all, wait_for_memory_to_return

        devices = [m.index for m in self.baseline]
        if self.settle_s > 0:
            try:
                wait_for_memory_to_return(
                    self.baseline,
                    slack_bytes=self.threshold_bytes,
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
        excess = sum(delta for _, delta in per_device)
        increase = excess - self.previous_excess
        self.previous_excess = excess
        self.measured += 1
        if excess > self.threshold_bytes:
            self.leaks.append(_Leak(item.nodeid, excess, increase, per_device))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        terminalreporter.section("GPU memory leak report")
        threshold = self.threshold_bytes / _GIB
        if self.baseline is None:
            write(f"not measured: {self.unavailable}")
            return
        for m in self.baseline:
            write(f"baseline: {m.describe()}")
        if not self.leaks:
            write(
                f"no test left more than {threshold:.2f} GiB above the baseline "
                f"({self.measured} tests measured)"
            )
            return
        write(
            f"{len(self.leaks)} of {self.measured} tests left more than {threshold:.2f} GiB "
            "above the baseline after teardown:"
        )
        for leak in self.leaks:
            devices = ", ".join(
                f"device {index}: +{delta / _GIB:.2f} GiB" for index, delta in leak.per_device
            )
            here = "  <- leaked here" if leak.increase_bytes > self.threshold_bytes else ""
            write(
                f"  {leak.nodeid}: +{leak.excess_bytes / _GIB:.2f} GiB above baseline "
                f"(+{max(0, leak.increase_bytes) / _GIB:.2f} GiB new in this test; "
                f"{devices}){here}"
            )
