"""Fixtures that hand out the engine a private factory helper builds: yielded straight from
the call, and returned. The fix makes the helper a context manager over the runner and each
fixture a `with` block yielding the helper's weak proxy; the tests see the same engine."""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


def _make(seed):
    return LLM(MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=seed)


@pytest.fixture
def yielded():
    yield _make(1)


@pytest.fixture
def returned():
    return _make(2)


def test_engine_yielded_from_the_helper(yielded):
    assert yielded.llm_engine.vllm_config.model_config.max_model_len == 192
    assert yielded.generate(["hello my name is"], GREEDY)[0].outputs[0].text


def test_engine_returned_from_the_helper(returned):
    assert returned.llm_engine.vllm_config.model_config.seed == 2
    assert returned.generate(["the capital of france is"], GREEDY)[0].outputs[0].text
