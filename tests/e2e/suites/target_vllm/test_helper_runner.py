"""A helper that builds an engine, with ``target = "vllm"`` (issue 11, shape 3), the engine's
arguments in a module constant (shape 2): the fix gives the helper a ``vllm_runner`` parameter,
passes vLLM's fixture from the test, and maps the mapping onto vLLM's runner."""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
ENGINE = {"model": MODEL, "max_model_len": 192, "enforce_eager": True, "dtype": "float32",
          "seed": 5}
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


def _greedy_texts(prompts):
    llm = LLM(**ENGINE)
    outputs = llm.generate(prompts, GREEDY)
    del llm
    gc.collect()
    return [output.outputs[0].text for output in outputs]


def test_helper_texts():
    texts = _greedy_texts(["hello my name is", "the capital of france is"])
    assert len(texts) == 2


def test_starts_after_the_helper():
    assert True
