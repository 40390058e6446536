"""A factory helper of its own module under ``target = "vllm"``, called by the test module
beside it: the fix is one unit across the two modules, the helper entering vLLM's
``VllmRunner`` imported from the project's tests/conftest.py (``from tests.conftest import
VllmRunner``, as vLLM's tests import it) with the runner's differing defaults spelled out, so
the engine resolves the configuration it had."""

import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


def build_engine(seed, max_model_len=192):
    return LLM(model=MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
               seed=seed)


def greedy(llm, prompt, max_tokens=5):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return llm.generate([prompt], params)[0].outputs[0].text
