"""A module's `setup_module(module)` storing its engine on the module object it takes
(`module.llm`, the module's global `llm` its tests read), deleted by hand in
`teardown_module(module)`. The fix keeps the stack on the module object too
(`module._engine_stack`), entered where the engine was built and closed where the cleanup
began: the engine lives exactly as long as before."""

import gc

from vllm import LLM, SamplingParams

from stack_engine_helpers import MODEL

GREEDY = SamplingParams(temperature=0.0, max_tokens=5)
llm = None


def setup_module(module):
    module.llm = LLM(MODEL, max_model_len=152, enforce_eager=True, dtype="float32", seed=6)


def teardown_module(module):
    del module.llm
    gc.collect()


def test_module_object_engine_generates():
    outputs = llm.generate(["hello my name is"], GREEDY)
    assert len(outputs[0].outputs[0].token_ids) == 5


def test_module_object_engine_config():
    assert llm.llm_engine.vllm_config.model_config.max_model_len == 152
