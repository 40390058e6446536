"""The runtime on real vLLM on an NVIDIA GPU: every test here is marked ``gpu``
and skipped unless NVML sees an NVIDIA GPU and ``vllm`` is importable.

The suites under ``suites/`` are never collected here: each test runs one of them as its
own pytest session (``gpu_session.run_suite``) and checks the figures it recorded.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

GPU_DIR = Path(__file__).resolve().parent
collect_ignore = ["suites"]


def _nvidia_gpus() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:  # no nvidia-ml-py, no driver, no device
        return 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = ""
    if importlib.util.find_spec("vllm") is None:
        reason = "vLLM is not installed"
    elif _nvidia_gpus() == 0:
        reason = "no NVIDIA GPU visible to NVML"
    for item in items:
        if GPU_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.gpu)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def tiny_model() -> str:
    """Path of the tiny random Llama of ``tests/e2e/tiny_model.py`` (built once, cached)."""
    spec = importlib.util.spec_from_file_location(
        "gpu_tiny_model", GPU_DIR.parent / "e2e" / "tiny_model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: str = module.tiny_model_path()
    os.environ["GPU_TINY_MODEL"] = path
    return path
