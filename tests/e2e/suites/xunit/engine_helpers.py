"""A factory helper of its own module, shared by the test modules beside it (the shape of
vLLM's `tests/utils.py` helpers): it builds an engine and returns it, and each caller tears it
down by hand. The fix is one unit across the three modules: this helper becomes a context
manager over the runner and every call in `test_xunit_shutdown.py` and `test_xunit_cleanup.py`
a `with` block, all written together."""

import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


def setup_engine(seed=0, max_model_len=256):
    llm = LLM(MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
              seed=seed)
    return llm


def texts_of(llm, prompts, max_tokens=6):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [o.outputs[0].text for o in llm.generate(prompts, params)]
