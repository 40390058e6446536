"""VllmRunner and VllmRunnerFactory against the stand-in vllm (a real child process each)."""

from __future__ import annotations

import gc
import sys
import time
import types
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from runtime_fakes import FakeMemoryReader

from lint_gpu_tests.runtime import (
    EngineClosedError,
    EngineProcessKilledWarning,
    GpuMemoryLeakWarning,
    RunnerTeardownWarning,
    VllmRunner,
    VllmRunnerFactory,
)
from lint_gpu_tests.runtime.memory import GIB
from lint_gpu_tests.runtime.procs import alive

pytestmark = pytest.mark.usefixtures("fake_vllm")


class QuietRunner(VllmRunner):
    """No device-memory wait (no GPU here); tests that need one set a fake reader."""

    memory_wait_timeout_s = 0.0


class ShortGraceRunner(QuietRunner):
    """Kills the stand-in's processes 0.2 s after shutdown began (a failed shutdown leaves
    them running)."""

    shutdown_grace_s = 0.2


def _core(llm: Any) -> Any:
    return llm.llm_engine.engine_core


def test_builds_llm_with_kwargs_untouched(fake_vllm: types.ModuleType) -> None:
    with QuietRunner("some/model", enforce_eager=True, seed=7, tokenizer_name="tok") as runner:
        assert isinstance(runner.llm, fake_vllm.LLM)
        assert runner.llm.model == "some/model"
        assert runner.llm.kwargs == {"enforce_eager": True, "seed": 7, "tokenizer": "tok"}
        assert runner.model is runner.llm  # alias for older code


def test_model_may_come_as_keyword_as_in_llm_kwargs_calls(fake_vllm: types.ModuleType) -> None:
    kwargs = {"model": "some/model", "enforce_eager": True}
    with QuietRunner(**kwargs) as runner:
        assert runner.llm.model == "some/model"
        assert runner.llm.kwargs == {"enforce_eager": True}
    with pytest.raises(TypeError, match="both"):
        QuietRunner("a", model="b")
    with pytest.raises(TypeError, match="needs a model"):
        QuietRunner(enforce_eager=True)


def test_exit_ends_the_engine_core_process_and_frees_the_engine() -> None:
    with QuietRunner("m") as runner:
        process = _core(runner.llm).process
        ref = weakref.ref(runner.llm)
        assert process.is_alive()
    assert not process.is_alive()
    assert process.exitcode == 0  # stopped by shutdown(), not killed
    assert ref() is None  # the cycle was collected: nothing keeps the engine
    assert runner.closed
    with pytest.raises(EngineClosedError):
        runner.llm  # noqa: B018


def test_teardown_order(fake_vllm: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = fake_vllm.EVENTS
    fake_torch = types.ModuleType("torch")
    fake_dynamo = types.ModuleType("torch._dynamo")
    fake_dynamo.reset = lambda: events.append("dynamo.reset")  # type: ignore[attr-defined]
    fake_torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_initialized=lambda: True, empty_cache=lambda: events.append("cuda.empty_cache")
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "torch._dynamo", fake_dynamo)
    recording = [False]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if recording[0] and phase == "start":
            events.append("gc.collect")

    class Runner(VllmRunner):
        memory_reader = FakeMemoryReader(events=events)

    runner = Runner("m")
    events.clear()
    gc.callbacks.append(on_gc)
    recording[0] = True
    try:
        runner.__exit__(None, None, None)
    finally:
        recording[0] = False
        gc.callbacks.remove(on_gc)
    # collapse repeated gc starts (cleanup helpers may collect more than once)
    seen = [e for i, e in enumerate(events) if i == 0 or e != events[i - 1]]
    assert seen == [
        "engine_core.shutdown",
        "dynamo.reset",
        "cleanup_dist_env_and_memory",
        "gc.collect",
        "cuda.empty_cache",
        "memory.read",
    ]
    assert [s.name for s in runner.teardown_steps] == [
        "shutdown_engine_core",
        "drop_reference",
        "dynamo_reset",
        "cleanup_dist_env_and_memory",
        "gc_collect",
        "empty_cache",
        "wait_for_memory",
    ]
    assert {s.status for s in runner.teardown_steps} == {"ok"}


