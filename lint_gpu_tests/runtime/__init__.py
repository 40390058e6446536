"""Runtime support for GPU test suites: the runner the linter's fixes target.

``from lint_gpu_tests.runtime import VllmRunner, create_new_process_for_each_test,
wait_for_gpu_memory_to_clear``. Importing this package is cheap: the submodules load on
first attribute access, and none of them imports torch, vLLM, pynvml or amdsmi until a
function needs it (README, "Writing GPU tests against the runner"). This package never imports the
linter or libcst.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .isolation import (
        ForkAfterCudaWarning,
        IsolatedTestError,
        IsolatedTestTimeoutError,
        create_new_process_for_each_test,
        fork_new_process_for_each_test,
        spawn_new_process_for_each_test,
    )
    from .memory import (
        DeviceMemory,
        GpuMemoryLeakWarning,
        GpuMemoryTimeoutError,
        MemoryReader,
        default_memory_reader,
        wait_for_gpu_memory_to_clear,
        wait_for_memory_to_return,
    )
    from .runner import (
        EngineClosedError,
        EngineProcessKilledWarning,
        RunnerTeardownWarning,
        VllmRunner,
        VllmRunnerFactory,
        release_process_state,
    )

_EXPORTS: dict[str, str] = {
    "ForkAfterCudaWarning": "isolation",
    "IsolatedTestError": "isolation",
    "IsolatedTestTimeoutError": "isolation",
    "create_new_process_for_each_test": "isolation",
    "fork_new_process_for_each_test": "isolation",
    "spawn_new_process_for_each_test": "isolation",
    "DeviceMemory": "memory",
    "GpuMemoryTimeoutError": "memory",
    "MemoryReader": "memory",
    "default_memory_reader": "memory",
    "wait_for_gpu_memory_to_clear": "memory",
    "wait_for_memory_to_return": "memory",
    "EngineClosedError": "runner",
    "EngineProcessKilledWarning": "runner",
    "GpuMemoryLeakWarning": "memory",
    "RunnerTeardownWarning": "runner",
    "VllmRunner": "runner",
    "VllmRunnerFactory": "runner",
    "release_process_state": "runner",
}

__all__ = [
    "DeviceMemory",
    "EngineClosedError",
    "EngineProcessKilledWarning",
    "ForkAfterCudaWarning",
    "GpuMemoryLeakWarning",
    "GpuMemoryTimeoutError",
    "IsolatedTestError",
    "IsolatedTestTimeoutError",
    "MemoryReader",
    "RunnerTeardownWarning",
    "VllmRunner",
    "VllmRunnerFactory",
    "create_new_process_for_each_test",
    "default_memory_reader",
    "fork_new_process_for_each_test",
    "release_process_state",
    "spawn_new_process_for_each_test",
    "wait_for_gpu_memory_to_clear",
    "wait_for_memory_to_return",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
