"""A helper class that owns an engine and has no cleanup method: each test deletes the
engine's attribute of its instance by hand (`del checker.llm; gc.collect()`), the second
building its engine after the first's is gone."""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


class EngineChecker:
    """Builds one engine in its constructor; its methods read it through `self.llm`."""

    def __init__(self, seed):
        self.llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=seed)
        self.params = SamplingParams(temperature=0.0, max_tokens=6)

    def texts(self, prompts):
        return [o.outputs[0].text for o in self.llm.generate(prompts, self.params)]


def test_greedy_texts_repeat():
    checker = EngineChecker(seed=0)
    first = checker.texts(PROMPTS)
    assert first == checker.texts(PROMPTS)
    del checker.llm
    gc.collect()


def test_second_engine_after_the_first():
    checker = EngineChecker(seed=1)
    assert all(isinstance(t, str) for t in checker.texts(PROMPTS[:1]))
    del checker.llm
    gc.collect()
