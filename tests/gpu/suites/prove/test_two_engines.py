"""Two engines in one test, one after the other, each torn down by hand.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``, section
(h)).
"""

import gc
import os

import torch
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


def test_shorter_context_gives_the_same_greedy_text():
    long_context = LLM(MODEL, dtype="bfloat16", max_model_len=256, enforce_eager=True,
                       gpu_memory_utilization=0.2)
    long_texts = [o.outputs[0].text for o in long_context.generate(["hello my name is"], GREEDY)]
    del long_context
    gc.collect()
    torch.cuda.empty_cache()

    short_context = LLM(MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
                        gpu_memory_utilization=0.2)
    short_texts = [o.outputs[0].text for o in short_context.generate(["hello my name is"], GREEDY)]
    del short_context
    gc.collect()
    torch.cuda.empty_cache()
    assert long_texts == short_texts
