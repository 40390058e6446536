"""Engines from a factory helper of a sibling module (`vllm_engine_helpers.py`) under
`target = "vllm"`, torn down by hand: fixed together with the helper, which enters vLLM's
`VllmRunner` from the project's tests/conftest.py."""

import gc

from vllm_engine_helpers import build_engine, greedy


def test_greedy_then_cleanup():
    llm = build_engine(seed=3)
    text = greedy(llm, "the capital of france is")
    del llm
    gc.collect()
    assert isinstance(text, str)


def test_config_kept():
    llm = build_engine(seed=6, max_model_len=128)
    try:
        config = llm.llm_engine.vllm_config
        assert config.model_config.max_model_len == 128
        assert greedy(llm, "hello my name is", max_tokens=3) is not None
    finally:
        llm.llm_engine.engine_core.shutdown()
