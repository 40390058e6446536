"""A conftest's fixture that hands out a factory of engines and keeps none of them, and a
fixture of its own that hands on the engine the factory builds. The fix makes the factory a
context manager over the runner and every call of it in the directory's modules a `with`
block, the callers' cleanup gone: one unit over the conftest and its two test modules."""

import os

import pytest
from vllm import LLM

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


@pytest.fixture
def make_llm():
    def _make(**overrides):
        return LLM(MODEL, enforce_eager=True, dtype="float32", **overrides)

    return _make


@pytest.fixture
def small_llm(make_llm):
    return make_llm(max_model_len=128, max_num_seqs=2)
