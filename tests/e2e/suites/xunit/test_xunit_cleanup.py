"""An engine from a helper of a sibling module (`engine_helpers.py`, imported as a module),
deleted by hand: fixed together with the helper and `test_xunit_shutdown.py`."""

import gc

import engine_helpers


def test_deleted_by_hand():
    llm = engine_helpers.setup_engine(seed=2)
    texts = engine_helpers.texts_of(llm, engine_helpers.PROMPTS[:1], max_tokens=4)
    del llm
    gc.collect()
    assert texts