def test_steps_for_libraries_never_imported_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
    with QuietRunner("m") as runner:
        pass
    status = {s.name: s.status for s in runner.teardown_steps}
    assert status["dynamo_reset"] == "skipped"
    assert status["empty_cache"] == "skipped"
    assert status["wait_for_memory"] == "skipped"
    assert status["shutdown_engine_core"] == "ok"
    assert "torch" not in sys.modules  # the runner never imports torch itself


def test_body_exception_propagates_and_teardown_still_runs(fake_vllm: types.ModuleType) -> None:
    with pytest.raises(ValueError, match="from the test body"):
        with QuietRunner("m") as runner:
            process = _core(runner.llm).process
            raise ValueError("from the test body")
    assert not process.is_alive()
    assert "cleanup_dist_env_and_memory" in fake_vllm.EVENTS


def test_failing_shutdown_does_not_skip_later_steps_nor_hide_body_error(
    fake_vllm: types.ModuleType,
) -> None:
    with pytest.warns(EngineProcessKilledWarning, match="VLLM::EngineCor"):
        with pytest.warns(RunnerTeardownWarning, match="shutdown_engine_core"):
            with pytest.raises(KeyError, match="body"):
                with ShortGraceRunner("m", fail_shutdown=True) as runner:
                    process = _core(runner.llm).process
                    ref = weakref.ref(runner.llm)
                    raise KeyError("body")
    status = {s.name: s.status for s in runner.teardown_steps}
    assert status["shutdown_engine_core"] == "failed"
    assert "refused to shut down" in runner.teardown_steps[0].detail
    assert status["cleanup_dist_env_and_memory"] == "ok"
    assert status["gc_collect"] == "ok"
    assert fake_vllm.EVENTS[-2:] == ["engine_core.shutdown", "cleanup_dist_env_and_memory"]
    # the failed shutdown kept no frame alive: the collector still freed the engine;
    # the child, which the failed shutdown left running, was killed after the grace
    assert ref() is None
    process.join()
    assert not process.is_alive()


def test_failing_shutdown_warns_when_the_body_passed() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ShortGraceRunner("m", fail_shutdown=True):
            pass
    # (Python 3.12 adds a DeprecationWarning for fork() in a threaded process; NVML starts
    # threads, so on a GPU machine the stand-in's fork can add one)
    ours = [w.category for w in caught if issubclass(w.category, RuntimeWarning)]
    assert ours == [EngineProcessKilledWarning, RunnerTeardownWarning]


def test_second_exit_is_a_no_op(fake_vllm: types.ModuleType) -> None:
    runner = QuietRunner("m")
    with runner:
        pass
    steps = list(runner.teardown_steps)
    events = list(fake_vllm.EVENTS)
    runner.__exit__(None, None, None)
    runner.close()
    assert runner.teardown_steps == steps
    assert fake_vllm.EVENTS == events


def test_engine_factory_is_pluggable() -> None:
    built: list[tuple[str, dict[str, Any]]] = []

    class OtherEngine:
        def __init__(self, model: str, **kwargs: Any) -> None:
            built.append((model, kwargs))
            self.stopped = False

        def shutdown(self) -> None:
            self.stopped = True

    with QuietRunner("x", engine_factory=OtherEngine, dtype="half") as runner:
        engine = runner.llm
    assert built == [("x", {"dtype": "half"})]
    assert engine.stopped  # no engine_core: falls back to engine.shutdown()

    class Subclassed(QuietRunner):
        engine_factory = OtherEngine

    with Subclassed("y"):
        pass
    assert built[-1] == ("y", {})


def test_shutdown_timeout_is_passed_where_accepted() -> None:
    calls: list[dict[str, Any]] = []

    class Core:
        def shutdown(self, timeout: float | None = None) -> None:
            calls.append({"timeout": timeout})

    class Engine:
        def __init__(self, model: str) -> None:
            self.llm_engine = types.SimpleNamespace(engine_core=Core())

    class Runner(QuietRunner):
        shutdown_timeout_s = 12.5

    with Runner("m", engine_factory=Engine):
        pass
    assert calls == [{"timeout": 12.5}]


