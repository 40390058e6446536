"""A module-scoped fixture that returns an engine, shared by the module's tests.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``, section
(h)). Nothing ever shuts the engine down: it lives until the session's end.
"""

import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]
PROMPTS = ["the future of ai is", "paris is the capital of"]


@pytest.fixture(scope="module")
def llm():
    return LLM(model=MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
               gpu_memory_utilization=0.2)


def test_greedy_is_repeatable(llm):
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    first = [o.outputs[0].text for o in llm.generate(PROMPTS, greedy)]
    second = [o.outputs[0].text for o in llm.generate(PROMPTS, greedy)]
    assert first == second


def test_max_tokens_bounds_the_output(llm):
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=4))
    assert all(len(o.outputs[0].token_ids) <= 4 for o in outputs)
