"""Engines kept together in a list (issue 11 shape 1; `isinstance()` on each, a
`engine_core.shutdown()` loop over them), one name rebound to new engines in a loop and in the
branches of an `if` (shape 5), and a `del llm  # noqa: GPU004` the fix keeps."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


def test_engines_built_in_a_comprehension():
    llms = [LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
                gpu_memory_utilization=0.4, seed=seed) for seed in (0, 1)]
    assert all(isinstance(llm, LLM) for llm in llms)  # a proxy forwards `__class__`
    texts = [llm.generate(["the future of ai is"], GREEDY)[0].outputs[0].text for llm in llms]
    for llm in llms:  # the group's teardown loop goes with the fix
        llm.llm_engine.engine_core.shutdown()
    del llms
    gc.collect()
    assert texts[0] == texts[1]


def test_suppressed_del_is_kept():
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32")
    assert isinstance(llm, LLM)
    text = llm.generate(["hello my name is"], GREEDY)[0].outputs[0].text
    del llm  # noqa: GPU004
    gc.collect()
    assert text


def test_name_rebound_in_a_loop():
    texts = []
    for block_size in (32, 64):  # the CPU attention backend needs multiples of 32
        llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
                  block_size=block_size)
        texts.append(llm.generate(["hello my name is"], GREEDY)[0].outputs[0].text)
        del llm
        gc.collect()
    assert texts[0] == texts[1]


@pytest.mark.parametrize("short", [True])
def test_name_rebound_in_branches(short):
    if short:
        llm = LLM(MODEL, max_model_len=64, enforce_eager=True, dtype="float32")
        text = llm.generate(["the capital of france is"], GREEDY)[0].outputs[0].text
        del llm
        gc.collect()
    else:
        llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32")
        text = llm.generate(["the capital of france is"], GREEDY)[0].outputs[0].text
        del llm
        gc.collect()
    assert text
