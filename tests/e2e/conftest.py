"""End-to-end tests against real vLLM on the CPU (``make e2e``).

Everything under ``tests/e2e`` is marked ``e2e`` and skipped unless vLLM imports (``make
test`` runs ``-m "not e2e"``; ``make e2e`` runs them in ``.venv-e2e``). The modules under
``suites/`` are the differential corpus: hand-managed on purpose, never collected here, run by
``test_differential.py`` in their own pytest processes.

Engine processes are machine-wide: every scenario here ends its engines before the next
starts, so at most two are alive at once (the factory scenario).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
collect_ignore_glob = ["suites/*", "work/*"]

# No network at test time, a small KV cache (GiB) for the CPU engine.
ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
for _key, _value in ENGINE_ENV.items():
    os.environ.setdefault(_key, _value)

if str(E2E_DIR) not in sys.path:
    sys.path.insert(0, str(E2E_DIR))

HAVE_VLLM = importlib.util.find_spec("vllm") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="vLLM is not installed (run `make e2e`)")
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            if not HAVE_VLLM:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model() -> str:
    """Path of the tiny random Llama (built once, cached in ``.e2e-cache/``)."""
    from tiny_model import tiny_model_path

    path = tiny_model_path()
    os.environ["GPU_TEST_LINT_TINY_MODEL"] = path
    return path


@pytest.fixture(scope="session")
def engine_kwargs(tiny_model: str) -> dict[str, object]:
    """Keyword arguments for an engine on the tiny model, within the CPU engine's limits."""
    from tiny_model import ENGINE_KWARGS

    return {"model": tiny_model, **ENGINE_KWARGS}
