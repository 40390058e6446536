"""A cleanup helper of the module that shuts down and drops the engine it is given, called by
the tests after their last use of the engine and from a `finally`: its calls are the manual
cleanup the runner's teardown takes over (the helper itself stays, unused)."""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


def _shutdown(llm):
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()


def test_cleanup_helper_after_use():
    llm = LLM(MODEL, max_model_len=160, enforce_eager=True, dtype="float32", seed=4)
    text = llm.generate(["hello my name is"], GREEDY)[0].outputs[0].text
    assert llm.llm_engine.vllm_config.model_config.max_model_len == 160
    _shutdown(llm)
    assert text


def test_cleanup_helper_in_finally():
    llm = LLM(MODEL, max_model_len=160, enforce_eager=True, dtype="float32", seed=5)
    try:
        assert llm.generate(["the capital of france is"], GREEDY)[0].outputs[0].text
    finally:
        _shutdown(llm)
