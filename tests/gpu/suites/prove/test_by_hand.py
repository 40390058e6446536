"""Engines built in the test and torn down by hand, as suites did before a runner existed.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``, section
(h)). The second test fails on purpose with its engine alive: pytest keeps its traceback, so
the third test starts with that engine still running until the fix moves it into a runner.
"""

import gc
import os

import torch
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def test_generate_then_clean_up():
    llm = LLM(MODEL, dtype="bfloat16", max_model_len=256, enforce_eager=True,
              gpu_memory_utilization=0.2, seed=0)
    outputs = llm.generate(PROMPTS, GREEDY)
    assert len(outputs) == 2
    del llm
    gc.collect()
    torch.cuda.empty_cache()


def test_fails_with_the_engine_alive():
    llm = LLM(MODEL, dtype="bfloat16", max_model_len=256, enforce_eager=True,
              gpu_memory_utilization=0.2, seed=0)
    outputs = llm.generate(PROMPTS[:1], GREEDY)
    assert len(outputs) == 2, "fails on purpose: one prompt gives one output"
    del llm
    gc.collect()
    torch.cuda.empty_cache()


def test_after_the_failure():
    assert GREEDY.max_tokens == 8
