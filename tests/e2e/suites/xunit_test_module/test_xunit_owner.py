"""A factory helper in a test module that another test module imports (`from test_xunit_owner
import build_engine`): its own test and the importer's each tear the engine down by hand. The
fix is one unit across both modules, with `--fix` and with `--unsafe-fixes` alike: the helper
becomes a context manager over the runner and both calls `with` blocks, written together."""

import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


def build_engine(seed=0):
    return LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=seed)


def greedy_texts(llm, prompts):
    params = SamplingParams(temperature=0.0, max_tokens=5)
    return [o.outputs[0].text for o in llm.generate(prompts, params)]


def test_owner_generates():
    llm = build_engine(seed=3)
    texts = greedy_texts(llm, ["hello my name is"])
    del llm
    assert texts
