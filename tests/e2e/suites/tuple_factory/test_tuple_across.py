"""Engines from a helper of a sibling module (`tuple_engine_helpers.py`) that returns the
engine and its sampling parameters in a tuple, unpacked by each test and torn down by hand
(deleted, or shut down in a `try/finally`): fixed together with the helper and
`test_tuple_local.py`. The parameters are read after the engine's last use, outside the
`with` block the fix writes."""

import gc

from tuple_engine_helpers import PROMPTS, setup_engine_and_params


def test_unpacked_and_deleted():
    llm, params = setup_engine_and_params(seed=1)
    texts = [o.outputs[0].text for o in llm.generate(PROMPTS, params)]
    del llm
    gc.collect()
    assert len(texts) == 2
    assert params.max_tokens == 6


def test_shut_down_in_finally():
    llm, params = setup_engine_and_params(max_model_len=128)
    try:
        resolved = llm.llm_engine.vllm_config.model_config.max_model_len
        assert llm.generate(PROMPTS[:1], params)
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
    assert resolved == 128
