"""A factory fixture that builds engines, registers their shutdown and returns them
(issue 11 shape 6): the fix is unsafe (the test gets a `weakref.proxy`)."""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


@pytest.fixture
def make_llm(request):
    def make(**overrides):
        llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", **overrides)
        request.addfinalizer(llm.llm_engine.engine_core.shutdown)
        return llm

    return make


def test_engine_from_the_factory(make_llm):
    llm = make_llm(seed=0)
    assert llm.generate(["hello my name is"], GREEDY)[0].outputs[0].text
