"""A test class with a parametrized test, and an expected failure that holds its engine."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


class TestGreedyLengths:
    @pytest.mark.parametrize("max_tokens", [3, 7])
    def test_length(self, max_tokens):
        llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32")
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        outputs = llm.generate(["hello my name is"], params)
        assert len(outputs[0].outputs[0].token_ids) == max_tokens
        del llm
        gc.collect()


@pytest.mark.xfail(reason="a random model does not know geography", strict=True)
def test_expected_failure_keeps_its_traceback():
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=7)
    outputs = llm.generate(["the capital of france is"], SamplingParams(temperature=0.0))
    assert outputs[0].outputs[0].text.strip() == "paris"


def test_starts_after_the_expected_failure():
    assert SamplingParams(temperature=0.0).temperature == 0.0
