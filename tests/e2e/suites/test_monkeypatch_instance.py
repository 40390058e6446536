"""GPU008 through a `pytest.MonkeyPatch()` that nothing undoes: a session-scoped autouse
fixture sets a vLLM setting through its own instance and returns, so the setting stays for
the rest of the session and is never put back. The safe fix adds `yield` and `mp.undo()`
at the fixture's end: every test still sees the setting (the engine's KV cache bytes, which
vLLM's CPU platform reads from `VLLM_CPU_KVCACHE_SPACE`), and the session's teardown
restores it."""

import os

import pytest
from vllm import SamplingParams

from lint_gpu_tests.runtime import VllmRunner

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GIB = 1 << 30


@pytest.fixture(scope="session", autouse=True)
def bigger_cache():
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_CPU_KVCACHE_SPACE", "2")


def test_engine_gets_the_setting():
    with VllmRunner(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
                    seed=23) as runner:
        cache = runner.llm.llm_engine.vllm_config.cache_config
        assert cache.kv_cache_memory_bytes == 2 * GIB
        outputs = runner.llm.generate(["hello my name is"],
                                      SamplingParams(temperature=0.0, max_tokens=4))
        assert len(outputs) == 1


def test_the_setting_holds_for_later_tests():
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "2"
