"""Generator fixtures that store their engine on an attribute for the tests of their scope
and clean it up by hand after their `yield`: a class-scoped fixture storing it on the test
class (`request.cls.llm`), a module-scoped one storing an engine a helper of the sibling
module builds on the module (`request.module.engine`, read by the module's tests as a
global), and a module-scoped one storing it in a global it declares (`global SHARED`). The
fix wraps each in a with-block from the store through the `yield`, the attribute bound to
the engine's proxy: each engine lives exactly as long as before."""

import gc

import pytest
from vllm import LLM, SamplingParams

from stored_engine_helpers import MODEL, build_engine

GREEDY = SamplingParams(temperature=0.0, max_tokens=6)
engine = None
SHARED = None


class TestClassStored:
    @pytest.fixture(scope="class", autouse=True)
    def class_engine(self, request):
        request.cls.llm = LLM(MODEL, max_model_len=200, enforce_eager=True, dtype="float32")
        yield
        del request.cls.llm
        gc.collect()

    def test_class_stored_generates(self):
        outputs = self.llm.generate(["hello my name is"], GREEDY)
        assert len(outputs[0].outputs[0].token_ids) == 6

    def test_class_stored_config(self):
        assert self.llm.llm_engine.vllm_config.model_config.max_model_len == 200


@pytest.fixture(scope="module")
def module_engine(request):
    request.module.engine = build_engine(max_model_len=184)
    yield
    request.module.engine.llm_engine.engine_core.shutdown()
    del request.module.engine
    gc.collect()


@pytest.mark.usefixtures("module_engine")
def test_module_stored_generates():
    text = engine.generate(["the capital of france is"], GREEDY)[0].outputs[0].text
    assert text


@pytest.mark.usefixtures("module_engine")
def test_module_stored_config():
    assert engine.llm_engine.vllm_config.model_config.max_model_len == 184


@pytest.fixture(scope="module")
def shared_engine():
    global SHARED
    SHARED = LLM(MODEL, max_model_len=168, enforce_eager=True, dtype="float32", seed=2)
    yield
    del SHARED
    gc.collect()


@pytest.mark.usefixtures("shared_engine")
def test_global_stored_generates():
    outputs = SHARED.generate(["the future of ai is"], GREEDY)
    assert outputs[0].outputs[0].text
    assert SHARED.llm_engine.vllm_config.model_config.max_model_len == 168
