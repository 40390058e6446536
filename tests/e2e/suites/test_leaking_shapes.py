"""Shapes that really leak on vLLM 0.32's CPU engine, where `del llm` of the last reference
already shuts the engine down: a failed test's traceback, and the reference cycle
`pytest.raises(...) as excinfo` makes with the test's frame."""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=4)


def test_failure_holds_the_engine():
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=11)
    outputs = llm.generate(["hello my name is"], GREEDY)
    assert outputs[0].outputs[0].text == "not what a random model says"


def test_starts_after_the_failure():
    assert GREEDY.max_tokens == 4


def test_raises_keeps_a_cycle():
    llm = LLM(MODEL, max_model_len=64, enforce_eager=True, dtype="float32", seed=12)
    with pytest.raises(Exception, match="maximum context length") as excinfo:
        llm.generate(["hello " * 100], GREEDY)
    assert "64 tokens" in str(excinfo.value)


def test_starts_after_the_cycle():
    assert GREEDY.temperature == 0.0
