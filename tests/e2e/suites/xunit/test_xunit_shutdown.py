"""Engines from a helper of a sibling module (`engine_helpers.py`), shut down by hand in a
`try/finally`: fixed together with the helper and `test_xunit_cleanup.py`."""

import gc

from engine_helpers import PROMPTS, setup_engine, texts_of


def test_shut_down_in_finally():
    llm = setup_engine()
    try:
        assert len(texts_of(llm, PROMPTS)) == 2
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def test_resolved_config():
    llm = setup_engine(seed=1, max_model_len=128)
    resolved = llm.llm_engine.vllm_config.model_config.max_model_len
    del llm
    gc.collect()
    assert resolved == 128
