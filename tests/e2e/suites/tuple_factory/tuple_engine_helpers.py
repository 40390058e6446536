"""A helper of its own module that builds an engine and returns it with the sampling
parameters its callers use, in a tuple each caller unpacks (`llm, params = ...`), shared by
the test modules beside it. The fix is one unit across the three modules: this helper becomes a
context manager over the runner that yields the tuple with the engine's proxy in its place, and
every call a `with` block binding the same names."""

import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


def setup_engine_and_params(seed=0, max_model_len=256):
    llm = LLM(MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
              seed=seed)
    params = SamplingParams(temperature=0.0, max_tokens=6)
    return llm, params
