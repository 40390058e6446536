"""Two engines alive at once in one test (two context lengths side by side), dropped together
with ``del`` and ``gc.collect()``.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``).
"""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


def test_two_engines_side_by_side():
    wide = LLM(MODEL, dtype="bfloat16", max_model_len=256, enforce_eager=True,
               gpu_memory_utilization=0.1)
    narrow = LLM(MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
                 gpu_memory_utilization=0.1)
    wide_len = wide.llm_engine.vllm_config.model_config.max_model_len
    narrow_len = narrow.llm_engine.vllm_config.model_config.max_model_len
    texts = [e.generate(["hello my name is"], GREEDY)[0].outputs[0].text for e in (wide, narrow)]
    del wide, narrow
    gc.collect()
    assert (wide_len, narrow_len) == (256, 128)
    assert len(texts) == 2
