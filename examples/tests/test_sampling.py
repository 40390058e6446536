"""More hand-managed tests: two engines that do not fit together, and an environment leak."""

import os

from vllm import LLM, SamplingParams

MODEL = "facebook/opt-125m"


def test_draft_and_target_agree():
    os.environ["VLLM_ATTENTION_BACKEND"] = "TORCH_SDPA"
    params = SamplingParams(temperature=0.0, max_tokens=4)
    target = LLM(MODEL, gpu_memory_utilization=0.6)
    draft = LLM(MODEL, gpu_memory_utilization=0.6)
    first = target.generate(["Hi"], params)
    second = draft.generate(["Hi"], params)
    assert first[0].outputs[0].text == second[0].outputs[0].text
