"""``VllmRunner``: build an engine, and tear it down completely when the block ends.

Why each teardown step exists (README, "Writing GPU tests against the runner";
docs/gpu-runtime.md): a vLLM V1 ``LLM`` owns a child process
(EngineCore) that holds the weights and KV cache on the GPU. Its memory comes back when
that process ends, which happens on ``llm.llm_engine.engine_core.shutdown()`` or when
the garbage collector finalises the client, and the collector may not get to it while
anything (a fixture cache, a traceback, an alias, a reference cycle) still refers to it.
So the runner shuts the core down first, explicitly, then drops its reference and
clears the process-wide state a test may leave behind: torch._dynamo's caches, vLLM's
distributed groups (``cleanup_dist_env_and_memory``), unreachable cycles (``gc.collect``)
and the allocator cache, and finally waits, bounded, until the device memory is back.

No module is imported here that the process has not imported already (torch, vLLM):
a step whose library was never loaded has nothing to clean and is skipped.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import logging
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Literal

from ._cuda import cuda_initialised_reason
from ._stack import stacklevel_outside_runtime
from .memory import (
    DEFAULT_SLACK_RATIO,
    GIB,
    DeviceMemory,
    GpuMemoryLeakWarning,
    GpuMemoryTimeoutError,
    MemoryReader,
    default_memory_reader,
    first_context_allowance,
    read_baseline,
    wait_for_memory_to_return,
)
from .procs import EngineProcess, alive, engine_processes, kill

__all__ = [
    "EngineClosedError",
    "EngineProcessKilledWarning",
    "GpuMemoryLeakWarning",
    "RunnerTeardownWarning",
    "StepResult",
    "VllmRunner",
    "VllmRunnerFactory",
    "release_process_state",
]

logger = logging.getLogger(__name__)

StepStatus = Literal["ok", "skipped", "failed"]


class RunnerTeardownWarning(RuntimeWarning):
    """A teardown step raised; the remaining steps still ran."""


class EngineProcessKilledWarning(RunnerTeardownWarning):
    """An engine process was still alive when the shutdown grace ran out and was killed;
    the message names it (title and pid)."""


class EngineClosedError(RuntimeError):
    """``runner.llm`` was read after the runner's block ended."""


@dataclass(frozen=True)
class StepResult:
    """What one teardown step did.

    Attributes:
        name: the step (``"shutdown_engine_core"``, ``"drop_reference"``,
            ``"dynamo_reset"``, ``"cleanup_dist_env_and_memory"``, ``"gc_collect"``,
            ``"empty_cache"``, ``"wait_for_memory"``).
        status: ``"ok"``, ``"skipped"`` (nothing to do) or ``"failed"``.
        detail: why it was skipped, or the formatted exception when it failed. Text only:
            keeping the exception would keep its traceback's frames, and with them the engine.
        seconds: how long the step took (``time.monotonic()``), in seconds.
    """

    name: str
    status: StepStatus
    detail: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class _Baseline:
    """Device memory before the engine(s) were built, and whether this process had CUDA
    initialised then (if not and it has at the wait, its first context is allowed for)."""

    readings: list[DeviceMemory]
    cuda_at_baseline: bool


class _Skip(Exception):
    """Raised by a step that has nothing to do."""


def _format_failure(exc: BaseException, outer: BaseException | None) -> str:
    """``exc`` formatted as ``traceback.format_exception`` would, except that the chain stops
    at ``outer``: the ``with`` block's own exception, which was being handled while the
    step ran (so it is ``exc.__context__``) and which pytest reports itself. Repeating it
    in the warning printed the test's own assertion text a second time."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(
            "".join(
                traceback.format_exception(
                    type(current), current, current.__traceback__, chain=False
                )
            )
        )
        if current.__cause__ is not None:
            following: BaseException | None = current.__cause__
            joint = "\nThe above exception was the direct cause of the following exception:\n\n"
        elif current.__context__ is not None and not current.__suppress_context__:
            following = current.__context__
            joint = "\nDuring handling of the above exception, another exception occurred:\n\n"
        else:
            break
        if following is outer:
            parts.append(
                f"(raised while the block's own {type(outer).__name__} propagated; "
                "pytest reports that one)\n"
            )
            break
        parts.append(joint)
        current = following
    return "".join(reversed(parts))


def _run_step(
    name: str,
    step: Callable[[], None],
    results: list[StepResult],
    outer: BaseException | None = None,
) -> None:
    """Run one teardown step, guarded; ``outer`` is the ``with`` block's own exception
    (being handled while the step runs), left out of a failure's text."""
    started = time.monotonic()
    try:
        step()
    except _Skip as skip:
        results.append(StepResult(name, "skipped", str(skip), time.monotonic() - started))
    except Exception as exc:
        detail = _format_failure(exc, outer)
        del exc  # the traceback's frames may hold the engine
        results.append(StepResult(name, "failed", detail, time.monotonic() - started))
        # Format to text: exc_info on a log record would keep the frames (and the engine).
        logger.warning("VllmRunner teardown step %s failed:\n%s", name, detail)
        warnings.warn(
            f"VllmRunner teardown step {name!r} failed (later steps still ran):\n{detail}",
            RunnerTeardownWarning,
            stacklevel=stacklevel_outside_runtime(),
        )
    else:
        results.append(StepResult(name, "ok", seconds=time.monotonic() - started))


