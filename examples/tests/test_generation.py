"""Example tests that manage vLLM engines by hand: each rule shows up once or more."""

import gc

import torch
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = "facebook/opt-125m"
PROMPTS = ["Hello, my name is", "The capital of France is"]


def test_greedy_is_deterministic():
    llm = LLM(MODEL, enforce_eager=True, seed=0)
    params = SamplingParams(temperature=0.0, max_tokens=8)
    first = llm.generate(PROMPTS, params)
    second = llm.generate(PROMPTS, params)
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    cleanup_dist_env_and_memory()
    assert [o.outputs[0].text for o in first] == [o.outputs[0].text for o in second]


def test_prefix_caching_matches(vllm_runner):
    params = SamplingParams(temperature=0.0, max_tokens=8)
    baseline = LLM(MODEL, enable_prefix_caching=False, gpu_memory_utilization=0.3)
    try:
        expected = baseline.generate(PROMPTS, params)
    finally:
        baseline.llm_engine.engine_core.shutdown()
    runner = vllm_runner(MODEL, enable_prefix_caching=True, gpu_memory_utilization=0.3)
    actual = runner.llm.generate(PROMPTS, params)
    del runner
    assert [o.outputs[0].text for o in actual] == [o.outputs[0].text for o in expected]


def test_chat_template(vllm_runner):
    with vllm_runner(MODEL, enforce_eager=True) as runner:
        llm = runner.llm
        outputs = llm.chat([{"role": "user", "content": "Hi"}])
    assert outputs
