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
import time
from pathlib import Path
from typing import Any

import pytest

E2E_DIR = Path(__file__).resolve().parent
collect_ignore_glob = ["suites/*", "work/*", "leak_suite"]

if str(E2E_DIR) not in sys.path:
    sys.path.insert(0, str(E2E_DIR))

from tiny_model import ENGINE_ENV  # noqa: E402 - needs E2E_DIR on sys.path

for _key, _value in ENGINE_ENV.items():
    os.environ.setdefault(_key, _value)

_START = time.monotonic()
#: [True] once this session has collected e2e tests with vLLM installed (the summary's cue).
_RAN_HERE: list[bool] = []

HAVE_VLLM = importlib.util.find_spec("vllm") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="vLLM is not installed (run `make e2e`)")
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            if not HAVE_VLLM:
                item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    _RAN_HERE[:] = [bool(HAVE_VLLM and any(E2E_DIR in Path(str(i.fspath)).resolve().parents
                                           for i in session.items))]


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The e2e run's wall time and, when the differential ran, how many corpus modules ran on
    the real engine and how many came from their recordings (``recordings.py``)."""
    differential = sys.modules.get("test_differential")
    runs = getattr(differential, "LAST", [])
    if not any(_RAN_HERE):
        return
    write = terminalreporter.write_line
    terminalreporter.section("gpu-test-lint e2e")
    write(f"e2e wall time: {time.monotonic() - _START:.0f} s")
    for v in runs:
        write(f"differential: {len(v.rerun)} of {len(v.rerun) + len(v.recorded)} corpus "
              f"modules run on the real engine ({', '.join(v.rerun) or 'none'}; sample: "
              f"{v.sample or 'none'}), {len(v.recorded)} taken from their recordings; "
              f"{len(v.fresh)} inner sessions in {v.seconds:.0f} s"
              + (f"; {len(v.pruned)} orphan recordings removed" if v.pruned else ""))