def test_memory_not_back_warns_with_device_figures() -> None:
    reader = FakeMemoryReader(used=[GIB])

    def hog(model: str) -> Any:
        reader.used[0] = 30 * GIB  # "allocates" and never gives it back
        return types.SimpleNamespace()

    class Runner(VllmRunner):
        memory_reader = reader
        memory_wait_timeout_s = 1e-9

    with pytest.warns(
        GpuMemoryLeakWarning, match=r"device 0 \(fake 0\): 30.00/80.00 GiB"
    ) as caught:
        with Runner("m", engine_factory=hog):
            pass
    # filed under the test's own line (the with statement), not a line of runner.py
    assert caught[0].filename == __file__


# -- teardown warnings, the first CUDA context -------------------------------------------
def test_teardown_warnings_point_at_the_test_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ShortGraceRunner("m", fail_shutdown=True):
            line = sys._getframe().f_lineno
    ours = [w for w in caught if issubclass(w.category, RunnerTeardownWarning)]
    assert [w.category for w in ours] == [EngineProcessKilledWarning, RunnerTeardownWarning]
    assert {(w.filename, w.lineno) for w in ours} == {(__file__, line - 1)}


def test_teardown_warning_does_not_repeat_the_tests_own_assertion() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AssertionError, match="the test's own words"):
            with ShortGraceRunner("m", fail_shutdown=True) as runner:
                raise AssertionError("the test's own words")
    (warning,) = [w for w in caught if w.category is RunnerTeardownWarning]
    text = str(warning.message)
    assert "refused to shut down" in text  # the step's own failure
    assert "the test's own words" not in text
    assert "raised while the block's own AssertionError propagated" in text
    (step,) = [s for s in runner.teardown_steps if s.status == "failed"]
    assert "the test's own words" not in step.detail


def test_step_failure_inside_the_tests_own_except_block_keeps_its_context() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            raise KeyError("handled by the test")
        except KeyError:
            with ShortGraceRunner("m", fail_shutdown=True):  # the block itself passes
                pass
    (warning,) = [w for w in caught if w.category is RunnerTeardownWarning]
    assert "handled by the test" in str(warning.message)


def test_step_failure_keeps_its_own_cause() -> None:
    from lint_gpu_tests.runtime.runner import _format_failure

    try:
        try:
            raise KeyError("inner cause")
        except KeyError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as exc:
        text = _format_failure(exc, None)
    assert "KeyError: 'inner cause'" in text
    assert "direct cause" in text
    assert text.index("KeyError") < text.index("RuntimeError: step failed")


