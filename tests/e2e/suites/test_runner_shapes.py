"""Shapes whose safe fix once changed what a test does: a fixture that enters the runner by
hand and hands the runner itself to its tests (the fix must yield the runner, not a proxy of
its engine), and a keyword the runner would rename but `LLM` rejects (no fix: the rewrite
would build an engine where the test expects a `TypeError`)."""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


@pytest.fixture
def opt(vllm_runner):
    runner = vllm_runner(MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=3)
    yield runner
    runner.__exit__(None, None, None)


def test_uses_the_runner(opt):
    outputs = opt.llm.generate(["hello my name is"], GREEDY)
    assert len(outputs[0].outputs[0].token_ids) == 6


def test_rejected_keyword():
    with pytest.raises(TypeError):
        llm = LLM(MODEL, tokenizer_name=MODEL, max_model_len=192, enforce_eager=True)
        llm.generate(["never reached"], GREEDY)
