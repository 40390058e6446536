"""Shared fixtures for the runtime tests (CPU ones run in CI; ``gpu`` ones need NVIDIA).

Nothing here imports libcst, torch or the linter: the GPU run loads only this folder.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

FAKE_VLLM_ROOT = Path(__file__).parent / "fakevllm"
REPO_ROOT = Path(__file__).resolve().parents[2]


def plugin_args() -> list[str]:
    """``-p lint_gpu_tests.runtime.plugin`` unless pytest already loads it by entry point."""
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        if entry_point.value == "lint_gpu_tests.runtime.plugin":
            return []
    return ["-p", "lint_gpu_tests.runtime.plugin"]


def _vllm_modules() -> dict[str, ModuleType]:
    return {
        name: module
        for name, module in sys.modules.items()
        if name == "vllm" or name.startswith("vllm.")
    }


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Put the stand-in ``vllm`` first on ``sys.path`` (and on ``PYTHONPATH`` for
    subprocesses); yields the module with ``EVENTS`` emptied. Restores ``sys.modules``."""
    saved = _vllm_modules()
    for name in saved:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(FAKE_VLLM_ROOT))
    paths = [str(FAKE_VLLM_ROOT), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    import vllm

    assert Path(vllm.__file__).is_relative_to(FAKE_VLLM_ROOT), vllm.__file__
    vllm.EVENTS.clear()
    try:
        yield vllm
    finally:
        for name in _vllm_modules():
            del sys.modules[name]
        sys.modules.update(saved)


def pytest_configure(config: pytest.Config) -> None:
    # `pytest_plugins = ["pytester"]` is refused in a conftest below the rootdir; load it
    # here instead (a no-op when `-p pytester` is given or a top-level conftest loads it).
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
