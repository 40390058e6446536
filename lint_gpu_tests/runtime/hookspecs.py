"""Hooks the ``gpu_test_lint`` pytest plugin adds (implement them in a ``conftest.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .memory import MemoryReader


@pytest.hookspec(firstresult=True)
def pytest_gpu_memory_reader(config: pytest.Config) -> MemoryReader | None:
    """Return the :class:`~lint_gpu_tests.runtime.memory.MemoryReader` that
    ``--gpu-leak-report`` reads device memory with; ``None`` (the default) means NVML,
    then amdsmi, then an initialised torch device. The first non-``None`` answer wins."""
