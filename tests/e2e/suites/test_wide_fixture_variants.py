"""The other hand-managed forms of a wide-scoped engine fixture: a class-scoped fixture that
returns the engine it builds (its cleanup left to pytest's cache and the garbage collector),
then a module-scoped one that registers the engine's shutdown with ``request.addfinalizer``.
The fix enters the bundled ``VllmRunner`` class in each and yields a proxy of its engine: each
engine lives as long as its fixture's scope, and the class's is gone before the module's is
built."""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


@pytest.fixture(scope="class")
def class_llm():
    return LLM(model=MODEL, max_model_len=160, enforce_eager=True, dtype="float32", seed=8)


class TestSharedByTheClass:
    def test_first(self, class_llm):
        outputs = class_llm.generate(["hello my name is"], GREEDY)
        assert len(outputs[0].outputs[0].token_ids) == 5

    def test_second(self, class_llm):
        assert class_llm.generate(["the capital of france is"], GREEDY)


@pytest.fixture(scope="module")
def module_llm(request):
    llm = LLM(model=MODEL, max_model_len=224, enforce_eager=True, dtype="float32", seed=9)
    request.addfinalizer(llm.llm_engine.engine_core.shutdown)
    return llm


def test_module_first(module_llm):
    outputs = module_llm.generate(["the future of ai is"], GREEDY)
    assert len(outputs[0].outputs[0].token_ids) == 5


def test_module_second(module_llm):
    assert module_llm.get_tokenizer().encode("hello")
