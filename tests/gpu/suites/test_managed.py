"""The same shapes as ``test_hand_managed.py``, through the runner: nothing is held.

Run by ``tests/gpu/test_gpu_leak_report.py`` with ``--gpu-leak-report``. Every engine here
outlives its ``with`` block as a Python object (a traceback, a fixture cache, a cycle, a
module global); the runner's exit shuts its engine core down all the same.
"""

import pytest
from gpu_probe import ENGINE_KWARGS, MODEL, above_gib, generate, record

ENGINE = None


@pytest.fixture(scope="module")
def engine_cache():
    return {}


def test_m1_fails_with_alias(vllm_runner):
    with vllm_runner(MODEL, **ENGINE_KWARGS) as runner:
        llm = runner.llm  # a strong alias, kept by the traceback
        assert generate(llm) == 0, "a failing test: its traceback holds the engine object"


def test_m2_after_failure(at_setup):
    pass


def test_m3_surviving_reference(vllm_runner, engine_cache):
    with vllm_runner(MODEL, **ENGINE_KWARGS) as runner:
        engine_cache["llm"] = runner.llm
        generate(runner.llm)
    record("m3.after_exit_gib", above_gib())


def test_m4_cycle(vllm_runner):
    with vllm_runner(MODEL, **ENGINE_KWARGS) as runner:
        cycle = {"engine": runner.llm}
        cycle["self"] = cycle
        generate(runner.llm)
    record("m4.after_exit_gib", above_gib())
    del cycle


def test_m5_module_level_engine(vllm_runner):
    global ENGINE
    with vllm_runner(MODEL, **ENGINE_KWARGS) as runner:
        ENGINE = runner.llm
        generate(ENGINE)
    record("m5.after_exit_gib", above_gib())


def test_m6_innocent(at_setup):
    pass
