"""Engines cleaned up by helpers of a sibling module (`engine_cleanup.py`): a call of the
cleanup helper after the engine's last use goes with the fix, and its import with it; a
call of the shutdown helper that does more, in a `finally`, stays inside the runner's block,
acting on the proxy, before the runner shuts the engine down again."""

import os

from engine_cleanup import release_engine, stop_engine
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


def test_released_after_use():
    llm = LLM(MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=6)
    text = llm.generate(["hello my name is"], GREEDY)[0].outputs[0].text
    assert llm.llm_engine.vllm_config.model_config.max_model_len == 192
    release_engine(llm)
    assert text


def test_stopped_in_finally():
    llm = LLM(MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=7)
    try:
        assert llm.generate(["the capital of france is"], GREEDY)[0].outputs[0].text
    finally:
        stop_engine(llm)
