"""A helper of its own module that builds an engine and returns it, called by a fixture of
the test module beside it that stores the engine on the module. The fix is one unit across
the two modules: this helper becomes a context manager over the runner yielding the engine's
proxy, and the fixture enters it in a with-block from the store through its `yield`."""

import os

from vllm import LLM

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


def build_engine(max_model_len=256):
    return LLM(MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
               seed=4)