def test_first_cuda_context_of_the_test_process_is_not_a_leak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lint_gpu_tests.runtime import _cuda

    monkeypatch.setattr(_cuda, "driver_initialised_reason", lambda: None)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    reader = FakeMemoryReader(used=[GIB // 2])

    def builds_and_initialises_cuda(model: str) -> Any:
        # the test process itself creates its first CUDA context (1.6 GiB: "over 1 GiB on
        # other drivers and devices") while the engine is alive
        cuda = types.SimpleNamespace(is_initialized=lambda: True, memory_reserved=lambda i: 0)
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
        reader.script = [reader.used[0] + 40 * GIB, GIB // 2 + int(1.6 * GIB)]
        return types.SimpleNamespace()

    class Runner(VllmRunner):
        memory_reader = reader
        memory_wait_timeout_s = 5.0

    with warnings.catch_warnings():
        warnings.simplefilter("error", GpuMemoryLeakWarning)
        with Runner("m", engine_factory=builds_and_initialises_cuda) as runner:
            pass
    assert [s.status for s in runner.teardown_steps if s.name == "wait_for_memory"] == ["ok"]


@pytest.fixture
def shared_reader() -> Iterator[FakeMemoryReader]:
    yield FakeMemoryReader(used=[0])


def test_factory_defers_the_memory_wait_until_the_last_engine_exits(
    fake_vllm: types.ModuleType, shared_reader: FakeMemoryReader
) -> None:
    class Runner(VllmRunner):
        memory_reader = shared_reader

    factory = VllmRunnerFactory(Runner)
    with factory("a") as a, factory("b") as b:
        first, second = _core(a.llm).process, _core(b.llm).process
        assert factory.open_runners == (a, b)
        reads_before_exit = shared_reader.reads
    # b exits first: its own wait deferred; a exits last: one wait for both
    assert [s.status for s in b.teardown_steps if s.name == "wait_for_memory"] == ["skipped"]
    assert "deferred" in b.teardown_steps[-1].detail
    assert [s.status for s in a.teardown_steps if s.name == "wait_for_memory"] == ["ok"]
    assert shared_reader.reads == reads_before_exit + 1
    assert not first.is_alive() and not second.is_alive()
    assert factory.open_runners == ()


def test_factory_close_exits_runners_left_open(fake_vllm: types.ModuleType) -> None:
    class Runner(QuietRunner):
        pass

    factory = VllmRunnerFactory(Runner)
    a, b = factory("a"), factory("b")
    processes = [_core(a.llm).process, _core(b.llm).process]
    factory.close()
    assert a.closed and b.closed
    assert not any(p.is_alive() for p in processes)
    assert fake_vllm.EVENTS.count("engine_core.shutdown") == 2


def test_engine_ignoring_sigterm_is_killed_after_the_grace_and_named() -> None:
    """An engine core that outlives SIGTERM (vLLM's CPU EngineCore has) would hold the exit
    for the whole timeout: the runner kills the engine's processes once
    ``shutdown_grace_s`` has passed."""

    class Runner(QuietRunner):
        shutdown_grace_s = 0.5
        shutdown_timeout_s = 3600.0  # the stand-in's own kill would come an hour later

    runner = Runner("m", ignore_sigterm=True, workers=1)
    core_pid = _core(runner.llm).pid
    assert [(p.name, p.pid == core_pid) for p in runner.engine_processes] == [
        ("VLLM::EngineCor", True),  # /proc/<pid>/comm keeps 15 characters
        ("VLLM::Worker", False),
    ]
    processes = list(runner.engine_processes)
    worker_pid = processes[1].pid
    started = time.monotonic()
    with pytest.warns(EngineProcessKilledWarning) as caught:
        runner.close()
    elapsed = time.monotonic() - started
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"VllmRunner: engine process(es) VLLM::EngineCor (pid {core_pid}), VLLM::Worker "
        f"(pid {worker_pid}) still alive 0.5 s after shutdown began (SIGTERM ignored or "
        "teardown hung); killed with SIGKILL"
    )
    assert elapsed < 30  # not the hour of shutdown_timeout_s
    assert alive(processes) == []  # gone, or a zombie waiting for its parent
    assert [s.status for s in runner.teardown_steps][:2] == ["ok", "ok"]


def test_engine_that_stops_in_time_is_not_killed() -> None:
    class Runner(QuietRunner):
        shutdown_grace_s = 30.0

    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineProcessKilledWarning)
        with Runner("m", workers=1) as runner:
            processes = list(runner.engine_processes)
    assert len(processes) == 2
    assert alive(processes) == []


def test_processes_are_killed_also_when_shutdown_raises() -> None:
    class Runner(QuietRunner):
        shutdown_grace_s = 0.3

    runner = Runner("m", fail_shutdown=True, ignore_sigterm=True)
    processes = list(runner.engine_processes)
    with pytest.warns(EngineProcessKilledWarning, match=r"VLLM::EngineCor \(pid \d+\)"):
        with pytest.warns(RunnerTeardownWarning, match="refused to shut down"):
            runner.close()
    assert [s.status for s in runner.teardown_steps][:2] == ["failed", "ok"]
    assert alive(processes) == []


def test_each_teardown_step_is_timed() -> None:
    class Runner(QuietRunner):
        shutdown_grace_s = 0.3

    runner = Runner("m", ignore_sigterm=True)
    assert runner.teardown_seconds == 0.0
    with pytest.warns(EngineProcessKilledWarning):
        runner.close()
    shutdown = runner.teardown_steps[0]
    assert shutdown.name == "shutdown_engine_core" and 0.3 <= shutdown.seconds
    assert runner.teardown_seconds == sum(s.seconds for s in runner.teardown_steps)