def _accepts_keyword(func: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _shutdown_engine(llm: Any, timeout_s: float) -> None:
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    shutdown = getattr(core, "shutdown", None)
    if not callable(shutdown):
        shutdown = getattr(llm, "shutdown", None)
    if not callable(shutdown):
        raise _Skip("engine has neither llm_engine.engine_core.shutdown nor shutdown")
    if _accepts_keyword(shutdown, "timeout"):
        shutdown(timeout=timeout_s)
    else:
        shutdown()


def _reap(processes: list[EngineProcess], deadline: float) -> list[EngineProcess]:
    """Wait until ``deadline`` (``time.monotonic()``) for ``processes`` to end, then SIGKILL
    those left and wait (at most 2 s) until they are gone; returns the ones killed."""
    left = alive(processes)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = alive(left)
    killed = [process for process in left if kill(process)]
    settle = time.monotonic() + 2.0
    while alive(killed) and time.monotonic() < settle:
        time.sleep(0.02)
    return killed


def _shutdown_with_grace(
    llm: Any, processes: list[EngineProcess], grace_s: float, timeout_s: float
) -> None:
    """Step 1: shut the engine core down; give its processes ``grace_s`` seconds from now
    to end, then kill them, and warn naming each one killed.

    A watchdog thread kills at the deadline even while ``shutdown()`` still blocks (vLLM's
    own shutdown sends SIGTERM and joins for ``timeout=``, 5 s when none is given); after
    ``shutdown()`` returns (or raises), processes still alive get the rest of the grace.

    Raises:
        Whatever ``shutdown()`` raises (the processes are reaped all the same).
    """
    deadline = time.monotonic() + grace_s
    killed: list[EngineProcess] = []
    done = threading.Event()

    def watchdog() -> None:
        if not done.wait(grace_s):
            killed.extend(_reap(processes, deadline))

    thread = threading.Thread(target=watchdog, name="VllmRunner-shutdown-grace", daemon=True)
    if processes:
        thread.start()
    try:
        _shutdown_engine(llm, timeout_s)
    finally:
        done.set()
        if processes:
            thread.join()
            killed.extend(_reap(processes, deadline))
        if killed:
            names = ", ".join(f"{p.name} (pid {p.pid})" for p in killed)
            message = (
                f"VllmRunner: engine process(es) {names} still alive {grace_s:g} s after "
                "shutdown began (SIGTERM ignored or teardown hung); killed with SIGKILL"
            )
            logger.warning(message)
            warnings.warn(
                message, EngineProcessKilledWarning, stacklevel=stacklevel_outside_runtime()
            )


def _dynamo_reset() -> None:
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        raise _Skip("torch._dynamo never imported")
    dynamo.reset()


def _cleanup_dist_env_and_memory() -> None:
    if "vllm" not in sys.modules:
        raise _Skip("vllm never imported")
    try:
        parallel_state = importlib.import_module("vllm.distributed.parallel_state")
    except ImportError as exc:
        raise _Skip(f"vllm.distributed.parallel_state unavailable: {exc}") from None
    cleanup = getattr(parallel_state, "cleanup_dist_env_and_memory", None)
    if cleanup is None:
        raise _Skip("this vllm has no cleanup_dist_env_and_memory")
    cleanup()


def _empty_cache() -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        raise _Skip("torch never imported")
    emptied = []
    for device_type in ("cuda", "xpu", "npu", "mlu", "hpu", "mps"):
        backend = getattr(torch, device_type, None)
        is_initialized = getattr(backend, "is_initialized", None)
        empty = getattr(backend, "empty_cache", None)
        if callable(is_initialized) and callable(empty) and is_initialized():
            empty()
            emptied.append(device_type)
    if not emptied:
        raise _Skip("no accelerator initialised in this process")


def _gc_collect() -> None:
    gc.collect()


def release_process_state(*, _block_exception: BaseException | None = None) -> list[StepResult]:
    """Clear what a finished engine leaves in this process, each step guarded.

    In order: ``torch._dynamo.reset()``, vLLM's ``cleanup_dist_env_and_memory()``,
    ``gc.collect()``, ``empty_cache()`` of every initialised torch accelerator. A step whose
    library was never imported is skipped; a failing step is logged and warned about
    (:class:`RunnerTeardownWarning`) and the next still runs. Never raises.
    """
    results: list[StepResult] = []
    outer = _block_exception
    _run_step("dynamo_reset", _dynamo_reset, results, outer)
    _run_step("cleanup_dist_env_and_memory", _cleanup_dist_env_and_memory, results, outer)
    _run_step("gc_collect", _gc_collect, results, outer)
    _run_step("empty_cache", _empty_cache, results, outer)
    return results


def _default_engine_factory() -> Callable[..., Any]:
    factory: Callable[..., Any] = importlib.import_module("vllm").LLM
    return factory


class VllmRunner:
    """Context manager owning one engine for the length of a ``with`` block.

    ``VllmRunner(model_name, **llm_kwargs)`` builds ``vllm.LLM(model_name, **llm_kwargs)``
    with the keyword arguments untouched, so every default is ``LLM``'s own (unlike vLLM's
    ``tests/conftest.py`` runner, which sets ``max_model_len=1024`` and others). The one
    renaming: ``tokenizer_name=`` (the name in vLLM's runner) is passed as ``tokenizer=``.

    Usage::

        with VllmRunner("facebook/opt-125m", enforce_eager=True) as runner:
            llm = weakref.proxy(runner.llm)
            llm.generate(["Hello"])

    On exit, in order, each step guarded so that one failure neither skips the rest nor
    hides the block's own exception (failures are logged and warned as
    :class:`RunnerTeardownWarning`; see :attr:`teardown_steps`):

    1. ``llm.llm_engine.engine_core.shutdown()`` (``timeout=`` passed where accepted;
       ``llm.shutdown()`` for engines without an engine core); the engine processes the
       build started (``VLLM::*`` descendants that were not there before) get
       ``shutdown_grace_s`` seconds from the start of this step to end, then are killed,
       and an :class:`EngineProcessKilledWarning` names each one killed;
    2. the runner's reference to the engine is dropped;
    3. ``torch._dynamo.reset()``; 4. ``vllm.distributed.parallel_state
       .cleanup_dist_env_and_memory()``; 5. ``gc.collect()``; 6. ``empty_cache()``
       (steps 3-6 skipped when their library was never imported);
    7. a bounded wait (``memory_wait_timeout_s`` seconds) until every visible device is
       back within its slack (``memory_slack_bytes``, ``memory_slack_ratio``) of what it
       used before the engine was built, this process's first CUDA context not counted;
       at the timeout a :class:`GpuMemoryLeakWarning` names each device's used/total GiB.
       Skipped when no memory reader is available (no GPU, no ``nvidia-ml-py``).

    A second exit is a no-op. After exit ``.llm`` raises :class:`EngineClosedError`.

    Configure by subclassing (class attributes) or per instance with ``engine_factory=``:

    Attributes:
        engine_factory: callable building the engine from ``(model_name, **llm_kwargs)``;
            ``None`` means ``vllm.LLM`` (imported on first use).
        shutdown_grace_s: seconds the engine's processes get to end after shutdown begins
            before the runner kills them (10 s: a healthy vLLM 0.32 CPU engine ended 6.7 s
            after SIGTERM, its worker in 4 s, so vLLM's own 5 s default kills it mid-teardown).
        shutdown_timeout_s: passed as ``timeout=`` to a shutdown that accepts one (seconds);
            vLLM's own kill after SIGTERM, a backstop behind ``shutdown_grace_s``.
        memory_wait_timeout_s: bound of step 7, in seconds (0 disables the wait).
        memory_slack_bytes: how far above its baseline a device may stay, at least
            (bytes; 1 GiB).
        memory_slack_ratio: ... or this fraction of the device's total memory when that is
            more (0.01: 1.40 GiB of a 140.4 GiB H200; 0 keeps the slack at
            ``memory_slack_bytes``). A process that created its first CUDA context while
            the engine was alive (it had none at the baseline) may also keep that context:
            its growth less torch's reserved bytes, at most max(2 GiB, 2% of the device)
            (:func:`~lint_gpu_tests.runtime.memory.first_context_allowance`).
        memory_reader: a :class:`~lint_gpu_tests.runtime.memory.MemoryReader`; ``None``
            means :func:`~lint_gpu_tests.runtime.memory.default_memory_reader`.
        raise_on_memory_timeout: raise :class:`~lint_gpu_tests.runtime.memory.
            GpuMemoryTimeoutError` instead of warning (only when the block did not raise).
    """

    engine_factory: ClassVar[Callable[..., Any] | None] = None
    shutdown_grace_s: ClassVar[float] = 10.0
    shutdown_timeout_s: ClassVar[float] = 15.0
    memory_wait_timeout_s: ClassVar[float] = 60.0
    memory_slack_bytes: ClassVar[int] = GIB
    memory_slack_ratio: ClassVar[float] = DEFAULT_SLACK_RATIO
    memory_reader: ClassVar[MemoryReader | None] = None
    raise_on_memory_timeout: ClassVar[bool] = False

    def __init__(
        self,
        model_name: str | None = None,
        *,
        engine_factory: Callable[..., Any] | None = None,
        _group: VllmRunnerFactory | None = None,
        **llm_kwargs: Any,
    ) -> None:
        """Build the engine.

        Args:
            model_name: the model, passed as ``LLM``'s first positional argument. May be
                given as ``model=`` instead, as ``LLM(**kwargs)`` calls do (the fixer keeps
                ``**kwargs`` that carry the model).
            engine_factory: overrides the class attribute of the same name.
            llm_kwargs: passed to the engine untouched (``tokenizer_name`` becomes
                ``tokenizer``).

        Raises:
            TypeError: neither ``model_name`` nor ``model=`` is given, or both are.
            Whatever building the engine raises; nothing is left to tear down then.
        """
        if "model" in llm_kwargs:
            if model_name is not None:
                raise TypeError("VllmRunner() got the model both as model_name and as model=")
            model_name = llm_kwargs.pop("model")
        if model_name is None:
            raise TypeError("VllmRunner() needs a model: pass model_name (or model=)")
        self.model_name = model_name
        self.teardown_steps: list[StepResult] = []
        self._closed = False
        self._group = _group
        self._llm: Any = None
        if "tokenizer_name" in llm_kwargs and "tokenizer" not in llm_kwargs:
            llm_kwargs["tokenizer"] = llm_kwargs.pop("tokenizer_name")
        factory = engine_factory or type(self).engine_factory or _default_engine_factory()
        self._baseline: _Baseline | None = None
        if _group is None:
            self._baseline = self._read_memory()
        before = {p.key for p in engine_processes()}
        self._llm = factory(model_name, **llm_kwargs)
        self.engine_processes: list[EngineProcess] = [
            p for p in engine_processes() if p.key not in before
        ]
        """The ``VLLM::*`` processes the build started (read with psutil), oldest first."""

    # -- the engine -----------------------------------------------------------------
    @property
    def llm(self) -> Any:
        """The engine. Prefer ``weakref.proxy(runner.llm)`` for any name that outlives a line.

        Raises:
            EngineClosedError: the runner has been exited.
        """
        if self._closed:
            raise EngineClosedError(f"the engine of {self!r} was torn down when its block ended")
        return self._llm

    @property
    def model(self) -> Any:
        """Alias of :attr:`llm` (older runners, e.g. vllm-ascend's, call it ``model``)."""
        return self.llm

    @property
    def teardown_seconds(self) -> float:
        """Seconds the teardown took (the sum of :attr:`teardown_steps`); 0 before exit."""
        return sum(step.seconds for step in self.teardown_steps)

    @property
    def closed(self) -> bool:
        """Whether teardown has run."""
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {self.model_name!r} {state}>"

    # -- context manager ------------------------------------------------------------
    def __enter__(self) -> VllmRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(_body_failed=exc_type is not None, _body_exception=exc)

    def close(
        self, *, _body_failed: bool = False, _body_exception: BaseException | None = None
    ) -> None:
        """Run the teardown now (what ``__exit__`` does). Harmless when already closed."""
        if self._closed:
            return
        self._closed = True
        steps = self.teardown_steps
        cls = type(self)
        outer = _body_exception  # left out of a failing step's text: pytest reports it
        _run_step(
            "shutdown_engine_core",
            lambda: _shutdown_with_grace(
                self._llm, self.engine_processes, cls.shutdown_grace_s, cls.shutdown_timeout_s
            ),
            steps,
            outer,
        )
        _run_step("drop_reference", self._drop_reference, steps, outer)
        steps.extend(release_process_state(_block_exception=outer))
        group, self._group = self._group, None
        baseline, self._baseline = self._baseline, None
        leak: list[GpuMemoryTimeoutError] = []
        if group is not None:
            _run_step("wait_for_memory", lambda: group._runner_closed(self), steps, outer)
        else:
            _run_step(
                "wait_for_memory",
                lambda: leak.extend(self._wait_for_memory(baseline)),
                steps,
                outer,
            )
        del outer, _body_exception
        if leak and type(self).raise_on_memory_timeout and not _body_failed:
            raise leak[0]

    def _drop_reference(self) -> None:
        self._llm = None

    # -- memory ---------------------------------------------------------------------
    @classmethod
    def _reader(cls) -> MemoryReader | None:
        return cls.memory_reader if cls.memory_reader is not None else default_memory_reader()

    @classmethod
    def _read_memory(cls) -> _Baseline | None:
        """Every visible device's reading (and whether this process had CUDA initialised
        then), or ``None`` when memory cannot be read."""
        if cls.memory_wait_timeout_s <= 0:
            return None
        cuda_at_baseline = cuda_initialised_reason() is not None
        readings = read_baseline(cls._reader())
        return None if readings is None else _Baseline(readings, cuda_at_baseline)

    @classmethod
    def _wait_for_memory(cls, baseline: _Baseline | None) -> list[GpuMemoryTimeoutError]:
        """Step 7; warns and returns the timeout error (empty list when memory came back)."""
        if baseline is None or not baseline.readings:
            raise _Skip("no baseline: device memory cannot be read here")
        try:
            wait_for_memory_to_return(
                baseline.readings,
                slack_bytes=cls.memory_slack_bytes,
                slack_ratio=cls.memory_slack_ratio,
                context_allowance=first_context_allowance(baseline.cuda_at_baseline),
                timeout_s=cls.memory_wait_timeout_s,
                reader=cls._reader(),
            )
        except GpuMemoryTimeoutError as exc:
            message = f"device memory not released after teardown: {exc}"
            logger.warning(message)
            warnings.warn(message, GpuMemoryLeakWarning, stacklevel=stacklevel_outside_runtime())
            return [exc]
        return []


class VllmRunnerFactory:
    """Makes runners for several engines alive at once; the memory wait runs once, at the end.

    Each call ``factory(model_name, **llm_kwargs)`` returns a :class:`VllmRunner` (use it
    in a ``with`` block). Each runner still shuts its own engine down on exit; the bounded
    wait for device memory is deferred until the last open runner exits, and compares to
    the memory measured before the first of them was built (so engine B still holding
    memory does not count as engine A leaking). :meth:`close` exits every runner still
    open, newest first (the ``vllm_runner_factory`` fixture calls it at teardown).

    Args:
        runner_cls: the runner class (a subclass carries its configuration).
    """

    def __init__(self, runner_cls: type[VllmRunner] = VllmRunner) -> None:
        self.runner_cls = runner_cls
        self._open: list[VllmRunner] = []
        self._baseline: _Baseline | None = None

    def __call__(self, model_name: str, **llm_kwargs: Any) -> VllmRunner:
        """Build one more engine; see :class:`VllmRunner`."""
        if not self._open:
            self._baseline = self.runner_cls._read_memory()
        runner = self.runner_cls(model_name, _group=self, **llm_kwargs)
        self._open.append(runner)
        return runner

    @property
    def open_runners(self) -> tuple[VllmRunner, ...]:
        """Runners built and not yet exited, oldest first."""
        return tuple(self._open)

    def _runner_closed(self, runner: VllmRunner) -> None:
        if runner in self._open:
            self._open.remove(runner)
        if self._open:
            raise _Skip(f"deferred: {len(self._open)} engine(s) of the factory still open")
        baseline, self._baseline = self._baseline, None
        self.runner_cls._wait_for_memory(baseline)

    def close(self) -> None:
        """Exit every runner still open, newest first."""
        while self._open:
            self._open[-1].close()
