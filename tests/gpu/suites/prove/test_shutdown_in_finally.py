"""An engine built in the test and shut down in ``finally`` through its engine core, sampling
with a seed (the texts compare exactly), as suites that guard against a leaked engine core do.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``).
"""

import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]


def test_seeded_sampling_is_repeatable():
    llm = LLM(MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
              gpu_memory_utilization=0.1)
    try:
        seeded = SamplingParams(temperature=0.8, seed=1234, max_tokens=6)
        first = llm.generate(["once upon a time"], seeded)[0].outputs[0].text
        second = llm.generate(["once upon a time"], seeded)[0].outputs[0].text
        assert first == second
    finally:
        llm.llm_engine.engine_core.shutdown()
