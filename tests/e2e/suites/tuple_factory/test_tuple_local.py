"""A private helper of the module that builds the engine inside the tuple it returns, the
engine second (`return prompts, LLM(...)`), and a call of the sibling module's tuple helper
(`tuple_engine_helpers.py`), each unpacked and deleted by hand. The private helper's fix is
its own unit; the call of the sibling's helper joins that helper's unit across the three
modules."""

import gc

import tuple_engine_helpers as helpers
from vllm import LLM, SamplingParams


def _prompts_and_engine(seed=0):
    return helpers.PROMPTS[:1], LLM(helpers.MODEL, max_model_len=256, enforce_eager=True,
                                    dtype="float32", seed=seed)


def test_engine_second_in_the_tuple():
    prompts, llm = _prompts_and_engine(seed=3)
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=5))
    del llm
    gc.collect()
    assert [o.outputs[0].text for o in outs]


def test_helper_of_the_sibling_module():
    llm, params = helpers.setup_engine_and_params(seed=2)
    try:
        texts = [o.outputs[0].text for o in llm.generate(helpers.PROMPTS, params)]
    finally:
        del llm
        gc.collect()
    assert len(texts) == 2
