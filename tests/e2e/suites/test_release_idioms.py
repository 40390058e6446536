"""Teardown idioms of vLLM's suites before their migration (issue 25): the proxy-then-delete
release (also guarded by `except UnboundLocalError`, for a construction that raised), an
engine built in an `ExitStack` that expects a rejection for an unsupported configuration,
and a helper class whose `__init__` stores the engine a method of it returns."""

import gc
import os
import weakref
from contextlib import ExitStack

import pytest
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


def test_proxy_then_delete():
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=0)
    outputs = llm.generate(PROMPTS, GREEDY)
    assert len(outputs) == 2

    # keep only a proxy, then drop that too, so the engine can be collected
    llm = weakref.proxy(llm)
    del llm
    gc.collect()


@pytest.mark.parametrize("max_model_len", [128, 4096])
def test_generate_or_reject(max_model_len):
    # the tiny model's context is 256 tokens: a longer max_model_len is rejected
    supported = max_model_len <= 256
    with ExitStack() as stack:
        if not supported:
            stack.enter_context(pytest.raises(ValueError))
        llm = LLM(MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
                  seed=1)
        outputs = llm.generate(PROMPTS[:1], GREEDY)
        assert outputs[0].outputs[0].text

    try:
        llm = weakref.proxy(llm)
        del llm
    except UnboundLocalError:
        pass
    cleanup_dist_env_and_memory()


class GreedyChecker:
    """Stores the engine its `_build_llm()` returns; `shutdown()` frees it."""

    def __init__(self, seed):
        self.params = GREEDY
        self.llm = self._build_llm(seed)

    def _build_llm(self, seed):
        return LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=seed)

    def texts(self, prompts):
        return [o.outputs[0].text for o in self.llm.generate(prompts, self.params)]

    def shutdown(self):
        del self.llm
        gc.collect()
        cleanup_dist_env_and_memory()


def test_checker_built_by_a_method():
    checker = GreedyChecker(seed=2)
    first = checker.texts(PROMPTS)
    assert first == checker.texts(PROMPTS)
    checker.shutdown()
