"""The hand-managed suite of ``test_leak_confirmed_e2e.py`` (never collected by the outer
session): a module-scoped fixture that builds its engine by hand and keeps it for the
module's later tests."""

import os

import pytest
from vllm import LLM

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
KWARGS = {"max_model_len": 256, "enforce_eager": True, "dtype": "float32"}


@pytest.fixture(scope="module")
def shared_llm():
    return LLM(MODEL, **KWARGS)
