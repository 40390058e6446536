"""Engines built inside a `try` that skips the test when the build fails, then used after
it: in a test, in a fixture that hands the engine out, and a build that fails and skips."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


@pytest.fixture
def small_llm():
    try:
        engine = LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=8)
    except (ValueError, RuntimeError) as e:
        pytest.skip(f"cannot build the engine: {e}")
    yield engine
    del engine
    gc.collect()


def test_built_or_skipped():
    try:
        llm = LLM(MODEL,
                  max_model_len=160,
                  enforce_eager=True,
                  dtype="float32",
                  seed=9)
    except Exception as e:
        pytest.skip(f"Skipping test: {e}")

    prompts = ["the capital of france is"] * 2
    try:
        outputs = llm.generate(prompts, GREEDY)
        assert outputs[0].outputs[0].text == outputs[1].outputs[0].text
    except Exception as e:
        pytest.fail(f"generation failed: {e}")
    finally:
        llm.llm_engine.engine_core.shutdown()


def test_from_the_fixture(small_llm):
    outputs = small_llm.generate(["one two three"], GREEDY)
    assert len(outputs[0].outputs[0].token_ids) == 5


def test_refused_and_skipped():
    try:
        llm = LLM(MODEL, max_num_batched_tokens=64, max_model_len=128,
                  enable_chunked_prefill=False, enforce_eager=True, dtype="float32")
    except ValueError as e:
        pytest.skip(f"refused: {type(e).__name__}")
    llm.generate(["never reached"], GREEDY)
