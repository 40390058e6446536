"""Tests calling the factory a conftest's fixture hands out, cleaning the engine up by hand:
`del` and `gc.collect()`, and a shutdown in a `finally`."""

import gc

from vllm import SamplingParams

PROMPTS = ["hello my name is", "the capital of france is"]


def _texts(llm, max_tokens=6):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [o.outputs[0].text for o in llm.generate(PROMPTS, params)]


def test_deleted_by_hand(make_llm):
    llm = make_llm(max_model_len=256, seed=0)
    texts = _texts(llm)
    resolved = llm.llm_engine.vllm_config.model_config.max_model_len
    del llm
    gc.collect()
    assert len(texts) == 2
    assert resolved == 256


def test_shut_down_in_finally(make_llm):
    llm = make_llm(max_model_len=128, seed=1)
    try:
        assert len(_texts(llm, max_tokens=4)) == 2
    finally:
        llm.llm_engine.engine_core.shutdown()
