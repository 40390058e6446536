"""A helper of its own module that builds an engine and returns it, called by the xunit
set-ups of the test module beside it. The fix is one unit across the two modules: this helper
becomes a context manager over the runner yielding the engine's proxy, and each set-up enters
its call on an `ExitStack` the paired teardown closes."""

import os

from vllm import LLM

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


def build_engine(max_model_len=256, seed=0):
    llm = LLM(MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
              seed=seed)
    return llm
