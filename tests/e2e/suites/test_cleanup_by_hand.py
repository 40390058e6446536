"""Engines built in the test and cleaned up by hand, as vLLM's suites did before migrating."""

import gc
import os

import pytest
import torch
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


def test_generate_then_clean_up():
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=0)
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=8))
    assert len(outputs) == 2
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    cleanup_dist_env_and_memory()


def test_finalizer_shuts_the_core_down(request: pytest.FixtureRequest):
    llm = LLM(model=MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=3)
    request.addfinalizer(llm.llm_engine.engine_core.shutdown)
    outputs = llm.generate(PROMPTS[:1], SamplingParams(temperature=0.0, max_tokens=6))
    assert outputs[0].outputs[0].text
