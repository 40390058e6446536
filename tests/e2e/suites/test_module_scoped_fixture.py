"""A module-scoped fixture that builds the engine by hand and frees it after its ``yield``:
the fix enters the bundled ``VllmRunner`` class in the fixture (the function-scoped
``vllm_runner`` fixture cannot be requested there), so the engine still lives for the module,
shared by its tests, and is shut down at the fixture's teardown."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


@pytest.fixture(scope="module")
def llm():
    llm = LLM(model=MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=7)
    yield llm
    del llm
    gc.collect()


def test_module_engine_generates(llm):
    outputs = llm.generate(["hello my name is"], GREEDY)
    assert len(outputs[0].outputs[0].token_ids) == 6


def test_module_engine_is_shared(llm):
    outputs = llm.generate(["the capital of france is", "the future of ai is"], GREEDY)
    assert len(outputs) == 2


def test_module_engine_tokenizer(llm):
    assert llm.get_tokenizer().encode("hello")
