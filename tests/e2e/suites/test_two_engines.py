"""Two engines in one test: one after the other, and alive together."""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


def test_one_after_the_other():
    first = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=0)
    long_outputs = first.generate(["hello my name is"], GREEDY)
    del first
    gc.collect()

    second = LLM(MODEL, max_model_len=64, enforce_eager=True, dtype="float32", seed=0)
    short_outputs = second.generate(["hello my name is"], GREEDY)
    assert long_outputs[0].outputs[0].text == short_outputs[0].outputs[0].text


def test_alive_together():
    a = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
            gpu_memory_utilization=0.4)
    b = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
            gpu_memory_utilization=0.4, block_size=32)
    texts_a = [o.outputs[0].text for o in a.generate(["the future of ai is"], GREEDY)]
    texts_b = [o.outputs[0].text for o in b.generate(["the future of ai is"], GREEDY)]
    assert texts_a == texts_b
