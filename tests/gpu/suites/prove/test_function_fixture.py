"""A function-scoped fixture that returns an engine and never tears it down: the engine of
one test lives on (nothing collects its reference cycle) when the next one starts.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``).
"""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]


@pytest.fixture
def llm():
    return LLM(model=MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
               gpu_memory_utilization=0.1)


def test_first_engine(llm):
    outputs = llm.generate(["a b c d"], SamplingParams(temperature=0.0, max_tokens=4))
    assert len(outputs) == 1


def test_second_engine_with_an_environment_write(llm, monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    outputs = llm.generate(["e f g h"], SamplingParams(temperature=0.0, max_tokens=4))
    assert len(outputs) == 1
