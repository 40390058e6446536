"""A module-scoped fixture that sets an environment variable, yields an engine and shuts its
engine core down in ``finally``, as plugin suites' shared fixtures do.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``).
"""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]
PROMPTS = ["the weather today is", "my favourite colour is"]


@pytest.fixture(scope="module")
def llm():
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    engine = LLM(model=MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
                 gpu_memory_utilization=0.1, seed=0)
    try:
        yield engine
    finally:
        engine.llm_engine.engine_core.shutdown()
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def test_greedy_gives_one_text_a_prompt(llm):
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=6))
    assert [len(o.outputs) for o in outputs] == [1, 1]


def test_the_fixture_set_the_environment(llm):
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    outputs = llm.generate(PROMPTS[:1], SamplingParams(temperature=0.0, max_tokens=3))
    assert len(outputs[0].outputs[0].token_ids) <= 3
